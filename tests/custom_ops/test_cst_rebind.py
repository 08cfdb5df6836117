"""New weight memory (rknn_set_weight_mem again) rebinds the program: the registered custom
ops are destroyed on the old binding and initialised on the new one, and keep running."""

from __future__ import annotations

import ctypes

import numpy as np
from cst_helpers import build, make_op, sigmoid, sigmoid_compute
from cst_models import reference

import rknnrt as rk


def _query(ctx: rk.rknn_context, cmd: int, info: ctypes.Structure) -> ctypes.Structure:
    assert rk.rknn_query(ctx, cmd, ctypes.byref(info), ctypes.sizeof(info)) == 0
    return info


def test_new_weight_memory_keeps_the_registered_ops(sigmoid_onnx, x):
    model = build(sigmoid_onnx)
    calls: list[str] = []

    def init(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        calls.append("init")
        return 0

    def destroy(op_ctx):  # type: ignore[no-untyped-def]
        calls.append("destroy")
        return 0

    ctx = rk.rknn_context()
    flag = rk.RKNN_FLAG_MEM_ALLOC_OUTSIDE
    assert rk.rknn_init(ctypes.byref(ctx), model, len(model), flag, None) == 0
    sizes = _query(ctx, rk.RKNN_QUERY_MEM_SIZE, rk.rknn_mem_size())
    mems = [rk.rknn_create_mem(ctx, sizes.total_weight_size),
            rk.rknn_create_mem(ctx, sizes.total_internal_size)]  # fmt: skip
    assert rk.rknn_set_weight_mem(ctx, mems[0]) == 0
    assert rk.rknn_set_internal_mem(ctx, mems[1]) == 0
    op, keep = make_op(init=init, compute=sigmoid_compute, destroy=destroy)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    attrs = []
    for cmd, data in ((rk.RKNN_QUERY_INPUT_ATTR, x), (rk.RKNN_QUERY_OUTPUT_ATTR, None)):
        attr = _query(ctx, cmd, rk.rknn_tensor_attr(index=0))
        attr.type, attr.fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
        mem = rk.rknn_create_mem(ctx, attr.n_elems * 4)
        if data is not None:
            ctypes.memmove(mem.contents.virt_addr, data.ctypes.data, data.nbytes)
        assert rk.rknn_set_io_mem(ctx, mem, ctypes.byref(attr)) == 0
        mems.append(mem)
        attrs.append(attr)

    def result() -> np.ndarray:
        assert rk.rknn_run(ctx, None) == 0
        n = attrs[1].n_elems
        raw = ctypes.string_at(mems[3].contents.virt_addr, n * 4)
        return np.frombuffer(raw, np.float32).copy()

    try:
        first = result()
        np.testing.assert_allclose(first, reference(sigmoid_onnx, x, sigmoid).ravel(), atol=1e-5)
        mems.append(rk.rknn_create_mem(ctx, sizes.total_weight_size))
        assert rk.rknn_set_weight_mem(ctx, mems[-1]) == 0
        assert calls == ["init", "destroy", "init"]  # moved to the new binding, not leaked
        np.testing.assert_array_equal(result(), first)
    finally:
        for mem in mems:
            assert rk.rknn_destroy_mem(ctx, mem) == 0
        assert rk.rknn_destroy(ctx) == 0
    assert calls == ["init", "destroy", "init", "destroy"]
    del keep
