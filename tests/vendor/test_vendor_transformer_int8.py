"""The int8 transformer block's inner roundings (docs/vendor-rknn.md, "Per-layer agreement"):
exNorm's scale and bias on their own int8 grids, exMatMul's symmetric second operand, and the
two grids inside exSDPAttention, each read from the file; the values asserted are the vendor
simulator's own (its quantisation config for the fixtures' build, rknn-toolkit2 2.5.0)."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import act_ops, attention_ops, fileformat
from rknnrt.model.vendor_rknn.fileformat import CONST_KINDS
from rknnrt.model.vendor_rknn.graph import GraphBuilder

from .test_vendor_arch import ARCH, PLATFORMS, _steps_and_cosines

SDPA_PLATFORMS = ("rk3588", "rk3576", "rk3562", "rv1126b")  # (rk3566 emits exMatMul)
# the simulator's quantisation config of the fixtures' build (hybrid_quantization_step1)
Q_RANGE = (-2.9953432083129883, 3.020108699798584)  # Q (matmul5's output)
QK_GRID, QK_ZP = 0.10114270004571653, -4  # matmul30_2sdpa_q_matmul
P_GRID = 0.002302860979940377  # matmul30_2sdpa_q_softmax (zero point -128)


def _model(stem: str) -> fileformat.VendorModel:
    return fileformat.parse(memoryview((ARCH / f"{stem}.rknn").read_bytes()))


def _op(b: GraphBuilder, op_type: str, k: int = 0) -> fileformat.Node:
    return [n for n in b.m.nodes if n.op_type == op_type][k]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_features_store_their_calibrated_range(platform: str) -> None:
    """Tensor fields 8/9: the range the scale and zero point were made from."""
    m = _model(f"transformer_{platform}_i8")
    q = next(t for t in m.tensors if t.name == "matmul5_mm_tp_sw")
    assert (q.lo[0], q.hi[0]) == Q_RANGE
    assert abs((q.hi[0] - q.lo[0]) / 255 - q.scale[0]) < 1e-7
    assert all(not t.lo for t in m.tensors if t.kind in CONST_KINDS and not t.scale)


def test_exmatmul_requantises_its_second_operand_to_a_symmetric_grid() -> None:
    """rk3566: the step max(|lo|, |hi|) / 127 of the second operand (Q, then the softmax
    probabilities) agrees with the op's requantising task, OUT_CVT m / 2^shift = s / s_sym."""
    b = GraphBuilder(_model("transformer_rk3566_i8"))
    for k, want in ((0, Q_RANGE[1] / 127), (1, 255 * P_GRID / 127)):
        n = _op(b, "exMatMul", k)
        second = [t for t in attention_ops.operands(b, n) if t.kind not in CONST_KINDS][1]
        s_sym = attention_ops.symmetric_scale(n, second)
        assert abs(s_sym / want - 1) < 1e-6
        # (that task programs OUT_CVT's scale and shift, not its offset: rk3566's 0x4084/0x4088)
        scales, shifts = (b.regs.register_values(n, r) for r in (0x4084, 0x4088))
        ratios = [m / 2**sh for m in scales for sh in shifts if sh in (15, 16)]
        assert any(abs(r - second.scale[0] / s_sym) <= 2**-16 for r in ratios), ratios


def test_a_feature_without_a_range_is_refused() -> None:
    b = GraphBuilder(_model("transformer_rk3566_i8"))
    n = _op(b, "exMatMul")
    t = b.m.tensors[n.inputs[1]]
    with pytest.raises(VendorFormatError, match="stores no calibrated range"):
        attention_ops.symmetric_scale(n, fileformat.Tensor(**{**vars(t), "lo": [], "hi": []}))


@pytest.mark.parametrize("platform", SDPA_PLATFORMS)
def test_the_attention_grids_are_the_simulators(platform: str) -> None:
    """Q K^T's grid from the Q K^T tasks' output conversion (with Q's symmetric step), the
    probabilities' from the P V tasks': the config's values to the multipliers' 15 bits."""
    b = GraphBuilder(_model(f"transformer_{platform}_i8"))
    n = _op(b, "exSDPAttention")
    qkv = attention_ops.operands(b, n)
    (qk, qk_zp), (p, p_zp) = attention_ops._int8_grids(b, n, qkv, 0.25)
    assert abs(qk / QK_GRID - 1) < 2e-5 and qk_zp == QK_ZP
    assert abs(p / P_GRID - 1) < 3e-5 and p_zp == -128
    # (the multiplier with Q's own step instead of its symmetric one: 0.8% off)
    assert abs(qk * qkv[0].scale[0] / attention_ops.symmetric_scale(n, qkv[0]) / QK_GRID - 1) > 5e-3


def test_undecoded_attention_grids_are_refused(monkeypatch) -> None:
    b = GraphBuilder(_model("transformer_rk3588_i8"))
    n = _op(b, "exSDPAttention")
    rows = b.regs.out_cvts(n)
    monkeypatch.setattr(b.regs, "out_cvts", lambda node: rows[:2])  # no P V conversion
    with pytest.raises(VendorFormatError, match="int8 grids inside exSDPAttention"):
        attention_ops._int8_grids(b, n, attention_ops.operands(b, n), 0.25)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_exnorm_scale_and_bias_are_on_their_int8_grids(platform: str) -> None:
    b = GraphBuilder(_model(f"transformer_{platform}_i8"))
    n = _op(b, "exNorm")
    consts = [t for t in attention_ops.operands(b, n)[1:] if t.kind in CONST_KINDS][:2]
    raw = act_ops._params(b, n, 2, 32)
    for t, value, stored in zip(consts, act_ops._params(b, n, 2, 32, on_grid=True), raw):
        steps = value.astype(np.float64) / np.float32(t.scale[0])
        assert np.abs(steps - np.round(steps)).max() < 1e-3
        assert np.abs(value - stored).max() <= t.scale[0] / 2 + 1e-7
    assert not np.array_equal(act_ops._params(b, n, 2, 32, on_grid=True)[0], raw[0])
    # the one channel the file cannot tell: its float16 scale lies within half a float16
    # step of a rounding tie of the grid (float32 ONNX value 230.537 steps, float16 230.462)
    gamma = b.m.const(consts[0]).astype(np.float64)[18]
    half_ulp = np.spacing(np.float16(gamma)).astype(np.float64) / 2 / consts[0].scale[0]
    assert abs(gamma / np.float32(consts[0].scale[0]) - 128 - 102.5) < half_ulp  # (zp -128)


def test_float16_files_keep_the_parameters_as_stored() -> None:
    b = GraphBuilder(_model("transformer_rk3588_fp16"))
    n = _op(b, "exNorm")
    assert not b.quantized
    a, c = act_ops._params(b, n, 2, 32), act_ops._params(b, n, 2, 32, on_grid=True)
    assert all(np.array_equal(x, y) for x, y in zip(a, c))


def test_with_the_onnx_float32_scales_the_block_is_exact_end_to_end(monkeypatch) -> None:
    """What is left end to end is exNorm's float16 scales (the file's): given the ONNX model's
    float32 ones (what the simulator rounds), rk3588's int8 block equals the simulator on two
    of its three inputs and is within one step on the third."""
    from onnx import numpy_helper

    from . import make_arch_fixtures as maf

    graph = maf.make_onnx("transformer").graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    real = fileformat.VendorModel.const

    def const(m: fileformat.VendorModel, t: fileformat.Tensor, dtype: str | None = None):  # type: ignore[no-untyped-def]
        if t.name in ("c1", "c39") and dtype is None:  # exNorm's two scales
            return inits[t.name].astype(np.float32)
        return real(m, t, dtype)

    monkeypatch.setattr(fileformat.VendorModel, "const", const)
    rows = _steps_and_cosines("transformer_rk3588_i8")
    assert [kind for kind, _, _ in rows] == ["int8"] * 3
    assert all(within == 1.0 for _, within, _ in rows)
    assert sorted(worst for _, _, worst in rows)[:2] == [0.0, 0.0]


# attention probes (tools/vendor_diff/attention_probes.py; files in fixtures_arch/attn_probes,
# the simulator's values in layers/): other widths, heads and scales. Each op's count of
# differences that are not ties: exNorm's float16 scale as in the fixtures, and on attn_c one
# element of exSDPAttention within the 15-bit multipliers' resolution of the grids (with the
# config's own grids, 0); every other op 0.
PROBE_KNOWN = {
    "attn_a_rk3566_i8": {"exNorm": 3},  # 4 heads of 12, s = 0.3: exMatMul
    "attn_a_rk3562_i8": {"exNorm": 3},  # the same through exSDPAttention
    "attn_c_rk3588_i8": {"exNorm": 1, "exSDPAttention": 1},  # s = 1
    # output zero point 0: its P V tasks leave the offset register out (refused before: "the
    # int8 grids inside exSDPAttention ... are not decoded", as a real-size DeiT's 6th block)
    "attn_z_rk3588_i8": {"exNorm": 1},
}


@pytest.mark.parametrize("stem", sorted(PROBE_KNOWN))
def test_attention_probes_per_layer(stem: str) -> None:
    from tools.vendor_diff import vendor_file

    buf = (ARCH / "attn_probes" / f"{stem}.rknn").read_bytes()
    rows = vendor_file.per_layer(buf, vendor_file.load_layers(ARCH / "layers" / f"{stem}.npz"))
    assert len(rows) == vendor_file.stored_ops(buf)
    ops = {r.op_type for r in rows}
    assert {"exNorm", "exMatMul" if "rk3566" in stem else "exSDPAttention"} <= ops
    for r in rows:
        assert r.off_tie == PROBE_KNOWN[stem].get(r.op_type, 0) and r.max_steps <= 1, r
