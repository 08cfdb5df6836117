"""Small models built with onnx.helper for the toolkit2 tests, and helpers to run them."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


class Graph:
    """A tiny builder: weights drawn from one seed, nodes named after their outputs."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.RandomState(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, out: str, cin: int, cout: int, k: int = 3, stride: int = 1) -> str:
        w = self.const(f"{out}.w", (self.rng.randn(cout, cin, k, k)
                                    * np.sqrt(2.0 / (cin * k * k))).astype(np.float32))
        b = self.const(f"{out}.b", (self.rng.randn(cout) * 0.1).astype(np.float32))
        return self.node("Conv", [x, w, b], out, kernel_shape=[k, k], pads=[k // 2] * 4,
                         strides=[stride, stride])

    def silu(self, x: str, out: str) -> str:
        s = self.node("Sigmoid", [x], f"{out}.sig")
        return self.node("Mul", [x, s], out)

    def model(self, inputs: list[tuple[str, list[int]]], outputs: list[str],
              opset: int = 13, name: str = "g") -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_empty_tensor_value_info(o) for o in outputs], self.inits,
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 7
        return onnx.shape_inference.infer_shapes(m)


def tiny_cnn(size: int = 16, seed: int = 0) -> onnx.ModelProto:
    """images [1,3,size,size] -> Conv-Relu -> Conv -> 'out' [1,4,size,size]."""
    g = Graph(seed)
    x = g.node("Relu", [g.conv("images", "conv1", 3, 8)], "relu1")
    g.conv(x, "out", 8, 4, k=1)
    return g.model([("images", [1, 3, size, size])], ["out"], name="tiny_cnn")


def two_input_model(seed: int = 1) -> onnx.ModelProto:
    """img [1,3,8,8] and vec [1,4]: conv(img) pooled, + vec @ W -> 'out' [1,4]."""
    g = Graph(seed)
    c = g.node("Relu", [g.conv("img", "c1", 3, 4)], "r1")
    p = g.node("GlobalAveragePool", [c], "gap")
    f = g.node("Flatten", [p], "flat")
    w = g.const("fc.w", g.rng.randn(4, 4).astype(np.float32))
    m = g.node("MatMul", ["vec", w], "mm")
    g.node("Add", [f, m], "out")
    return g.model([("img", [1, 3, 8, 8]), ("vec", [1, 4])], ["out"], name="two_input")


def yolo_like(size: int = 64, seed: int = 2) -> onnx.ModelProto:
    """A YOLOv5s-shaped network: Conv+SiLU backbone with stride 2, a Resize (nearest x2) up
    path concatenated with the earlier feature map, Sigmoid heads at two scales."""
    g = Graph(seed)
    a = g.silu(g.conv("images", "stem", 3, 8, stride=2), "stem.act")  # /2
    b = g.silu(g.conv(a, "down1", 8, 16, stride=2), "down1.act")  # /4
    c = g.silu(g.conv(b, "down2", 16, 32, stride=2), "down2.act")  # /8
    lat = g.silu(g.conv(c, "lat", 32, 16, k=1), "lat.act")
    scales = g.const("up.scales", np.array([1, 1, 2, 2], np.float32))
    roi = g.const("up.roi", np.zeros(0, np.float32))
    up = g.node("Resize", [lat, roi, scales], "up", mode="nearest")
    cat = g.node("Concat", [up, b], "cat", axis=1)
    p4 = g.silu(g.conv(cat, "c3", 32, 16), "c3.act")
    g.node("Sigmoid", [g.conv(p4, "head4", 16, 18, k=1)], "out4")
    g.node("Sigmoid", [g.conv(c, "head8", 32, 18, k=1)], "out8")
    return g.model([("images", [1, 3, size, size])], ["out4", "out8"], name="yolo_like")


def ocr_det_like(size: int = 64, seed: int = 3) -> onnx.ModelProto:
    """A PP-OCR-detection-shaped network: a downsampling backbone, Resize (bilinear) of every
    scale back to 1/4, Concat, HardSwish, then a 1-channel Sigmoid probability map."""
    g = Graph(seed)
    f1 = g.node("Relu", [g.conv("x", "b1", 3, 8, stride=2)], "b1.act")  # /2
    f2 = g.node("Relu", [g.conv(f1, "b2", 8, 8, stride=2)], "b2.act")  # /4
    f3 = g.node("Relu", [g.conv(f2, "b3", 8, 8, stride=2)], "b3.act")  # /8
    f4 = g.node("Relu", [g.conv(f3, "b4", 8, 8, stride=2)], "b4.act")  # /16
    roi = g.const("roi", np.zeros(0, np.float32))
    ups = [f2]
    for name, src, factor in (("u3", f3, 2), ("u4", f4, 4)):
        sc = g.const(f"{name}.s", np.array([1, 1, factor, factor], np.float32))
        ups.append(g.node("Resize", [src, roi, sc], name, mode="linear"))
    cat = g.node("Concat", ups, "fuse", axis=1)
    h = g.node("HardSwish", [g.conv(cat, "neck", 24, 8)], "neck.act")
    sc = g.const("up4.s", np.array([1, 1, 4, 4], np.float32))
    up = g.node("Resize", [h, roi, sc], "up4", mode="linear")
    g.node("Sigmoid", [g.conv(up, "head", 8, 1)], "prob")
    return g.model([("x", [1, 3, size, size])], ["prob"], opset=14, name="ocr_det_like")


def run_onnx(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.astype(np.float32) for k, v in feeds.items()})


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def smooth_images(count: int, size: int, seed: int = 0) -> list[np.ndarray]:
    """uint8 HWC RGB images with structure (gradients + blobs), not white noise."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = []
    for _ in range(count):
        chans = []
        for _c in range(3):
            fx, fy, ph = rng.uniform(1, 4), rng.uniform(1, 4), rng.uniform(0, 6)
            chans.append(0.5 + 0.5 * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph))
        img = np.stack(chans, -1) * 255
        out.append(np.clip(img + rng.randn(size, size, 3) * 8, 0, 255).astype(np.uint8))
    return out


def write_images(folder: str, images: list[np.ndarray], suffix: str = ".png") -> list[str]:
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    paths = []
    for k, img in enumerate(images):
        path = os.path.join(folder, f"img{k}{suffix}")
        Image.fromarray(img).save(path)
        paths.append(path)
    return paths
