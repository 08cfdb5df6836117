"""Architecture-true ONNX models of the model zoo's benchmark networks, built with onnx.helper.

Weights are drawn from a seed (He-normal convolutions, small biases): latency and memory depend
on the layers and shapes, not on the values. Each builder returns an `onnx.ModelProto`
(opset 13, NCHW float32 input) named after the zoo model it mirrors:

- `mobilenetv2` (mobilenetv2-12, 224): torchvision's MobileNetV2 with BatchNorm folded (Conv +
  bias + Clip(0, 6), as in the ONNX model zoo export).
- `resnet50_v2` (resnet50-v2-7, 224): Gluon's pre-activation ResNet-50 v2 (BN-ReLU before each
  convolution, a BatchNorm on the input, projection shortcuts at each stage's first block).
- `yolov5s` (640): the zoo's `yolov5s_relu.onnx` (YOLOv5 v6 with ReLU activations, the three
  detection convolutions as outputs, no decode).
- `yolov8n` (640): the zoo's YOLOv8n export (SiLU, box and class branches per level as outputs,
  DFL and decode on the CPU after the model, a score-sum output per level).
- `deeplabv3_mobilenetv2` (513): DeepLab v3 with a MobileNetV2 backbone at output stride 8
  (dilated last stages), image-pooling + 1x1 ASPP and a 21-class 1x1 head at 65x65.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Appends nodes to one graph and tracks each tensor's NCHW shape."""

    def __init__(self, name: str, shape: list[int], seed: int = 0) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.shape: dict[str, list[int]] = {"images": list(shape)}
        self.outputs: list[str] = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def _init(self, array: np.ndarray, kind: str) -> str:
        name = self._name(kind)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def _node(self, op: str, inputs: list[str], shape: list[int], **attrs) -> str:
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        self.shape[out] = shape
        return out

    def conv(self, x: str, cout: int, k: int = 1, s: int = 1, groups: int = 1, d: int = 1,
             act: str | None = "relu", p: int | None = None, bias: bool = True) -> str:  # fmt: skip
        n, cin, h, w = self.shape[x]
        p = d * (k - 1) // 2 if p is None else p
        fan_in = cin // groups * k * k
        wt = self.rng.normal(0, (2 / fan_in) ** 0.5, (cout, cin // groups, k, k))
        ins = [x, self._init(wt.astype(np.float32), "w")]
        if bias:
            ins.append(self._init(self.rng.normal(0, 0.01, cout).astype(np.float32), "b"))
        oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
        ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
        y = self._node("Conv", ins, [n, cout, oh, ow], kernel_shape=[k, k], strides=[s, s],
                       pads=[p] * 4, group=groups, dilations=[d, d])  # fmt: skip
        return self.act(y, act)

    def act(self, x: str, act: str | None) -> str:
        if act is None:
            return x
        if act == "relu":
            return self._node("Relu", [x], self.shape[x])
        if act == "relu6":
            lo = self._init(np.array(0, np.float32), "lo")
            hi = self._init(np.array(6, np.float32), "hi")
            return self._node("Clip", [x, lo, hi], self.shape[x])
        if act == "silu":
            sig = self._node("Sigmoid", [x], self.shape[x])
            return self._node("Mul", [x, sig], self.shape[x])
        if act == "sigmoid":
            return self._node("Sigmoid", [x], self.shape[x])
        raise ValueError(act)

    def bn(self, x: str) -> str:
        c = self.shape[x][1]
        params = [self.rng.uniform(0.5, 1.5, c), self.rng.normal(0, 0.1, c),
                  self.rng.normal(0, 0.1, c), self.rng.uniform(0.5, 1.5, c)]  # fmt: skip
        names = [self._init(p.astype(np.float32), "bn") for p in params]
        return self._node("BatchNormalization", [x, *names], self.shape[x])

    def add(self, a: str, b: str) -> str:
        return self._node("Add", [a, b], self.shape[a])

    def concat(self, xs: list[str]) -> str:
        n, _, h, w = self.shape[xs[0]]
        return self._node("Concat", xs, [n, sum(self.shape[x][1] for x in xs), h, w], axis=1)

    def split(self, x: str, parts: list[int]) -> list[str]:
        n, _, h, w = self.shape[x]
        outs = [self._name("split") for _ in parts]
        sizes = self._init(np.array(parts, np.int64), "splits")
        self.nodes.append(helper.make_node("Split", [x, sizes], outs, name=outs[0], axis=1))
        for o, c in zip(outs, parts):
            self.shape[o] = [n, c, h, w]
        return outs

    def maxpool(self, x: str, k: int, s: int) -> str:
        n, c, h, w = self.shape[x]
        p = k // 2 if s == 1 else (k - 1) // 2
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        return self._node("MaxPool", [x], [n, c, oh, ow], kernel_shape=[k, k],
                          strides=[s, s], pads=[p] * 4)  # fmt: skip

    def gap(self, x: str) -> str:
        n, c, _, _ = self.shape[x]
        return self._node("GlobalAveragePool", [x], [n, c, 1, 1])

    def resize(self, x: str, size: tuple[int, int], mode: str = "nearest") -> str:
        n, c, _, _ = self.shape[x]
        sizes = self._init(np.array([n, c, *size], np.int64), "sizes")
        return self._node("Resize", [x, "", "", sizes], [n, c, *size], mode=mode)

    def gemm(self, x: str, classes: int) -> str:
        n, c = self.shape[x][:2]
        flat = self._node("Flatten", [x], [n, c], axis=1)
        w = self._init(self.rng.normal(0, (1 / c) ** 0.5, (classes, c)).astype(np.float32), "fc")
        b = self._init(np.zeros(classes, np.float32), "fcb")
        return self._node("Gemm", [flat, w, b], [n, classes], transB=1)

    def output(self, x: str) -> None:
        self.outputs.append(x)

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("images", TensorProto.FLOAT, self.shape["images"])],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, self.shape[o])
             for o in self.outputs],
            self.inits,
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        return model


def _inverted_residual(b: Builder, x: str, cout: int, stride: int, expand: int,
                       dilation: int = 1) -> str:  # fmt: skip
    cin = b.shape[x][1]
    y = b.conv(x, cin * expand, act="relu6") if expand != 1 else x
    y = b.conv(y, cin * expand, 3, stride, groups=cin * expand, d=dilation, act="relu6")
    y = b.conv(y, cout, act=None)
    return b.add(x, y) if stride == 1 and cin == cout else y


_MBV2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
         (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip


def mobilenetv2(size: int = 224) -> onnx.ModelProto:
    b = Builder("mobilenetv2-12", [1, 3, size, size])
    x = b.conv("images", 32, 3, 2, act="relu6")
    for t, c, n, s in _MBV2:
        for i in range(n):
            x = _inverted_residual(b, x, c, s if i == 0 else 1, t)
    x = b.conv(x, 1280, act="relu6")
    b.output(b.gemm(b.gap(x), 1000))
    return b.model()


def resnet50_v2(size: int = 224) -> onnx.ModelProto:
    b = Builder("resnet50-v2-7", [1, 3, size, size])
    x = b.bn("images")
    x = b.act(b.bn(b.conv(x, 64, 7, 2, act=None, bias=False)), "relu")
    x = b.maxpool(x, 3, 2)
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            pre = b.act(b.bn(x), "relu")
            if i == 0:
                shortcut = b.conv(pre, width * 4, 1, stride, act=None, bias=False)
            else:
                shortcut = x
            y = b.act(b.bn(b.conv(pre, width, act=None, bias=False)), "relu")
            y = b.act(b.bn(b.conv(y, width, 3, stride, act=None, bias=False)), "relu")
            y = b.conv(y, width * 4, act=None, bias=False)
            x = b.add(y, shortcut)
    x = b.act(b.bn(x), "relu")
    b.output(b.gemm(b.gap(x), 1000))
    return b.model()


def _c3(b: Builder, x: str, cout: int, n: int, shortcut: bool, act: str) -> str:
    hidden = cout // 2
    y1 = b.conv(x, hidden, act=act)
    for _ in range(n):
        z = b.conv(b.conv(y1, hidden, act=act), hidden, 3, act=act)
        y1 = b.add(y1, z) if shortcut else z
    y2 = b.conv(x, hidden, act=act)
    return b.conv(b.concat([y1, y2]), cout, act=act)


def _sppf(b: Builder, x: str, cout: int, act: str) -> str:
    y = b.conv(x, b.shape[x][1] // 2, act=act)
    p1 = b.maxpool(y, 5, 1)
    p2 = b.maxpool(p1, 5, 1)
    p3 = b.maxpool(p2, 5, 1)
    return b.conv(b.concat([y, p1, p2, p3]), cout, act=act)


def _up(b: Builder, x: str) -> str:
    _, _, h, w = b.shape[x]
    return b.resize(x, (2 * h, 2 * w))


def yolov5s(size: int = 640) -> onnx.ModelProto:
    b = Builder("yolov5s_relu", [1, 3, size, size])
    a = "relu"
    x = b.conv("images", 32, 6, 2, p=2, act=a)
    x = b.conv(x, 64, 3, 2, act=a)
    x = _c3(b, x, 64, 1, True, a)
    x = b.conv(x, 128, 3, 2, act=a)
    p3 = _c3(b, x, 128, 2, True, a)
    x = b.conv(p3, 256, 3, 2, act=a)
    p4 = _c3(b, x, 256, 3, True, a)
    x = b.conv(p4, 512, 3, 2, act=a)
    x = _sppf(b, _c3(b, x, 512, 1, True, a), 512, a)
    h10 = b.conv(x, 256, act=a)
    x = _c3(b, b.concat([_up(b, h10), p4]), 256, 1, False, a)
    h14 = b.conv(x, 128, act=a)
    out3 = _c3(b, b.concat([_up(b, h14), p3]), 128, 1, False, a)
    x = b.conv(out3, 128, 3, 2, act=a)
    out4 = _c3(b, b.concat([x, h14]), 256, 1, False, a)
    x = b.conv(out4, 256, 3, 2, act=a)
    out5 = _c3(b, b.concat([x, h10]), 512, 1, False, a)
    for feat in (out3, out4, out5):
        b.output(b.conv(feat, 255, act=None))
    return b.model()


def _c2f(b: Builder, x: str, cout: int, n: int, shortcut: bool) -> str:
    hidden = cout // 2
    y = b.conv(x, 2 * hidden, act="silu")
    parts = b.split(y, [hidden, hidden])
    last = parts[-1]
    for _ in range(n):
        z = b.conv(b.conv(last, hidden, 3, act="silu"), hidden, 3, act="silu")
        last = b.add(last, z) if shortcut else z
        parts.append(last)
    return b.conv(b.concat(parts), cout, act="silu")


def yolov8n(size: int = 640) -> onnx.ModelProto:
    b = Builder("yolov8n", [1, 3, size, size])
    s = "silu"
    x = b.conv("images", 16, 3, 2, act=s)
    x = b.conv(x, 32, 3, 2, act=s)
    x = _c2f(b, x, 32, 1, True)
    x = b.conv(x, 64, 3, 2, act=s)
    p3 = _c2f(b, x, 64, 2, True)
    x = b.conv(p3, 128, 3, 2, act=s)
    p4 = _c2f(b, x, 128, 2, True)
    x = b.conv(p4, 256, 3, 2, act=s)
    p5 = _sppf(b, _c2f(b, x, 256, 1, True), 256, s)
    h12 = _c2f(b, b.concat([_up(b, p5), p4]), 128, 1, False)
    out3 = _c2f(b, b.concat([_up(b, h12), p3]), 64, 1, False)
    out4 = _c2f(b, b.concat([b.conv(out3, 64, 3, 2, act=s), h12]), 128, 1, False)
    out5 = _c2f(b, b.concat([b.conv(out4, 128, 3, 2, act=s), p5]), 256, 1, False)
    for feat in (out3, out4, out5):
        box = b.conv(b.conv(b.conv(feat, 64, 3, act=s), 64, 3, act=s), 64, act=None)
        cls = b.conv(b.conv(b.conv(feat, 80, 3, act=s), 80, 3, act=s), 80, act="sigmoid")
        n, _, h, w = b.shape[cls]
        axes = b._init(np.array([1], np.int64), "axes")
        total = b._node("ReduceSum", [cls, axes], [n, 1, h, w], keepdims=1)
        lo = b._init(np.array(0, np.float32), "lo")
        hi = b._init(np.array(1, np.float32), "hi")
        for out in (box, cls, b._node("Clip", [total, lo, hi], [n, 1, h, w])):
            b.output(out)
    return b.model()


def deeplabv3_mobilenetv2(size: int = 513) -> onnx.ModelProto:
    b = Builder("deeplabv3_mobilenetv2", [1, 3, size, size])
    x = b.conv("images", 32, 3, 2, act="relu6")
    stride, dilation = 2, 1
    for t, c, n, s in _MBV2:
        for i in range(n):
            step = s if i == 0 else 1
            if step == 2 and stride >= 8:  # output stride 8: dilate instead of striding
                dilation, step = dilation * 2, 1
            elif step == 2:
                stride *= 2
            x = _inverted_residual(b, x, c, step, t, dilation)
    _, _, h, w = b.shape[x]
    pooled = b.resize(b.conv(b.gap(x), 256), (h, w), mode="linear")
    branch = b.conv(x, 256)
    x = b.conv(b.concat([pooled, branch]), 256)
    b.output(b.conv(x, 21, act=None))
    return b.model()


ZOO: dict[str, tuple[Callable[[], onnx.ModelProto], int]] = {
    "mobilenetv2": (mobilenetv2, 224),
    "resnet50_v2": (resnet50_v2, 224),
    "yolov5s": (yolov5s, 640),
    "yolov8n": (yolov8n, 640),
    "deeplabv3_mobilenetv2": (deeplabv3_mobilenetv2, 513),
}
