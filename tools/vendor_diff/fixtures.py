"""The small models the recorded vendor fixtures cover (built with onnx.helper, seeded)."""

from __future__ import annotations

import os
import sys

_TESTS = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "quant")
sys.path.insert(0, os.path.abspath(_TESTS))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from shaped_models import ocr_det_like, op_zoo, yolov5s_like  # noqa: E402
from test_quantization import mlp_model, two_io_model  # noqa: E402

from .light import redraw  # noqa: E402
from .tie_weights import load as load_tie_weights  # noqa: E402


def sigmoid_range() -> onnx.ModelProto:
    """x -> 1x1 Conv with outputs of about +-15 -> Sigmoid -> 1x1 Conv: the Sigmoid input's
    calibrated range clipped to [-7, 7] by the vendor."""
    rng = np.random.RandomState(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Conv", ["s", "w2"], ["y"], kernel_shape=[1, 1])]  # fmt: skip
    graph = helper.make_graph(
        nodes, "sig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])],
        [numpy_helper.from_array((rng.randn(4, 3, 1, 1) * 15).astype(np.float32), "w"),
         numpy_helper.from_array(rng.randn(2, 4, 1, 1).astype(np.float32), "w2")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model)


def avgpool_unit() -> onnx.ModelProto:
    """A ShuffleNet-like unit: Conv+Relu, then a 3x3 stride-2 AveragePool (count_include_pad 0,
    borders averaging 4 or 6 values) beside a strided conv, Concat, Relu, 1x1 Conv."""
    rng = np.random.RandomState(1)
    conv = helper.make_node
    nodes = [conv("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
             conv("Relu", ["c1"], ["r1"]),
             conv("AveragePool", ["r1"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1] * 4),
             conv("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1] * 4),
             conv("Concat", ["c2", "p"], ["cat"], axis=1),
             conv("Relu", ["cat"], ["r2"]),
             conv("Conv", ["r2", "w3"], ["y"], kernel_shape=[1, 1])]  # fmt: skip
    inits = {"w1": rng.randn(8, 3, 3, 3) * 0.4, "b1": rng.randn(8) * 0.1,
             "w2": rng.randn(8, 8, 3, 3) * 0.15, "w3": rng.randn(4, 16, 1, 1) * 0.3}  # fmt: skip
    graph = helper.make_graph(
        nodes, "avgpool_unit",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model)


def bn_ties() -> onnx.ModelProto:
    """Conv -> BatchNorm -> Relu whose folded weights lie at float32 rounding ties (tie_weights:
    the vendor's float32 folding and division decide them), then MaxPool -> BatchNorm -> Mul and
    Add by constants whose elements are all equal (they join the BN) -> Relu -> 1x1 Conv."""
    w, scale, var = load_tie_weights()
    rng = np.random.RandomState(2)
    node = helper.make_node
    nodes = [node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
             node("BatchNormalization", ["c", "s1", "b1", "m1", "v1"], ["bn1"]),
             node("Relu", ["bn1"], ["r1"]),
             node("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("BatchNormalization", ["p", "s2", "b2", "m2", "v2"], ["bn2"]),
             node("Mul", ["bn2", "k"], ["mul"]), node("Add", ["mul", "t"], ["add"]),
             node("Relu", ["add"], ["r2"]),
             node("Conv", ["r2", "w2"], ["y"], kernel_shape=[1, 1])]  # fmt: skip
    inits = {"w": w, "s1": scale, "b1": np.full(4, 0.05), "m1": np.zeros(4), "v1": var,
             "s2": rng.rand(4) + 0.5, "b2": rng.randn(4) * 0.1, "m2": rng.randn(4) * 0.2,
             "v2": rng.rand(4) + 0.5, "k": np.full((4, 1, 1), 0.5), "t": np.full((4, 1, 1), 0.1),
             "w2": rng.randn(2, 4, 1, 1) * 0.5}  # fmt: skip
    graph = helper.make_graph(
        nodes, "bn_ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])],
        [numpy_helper.from_array(np.asarray(v).astype(np.float32), k) for k, v in inits.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model)


FIXTURES = {
    "bn_ties": bn_ties,  # float32 BN folding/division at weight ties; uniform Mul/Add join a BN
    "avgpool_unit": avgpool_unit,  # non-global AveragePool, Concat -> Relu
    "sigmoid_range": sigmoid_range,
    "yolov5s_like": yolov5s_like,  # Conv/SiLU, Concat, MaxPool (SPPF), Resize, Sigmoid head
    "ocr_det_like": ocr_det_like,  # Resize-heavy FPN, HardSwish, Add, Sigmoid
    "op_zoo": op_zoo,  # Split, Slice, linear Resize, MatMul, final Softmax
    "two_io": two_io_model,  # two inputs, residual Add, Concat, GlobalAveragePool, Gemm
    "mlp": mlp_model,  # MatMul, Gemm, final Softmax
    # SqueezeNet 1.0 with re-drawn weights: fire-module Concats, MaxPool, GAP, final Softmax
    # wrapped in Flatten/Reshape
    "light_squeezenet": lambda: redraw("light_squeezenet"),
    # the other re-drawn light models (parameters and stored sets only: no values recorded)
    "light_inception_v1": lambda: redraw("light_inception_v1"),  # LRN, padded pools
    "light_inception_v2": lambda: redraw("light_inception_v2"),  # Conv-BN-Mul-Add-Relu
    "light_shufflenet": lambda: redraw("light_shufflenet"),  # channel shuffle, AveragePool
    "light_resnet50": lambda: redraw("light_resnet50"),  # opset-9 Sum, tiled stage-5 convs
    "light_densenet121": lambda: redraw("light_densenet121"),  # Caffe-style BN, Concat
}
