"""int8 ConvSigmoid / ConvExSwish: the pre-activation scale decoded from the activation's
lookup table and the BN multiplier (docs/vendor-rknn.md, "Lookup tables"), checked against the
fixtures' original float weights (make_fixtures.make_onnx; no vendor toolkit needed)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from rknnrt.model.vendor_rknn import fileformat, int8, lut

from .make_fixtures import make_onnx
from .vendor_data import model_bytes


def _floor_sigmoid_table(s: float) -> np.ndarray:
    x = -16384 + np.arange(513) * 32.0
    return np.floor(32768 / (1 + np.exp(-x * s)))


def test_sigmoid_step_recovers_the_tables_input_scale() -> None:
    for s in (3.851e-4, 1.0e-4, 6.0e-4):
        assert lut.sigmoid_step(_floor_sigmoid_table(s), -16384) == pytest.approx(s, rel=1e-3)


def test_a_table_that_is_no_sigmoid_is_not_decoded() -> None:
    x = -16384 + np.arange(513) * 32.0
    swish_like = np.floor(32768 * x / 16384 / (1 + np.exp(-x / 2000)))
    assert lut.sigmoid_step(swish_like, -16384) is None
    assert lut.sigmoid_step(np.linspace(0, 16384, 513), -16384) is None
    assert lut.sigmoid_step(_floor_sigmoid_table(3.851e-4), 0) is None


def test_swish_step_recovers_the_tables_input_scale() -> None:
    x = -16384 + np.arange(513) * 32.0
    for s, k in ((3.5387e-4, 5668.9), (2.0e-4, 9000.0)):
        z = x * s
        table = np.round(k * z / (1 + np.exp(-z)))
        assert lut.swish_step(table, -16384) == pytest.approx(s, rel=2e-3)
    assert lut.swish_step(_floor_sigmoid_table(3.851e-4), -16384) is None  # no negative entry


@pytest.mark.parametrize("platform", ["rk3588", "rk3566", "rk3576"])
def test_fixture_tables_fit_their_functions(platform: str) -> None:
    """The uploaded tables: sigmoid and swish with the same steps on both platforms."""
    for stem, kind, step in (("sigmoid", "Sigmoid", 3.851e-4), ("swish", "ExSwish", 3.539e-4)):
        m = fileformat.parse(memoryview(model_bytes(f"{stem}_{platform}_i8")))
        table = int8.RegisterFile(m).lut_by_op[1]
        assert table.shape == (513,) and table[-1] in (0, 16384)  # f(0)
        assert lut.STEP[kind](table, -16384) == pytest.approx(step, rel=2e-3)
        other = "ExSwish" if kind == "Sigmoid" else "Sigmoid"
        assert lut.STEP[other](table, -16384) is None


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
