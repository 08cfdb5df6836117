"""A vendor file's int8 convolutions are rebuilt in rknnrt's converter's integer form (int8
input and weights, an int32 bias, each through a DequantizeLinear; int8 tensors held as uint8
on the same grid inside the graph), so that the runtime sums them in integers on onnxruntime's
integer kernels or rknnrt's compiled ones, as the NPU does, and as fast as rknnrt's own
conversion of the network (issue 24: run <= 1.2x)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import rknnrt as rk
from rknnrt.core.program import dw_kernel, qconv_kernel, whole
from rknnrt.lite import RKNNLite
from rknnrt.model.vendor_rknn import conv_ops, fileformat, int8, rebuild

from .test_vendor_arch import ARCH, REPORTED

# a 7x7 stem on 3 channels, depthwise 3x3 and 7x7, a global pool as a 2x2 depthwise (rk3588,
# rk3576's 64-channel tiles and weight pairs, rk3562), ReLU6 clips, fused residual Adds
STEMS = ["stem_rk3588_i8", "stem_rk3576_i8", "mbv2_rk3562_i8", "mbv2_rv1126b_i8",
         "clip_rk3566_i8", "yoloneck_rk3588_i8"]  # fmt: skip


def _rebuilt(stem: str) -> onnx.ModelProto:
    m = fileformat.parse(memoryview((ARCH / f"{stem}.rknn").read_bytes()))
    b, _, _ = rebuild.rebuild(m)
    rebuild.place_weights(b, bytearray(0))
    return b.model


@pytest.mark.parametrize("stem", STEMS)
def test_int8_convs_read_int8_weights_and_int32_biases(stem: str) -> None:
    model = _rebuilt(stem)
    inits = {t.name: t for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert convs
    for conv in convs:
        x, w, bias = (producer[i] for i in conv.input)
        assert (x.op_type, w.op_type, bias.op_type) == ("DequantizeLinear",) * 3, conv.name
        assert inits[w.input[0]].data_type == onnx.TensorProto.INT8
        assert inits[bias.input[0]].data_type == onnx.TensorProto.INT32
        # the bias is in accumulator units: its scale is the input's times each weight's
        x_scale = onnx.numpy_helper.to_array(inits[x.input[1]])
        w_scale = onnx.numpy_helper.to_array(inits[w.input[1]])
        b_scale = onnx.numpy_helper.to_array(inits[bias.input[1]])
        assert b_scale.tobytes() == (np.float32(x_scale) * w_scale).astype(np.float32).tobytes()


@pytest.mark.parametrize("stem", STEMS[:2])
def test_int8_tensors_inside_the_graph_are_uint8_and_outputs_int8(stem: str) -> None:
    model = _rebuilt(stem)
    inits = {t.name: t.data_type for t in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    producer = {o: n for n in model.graph.node for o in n.output}
    zps = [inits[n.input[2]] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert zps.count(onnx.TensorProto.UINT8) >= 4
    for name in outputs:  # (an Identity of, or a QuantizeLinear to, the int8 output)
        node = producer[name]
        assert node.op_type in ("Identity", "QuantizeLinear")
        assert all(o.type.tensor_type.elem_type == onnx.TensorProto.INT8
                   for o in model.graph.output)  # fmt: skip


def test_the_program_runs_no_float_convolution(monkeypatch, tmp_path) -> None:
    """stem_rk3588_i8 runs on QLinearConv (or the VNNI conv kernel) and the compiled depthwise
    kernel (or its exact float chain where no compiler is), as the same network converted by
    rknnrt does; before, five float Convs on dequantised weights."""
    optimised = []
    real = whole.open_program

    def recording(graph, **kw):
        kw["optimized_model_path"] = str(tmp_path / f"opt{len(optimised)}.onnx")
        optimised.append(kw["optimized_model_path"])
        return real(graph, **kw)

    monkeypatch.setattr(whole, "open_program", recording)
    blob = (ARCH / "stem_rk3588_i8.rknn").read_bytes()
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, blob, len(blob), 0, None) == 0
    rk.rknn_destroy(ctx)
    ops = [n.op_type for p in optimised
           for n in onnx.load(p, load_external_data=False).graph.node]  # fmt: skip
    # the shallow dense ones on the VNNI conv kernel where this CPU has it (qconv_kernel.py)
    on_kernel = ops.count("ConvInt8_u8u8")
    assert ops.count("QLinearConv") + on_kernel == 3, ops
    assert (on_kernel > 0) == qconv_kernel.available(), ops
    if dw_kernel.available():  # the two depthwise convs on the compiled kernel
        assert "Conv" not in ops and ops.count("DepthwiseConvInt8_u8u8") == 1, ops
    else:  # on their exact integer-valued float chain (int8_depthwise.py)
        assert ops.count("Conv") == 2, ops


def _outputs(stem: str) -> list[np.ndarray]:
    rep = REPORTED[stem]
    with np.load(ARCH / f"{stem}.npz", allow_pickle=False) as data:
        ref = {k: data[k] for k in data.files}
    lite = RKNNLite()
    assert lite.load_rknn(str(ARCH / f"{stem}.rknn")) == 0 and lite.init_runtime() == 0
    n_in = len(rep["inputs"])
    outs = [np.asarray(o, np.float64) for s in range(ref["in0"].shape[0])
            for o in lite.inference(inputs=[ref[f"in{i}"][s] for i in range(n_in)],
                                    data_format=["nchw"] * n_in)]  # fmt: skip
    lite.release()
    return outs


@pytest.mark.parametrize("stem", ["stem_rk3576_i8", "mbv2_rk3588_i8", "mbv3_rk3566_i8"])
def test_integer_sums_agree_with_the_arithmetic_form(stem: str, monkeypatch) -> None:
    """The integer sums (exact) against the float32 sums of the dequantised operands the
    reader wrote before: the same outputs but for float32 rounding at ties, each within one
    step; and as close to the simulator's (tests/vendor/test_vendor_arch.py)."""
    scale = json.loads((ARCH / "reported.json").read_text())[stem]["io_quant"]
    integer = _outputs(stem)
    monkeypatch.setattr(conv_ops, "_integer_operands", lambda b, x, conv: None)
    arithmetic = _outputs(stem)
    steps = np.concatenate([np.abs(a - b).ravel() for a, b in zip(integer, arithmetic)])
    steps /= next(iter(scale.values()))["scale"]
    assert np.mean(steps < 1e-3) >= 0.995 and steps.max() <= 1 + 1e-3, (stem, steps.max())


class _Builder:
    int8_values = {3: ("x", "s", "z")}


def _input() -> fileformat.Tensor:
    return fileformat.Tensor(3, "x", "int8", 64, 2, [1, 2, 1, 1, 16], [1, 2, 1, 1], "layer",
                             "int8", [0.5], [0], 32, 0, -1, 0)  # fmt: skip


@pytest.mark.parametrize("zw, acc_bias", [(200, 0), (-129, 0), (0, 2**31), (0, -(2**31) - 1)])
def test_values_outside_int8_or_int32_keep_the_arithmetic_form(zw: int, acc_bias: int) -> None:
    x = _input()
    conv = int8.ConvInt8(np.zeros((2, 1, 1, 1), np.int8), np.array([0, zw], np.float32),
                         np.ones(2, np.float32), np.zeros(2, np.float32),
                         np.array([acc_bias, 0], np.int64))  # fmt: skip
    assert conv_ops._integer_operands(_Builder(), x, conv) is None


def test_a_channel_scale_of_zero_keeps_the_arithmetic_form() -> None:
    x = _input()
    conv = int8.ConvInt8(np.zeros((2, 1, 1, 1), np.int8), np.zeros(2, np.float32),
                         np.array([1.0, 0.0], np.float32), np.zeros(2, np.float32),
                         np.zeros(2, np.int64))  # fmt: skip
    assert conv_ops._integer_operands(_Builder(), x, conv) is None
