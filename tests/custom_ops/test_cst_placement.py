"""The per-platform op placement: an op the RV1106 runtime places on the CPU (ArgMax,
model/op_placement.py) runs as a CPU segment between NPU segments there, and on the NPU of an
RK3588; both give the same result, and `placement()` (rknnrt info) shows the difference."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
from cst_helpers import build, make_op, run, sigmoid_compute
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.core.program.segmented import SegmentedProgram


def _argmax_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(
        np.random.default_rng(3).normal(0, 0.5, (5, 3, 1, 1)).astype(np.float32), "w"
    )
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("ArgMax", ["c"], ["idx"], name="argmax", axis=1, keepdims=1),
        helper.make_node("Cast", ["idx"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Relu", ["f"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "argmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 8, 8])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _run(model: bytes, x: np.ndarray) -> tuple[list, np.ndarray, object]:
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
    try:
        core = registry.get(ctx.value)
        placement = core.placement()
        # zero-copy: RV1106 has no rknn_inputs_set (the same path on both platforms)
        mems = []
        for query, array in ((rk.RKNN_QUERY_INPUT_ATTR, x), (rk.RKNN_QUERY_OUTPUT_ATTR, None)):
            attr = rk.rknn_tensor_attr(index=0)
            assert rk.rknn_query(ctx, query, ctypes.byref(attr), ctypes.sizeof(attr)) == 0
            attr.type, attr.fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
            mem = rk.rknn_create_mem(ctx, attr.n_elems * 4)
            if array is not None:
                ctypes.memmove(mem.contents.virt_addr, array.ctypes.data, array.nbytes)
            assert rk.rknn_set_io_mem(ctx, mem, ctypes.byref(attr)) == 0
            mems.append(mem)
        assert rk.rknn_run(ctx, None) == 0
        raw = ctypes.string_at(mems[1].contents.virt_addr, 64 * 4)
        y = np.frombuffer(raw, np.float32).reshape(1, 1, 8, 8).copy()
        for mem in mems:
            assert rk.rknn_destroy_mem(ctx, mem) == 0
        return placement, y, core.weights.program
    finally:
        assert rk.rknn_destroy(ctx) == 0


def test_argmax_is_a_cpu_segment_on_rv1106_and_npu_on_rk3588():
    onnx_model = _argmax_model()
    x = np.random.default_rng(4).normal(size=(1, 3, 8, 8)).astype(np.float32)
    small = build(onnx_model, ops=(), platform="rv1106", dtype="float16", quantize=True)
    big = build(onnx_model, ops=(), platform="rk3588", dtype="float16", quantize=True)
    place_small, y_small, program_small = _run(small, x)
    place_big, y_big, program_big = _run(big, x)
    assert ("ArgMax x1", "CPU") in place_small and ("Conv x1", "NPU") in place_small
    assert ("ArgMax x1", "NPU") in place_big and all(d == "NPU" for _, d in place_big)
    assert isinstance(program_small, SegmentedProgram)
    assert [s.device for s in program_small.steps] == ["NPU", "CPU", "NPU"]
    assert not isinstance(program_big, SegmentedProgram)
    np.testing.assert_array_equal(y_small, y_big)
    w = numpy_helper.to_array(onnx_model.graph.initializer[0])[:, :, 0, 0]
    expected = np.einsum("oc,nchw->nohw", w, x).argmax(axis=1)[:, None].astype(np.float32)
    # the int8 output holds 0..4 at its scale; int8 rounding of the Conv may flip near-ties
    assert (np.rint(y_small) == expected).mean() > 0.9


def test_perf_detail_shows_the_custom_op_on_the_cpu(sigmoid_model, x):
    ctx = rk.rknn_context()
    flag = rk.RKNN_FLAG_COLLECT_PERF_MASK
    assert rk.rknn_init(ctypes.byref(ctx), sigmoid_model, len(sigmoid_model), flag, None) == 0
    op, keep = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    assert run(ctx, x)[0] == 0
    detail = rk.rknn_perf_detail()
    size = ctypes.sizeof(detail)
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_PERF_DETAIL, ctypes.byref(detail), size) == 0
    rows = {
        line.split()[-2]: line.split()
        for line in detail.perf_data.decode().splitlines()
        if line[:1].isdigit()
    }
    assert rows["Conv:conv1"][3] == "NPU" and rows["Conv:conv2"][3] == "NPU"
    custom = rows["cstSigmoid:my_sigmoid"]
    assert custom[2:4] == ["FLOAT32", "CPU"]
    assert float(custom[-1]) > 0  # its estimate: CPU time plus the NPU<->CPU transfers
    assert rk.rknn_destroy(ctx) == 0
