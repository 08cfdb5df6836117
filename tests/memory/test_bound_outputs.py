"""Outputs bound with rknn_set_io_mem go through the same dequantise -> layout -> cast pipeline
as rknn_outputs_get (issue 10): for an int8 model, a FLOAT32 binding in any layout holds exactly
the want_float values, and every other type holds the same values cast."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.core.platforms import PLATFORMS
from tests.helpers import query_attr as query

# Every type the bound-output path accepts (core/conversions.BOUND_OUTPUT_TYPES)
TYPES = {
    "float32": (rk.RKNN_TENSOR_FLOAT32, np.float32),
    "float16": (rk.RKNN_TENSOR_FLOAT16, np.float16),
    "int8": (rk.RKNN_TENSOR_INT8, np.int8), "uint8": (rk.RKNN_TENSOR_UINT8, np.uint8),
    "int16": (rk.RKNN_TENSOR_INT16, np.int16), "int32": (rk.RKNN_TENSOR_INT32, np.int32),
    "int64": (rk.RKNN_TENSOR_INT64, np.int64), "bool": (rk.RKNN_TENSOR_BOOL, np.bool_),
}  # fmt: skip
LAYOUTS = {"NCHW": rk.RKNN_TENSOR_NCHW, "NHWC": rk.RKNN_TENSOR_NHWC,
           "NC1HWC2": rk.RKNN_TENSOR_NC1HWC2}  # fmt: skip


def conv_model() -> onnx.ModelProto:
    """img[1,3,8,8] -> Conv(5 channels: NC1HWC2 pads them) -> out[1,5,8,8]."""
    rng = np.random.RandomState(7)
    inits = [numpy_helper.from_array((rng.randn(5, 3, 3, 3) * 0.5).astype(np.float32), "w"),
             numpy_helper.from_array((rng.randn(5) * 0.2).astype(np.float32), "b")]  # fmt: skip
    node = helper.make_node("Conv", ["img", "w", "b"], ["out"], kernel_shape=[3, 3], pads=[1] * 4)
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 5, 8, 8])], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module", params=["rk3588", "rk3566"])
def int8_model(request: pytest.FixtureRequest) -> tuple[str, bytes]:
    from rknnrt.toolkit import RKNN

    rng = np.random.RandomState(1)
    dataset = [[rng.randn(1, 3, 8, 8).astype(np.float32)] for _ in range(4)]
    rknn = RKNN()
    assert rknn.config(target_platform=request.param) == 0, rknn.last_error
    assert rknn.load_onnx(conv_model()) == 0, rknn.last_error
    assert rknn.build(do_quantization=True, dataset=dataset) == 0, rknn.last_error
    return request.param, rknn.model_bytes()


def general_api(ctx: rk.rknn_context, image: np.ndarray, want_float: int) -> np.ndarray:
    inp = rk.rknn_input(index=0, buf=image.ctypes.data, size=image.nbytes,
                        type=rk.RKNN_TENSOR_FLOAT32, fmt=rk.RKNN_TENSOR_NCHW)  # fmt: skip
    assert rk.rknn_inputs_set(ctx, 1, inp) == 0 and rk.rknn_run(ctx, None) == 0
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = want_float
    assert rk.rknn_outputs_get(ctx, 1, outs, None) == 0
    dtype = np.float32 if want_float else np.int8
    data = np.frombuffer(ctypes.string_at(outs[0].buf, outs[0].size), dtype).copy()
    assert rk.rknn_outputs_release(ctx, 1, outs) == 0
    return data.reshape(1, 5, 8, 8)


def to_nchw(data: np.ndarray, fmt: str, dims: list[int]) -> np.ndarray:
    data = data.reshape(dims)
    if fmt == "NHWC":
        return data.transpose(0, 3, 1, 2)
    if fmt == "NC1HWC2":
        n, c1, h, w, c2 = dims
        return data.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c2, h, w)[:, :5]
    return data


def test_int8_output_bound_in_every_layout_and_type(make_ctx, int8_model) -> None:
    platform_name, model = int8_model
    platform = PLATFORMS[platform_name]
    ctx = make_ctx(model)
    image = np.random.RandomState(3).randn(1, 3, 8, 8).astype(np.float32)
    want_float = general_api(ctx, image, 1)
    raw = general_api(ctx, image, 0)
    assert len(np.unique(want_float)) > 20  # a real spread of dequantised values
    out_attr = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR)
    assert out_attr.type == rk.RKNN_TENSOR_INT8
    in_attr = query(ctx, rk.RKNN_QUERY_INPUT_ATTR)
    in_attr.type, in_attr.fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
    imem = rk.rknn_create_mem(ctx, image.nbytes)
    ctypes.memmove(imem.contents.virt_addr, image.ctypes.data, image.nbytes)
    assert rk.rknn_set_io_mem(ctx, imem, in_attr) == 0
    checked = 0
    for fmt, fmt_code in LAYOUTS.items():
        for dtype, (type_code, np_type) in TYPES.items():
            a = query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR)
            a.type, a.fmt = type_code, fmt_code
            c2 = platform.c2_for(dtype)  # the C2 rule has its own tests (tests/unit)
            dims = {"NCHW": [1, 5, 8, 8], "NHWC": [1, 8, 8, 5],
                    "NC1HWC2": [1, -(-5 // c2), 8, 8, c2]}[fmt]  # fmt: skip
            omem = rk.rknn_create_mem(ctx, 4096)
            assert rk.rknn_set_io_mem(ctx, omem, a) == 0, (fmt, dtype)
            assert rk.rknn_run(ctx, None) == 0
            size = int(np.prod(dims))
            data = np.frombuffer(ctypes.string_at(omem.contents.virt_addr, 4096), np_type)
            got = to_nchw(data[:size], fmt, dims)
            if dtype == "float32":
                np.testing.assert_array_equal(got, want_float, err_msg=f"{fmt} {dtype}")
            elif dtype == "float16":
                np.testing.assert_array_equal(got, want_float.astype(np.float16))
            else:
                np.testing.assert_array_equal(got, raw.astype(np_type), err_msg=f"{fmt} {dtype}")
            assert rk.rknn_destroy_mem(ctx, omem) == 0
            checked += 1
    assert checked == len(LAYOUTS) * len(TYPES)
    assert rk.rknn_destroy_mem(ctx, imem) == 0
