"""Small models shaped like the detectors the vendor's examples convert, built with
onnx.helper: a YOLOv5s-like net (Conv/SiLU backbone, Concat, Resize neck, Sigmoid head) and a
PP-OCR-detection-like net (Resize-heavy FPN, HardSwish, ConvTranspose-free upsampling)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.RandomState(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, array: np.ndarray, base: str = "k") -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs: list[str], n_out: int = 1, **attrs) -> list[str]:
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), **attrs))
        return outs

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, act: str = "silu"):
        fan_in = cin * k * k
        w = (self.rng.randn(cout, cin, k, k) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (self.rng.randn(cout) * 0.1).astype(np.float32)
        (y,) = self.node("Conv", [x, self.const(w, "w"), self.const(b, "b")],
                         kernel_shape=[k, k], strides=[stride] * 2, pads=[k // 2] * 4)  # fmt: skip
        if act == "silu":
            (s,) = self.node("Sigmoid", [y])
            (y,) = self.node("Mul", [y, s])
        elif act == "relu":
            (y,) = self.node("Relu", [y])
        elif act == "hardswish":
            (y,) = self.node("HardSwish", [y])
        elif act == "leaky":
            (y,) = self.node("LeakyRelu", [y], alpha=0.1)
        return y

    def upsample(self, x: str) -> str:
        scales = self.const(np.array([1, 1, 2, 2], np.float32), "scales")
        (y,) = self.node("Resize", [x, "", scales], mode="nearest")
        return y

    def model(self, inputs, outputs, name: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
        return onnx.shape_inference.infer_shapes(model)


def yolov5s_like(seed: int = 5, size: int = 64, classes: int = 3) -> onnx.ModelProto:
    """images[1,3,size,size] -> Conv/SiLU backbone (strides 8/16) -> Resize + Concat neck ->
    two 1x1 detection convs with Sigmoid, reshaped/transposed to [1, 3, h, w, 5+classes]."""
    b = _Builder(seed)
    x = b.conv("images", 3, 8, 3, 2)
    x = b.conv(x, 8, 16, 3, 2)
    c3a = b.conv(x, 16, 8, 1)
    c3b = b.conv(b.conv(x, 16, 8, 1), 8, 8, 3)
    (x,) = b.node("Concat", [c3a, c3b], axis=1)
    p3 = b.conv(x, 16, 16, 3, 2)  # stride 8
    p4 = b.conv(p3, 16, 32, 3, 2)  # stride 16
    # SPPF-like: MaxPools concatenated
    (m1,) = b.node("MaxPool", [p4], kernel_shape=[5, 5], pads=[2] * 4, strides=[1, 1])
    (m2,) = b.node("MaxPool", [m1], kernel_shape=[5, 5], pads=[2] * 4, strides=[1, 1])
    (sp,) = b.node("Concat", [p4, m1, m2], axis=1)
    p4 = b.conv(sp, 96, 32, 1)
    up = b.upsample(b.conv(p4, 32, 16, 1))
    (n3,) = b.node("Concat", [up, p3], axis=1)
    n3 = b.conv(n3, 32, 16, 3)
    outputs, infos = [], []
    no = 5 + classes
    for level, (feat, ch) in enumerate(((n3, 16), (p4, 32))):
        hw = size // (8 * 2**level)
        w = (b.rng.randn(3 * no, ch, 1, 1) * 0.2).astype(np.float32)
        bias = (b.rng.randn(3 * no) * 0.5).astype(np.float32)
        (d,) = b.node("Conv", [feat, b.const(w, "w"), b.const(bias, "b")], kernel_shape=[1, 1])
        shape = b.const(np.array([1, 3, no, hw, hw], np.int64), "shape")
        (r,) = b.node("Reshape", [d, shape])
        (t,) = b.node("Transpose", [r], perm=[0, 1, 3, 4, 2])
        (s,) = b.node("Sigmoid", [t])
        out = f"out{level}"
        b.nodes[-1].output[0] = out
        outputs.append(out)
        infos.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 3, hw, hw, no]))
    inputs = [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])]
    return b.model(inputs, infos, "yolov5s_like")


def ocr_det_like(seed: int = 6, size: int = 64) -> onnx.ModelProto:
    """x[1,3,size,size] -> HardSwish/Relu backbone at strides 4/8/16/32 -> FPN (Resize x2
    and Add top-down, then Resize of every level to stride 4 and Concat) -> head conv ->
    Resize x4 -> Sigmoid probability map [1,1,size,size]."""
    b = _Builder(seed)
    x = b.conv("x", 3, 8, 3, 2, act="hardswish")
    levels = []
    ch = 8
    for k, out_ch in enumerate((8, 16, 24, 32)):
        x = b.conv(x, ch, out_ch, 3, 2 if k else 2, act="hardswish" if k % 2 else "relu")
        levels.append((x, out_ch))
        ch = out_ch
    lat = [b.conv(f, c, 16, 1, act="none") for f, c in levels]
    top = lat[-1]
    merged = [top]
    for feat in reversed(lat[:-1]):
        (top,) = b.node("Add", [b.upsample(top), feat])
        merged.insert(0, top)
    outs = []
    for k, feat in enumerate(merged):
        y = b.conv(feat, 16, 4, 3, act="none")
        for _ in range(k):
            y = b.upsample(y)
        outs.append(y)
    (cat,) = b.node("Concat", outs, axis=1)
    h = b.conv(cat, 16, 8, 3, act="relu")
    h = b.upsample(b.upsample(h))
    w = (b.rng.randn(1, 8, 3, 3) * 0.3).astype(np.float32)
    (h,) = b.node("Conv", [h, b.const(w, "w")], kernel_shape=[3, 3], pads=[1] * 4)
    b.node("Sigmoid", [h])
    b.nodes[-1].output[0] = "prob"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])]
    outputs = [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1, size, size])]
    return b.model(inputs, outputs, "ocr_det_like")


def op_zoo(seed: int = 7) -> onnx.ModelProto:
    """One graph with the ops item 5 lists that the two detectors lack: Split, Slice,
    MatMul, Softmax, LeakyRelu, Upsample-style Resize with sizes, Transpose, Reshape."""
    b = _Builder(seed)
    x = b.conv("x", 3, 16, 3, 2, act="leaky")
    a, c = b.node("Split", [x, b.const(np.array([8, 8], np.int64), "split")], n_out=2, axis=1)
    (s,) = b.node("Slice", [c, b.const(np.array([2], np.int64), "st"),
                            b.const(np.array([8], np.int64), "en"),
                            b.const(np.array([1], np.int64), "ax")])  # fmt: skip
    (u,) = b.node("Resize", [s, "", "", b.const(np.array([1, 6, 32, 32], np.int64), "sizes")],
                  mode="linear")  # fmt: skip
    y = b.conv(a, 8, 6, 3, 2, act="relu")
    (cat,) = b.node("Concat", [b.upsample(y), u], axis=1)  # [1,12,32,32]
    (r,) = b.node("Reshape", [cat, b.const(np.array([1, 12, 1024], np.int64), "shape")])
    (t,) = b.node("Transpose", [r], perm=[0, 2, 1])  # [1,1024,12]
    m = (b.rng.randn(12, 10) * 0.4).astype(np.float32)
    (mm,) = b.node("MatMul", [t, b.const(m, "m")])
    b.node("Softmax", [mm], axis=-1)
    b.nodes[-1].output[0] = "probs"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 1024, 10])]
    return b.model(inputs, outputs, "op_zoo")
