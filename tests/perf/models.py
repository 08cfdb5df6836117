"""Small random-weight models for the speed rewrites' exactness tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.RandomState(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, array: np.ndarray) -> str:
        name = f"k{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = f"t{len(self.nodes)}_{op.lower()}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"n{len(self.nodes)}", **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 1, group: int = 1) -> str:
        w = self.rng.randn(cout, cin // group, k, k).astype(np.float32) * (2 / (cin * k)) ** 0.5
        b = self.rng.randn(cout).astype(np.float32) * 0.1
        return self.node("Conv", [x, self.const(w), self.const(b)], kernel_shape=[k, k],
                         pads=[k // 2] * 4, group=group)  # fmt: skip

    def shuffle(self, x: str, groups: int, per_group: int, size: int) -> str:
        y = self.node("Reshape", [x, self.const(np.array([1, groups, per_group, size, size]))])
        y = self.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return self.node("Reshape", [y, self.const(np.array([1, groups * per_group, size,
                                                             size]))])  # fmt: skip

    def model(self, out: str, shape: list[int]) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits,
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        return onnx.shape_inference.infer_shapes(model)


def shufflenet_like(seed: int = 0, size: int = 8) -> onnx.ModelProto:
    """Conv -> Relu -> channel shuffle (3 groups of 4) -> grouped 1x1 Conv -> Relu -> channel
    shuffle (4 groups of 3) -> depthwise 3x3 Conv -> residual Add -> 1x1 Conv."""
    b = Builder(seed)
    x = b.node("Relu", [b.conv("x", 3, 12, 3)])
    y = b.shuffle(x, 3, 4, size)
    y = b.node("Relu", [b.conv(y, 12, 12, 1, group=3)])
    y = b.shuffle(y, 4, 3, size)
    y = b.node("Add", [b.conv(y, 12, 12, 3, group=12), x])
    return b.model(b.conv(y, 12, 5), [1, 3, size, size])


def value_moving_model(seed: int = 1, size: int = 8) -> onnx.ModelProto:
    """Convolutions whose outputs are moved by MaxPool, Concat, Relu, Reshape, Transpose,
    Flatten, Slice, and averaged by AveragePool (which does compute)."""
    b = Builder(seed)
    a = b.node("Relu", [b.conv("x", 3, 6, 3)])
    c = b.conv("x", 3, 6, 1)
    m = b.node("MaxPool", [a], kernel_shape=[3, 3], pads=[1] * 4)
    cat = b.node("Concat", [m, c], axis=1)
    r = b.node("Relu", [cat])
    avg = b.node("AveragePool", [r], kernel_shape=[2, 2], strides=[2, 2])
    half = size // 2
    t = b.node("Transpose", [b.node("Reshape", [avg, b.const(np.array([1, 12, half * half]))])],
               perm=[0, 2, 1])  # fmt: skip
    s = b.node("Slice", [t, b.const(np.array([0])), b.const(np.array([8])),
                         b.const(np.array([2]))])  # fmt: skip
    f = b.node("Flatten", [s])
    w = b.rng.randn(f_len := half * half * 8, 7).astype(np.float32) / f_len**0.5
    return b.model(b.node("MatMul", [f, b.const(w)]), [1, 3, size, size])


def residual_like(seed: int = 2, size: int = 16) -> onnx.ModelProto:
    """Blocks onnxruntime lays out in its blocked format (16 and 32 channels): Conv+Relu, a
    residual Add+Relu, MaxPool, two Convs into a Concat, a 1x1 Conv."""
    b = Builder(seed)
    a = b.node("Relu", [b.conv("x", 3, 16, 3)])
    r = b.conv(b.node("Relu", [b.conv(a, 16, 16, 3)]), 16, 16, 1)
    res = b.node("Relu", [b.node("Add", [r, a])])
    p = b.node("MaxPool", [res], kernel_shape=[2, 2], strides=[2, 2])
    cat = b.node("Concat", [b.node("Relu", [b.conv(p, 16, 32, 3)]), b.conv(p, 16, 32, 1)], axis=1)
    return b.model(b.conv(cat, 64, 8), [1, 3, size, size])


def hardswish_like(seed: int = 4, size: int = 16) -> onnx.ModelProto:
    """MobileNetV3's Conv -> HardSwish (opset 14), pointwise and depthwise, and an SE gate."""
    b = Builder(seed)
    x = b.node("HardSwish", [b.conv("x", 3, 16, k=3)])
    x = b.node("HardSwish", [b.conv(x, 16, 16, k=3, group=16)])
    gate = b.node("HardSigmoid", [b.conv(b.node("GlobalAveragePool", [x]), 16, 16)])
    x = b.node("Mul", [x, gate])
    y = b.node("HardSwish", [b.conv(x, 16, 24)])
    model = b.model(b.conv(y, 24, 8), [1, 3, size, size])
    model.opset_import[0].version = 14
    return model


def inverted_residual_like(seed: int = 5, size: int = 16) -> onnx.ModelProto:
    """MobileNetV2's inverted residual twice: 1x1 Conv+Relu (96 channels), depthwise 3x3
    Conv+Relu, 1x1 Conv (not stored) into an Add with the block's stored input. onnxruntime's
    blocked layout would fuse such an Add into that Conv, which sums in another order."""
    b = Builder(seed)
    x = b.conv("x", 3, 32, 3)
    for _ in range(2):
        y = b.node("Relu", [b.conv(x, 32, 96)])
        y = b.node("Relu", [b.conv(y, 96, 96, 3, group=96)])
        x = b.node("Add", [x, b.conv(y, 96, 32)])
    return b.model(b.conv(x, 32, 8), [1, 3, size, size])


def pooled_like(seed: int = 6, size: int = 32) -> onnx.ModelProto:
    """Stored tensors read by a GlobalAveragePool (an SE gate, 96 channels) and by a linear
    Resize (align_corners, x2): onnxruntime's blocked kernels of both compute otherwise than
    the plain ones."""
    b = Builder(seed)
    a = b.node("Relu", [b.conv("x", 3, 96, 3)])
    gate = b.node("Sigmoid", [b.conv(b.node("GlobalAveragePool", [a]), 96, 96)])
    y = b.conv(b.node("Mul", [a, gate]), 96, 32)
    up = b.node("Resize", [y, "", b.const(np.array([1, 1, 2, 2], np.float32))], mode="linear",
                coordinate_transformation_mode="align_corners")  # fmt: skip
    return b.model(b.conv(up, 32, 8), [1, 3, size, size])


def scaled_matmul_like(seed: int = 7, size: int = 16) -> onnx.ModelProto:
    """A Conv's output scaled by a constant (a stored tensor) into a MatMul: onnxruntime's
    MatMulScaleFusion would make the scale the MatMul's alpha, across the rounding."""
    b = Builder(seed)
    x = b.node("Relu", [b.conv("x", 3, 16, 3)])
    y = b.node("Mul", [x, b.const(np.array(0.3, np.float32))])
    w = b.rng.randn(size, 8).astype(np.float32) / size**0.5
    return b.model(b.conv(b.node("MatMul", [y, b.const(w)]), 16, 4), [1, 3, size, size])
