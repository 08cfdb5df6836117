"""rv1103b/rv1106b's NPU format "RKNPU w1" (tests/vendor/fixtures_mini, the same models as the
rv1106 files): its own CNA register map, output conversion register, bias blob, depthwise
packing and Clip registers decode to what rv1106's ("RKNPU t3") files of the same model say;
rv1103b files are rv1106b's but for the platform name. Agreement with the simulator:
test_vendor_mini.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rknnrt.model import container
from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import conv_ops, int8, mini_format, mini_weights, rebuild
from rknnrt.model.vendor_rknn.graph import GraphBuilder

from .test_vendor_mini import _bytes


def _model(stem: str):  # type: ignore[no-untyped-def]
    return mini_format.parse(memoryview(_bytes(stem)))


def _convs(m) -> list:  # type: ignore[no-untyped-def]
    return [n for n in m.nodes if n.op_type.startswith("Conv")]


def test_convolution_attributes_come_from_the_w1_registers() -> None:
    """0x100c (strides, dilations), 0x1028 (top pad), 0x1084 (left pad): the probes' own
    attributes, as rv1106's files give them."""
    for name in ("asym", "dilated", "dw5", "c20"):
        w1, t3 = _model(f"{name}_rv1106b_i8"), _model(f"{name}_rv1106_i8")
        assert w1.npu_format == "RKNPU w1" and t3.npu_format == "RKNPU t3"
        for a, b in zip(_convs(w1), _convs(t3), strict=True):
            assert [a.attr_ints(s) for s in range(1, 6)] == [b.attr_ints(s) for s in range(1, 6)]
    (conv,) = _convs(_model("dilated_rv1106b_i8"))
    assert (conv.attr_ints(5), conv.attr_ints(1)) == ([1, 2], [2, 1])


@pytest.mark.parametrize("name", ["convpool", "twoinput", "fire", "c20"])
def test_out_cvt_and_bias_blob_equal_rv1106s(name: str) -> None:
    """The packed OUT_CVT (0x408c; 0x4090 scale bits 15:0, shift bits 23:16) and the bias
    blob per 8 channels [4 A | 4 C | 8 x i8 B | 4 A | 4 C] hold rv1106's values (A, B = -zw,
    C per channel; twoinput's first conv has a weight zero point of -128, stored as -128)."""
    w1, t3 = _model(f"{name}_rv1106b_i8"), _model(f"{name}_rv1106_i8")
    r1, r3 = int8.RegisterFile(w1), int8.RegisterFile(t3)
    minus_zw = []
    for a, b in zip(_convs(w1), _convs(t3), strict=True):
        assert r1.out_cvt(a) == r3.out_cvt(b)
        bias1, bias3 = w1.tensors[a.inputs[2]], t3.tensors[b.inputs[2]]
        oc = w1.tensors[a.inputs[1]].shape[0]
        got = mini_weights.w1_bias_blob(w1.data(bias1), oc, bias1.name)
        want = int8._bias_blob(t3.data(bias3), oc, 4, bias3.name)
        for x, y in zip(got, want, strict=True):
            np.testing.assert_array_equal(x, y)
        minus_zw.append(got[1].tolist())
    if name == "twoinput":
        assert minus_zw[0] == [128, -5, -59, 97]


def test_depthwise_weights_equal_rv1106s() -> None:
    """rv1106b stores a depthwise kernel position's 8 weights, then their 8 -zw (rv1106
    interleaves them): the same weights and zero points."""
    w1, t3 = _model("dw5_rv1106b_i8"), _model("dw5_rv1106_i8")
    (a,), (b,) = _convs(w1), _convs(t3)
    wa, wb = w1.tensors[a.inputs[1]], t3.tensors[b.inputs[1]]
    got = mini_weights.unpack_depthwise_split(w1.data(wa), wa.native_shape, 16, 5, 5, wa.name)
    want = mini_weights.unpack_depthwise(t3.data(wb), wb.native_shape, 16, 5, 5, wb.name)
    for x, y in zip(got, want, strict=True):
        np.testing.assert_array_equal(x, y)
    assert wa.native_shape == [1, 2, 5, 5, 1, 8]


@pytest.mark.parametrize("stem, bounds", [("clip_rv1106b_i8", (-1.5, 2.5)),
                                          ("cliplo_rv1106b_i8", (0.5, 2.5)),
                                          ("cliphi_rv1106b_i8", (-1.5, -0.5))])  # fmt: skip
def test_w1_clip_bounds(stem: str, bounds: tuple[float, float]) -> None:
    """0x4050 holds lo in OUT_CVT input units and 0x4060 hi - lo in channel 0's accumulator
    units: every bound decodes, a lower one above 0 too (rv1106 keeps only its integer part)."""
    m = _model(stem)
    b = GraphBuilder(m)
    (n,) = [n for n in m.nodes if n.op_type == "ConvClip"]
    x, w, bias = (m.tensors[i] for i in n.inputs[:3])
    conv = int8.conv_weights(b.regs, n, x, w, bias, m.tensors[n.outputs[0]], False)
    acc_unit = float(x.scale[0]) * float(conv.scale[0])
    assert conv_ops._w1_clip_bounds(b, n, acc_unit) == bounds


def test_a_split_activations_convolution_output_is_not_rounded() -> None:
    """rv1106b runs swish as Conv then exSwish (rv1106: one ConvExSwish); the simulator
    computes the fused op, so the conv's stored output is not rounded (rebuild.py)."""
    m = _model("swish_rv1106b_i8")
    (conv,) = [n for n in m.nodes if n.op_type == "Conv"]
    assert rebuild.split_activation_inputs(m) == set(conv.outputs)
    assert rebuild.split_activation_inputs(_model("swish_rv1106_i8")) == set()


@pytest.mark.parametrize("name", ["convpool", "residual", "swish"])
def test_rv1103b_files_are_rv1106bs_but_for_the_platform(name: str) -> None:
    """The same ops, tensors and rebuilt graph and weights (the bytes differ where the
    toolkit leaks uninitialised memory, e.g. a bias blob's unused channels)."""
    a, b = _model(f"{name}_rv1103b_i8"), _model(f"{name}_rv1106b_i8")
    assert (a.platform, b.platform, a.npu_format) == ("rv1103b", "rv1106b", "RKNPU w1")
    assert [(n.op_type, n.inputs, n.outputs) for n in a.nodes] == \
        [(n.op_type, n.inputs, n.outputs) for n in b.nodes]  # fmt: skip
    for ta, tb in zip(a.tensors, b.tensors, strict=True):
        assert (ta.name, ta.shape, ta.native_shape, ta.scale, ta.zp) == \
            (tb.name, tb.shape, tb.native_shape, tb.scale, tb.zp)  # fmt: skip
    sa, sb = (container.read(memoryview(_bytes(f"{name}_{p}_i8"))) for p in ("rv1103b", "rv1106b"))
    assert bytes(sa.graph) == bytes(sb.graph) and bytes(sa.weights) == bytes(sb.weights)


def _hard_sigmoids(stem: str) -> list[tuple[float, float]]:
    b, _, _ = rebuild.rebuild(_model(stem))
    return [tuple(a.f for a in sorted(n.attribute, key=lambda a: a.name))  # (alpha, beta)
            for n in b.model.graph.node if n.op_type == "HardSigmoid"]  # fmt: skip


def test_a_standalone_hard_sigmoid_takes_its_alpha_and_beta_from_the_w1_registers() -> None:
    """hsig's HardSigmoid(0.2, 0.4) and (1/6, 1/2), which rv1106 fuses into their convs and
    rv1106b runs apart: 0x4038 / 2^(15 + 0x4080's low byte) is alpha s_in (alpha exact where
    it rounds to 1/6 or 0.2), the integer 0x4034 + zp_in gives beta - 1/2 in units of alpha
    s_in (so 0.4 is the board's 0.39804)."""
    assert [n.op_type for n in _model("hsig_rv1106_i8").nodes].count("HardSigmoid") == 0
    (a1, b1), (a2, b2) = _hard_sigmoids("hsig_rv1106b_i8")
    assert (a1, a2) == (np.float32(0.2), np.float32(1 / 6)) and b2 == 0.5
    assert abs(b1 - 0.4) < 0.0025 and b1 != np.float32(0.4)


def test_a_hard_sigmoid_without_its_registers_is_refused_by_name(monkeypatch) -> None:
    first_task = int8.RegisterFile.first_task
    monkeypatch.setattr(int8.RegisterFile, "first_task", lambda self, n: {} if n.op_type ==
                        "HardSigmoid" else first_task(self, n))  # fmt: skip
    with pytest.raises(VendorFormatError,
                       match=r"the parameters of HardSigmoid '.*' \(RKNPU w1\) are not decoded"):
        container.read(memoryview(_bytes("hsig_rv1106b_i8")))


def _one_channel_zw(m) -> dict[str, float]:  # type: ignore[no-untyped-def]
    regs = int8.RegisterFile(m)
    out = {}
    for n in _convs(m):
        x, w, bias, y = (m.tensors[i] for i in (*n.inputs[:3], n.outputs[0]))
        if w.shape[0] == 1:
            out[n.name] = float(int8.conv_weights(regs, n, x, w, bias, y, False).zw[0])
    return out


def test_a_one_channel_convs_zero_point_is_the_low_byte_of_cna_register_0x1078() -> None:
    """oc1's two convs of one output channel: rv1106 holds -zw in 0x4054 as rk3588 does,
    rv1106b in the low byte of 0x1078 (repeated in bits 15:8; 0x80 is 128); the same values."""
    rv1106, rv1106b = _model("oc1_rv1106_i8"), _model("oc1_rv1106b_i8")
    want, got = _one_channel_zw(rv1106), _one_channel_zw(rv1106b)
    assert len(got) == 2 and got == want and all(got.values())
    regs = int8.RegisterFile(rv1106b)
    for n in _convs(rv1106b):
        if n.name in got:
            byte = regs.first_task(n)[0x1078] & 0xFF
            assert regs.first_task(n)[0x1078] >> 8 & 0xFF == byte
            assert -got[n.name] == (byte - 256 if byte > 128 else byte)


def test_a_hard_sigmoid_of_a_zero_input_scale_is_refused_by_name() -> None:
    """(alpha is the multiplier over the input's scale: a zero scale divided by zero before)"""
    m = _model("hsig_rv1106b_i8")
    n = next(n for n in m.nodes if n.op_type == "HardSigmoid")
    m.tensors[n.inputs[0]] = dataclasses.replace(m.tensors[n.inputs[0]], scale=[0.0])
    with pytest.raises(VendorFormatError, match=r"the parameters of HardSigmoid"):
        rebuild.rebuild(m)
