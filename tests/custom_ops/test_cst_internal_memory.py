"""The tensors crossing between NPU segments and a custom op live in the context's internal
memory at the offsets the model's memory plan gives them (design §5)."""

from __future__ import annotations

import ctypes
import json

import numpy as np
from cst_helpers import build, floats_at, make_op, run, sigmoid, sigmoid_compute
from cst_models import reference

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.model import container


def _planned(model: bytes) -> dict[str, int]:
    meta = json.loads(bytes(container.read(memoryview(model)).metadata))
    return {t["name"]: t["offset"] for t in meta["memory"]["tensors"]}


def _outside(model: bytes, internal=None):  # type: ignore[no-untyped-def]
    """An INTERNAL_ALLOC_OUTSIDE context with its internal memory (the given one or new)."""
    ctx = rk.rknn_context()
    flag = rk.RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE
    assert rk.rknn_init(ctypes.byref(ctx), model, len(model), flag, None) == 0
    sizes = rk.rknn_mem_size()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_MEM_SIZE, ctypes.byref(sizes), ctypes.sizeof(sizes)) \
        == 0  # fmt: skip
    if internal is None:
        internal = rk.rknn_create_mem(ctx, sizes.total_internal_size)
    assert rk.rknn_set_internal_mem(ctx, internal) == 0
    return ctx, internal


def _conv1(onnx_model, x: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The custom op's input: the first Conv of conv_custom_conv (reference with identity)."""
    captured: list[np.ndarray] = []

    def keep(a: np.ndarray) -> np.ndarray:
        captured.append(a)
        return a

    reference(onnx_model, x, keep)
    return captured[0].astype(np.float32)


def test_the_custom_ops_input_is_in_the_users_internal_memory(sigmoid_onnx, x):
    model = build(sigmoid_onnx)  # float32: the op's input 'a' is the stored tensor itself
    offsets = _planned(model)
    assert offsets["a"] == 0 and offsets["b"] == 1024  # (b, last, keeps a guarded buffer)
    seen: list[tuple[int, np.ndarray]] = []

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        t = ins[0]
        seen.append((t.mem.virt_addr + t.mem.offset, floats_at(t).copy()))
        return sigmoid_compute(op_ctx, ins, n_in, outs, n_out)

    ctx, internal = _outside(model)
    try:
        op, keep = make_op(compute=compute)
        assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
        status, y = run(ctx, x)
        assert status == 0
        np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)
        base = internal.contents.virt_addr + internal.contents.offset
        ((address, data),) = seen
        assert address == base + offsets["a"]  # the op reads the internal memory in place
        n = data.size
        in_memory = np.ctypeslib.as_array(
            ctypes.cast(base + offsets["a"], ctypes.POINTER(ctypes.c_float)), (n,)
        )
        np.testing.assert_array_equal(in_memory, data)
        np.testing.assert_allclose(data, _conv1(sigmoid_onnx, x).ravel(), atol=1e-4)
    finally:
        assert rk.rknn_destroy_mem(ctx, internal) == 0
        rk.rknn_destroy(ctx)


def test_two_contexts_sharing_one_internal_memory_in_series(sigmoid_onnx, x):
    """As on a board: each run rewrites the shared tensors before reading them, so two
    contexts on one internal buffer, run one after the other, both give their results."""
    model = build(sigmoid_onnx)
    first, internal = _outside(model)
    second, _ = _outside(model, internal)
    other = np.random.default_rng(11).normal(size=x.shape).astype(np.float32)
    try:
        ops = [make_op(compute=sigmoid_compute) for _ in range(2)]
        for ctx, (op, _keep) in zip((first, second), ops):
            assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
        for _ in range(2):
            for ctx, data in ((first, x), (second, other)):
                status, y = run(ctx, data)
                assert status == 0
                np.testing.assert_allclose(y, reference(sigmoid_onnx, data, sigmoid), atol=1e-5)
    finally:
        rk.rknn_destroy(second)
        assert rk.rknn_destroy_mem(first, internal) == 0
        rk.rknn_destroy(first)


def test_an_int8_models_stored_crossing_tensors_are_in_internal_memory(sigmoid_onnx, x):
    """int8: the NPU's int8 output before the op's DequantizeLinear lives at its offset."""
    model = build(sigmoid_onnx, dtype="float16", quantize=True)
    offsets = _planned(model)
    seen: list[np.ndarray] = []

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        seen.append(floats_at(ins[0]).copy())
        return sigmoid_compute(op_ctx, ins, n_in, outs, n_out)

    ctx, internal = _outside(model)
    try:
        op, keep = make_op(compute=compute)
        assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
        assert run(ctx, x)[0] == 0
        program = registry.get(ctx.value).weights.program
        (step,) = [s for s in program.steps if s.node is not None]
        (stored,) = step.inputs  # the int8 tensor the NPU segment wrote
        assert program.types[stored] == 3  # onnx INT8
        base = internal.contents.virt_addr + internal.contents.offset
        q = np.ctypeslib.as_array(
            ctypes.cast(base + offsets[stored], ctypes.POINTER(ctypes.c_int8)), (seen[0].size,)
        ).astype(np.float32)
        # what the op saw is that int8 tensor dequantised: a linear map of it
        scale = np.polyfit(q, seen[0], 1)
        np.testing.assert_allclose(np.polyval(scale, q), seen[0], atol=1e-5)
        assert np.unique(q).size > 8
    finally:
        assert rk.rknn_destroy_mem(ctx, internal) == 0
        rk.rknn_destroy(ctx)
