"""passes.fold_scale_shift: Caffe-style BatchNormalization -> Mul -> Add (DenseNet-121) run as
convolutions, as the vendor's converter does (the module docstring gives the measurement)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from rknnrt.toolkit.passes import fold_scale_shift
from rknnrt.toolkit.quantize import quantize_model

RNG = np.random.RandomState(0)


def _bn(src: str, out: str, prefix: str) -> tuple[list, list]:
    stats = {"s": RNG.rand(4) + 0.5, "b": RNG.randn(4) * 0.1, "m": RNG.randn(4) * 0.2,
             "v": RNG.rand(4) + 0.5}  # fmt: skip
    inits = [numpy_helper.from_array(v.astype(np.float32), prefix + k) for k, v in stats.items()]
    node = helper.make_node("BatchNormalization", [src] + [prefix + k for k in "sbmv"], [out])
    return [node], inits


def _scale_shift(src: str, out: str, prefix: str) -> tuple[list, list]:
    inits = [numpy_helper.from_array((RNG.rand(4, 1, 1) + 0.5).astype(np.float32), prefix + "k"),
             numpy_helper.from_array((RNG.randn(4, 1, 1) * 0.2).astype(np.float32), prefix + "t")]
    nodes = [helper.make_node("Mul", [src, prefix + "k"], [prefix + "mul"]),
             helper.make_node("Add", [prefix + "mul", prefix + "t"], [out])]  # fmt: skip
    return nodes, inits


def _densenet_like() -> onnx.ModelProto:
    """Conv -> BN -> Mul -> Add -> Relu -> MaxPool -> BN -> Mul -> Add -> Relu -> Conv."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], kernel_shape=[3, 3], pads=[1] * 4)]
    inits = [numpy_helper.from_array((RNG.randn(4, 3, 3, 3) * 0.4).astype(np.float32), "w0"),
             numpy_helper.from_array((RNG.randn(2, 4, 1, 1) * 0.4).astype(np.float32), "w1")]
    for part in (_bn("c0", "bn0", "a_"), _scale_shift("bn0", "ss0", "a_"),
                 ([helper.make_node("Relu", ["ss0"], ["r0"]),
                   helper.make_node("MaxPool", ["r0"], ["p"], kernel_shape=[2, 2],
                                    strides=[2, 2])], []),
                 _bn("p", "bn1", "b_"), _scale_shift("bn1", "ss1", "b_"),
                 ([helper.make_node("Relu", ["ss1"], ["r1"]),
                   helper.make_node("Conv", ["r1", "w1"], ["y"], kernel_shape=[1, 1])], [])):
        nodes += part[0]
        inits += part[1]
    graph = helper.make_graph(
        nodes, "dn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])], inits)  # fmt: skip
    return onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))  # fmt: skip


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_scale_and_shift_fold_into_convs_or_become_depthwise_convs() -> None:
    from rknnrt.toolkit import passes

    model = _densenet_like()
    folded = passes.run_all(model)
    ops = [n.op_type for n in folded.graph.node]
    # stem: Conv+BN+Mul+Add one conv; after the pool: BN one depthwise conv, Mul+Add another
    assert ops == ["Conv", "Relu", "MaxPool", "Conv", "Conv", "Relu", "Conv"]
    depthwise = [n for n in folded.graph.node if any(
        a.name == "group" and a.i == 4 for a in n.attribute)]  # fmt: skip
    assert [n.output[0] for n in depthwise] == ["bn1", "ss1"]
    x = RNG.rand(1, 3, 8, 8).astype(np.float32)
    np.testing.assert_allclose(_run(folded, x), _run(model, x), rtol=1e-5, atol=1e-5)
    # int8: the BN output is stored, the Mul output is not, the Add is fused into its Relu
    q = quantize_model(folded, [[x]], progress=lambda d, t: None).tensor_qparams
    assert "bn1" in q and "b_mul" not in q and "ss1" not in q and "r1" in q
    assert "c0" not in q and "bn0" not in q and "ss0" not in q


def test_a_scalar_factor_and_a_shared_conv_stay() -> None:
    w = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    k = numpy_helper.from_array(np.full((4, 1, 1), 2.0, np.float32), "k")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Mul", ["c", "k"], ["m"]),  # c is also read by the Add: kept
             helper.make_node("Add", ["c", "m"], ["a"]),
             helper.make_node("Mul", ["a", "half"], ["y"])]  # a scalar factor: kept
    graph = helper.make_graph(
        nodes, "keep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], [w, half, k])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    out = fold_scale_shift.run(model)
    ops = [n.op_type for n in out.graph.node]
    assert ops == ["Conv", "Conv", "Add", "Mul"]  # only the per-channel Mul became a conv
    x = RNG.rand(1, 3, 4, 4).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), _run(model, x), rtol=1e-6)


def test_uniform_scale_and_shift_join_the_batchnorm_before_them() -> None:
    """Mul and Add constants whose elements are all equal (DenseNet's 0.02 after its Concats)
    fold into the standalone BN's depthwise conv, as the vendor's log shows ('fuse_mul_into_bn',
    'fuse_add_into_bn'); a per-channel Add after a uniform Mul stays an Add (probed)."""
    from rknnrt.toolkit import passes

    model = _densenet_like()
    inits = {t.name: t for t in model.graph.initializer}
    for name in ("b_k", "b_t"):  # the scale/shift after the pool: all elements 0.02
        inits[name].CopyFrom(numpy_helper.from_array(np.full((4, 1, 1), 0.02, np.float32), name))
    folded = passes.run_all(model)
    assert [n.op_type for n in folded.graph.node] == ["Conv", "Relu", "MaxPool", "Conv", "Relu",
                                                      "Conv"]  # fmt: skip
    depthwise = folded.graph.node[3]
    assert depthwise.output[0] == "ss1"
    x = RNG.rand(1, 3, 8, 8).astype(np.float32)
    np.testing.assert_allclose(_run(folded, x), _run(model, x), rtol=1e-5, atol=1e-5)
    q = quantize_model(folded, [[x]], progress=lambda d, t: None).tensor_qparams
    assert "bn1" not in q and "ss1" not in q and "r1" in q  # one op, its Relu fused
    # only one of the two uniform: the Mul joins the BN, the per-channel Add stays apart
    inits["b_t"].CopyFrom(numpy_helper.from_array((RNG.randn(4, 1, 1) * 0.2).astype(
        np.float32), "b_t"))  # fmt: skip
    folded = passes.run_all(model)
    assert [n.op_type for n in folded.graph.node][3:5] == ["Conv", "Add"]
    assert folded.graph.node[3].output[0] == "b_mul"
    np.testing.assert_allclose(_run(folded, x), _run(model, x), rtol=1e-5, atol=1e-5)
