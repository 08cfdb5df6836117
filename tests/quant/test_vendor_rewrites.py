"""The vendor's graph rewrites before quantisation (passes.vendor_rewrites, and the split
threshold of passes.split_concat_conv); each docstring there gives the measurement."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from rknnrt.toolkit.passes import split_concat_conv, vendor_rewrites
from rknnrt.toolkit.quantize import quantize_model
from rknnrt.toolkit.quantize.rules import weight_qparams

QUIET = {"progress": lambda d, t: None}


def _model(nodes, x_shape, y_shape, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], list(inits))  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _depthwise_residual(strides=(1, 1)) -> onnx.ModelProto:
    w = np.random.RandomState(0).randn(4, 1, 3, 3).astype(np.float32) * 0.3
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=4, kernel_shape=[3, 3],
                              pads=[1] * 4, strides=list(strides)),
             helper.make_node("Add", ["x", "c"], ["y"])]  # fmt: skip
    out = [1, 4, 8 // strides[0], 8 // strides[1]]
    return _model(nodes, [1, 4, 8, 8], out, [numpy_helper.from_array(w, "w")])


def test_identity_folds_into_a_same_size_depthwise_conv() -> None:
    model = _depthwise_residual()
    folded = vendor_rewrites.fold_identity_into_depthwise(model)
    assert [n.op_type for n in folded.graph.node] == ["Conv"]
    assert folded.graph.node[0].output[0] == "y"
    w0 = numpy_helper.to_array(model.graph.initializer[0])
    w1 = numpy_helper.to_array(folded.graph.initializer[0])
    np.testing.assert_array_equal(w1[:, 0, 1, 1], w0[:, 0, 1, 1] + 1)  # the centre tap
    x = np.random.RandomState(1).rand(1, 4, 8, 8).astype(np.float32)
    np.testing.assert_allclose(_run(folded, x), _run(model, x), rtol=1e-5, atol=1e-5)
    # the int8 weights are those of the folded conv: its ranges include the +1
    q = quantize_model(model, [[x]], **QUIET)
    scales = [numpy_helper.to_array(t) for t in q.program.graph.initializer
              if t.name.endswith("__wscale")]  # fmt: skip
    np.testing.assert_allclose(scales[0], weight_qparams(w1, 0, True)[0], rtol=1e-6)
    assert "c" not in q.tensor_qparams  # no separate conv output


def test_identity_does_not_fold_into_a_strided_conv() -> None:
    w = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=4, kernel_shape=[3, 3],
                              pads=[1] * 4, strides=[2, 2]),
             helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Add", ["p", "c"], ["y"])]  # fmt: skip
    model = _model(nodes, [1, 4, 8, 8], [1, 4, 4, 4], [w])
    assert vendor_rewrites.fold_identity_into_depthwise(model) == model


def _maxpool(size: int) -> onnx.ModelProto:
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[5, 5], pads=[2] * 4)
    return _model([node], [1, 3, size, size], [1, 3, size, size])


def test_maxpool_larger_than_its_input_is_a_global_max() -> None:
    model = vendor_rewrites.oversized_maxpool_as_global(_maxpool(4))
    assert [n.op_type for n in model.graph.node] == ["GlobalMaxPool", "Expand"]
    assert model.graph.node[0].output[0] == "y_mp"  # the vendor's name
    x = np.random.RandomState(2).randn(1, 3, 4, 4).astype(np.float32)
    want = np.broadcast_to(x.max(axis=(2, 3), keepdims=True), x.shape)
    np.testing.assert_array_equal(_run(model, x), want)
    assert not np.array_equal(_run(_maxpool(4), x), want)  # what ONNX's MaxPool gives
    five = _maxpool(5)
    assert vendor_rewrites.oversized_maxpool_as_global(five) == five


def _gap(size: int) -> onnx.ModelProto:
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")
    return _model([node], [1, 2, size, size], [1, 2, 1, 1])


def test_global_average_pool_over_a_wide_map_is_two_convs() -> None:
    for size, pads, grid in ((13, [0, 0, 1, 1], [2, 2]), (32, [1, 1, 2, 2], [5, 5])):
        model = vendor_rewrites.global_pool_as_convs(_gap(size))
        first, second = model.graph.node
        assert (first.op_type, second.op_type) == ("Conv", "Conv")
        assert first.output[0] == "gap_2conv0"
        attrs = {a.name: helper.get_attribute_value(a) for a in first.attribute}
        assert attrs["kernel_shape"] == [7, 7] and attrs["strides"] == [7, 7]
        assert attrs["pads"] == pads
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        assert inits[second.input[1]].shape == (2, 1, *grid)
        np.testing.assert_allclose(inits[first.input[1]], 1 / size, rtol=1e-6)
        x = np.random.RandomState(3).rand(1, 2, size, size).astype(np.float32)
        np.testing.assert_allclose(_run(model, x), x.mean(axis=(2, 3), keepdims=True),
                                   rtol=1e-5)  # fmt: skip
    seven = _gap(7)
    assert vendor_rewrites.global_pool_as_convs(seven) == seven
    x = np.random.RandomState(4).rand(1, 2, 13, 13).astype(np.float32)
    q = quantize_model(_gap(13), [[x]], **QUIET)
    assert "gap_2conv0" in q.tensor_qparams  # the vendor stores the partial sums


def _concat_conv(cout: int) -> onnx.ModelProto:
    rng = np.random.RandomState(5)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Concat", ["a", "rb"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w"], ["y"], kernel_shape=[1, 1])]  # fmt: skip
    w = numpy_helper.from_array(rng.randn(cout, 8, 1, 1).astype(np.float32), "w")
    return _model(nodes, [1, 4, 4, 4], [1, cout, 4, 4], [w])


def test_only_convs_with_few_output_channels_are_split() -> None:
    split = split_concat_conv.run(_concat_conv(128))
    assert "Concat" not in [n.op_type for n in split.graph.node]
    kept = split_concat_conv.run(_concat_conv(256))
    assert "Concat" in [n.op_type for n in kept.graph.node]
