"""Dynamic input shapes: shape sets in the converter, rknn_set_input_shapes in the runtime."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.toolkit import RKNN
from tests.helpers import query_attr as query

ONE_SETS = [[[1, 3, 32, 32]], [[1, 3, 64, 48]], [[1, 3, 16, 24]]]
TWO_SETS = [[[1, 3, 20, 20], [1, 5]], [[1, 3, 40, 28], [2, 5]]]


def one_input_model() -> onnx.ModelProto:
    """x[1,3,H,W] -> Conv 3x3 (8) -> Relu -> MaxPool 2 -> y[1,8,H/2,W/2]."""
    rng = np.random.RandomState(0)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    graph = helper.make_graph(
        nodes, "dyn1", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.randn(8, 3, 3, 3).astype(np.float32), "w"),
         numpy_helper.from_array(rng.randn(8).astype(np.float32), "b")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def two_input_model() -> onnx.ModelProto:
    """img[1,3,H,W] -> GlobalAveragePool -> Flatten -> MatMul(3x5) ; vec[B,5] ->
    out = vec * sum(pooled) (broadcast), and a second output pooled (4-D)."""
    rng = np.random.RandomState(1)
    nodes = [
        helper.make_node("GlobalAveragePool", ["img"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("MatMul", ["flat", "m"], ["proj"]),
        helper.make_node("Mul", ["vec", "proj"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "dyn2",
        [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, "h", "w"]),
         helper.make_tensor_value_info("vec", TensorProto.FLOAT, ["b", 5])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("pooled", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(rng.randn(3, 5).astype(np.float32), "m")],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def build(model: onnx.ModelProto, sets, **config) -> bytes:
    rknn = RKNN()
    config.setdefault("float_dtype", "float32")
    assert rknn.config(dynamic_input=sets, **config) == 0, rknn.last_error
    assert rknn.load_onnx(model) == 0, rknn.last_error
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    return rknn.model_bytes()


@pytest.fixture(scope="module")
def one_model() -> bytes:
    return build(one_input_model(), ONE_SETS)


@pytest.fixture(scope="module")
def two_model() -> bytes:
    return build(two_input_model(), TWO_SETS)


def nhwc(shape: list[int]) -> list[int]:
    return [shape[0], shape[2], shape[3], shape[1]] if len(shape) == 4 else shape


def shape_attrs(shapes: list[list[int]]) -> ctypes.Array:
    attrs = (rk.rknn_tensor_attr * len(shapes))()
    for i, shape in enumerate(shapes):
        dims = nhwc(shape)
        attrs[i].index, attrs[i].n_dims = i, len(dims)
        attrs[i].fmt = rk.RKNN_TENSOR_NHWC if len(dims) == 4 else rk.RKNN_TENSOR_UNDEFINED
        for d, v in enumerate(dims):
            attrs[i].dims[d] = v
    return attrs


def dims(a: rk.rknn_tensor_attr) -> list[int]:
    return list(a.dims[: a.n_dims])


def run_general(ctx, arrays: list[np.ndarray], n_out: int) -> list[np.ndarray]:
    inputs = (rk.rknn_input * len(arrays))()
    keep = []
    for i, x in enumerate(arrays):
        data = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x
        keep.append(data)
        inputs[i].index, inputs[i].buf, inputs[i].size = i, data.ctypes.data, data.nbytes
        inputs[i].fmt = rk.RKNN_TENSOR_NHWC if x.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED
    assert rk.rknn_inputs_set(ctx, len(arrays), inputs) == 0
    assert rk.rknn_run(ctx, None) == 0
    outs = (rk.rknn_output * n_out)()
    for o in outs:
        o.want_float = 1
    assert rk.rknn_outputs_get(ctx, n_out, outs, None) == 0
    results = []
    for i, o in enumerate(outs):
        shape = dims(query(ctx, rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR, i))
        raw = (ctypes.c_char * o.size).from_address(o.buf)
        results.append(np.frombuffer(raw, np.float32).reshape(shape).copy())
    assert rk.rknn_outputs_release(ctx, n_out, outs) == 0
    return results


def run_zero_copy(ctx, arrays: list[np.ndarray], n_out: int) -> list[np.ndarray]:
    mems = []
    for i, x in enumerate(arrays):
        a = query(ctx, rk.RKNN_QUERY_CURRENT_INPUT_ATTR, i)
        data = np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x
        mem = rk.rknn_create_mem(ctx, data.nbytes)
        ctypes.memmove(mem.contents.virt_addr, data.ctypes.data, data.nbytes)
        assert rk.rknn_set_io_mem(ctx, mem, a) == 0
        mems.append(mem)
    outs = []
    for i in range(n_out):
        a = query(ctx, rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR, i)
        mem = rk.rknn_create_mem(ctx, a.size)
        assert rk.rknn_set_io_mem(ctx, mem, a) == 0
        outs.append((mem, dims(a)))
        mems.append(mem)
    assert rk.rknn_run(ctx, None) == 0
    results = [
        np.frombuffer((ctypes.c_char * m.contents.size).from_address(m.contents.virt_addr),
                      np.float32).reshape(shape).copy()
        for m, shape in outs
    ]  # fmt: skip
    for m in mems:
        assert rk.rknn_destroy_mem(ctx, m) == 0
    return results


@pytest.mark.parametrize("mode", ["general", "zero_copy"])
@pytest.mark.parametrize(("which", "sets"), [("one", ONE_SETS), ("two", TWO_SETS)])
def test_every_set_matches_onnxruntime(make_ctx, one_model, two_model, which, sets, mode):
    onnx_model = one_input_model() if which == "one" else two_input_model()
    session = ort.InferenceSession(onnx_model.SerializeToString())
    names = [i.name for i in session.get_inputs()]
    ctx = make_ctx(one_model if which == "one" else two_model)
    n_out = len(session.get_outputs())
    rng = np.random.RandomState(2)
    for shapes in sets + sets[::-1]:  # every set, then back again (reused plans)
        assert rk.rknn_set_input_shapes(ctx, len(shapes), shape_attrs(shapes)) == 0
        arrays = [rng.randn(*s).astype(np.float32) for s in shapes]
        expected = session.run(None, dict(zip(names, arrays)))
        run = run_general if mode == "general" else run_zero_copy
        for got, want in zip(run(ctx, arrays, n_out), expected):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_queries(make_ctx, one_model, two_model, rknn_log) -> None:
    ctx = make_ctx(one_model)
    assert dims(query(ctx, rk.RKNN_QUERY_INPUT_ATTR)) == [1, 64, 48, 3]  # the largest set
    assert dims(query(ctx, rk.RKNN_QUERY_OUTPUT_ATTR)) == [1, 8, 32, 24]
    rng_ = rk.rknn_input_range(index=0)
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_DYNAMIC_RANGE, ctypes.byref(rng_),
                         ctypes.sizeof(rng_)) == 0  # fmt: skip
    assert (rng_.shape_number, rng_.n_dims, rng_.fmt) == (3, 4, rk.RKNN_TENSOR_NHWC)
    assert rng_.name == b"x"
    assert [list(rng_.dyn_range[s][:4]) for s in range(3)] == [nhwc(s[0]) for s in ONE_SETS]
    # CURRENT_* before any rknn_set_input_shapes
    a = rk.rknn_tensor_attr(index=0)
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_CURRENT_INPUT_ATTR, ctypes.byref(a),
                         ctypes.sizeof(a)) == rk.RKNN_ERR_FAIL  # fmt: skip
    assert "call rknn_set_input_shapes first" in rknn_log.take("E")[-1]
    assert rk.rknn_set_input_shapes(ctx, 1, shape_attrs(ONE_SETS[2][:1])) == 0
    assert dims(query(ctx, rk.RKNN_QUERY_CURRENT_INPUT_ATTR)) == [1, 16, 24, 3]
    assert dims(query(ctx, rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR)) == [1, 8, 8, 12]
    native = query(ctx, rk.RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR)
    assert dims(native) == [1, 2, 8, 12, 4] and native.fmt == rk.RKNN_TENSOR_NC1HWC2
    two = make_ctx(two_model)
    r1 = rk.rknn_input_range(index=1)
    assert rk.rknn_query(two, rk.RKNN_QUERY_INPUT_DYNAMIC_RANGE, ctypes.byref(r1),
                         ctypes.sizeof(r1)) == 0  # fmt: skip
    assert r1.fmt == rk.RKNN_TENSOR_UNDEFINED and r1.shape_number == 2
    assert [list(r1.dyn_range[s][:2]) for s in range(2)] == [[1, 5], [2, 5]]


def test_shape_errors(make_ctx, one_model, two_model, rknn_log) -> None:
    ctx = make_ctx(one_model)
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL  # no shapes chosen yet
    assert rk.rknn_set_input_shapes(ctx, 1, shape_attrs([[1, 3, 32, 48]])) == \
        rk.RKNN_ERR_PARAM_INVALID  # fmt: skip
    line = rknn_log.take("E")[-1]
    assert "input shapes [1, 32, 48, 3] are not supported" in line
    assert re.search(r"supported input shapes are as follows.*\[1, 32, 32, 3\]; "
                     r"\[1, 64, 48, 3\]; \[1, 16, 24, 3\]", line)  # fmt: skip
    two = make_ctx(two_model)
    assert rk.rknn_set_input_shapes(two, 1, shape_attrs(TWO_SETS[0][:1])) == \
        rk.RKNN_ERR_PARAM_INVALID  # fmt: skip
    assert "give the shapes of all 2 inputs at once" in rknn_log.take("E")[-1]
    # a cross combination of two sets is not a set
    cross = [TWO_SETS[0][0], TWO_SETS[1][1]]
    assert rk.rknn_set_input_shapes(two, 2, shape_attrs(cross)) == rk.RKNN_ERR_PARAM_INVALID
    # refused for dynamic models: dup_context and SHARE_WEIGHT_MEM
    dup = rk.rknn_context()
    assert rk.rknn_dup_context(ctx, dup) == rk.RKNN_ERR_FAIL
    assert "not supported for models with dynamic input shapes" in rknn_log.take("E")[-1]


def test_forgotten_rebind_is_detected(make_ctx, one_model, rknn_log) -> None:
    ctx = make_ctx(one_model)
    assert rk.rknn_set_input_shapes(ctx, 1, shape_attrs(ONE_SETS[0])) == 0
    x = np.random.RandomState(3).randn(*ONE_SETS[0][0]).astype(np.float32)
    run_zero_copy(ctx, [x], 1)
    ia = query(ctx, rk.RKNN_QUERY_CURRENT_INPUT_ATTR)
    oa = query(ctx, rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR)
    imem, omem = rk.rknn_create_mem(ctx, ia.size), rk.rknn_create_mem(ctx, oa.size)
    assert rk.rknn_set_io_mem(ctx, imem, ia) == 0 and rk.rknn_set_io_mem(ctx, omem, oa) == 0
    assert rk.rknn_run(ctx, None) == 0
    assert rk.rknn_set_input_shapes(ctx, 1, shape_attrs(ONE_SETS[1])) == 0
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_FAIL
    assert "call rknn_set_io_mem again after rknn_set_input_shapes" in rknn_log.take("E")[-1]


def test_deprecated_set_input_shape(make_ctx, one_model, rknn_log) -> None:
    ctx = make_ctx(one_model)
    attrs = shape_attrs(ONE_SETS[1])
    assert rk.rknn_set_input_shape(ctx, attrs[0]) == 0
    assert "rknn_set_input_shape is deprecated" in rknn_log.take("W")[-1]
    assert dims(query(ctx, rk.RKNN_QUERY_CURRENT_INPUT_ATTR)) == [1, 64, 48, 3]


@pytest.mark.parametrize(
    ("sets", "config", "pattern"),
    [
        ([[[1, 3, 8]]], {}, "must have 4 positive dims"),
        ([[[2, 3, 8, 8]]], {}, "dim 0 is fixed at 1 in the model, not 2"),
        ([[[1, 4, 8, 8]]], {}, "dim 1 is fixed at 3"),
        ([[[1, 3, 8, 8]], [[1, 3, 8, 8]]], {}, "repeats an earlier shape set"),
        ([[[1, 3, 8, 8]]] * 513, {}, "1 to 512 shape sets"),
        ([[[1, 3, 8, 8]]], {"target_platform": "rv1126b"}, "rv1126b has no dynamic shapes"),
    ],
)
def test_converter_validation(sets, config, pattern) -> None:
    rknn = RKNN()
    assert rknn.config(dynamic_input=sets, **config) == 0
    assert rknn.load_onnx(one_input_model()) == 0
    assert rknn.build(do_quantization=False) == -1
    assert re.search(pattern, rknn.last_error), rknn.last_error


def test_share_weight_refused_for_dynamic(make_ctx, one_model, rknn_log) -> None:
    donor = make_ctx(one_model)
    ext = rk.rknn_init_extend()
    ext.ctx = donor.value
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, one_model, len(one_model), rk.RKNN_FLAG_SHARE_WEIGHT_MEM,
                        ext) == rk.RKNN_ERR_PARAM_INVALID  # fmt: skip
    assert "not supported for models with dynamic input shapes" in rknn_log.take("E")[-1]
