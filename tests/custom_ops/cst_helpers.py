"""Helpers of the custom-operator tests: the cstSigmoid op of the vendor's documented scenario
(toolkit side and runtime side), building, registering and running."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

import rknnrt as rk
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.custom_ops import get_node_attr

sys.path.insert(0, str(Path(__file__).parent))


class CstSigmoid:
    """The toolkit side: y = 1 / (1 + exp(-scale * x))."""

    op_type = "cstSigmoid"

    def shape_infer(self, node, in_shapes, in_dtypes):  # type: ignore[no-untyped-def]
        return in_shapes.copy(), in_dtypes.copy()

    def compute(self, node, inputs):  # type: ignore[no-untyped-def]
        scale = get_node_attr(node, "scale")
        return [1.0 / (1.0 + np.exp(-inputs[0] * (1.0 if scale is None else scale)))]


def sigmoid(a: np.ndarray, scale: float = 2.0) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-scale * a))


def calibration(n: int = 8) -> list[np.ndarray]:
    return [
        np.random.default_rng(100 + k).normal(size=(1, 3, 8, 8)).astype(np.float32)
        for k in range(n)
    ]


def build(
    onnx_model, ops=None, platform: str = "rk3588", dtype: str = "float32", quantize: bool = False
) -> bytes:  # type: ignore[no-untyped-def]
    ops = (CstSigmoid(),) if ops is None else ops
    rknn = RKNN()
    assert rknn.config(target_platform=platform, float_dtype=dtype) == 0
    for op in ops:
        assert rknn.reg_custom_op(op) == 0, rknn.last_error
    assert rknn.load_onnx(onnx_model) == 0, rknn.last_error
    assert rknn.build(do_quantization=quantize, dataset=calibration() if quantize else None) == 0, (
        rknn.last_error
    )
    return rknn.model_bytes()


def floats_at(tensor: rk.rknn_custom_op_tensor) -> np.ndarray:
    """A custom op tensor's float32 data, in place (virt_addr + offset)."""
    n = tensor.attr.n_elems
    pointer = ctypes.cast(tensor.mem.virt_addr + tensor.mem.offset, ctypes.POINTER(ctypes.c_float))
    return np.ctypeslib.as_array(pointer, (n,))


def read_attr(op_ctx, name: bytes) -> np.ndarray | None:  # type: ignore[no-untyped-def]
    """rknn_custom_op_get_op_attr as numpy (None when n_elems is 0)."""
    attr = rk.rknn_custom_op_attr()
    rk.rknn_custom_op_get_op_attr(op_ctx, name, ctypes.byref(attr))
    if attr.n_elems == 0:
        return None
    types = {
        rk.RKNN_TENSOR_FLOAT32: np.float32,
        rk.RKNN_TENSOR_INT64: np.int64,
        rk.RKNN_TENSOR_INT32: np.int32,
        rk.RKNN_TENSOR_BOOL: np.bool_,
        rk.RKNN_TENSOR_UINT8: np.uint8,
    }
    dtype = np.dtype(types[attr.dtype])
    raw = ctypes.string_at(attr.data, attr.n_elems * dtype.itemsize)
    return np.frombuffer(raw, dtype).copy()


def make_op(
    op_type: bytes = b"cstSigmoid", target: int = rk.RKNN_TARGET_TYPE_CPU, **callbacks: Callable
) -> tuple[rk.rknn_custom_op, list]:  # type: ignore[type-arg]
    """An rknn_custom_op with Python callbacks; keep the second value alive with it."""
    op = rk.rknn_custom_op()
    op.version, op.target, op.op_type = 1, target, op_type
    keep = []
    for name, function in callbacks.items():
        kind = (
            rk.rknn_custom_op_destroy_callback if name == "destroy" else rk.rknn_custom_op_callback
        )
        pointer = kind(function)
        keep.append(pointer)
        setattr(op, name, pointer)
    return op, keep


def sigmoid_compute(op_ctx, ins, n_in, outs, n_out) -> int:  # type: ignore[no-untyped-def]
    scale = read_attr(op_ctx, b"scale")
    floats_at(outs[0])[:] = sigmoid(floats_at(ins[0]), float(scale[0]))
    return 0


def run(ctx: rk.rknn_context, x: np.ndarray) -> tuple[int, np.ndarray]:
    """inputs_set (float32 NCHW), run, outputs_get (float); (run status, output)."""
    inp = rk.rknn_input(
        index=0,
        buf=x.ctypes.data,
        size=x.nbytes,
        pass_through=0,
        type=rk.RKNN_TENSOR_FLOAT32,
        fmt=rk.RKNN_TENSOR_NCHW,
    )
    assert rk.rknn_inputs_set(ctx, 1, ctypes.byref(inp)) == 0
    status = rk.rknn_run(ctx, None)
    if status != 0:
        return status, np.empty(0)
    out = rk.rknn_output(want_float=1)
    assert rk.rknn_outputs_get(ctx, 1, ctypes.byref(out), None) == 0
    y = np.ctypeslib.as_array(
        ctypes.cast(out.buf, ctypes.POINTER(ctypes.c_float)), (out.size // 4,)
    )
    y = y.copy()
    assert rk.rknn_outputs_release(ctx, 1, ctypes.byref(out)) == 0
    return status, y.reshape(1, 4, 8, 8) if y.size == 4 * 64 else y
