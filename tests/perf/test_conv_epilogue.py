"""The int8 conv kernels' epilogue (sessions/kernels/epilogue.h, core/program/conv_epilogue.py):
a float island's HardSwish (one op, or HardSigmoid then Mul), SiLU (Sigmoid then Mul) or
Sigmoid (a gate) and the QuantizeLinear after it, computed in the kernel's pass, give
onnxruntime's bytes on every path of both kernels, dense and depthwise; the probe keeps an
activation that differs out."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rknnrt.core import switches
from rknnrt.core.program import conv_epilogue, dw_kernel, int8_islands, qconv_kernel, whole

from .test_int8_islands import _inputs, _model

CONFIGS = [
    {"tail": "hardswish", "fusable": True, "ys": 0.02},
    {"tail": "hardswish", "fusable": True, "k": 1, "cout": 24, "ys": 0.05},
    {"tail": "hardsigmoid_mul", "fusable": True, "ys": 0.03},
    {"tail": "hardswish", "fusable": True, "group": "dw", "ys": 0.02},
    {"tail": "hardsigmoid_mul", "fusable": True, "group": "dw", "k": 5, "s": 2, "ys": 0.04},
    {"tail": "silu", "fusable": True, "ys": 0.02},
    {"tail": "silu", "fusable": True, "group": "dw", "k": 3, "ys": 0.03},
    {"tail": "silu", "fusable": True, "k": 1, "cout": 40, "ys": 0.01},
    {"tail": "sigmoid", "fusable": True, "k": 1, "cout": 24, "ys": 0.004},  # a gate
    {"tail": "sigmoid", "fusable": True, "group": "dw", "ys": 0.0041},
    {"tail": "hardswish", "ys": 0.02},  # the conv's value is a graph output too: not fused
]


def _rewritten(model: onnx.ModelProto, monkeypatch, kernels_on: bool) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    with monkeypatch.context() as patch:
        for switch in (switches.INT8_CONV_KERNEL, switches.INT8_DW_KERNEL):
            patch.setenv(switch.name, "1" if kernels_on else "0")
        assert int8_islands.islands_as_integers(out.graph, {}) == len(CONFIGS)
    dw_kernel.import_domain(out)
    return out


def _fused(model: onnx.ModelProto, kind: int) -> list[str]:
    return sorted(n.op_type for n in model.graph.node
                  if any(a.name == "activation" and a.i == kind for a in n.attribute))  # fmt: skip


@pytest.mark.parametrize("levels", [(2, 2), (1, 1), (0, 0)], ids=["widest", "avx2", "scalar"])
def test_fused_activations_give_onnxruntimes_bytes(library, monkeypatch, levels) -> None:
    """Against the islands' float convs with onnxruntime's own activations and QuantizeLinear
    (both kernels off), on the kernels' AVX-512 (VNNI), AVX2 (AVX-VNNI) and scalar paths."""
    # (the scalar path where the CPU has no VNNI)
    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_qconv_vnni"), True)
    model = _model(CONFIGS)
    fused, plain = _rewritten(model, monkeypatch, True), _rewritten(model, monkeypatch, False)
    assert _fused(fused, conv_epilogue.HARDSWISH) == ["ConvInt8_u8u8"] * 3 + \
        ["DepthwiseConvInt8_u8u8"] * 2
    assert not any(n.op_type in ("HardSwish", "HardSigmoid") for n in fused.graph.node
                   if n.output[0].startswith(("a0", "g2", "a3", "g4")))  # fmt: skip
    silu = ["ConvInt8_u8u8", "ConvInt8_u8u8", "DepthwiseConvInt8_u8u8"]
    assert _fused(fused, conv_epilogue.SILU) == (silu if conv_epilogue.exact(
        conv_epilogue.SILU) else [])  # fmt: skip
    gates = ["ConvInt8_u8u8", "DepthwiseConvInt8_u8u8"]
    assert _fused(fused, conv_epilogue.SIGMOID) == (gates if conv_epilogue.exact(
        conv_epilogue.SIGMOID) else [])  # fmt: skip
    gates_left = any(n.op_type == "Sigmoid" and n.output[0] in ("g9", "g10")
                     for n in fused.graph.node)  # fmt: skip
    assert gates_left != conv_epilogue.exact(conv_epilogue.SIGMOID)
    library[1].rknnrt_qconv_max_level(levels[0])
    library[1].rknnrt_dw_max_level(levels[1])
    try:
        a_session = whole.open_program(fused.SerializeToString())
        b_session = whole.open_program(plain.SerializeToString())
        for x in _inputs():
            for k, (a, b) in enumerate(zip(a_session.run(None, {"x": x}),
                                           b_session.run(None, {"x": x}))):  # fmt: skip
                assert a.dtype == b.dtype and np.ptp(a.astype(np.int64)) > 50, k
                assert a.tobytes() == b.tobytes(), k
    finally:
        library[1].rknnrt_qconv_max_level(2)
        library[1].rknnrt_dw_max_level(2)


def test_a_mul_of_other_operands_is_not_fused(library, monkeypatch) -> None:
    model = _model([{"tail": "hardsigmoid_mul", "fusable": True}])
    mul = next(n for n in model.graph.node if n.op_type == "Mul")
    mul.input[1] = "xd"  # HardSigmoid(conv) * x: not a HardSwish of the conv
    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_qconv_vnni"), True)
    assert int8_islands.islands_as_integers(model.graph, {}) == 1
    assert _fused(model, conv_epilogue.HARDSWISH) == []


def test_the_probes_hold_on_an_fma_cpu(library) -> None:
    """Where the CPU has FMA (onnxruntime's logistic kernel is then its FMA one), the kernels'
    SiLU and HardSwish are onnxruntime's own, bit for bit, on the probe's 200k values, on all
    paths (the verdicts the fusion test above relies on)."""
    if "fma" not in open("/proc/cpuinfo").read().split():
        pytest.skip("this CPU has no FMA: onnxruntime's logistic there is another kernel "
                    "(test_a_difference_turns_the_probe_off covers the verdict's other side)")
    assert conv_epilogue.exact(conv_epilogue.SILU)
    assert conv_epilogue.exact(conv_epilogue.HARDSWISH, float(np.float32(1 / 6)), 0.5)
    assert conv_epilogue.exact(conv_epilogue.SIGMOID, 0.0, 0.0)


def test_a_difference_turns_the_probe_off(library, monkeypatch) -> None:
    """An onnxruntime whose value differs in one place (one element a unit in the last place
    away) turns the verdict off, and the tail is then not fused."""
    kernels_path = str(library[0])
    create = conv_epilogue.factory.create

    class OneUlpOff:
        def __init__(self, session) -> None:
            self.session = session

        def run(self, names, feeds):
            out = self.session.run(names, feeds)
            out[0].view(np.uint32)[12345] += 1
            return out

    monkeypatch.setattr(conv_epilogue.factory, "create",
                        lambda *a, **k: OneUlpOff(create(*a, **k)))  # fmt: skip
    monkeypatch.setattr(conv_epilogue, "_verdicts", {})
    assert not conv_epilogue.exact(conv_epilogue.SILU)
    monkeypatch.setitem(qconv_kernel._facts, (kernels_path, "rknnrt_qconv_vnni"), True)
    model = _model([{"tail": "silu", "fusable": True}])
    assert int8_islands.islands_as_integers(model.graph, {}) == 1
    assert _fused(model, conv_epilogue.SILU) == []
