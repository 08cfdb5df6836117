"""The bundled default model: a small CNN built deterministically (no download, no file).

It exercises what most vision models use: Conv + BatchNormalization + Relu, a depthwise conv, a
residual Add, MaxPool, Concat, GlobalAveragePool, Flatten, Gemm and Softmax.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_INPUT_SHAPE = (1, 3, 64, 64)
DEFAULT_CLASSES = 10


def default_model(seed: int = 0) -> onnx.ModelProto:
    """The default model as ONNX (opset 13), input 'images' [1,3,64,64], output 'probs'."""
    rng = np.random.RandomState(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv(x: str, name: str, cin: int, cout: int, k: int, stride: int = 1,
             group: int = 1) -> str:  # fmt: skip
        fan_in = cin // group * k * k
        w = const(f"{name}.w", rng.randn(cout, cin // group, k, k) * np.sqrt(2.0 / fan_in))
        b = const(f"{name}.b", rng.randn(cout) * 0.1)
        nodes.append(helper.make_node(
            "Conv", [x, w, b], [name], name=name, kernel_shape=[k, k],
            strides=[stride, stride], pads=[k // 2] * 4, group=group,
        ))  # fmt: skip
        return name

    def bn_relu(x: str, name: str, c: int) -> str:
        params = [
            const(f"{name}.scale", 1.0 + 0.1 * rng.randn(c)),
            const(f"{name}.bias", 0.1 * rng.randn(c)),
            const(f"{name}.mean", 0.1 * rng.randn(c)),
            const(f"{name}.var", 1.0 + 0.1 * rng.rand(c)),
        ]
        nodes.append(helper.make_node("BatchNormalization", [x, *params], [f"{name}.bn"],
                                      name=f"{name}.bn"))  # fmt: skip
        nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.relu"],
                                      name=f"{name}.relu"))  # fmt: skip
        return f"{name}.relu"

    x = bn_relu(conv("images", "conv1", 3, 16, 3, stride=2), "conv1", 16)
    y = bn_relu(conv(x, "dw2", 16, 16, 3, group=16), "dw2", 16)
    y = conv(y, "pw2", 16, 16, 1)
    nodes.append(helper.make_node("Add", [x, y], ["res2"], name="res2"))
    nodes.append(helper.make_node("MaxPool", ["res2"], ["pool2"], name="pool2",
                                  kernel_shape=[2, 2], strides=[2, 2]))  # fmt: skip
    a = bn_relu(conv("pool2", "branch_a", 16, 16, 1), "branch_a", 16)
    b = bn_relu(conv("pool2", "branch_b", 16, 16, 3), "branch_b", 16)
    nodes.append(helper.make_node("Concat", [a, b], ["cat3"], name="cat3", axis=1))
    nodes.append(helper.make_node("GlobalAveragePool", ["cat3"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    w = const("fc.w", rng.randn(DEFAULT_CLASSES, 32) * np.sqrt(1.0 / 32))
    bias = const("fc.b", rng.randn(DEFAULT_CLASSES) * 0.1)
    nodes.append(helper.make_node("Gemm", ["flat", w, bias], ["logits"], name="fc", transB=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1))
    graph = helper.make_graph(
        nodes,
        "rknnrt_default_cnn",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(DEFAULT_INPUT_SHAPE))],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, DEFAULT_CLASSES])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="rknnrt")  # fmt: skip
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def default_input(seed: int = 0) -> np.ndarray:
    """A deterministic NHWC uint8 'image' for the default model."""
    n, c, h, w = DEFAULT_INPUT_SHAPE
    return np.random.RandomState(seed).randint(0, 256, size=(n, h, w, c), dtype=np.uint8)
