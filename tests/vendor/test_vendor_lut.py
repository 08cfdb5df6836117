"""int8 convolutions fused with a lookup-table activation (ConvSigmoid, ConvExSwish,
ConvExGelu, ConvHardSwish, ConvHardSigmoid): the pre-activation scale from the activation's
fixed table and the BN multiplier, the BN addend (docs/vendor-rknn.md, "Lookup tables"),
checked against the fixtures' original float weights (make_fixtures.make_onnx) and op by op
against the vendor simulator's own values (fixtures_arch/layers, tools/vendor_diff/vendor_file.py;
no vendor toolkit needed)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from rknnrt.model.vendor_rknn import fileformat, int8, lut
from tools.vendor_diff import vendor_file

from .make_fixtures import make_onnx
from .test_vendor_arch import ARCH
from .vendor_data import model_bytes


def _known(kind: str) -> np.ndarray:
    span, values = lut.TABLES[kind]
    return values(np.linspace(-span, 0.0, 513))


def test_each_known_table_is_recognised_as_its_own_activation_only() -> None:
    for kind in lut.TABLES:
        table = _known(kind)
        found = [k for k in lut.TABLES if lut.table_step(k, table, -16384) is not None]
        assert found == [kind]
        assert lut.table_step(kind, table, -16384) == lut.TABLES[kind][0] / 2**14
        assert lut.table_step(kind, table, 0) is None  # another input range
        moved = table.copy()
        moved[200] += 2  # one entry off by two units
        assert lut.table_step(kind, moved, -16384) is None
    assert lut.table_step("Tanh", _known("Sigmoid"), -16384) is None


def test_the_swish_table_is_rounded_at_span_5_8_exactly() -> None:
    """The old fit found s = 3.5377e-4 from the table (0.07% off: conv3 of effnet differed off
    a tie in 24 of 4096 elements); the table is round(32767 swish(z) / swish(5.8)) exactly."""
    z = np.linspace(-5.8, 0, 513)
    table = np.round(32767 * z / (1 + np.exp(-z)) / (5.8 / (1 + np.exp(-5.8))))
    assert lut.table_step("ExSwish", table, -16384) == 5.8 / 2**14


@pytest.mark.parametrize("platform", ["rk3588", "rk3566", "rk3576"])
def test_fixture_tables_are_the_known_ones(platform: str) -> None:
    """The uploaded tables: sigmoid and swish with the same spans on every platform."""
    for stem, kind in (("sigmoid", "Sigmoid"), ("swish", "ExSwish")):
        m = fileformat.parse(memoryview(model_bytes(f"{stem}_{platform}_i8")))
        table = int8.RegisterFile(m).lut_by_op[1]
        assert table.shape == (513,) and table[-1] in (0, 16384)  # f(0)
        assert lut.table_step(kind, table, -16384) == lut.TABLES[kind][0] / 2**14
        other = "ExSwish" if kind == "Sigmoid" else "Sigmoid"
        assert lut.table_step(other, table, -16384) is None


@pytest.mark.parametrize("platform", ["rk3588", "rk3566", "rk3576", "rk3562", "rv1126b"])
def test_arch_fixture_tables_are_the_known_ones(platform: str) -> None:
    """HardSwish, HardSigmoid (MobileNetV3) and GELU (the ViT block's MLP) tables."""
    for stem, kinds in (("mbv3", {"HardSwish", "HardSigmoid"}), ("transformer", {"ExGelu"})):
        m = fileformat.parse(memoryview((ARCH / f"{stem}_{platform}_i8.rknn").read_bytes()))
        found = set()
        for op, table in int8.RegisterFile(m).lut_by_op.items():
            kind = m.nodes[op].op_type.removeprefix("Conv").replace("ex", "Ex")
            if kind in lut.TABLES:
                assert lut.table_step(kind, table, -16384) is not None, (stem, op)
                found.add(kind)
        assert found == kinds or (stem, platform) in {("transformer", "rk3576")}


def _decoded_to_true_ratio(stem: str, op: int, weight: str, **kw) -> np.ndarray:
    m = fileformat.parse(memoryview(model_bytes(stem)))
    n = m.nodes[op]
    x, w, bias = (m.tensors[i] for i in n.inputs[:3])
    conv = int8.conv_weights(int8.RegisterFile(m), n, x, w, bias, m.tensors[n.outputs[0]],
                             False, **kw)  # fmt: skip
    decoded = (conv.q.astype(np.float64) - conv.zw[:, None, None, None]) * conv.scale[
        :, None, None, None
    ]
    onnx_model = make_onnx(stem.split("_")[0])
    true = {t.name: numpy_helper.to_array(t) for t in onnx_model.graph.initializer}
    d, t = decoded.reshape(len(decoded), -1), true[weight].reshape(len(decoded), -1)
    return (t * d).sum(1) / (d * d).sum(1)


@pytest.mark.parametrize("platform", ["rk3588", "rk3566", "rk3576"])
def test_conv_sigmoid_weights_equal_the_original_float_weights(platform: str) -> None:
    """The sigmoid model's gate convolution: per-channel scales within 0.5% of the float
    weights the vendor toolkit quantised."""
    stem = f"sigmoid_{platform}_i8"
    ratio = _decoded_to_true_ratio(stem, 1, "ga_w", activation="Sigmoid")
    np.testing.assert_allclose(ratio, 1.0, atol=5e-3)
    m = fileformat.parse(memoryview(model_bytes(stem)))
    gs = m.tensors[m.nodes[2].inputs[3]]
    assert gs.name == "gs"
    # ConvMul multiplies by the int8 gate q - zp: without its scale the weights are 1/s_gs off
    ratio = _decoded_to_true_ratio(stem, 2, "gb_w")
    np.testing.assert_allclose(ratio * float(gs.scale[0]), 1.0, atol=5e-3)
    np.testing.assert_allclose(_decoded_to_true_ratio(stem, 2, "gb_w", mul_operand=gs), 1.0,
                               atol=5e-3)  # fmt: skip


@pytest.mark.parametrize("platform", ["rk3588", "rk3566", "rk3576"])
def test_conv_exswish_weights_equal_the_original_float_weights(platform: str) -> None:
    ratio = _decoded_to_true_ratio(f"swish_{platform}_i8", 1, "c_w", activation="ExSwish")
    np.testing.assert_allclose(ratio, 1.0, atol=5e-3)


def test_rk3576_multiplier_comes_from_the_bn_cfg_constant() -> None:
    """rk3576 programs no BN_MUL_CFG register: the operand 0x6032 (0x7067 for swish) and shift
    16 are words 16 and 24 of '<output>_BnCfg_BNcfgTensor', the same values rk3588 programs."""
    for stem, out in (("sigmoid", "gs"), ("swish", "sw")):
        m = fileformat.parse(memoryview(model_bytes(f"{stem}_rk3576_i8")))
        cfg = next(t for t in m.tensors if t.name == out + lut.BN_CFG_SUFFIX)
        got = lut.bn_multiplier({}, "RKNPU f2", bytes(m.data(cfg)))
        m88 = fileformat.parse(memoryview(model_bytes(f"{stem}_rk3588_i8")))
        want = lut.bn_multiplier(int8.RegisterFile(m88).by_op[1], "RKNPU v2", None)
        assert got == want == {"sigmoid": 0x6032, "swish": 0x7067}[stem] / 2.0**16
    assert lut.bn_multiplier({}, "RKNPU f2", None) is None
    assert lut.bn_multiplier({}, "RKNPU t4", bytes(64)) is None


def test_rk3562_multiplier_is_the_bn_mul_register() -> None:
    """rk3562 (RKNPU t4) programs BN_MUL_CFG 0x4068 as rk3588 does (it was refused before: its
    EfficientNet and YOLO-neck int8 files did not load)."""
    for stem in ("effnet", "yoloneck"):
        mults = []
        for platform, fmt in (("rk3562", "RKNPU t4"), ("rk3588", "RKNPU v2")):
            m = fileformat.parse(memoryview((ARCH / f"{stem}_{platform}_i8.rknn").read_bytes()))
            regs = int8.RegisterFile(m)
            mults.append([lut.bn_multiplier(regs.by_op[op], fmt, None)
                          for op in sorted(regs.lut_by_op)])  # fmt: skip
        assert mults[0] == mults[1] and None not in mults[0]


@pytest.mark.parametrize("platform", ["rk3588", "rk3566", "rk3576", "rk3562", "rv1126b"])
def test_hard_sigmoid_beta_is_the_bn_addend(platform: str) -> None:
    """HardSigmoid(0.2, 0.4) feeds the fixed table z = 6 (alpha y + beta) - 3: its addend is
    6 (beta - 1/2) = -0.6 in the conv's decoded units (rk3588/rk3566 add it after the
    multiplier, rk3562 and rk3576/rv1126b before it); HardSigmoid(1/6, 1/2) programs none."""
    m = fileformat.parse(memoryview((ARCH / f"hsig_{platform}_i8.rknn").read_bytes()))
    regs = int8.RegisterFile(m)
    first, second = (n for n in m.nodes if n.op_type == "ConvHardSigmoid")
    assert regs.activation_addend(first, "HardSigmoid") == pytest.approx(-0.6, abs=3e-4)
    assert regs.activation_addend(second, "HardSigmoid") == 0


# The lookup-table probe (tools/vendor_diff/probes.py PROBE, built and dumped by
# tools/vendor_diff/arch_layers.py --probe): Sigmoid, SiLU, GELU, HardSwish, HardSigmoid(0.2,
# 0.4) and (0.3, 0.6) (a positive addend) after a full conv, pre-activations up to 3x the
# usual range. (The fixtures' own lookup-table ops: test_vendor_layers.py, same comparison.)
PROBE_OPS = ("Conv:p0_conv", "Conv:p1_conv", "Conv:p2_conv", "Conv:p3_conv", "Conv:p5_conv",
             "Conv:p6_conv")  # fmt: skip
LAYERS = ARCH / "layers"


def _file(stem: str) -> bytes:
    path = ARCH / f"{stem}.rknn"
    return (path if path.exists() else ARCH / "lut_probes" / f"{stem}.rknn").read_bytes()


def _layers(stem: str) -> dict:
    return vendor_file.load_layers(vendor_file.layer_path(LAYERS, stem))


@pytest.mark.parametrize("platform", ["rk3588", "rk3562"])
def test_probe_ops_fed_the_simulators_inputs_differ_only_at_ties(platform: str) -> None:
    stem = f"lutprobe_{platform}_i8"
    rows = {r.node: r for r in vendor_file.per_layer(_file(stem), _layers(stem))}
    for op in PROBE_OPS:
        r = rows[op]
        assert r.elements == 16 * 12 * 12 and r.off_tie == 0 and r.max_steps <= 1, r
    # HardSigmoid(1/6, 1/2) (p4): the pre-activation grid below
    assert rows["Conv:p4_conv"].off_tie > 0 and rows["Conv:p4_conv"].max_steps <= 1


@pytest.mark.parametrize("stem, op, pre", [("effnet_rk3588_i8", "Conv:conv8", "conv8"),
                                           ("hsig_rk3588_i8", "Conv:conv7", "conv7"),
                                           ("lutprobe_rk3562_i8", "Conv:p4_conv",
                                            "p4_conv")])  # fmt: skip
def test_the_simulator_rounds_a_pre_activation_the_file_lacks(stem: str, op: str,
                                                              pre: str) -> None:  # fmt: skip
    """Depthwise conv + SiLU and conv + HardSigmoid: the simulator rounds the pre-activation to
    its own calibrated int8 grid (a scale and zero point the file does not hold), then applies
    the activation. rknnrt computes the NPU's chain without that step: its pre-activation lies
    within half a grid step of the simulator's (inside the grid's range), so the only
    differences are that grid's (docs/vendor-rknn.md)."""
    layers = _layers(stem)
    grid = vendor_file.sim_float(layers, pre)
    step = layers[pre]["scale"]
    ours = vendor_file.pre_activation(_file(stem), layers, op).reshape(grid.shape)
    assert np.abs(np.clip(ours, grid.min(), grid.max()) - grid).max() <= step / 2 * 1.01
    (row,) = [r for r in vendor_file.per_layer(_file(stem), layers) if r.node == op]
    assert row.max_steps <= 1 and row.off_tie > 0  # (the grid's differences)


@pytest.mark.parametrize("platform", ["rk3588", "rk3562"])
def test_a_positive_hard_sigmoid_addend(platform: str) -> None:
    """HardSigmoid(0.3, 0.6) (the probe's p6): 6 (beta - 1/2) = +0.6; (0.2, 0.4): -0.6."""
    path = ARCH / "lut_probes" / f"lutprobe_{platform}_i8.rknn"
    m = fileformat.parse(memoryview(path.read_bytes()))
    regs = int8.RegisterFile(m)
    for op, want in (("Conv:p6_conv", 0.6), ("Conv:p5_conv", -0.6), ("Conv:p4_conv", 0.0)):
        n = next(n for n in m.nodes if n.name == op)
        # (rk3562's addend is an integer in the multiplier's input units: 4e-4 in z here)
        assert regs.activation_addend(n, "HardSigmoid") == pytest.approx(want, abs=3e-4)
