"""Image classifiers of the real-architecture set, layer for layer as their exporters write them
(BatchNorm folded into the conv bias), at any input size."""

from __future__ import annotations

import numpy as np
import onnx

from .graph import Net


def _divisible(v: float, d: int = 8) -> int:
    return max(d, int(v + d / 2) // d * d)


def mobilenetv2(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """torchvision MobileNetV2: inverted residuals, ReLU6 as Clip(0, 6), 1280-wide head."""
    net = Net("mobilenetv2", [1, 3, size, size], seed)
    x = net.conv("images", 32, 3, 2, act="relu6")
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:  # fmt: skip
        for i in range(n):
            x = _inverted(net, x, c, s if i == 0 else 1, t)
    x = net.conv(x, 1280, act="relu6")
    net.output(net.gemm(net.gap(x), 1000))
    return net.model()


def _inverted(net: Net, x: str, cout: int, stride: int, expand: int, d: int = 1) -> str:
    cin = net.shape[x][1]
    y = net.conv(x, cin * expand, act="relu6") if expand != 1 else x
    y = net.conv(y, cin * expand, 3, stride, groups=cin * expand, d=d, act="relu6")
    y = net.conv(y, cout)
    return net.add(x, y) if stride == 1 and cin == cout else y


def _se(net: Net, x: str, squeeze: int, inner: str, gate: str) -> str:
    c = net.shape[x][1]
    s = net.conv(net.gap(x), squeeze, act=inner)
    return net.mul(x, net.conv(s, c, act=gate))


def mobilenetv3_small(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """torchvision MobileNetV3-small: HardSwish/ReLU, squeeze-excite with HardSigmoid."""
    net = Net("mobilenetv3_small", [1, 3, size, size], seed)
    x = net.conv("images", 16, 3, 2, act="hardswish")
    for k, exp, c, se, act, s in [
        (3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2),
        (3, 88, 24, False, "relu", 1), (5, 96, 40, True, "hardswish", 2),
        (5, 240, 40, True, "hardswish", 1), (5, 240, 40, True, "hardswish", 1),
        (5, 120, 48, True, "hardswish", 1), (5, 144, 48, True, "hardswish", 1),
        (5, 288, 96, True, "hardswish", 2), (5, 576, 96, True, "hardswish", 1),
        (5, 576, 96, True, "hardswish", 1),
    ]:  # fmt: skip
        cin = net.shape[x][1]
        y = net.conv(x, exp, act=act) if exp != cin else x
        y = net.conv(y, exp, k, s, groups=exp, act=act)
        if se:
            y = _se(net, y, _divisible(exp / 4), "relu", "hardsigmoid")
        y = net.conv(y, c)
        x = net.add(x, y) if s == 1 and cin == c else y
    x = net.conv(x, 576, act="hardswish")
    x = net.act(net.conv(net.gap(x), 1024), "hardswish")
    net.output(net.gemm(x, 1000))
    return net.model()


def efficientnet_b0(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """EfficientNet-B0: MBConv 3x3/5x5 with SiLU (Sigmoid * x) and SiLU/Sigmoid SE."""
    net = Net("efficientnet_b0", [1, 3, size, size], seed)
    x = net.conv("images", 32, 3, 2, act="silu")
    for t, k, s, c, n in [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]:  # fmt: skip
        for i in range(n):
            cin, stride = net.shape[x][1], s if i == 0 else 1
            y = net.conv(x, cin * t, act="silu") if t != 1 else x
            y = net.conv(y, cin * t, k, stride, groups=cin * t, act="silu")
            y = _se(net, y, max(1, cin // 4), "silu", "sigmoid")
            y = net.conv(y, c)
            x = net.add(x, y) if stride == 1 and cin == c else y
    x = net.conv(x, 1280, act="silu")
    net.output(net.gemm(net.gap(x), 1000))
    return net.model()


def _shuffle(net: Net, x: str, groups: int = 2) -> str:
    n, c, h, w = net.shape[x]
    y = net.reshape(x, [n, groups, c // groups, h, w])
    y = net.transpose(y, [0, 2, 1, 3, 4])
    return net.reshape(y, [n, c, h, w])


def shufflenetv2(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """torchvision ShuffleNetV2 x1.0: channel split, depthwise without activation, Concat and
    channel shuffle (Reshape, Transpose, Reshape)."""
    net = Net("shufflenetv2", [1, 3, size, size], seed)
    x = net.pool(net.conv("images", 24, 3, 2, act="relu"), "MaxPool", 3, 2, 1)
    for c, repeats in [(116, 4), (232, 8), (464, 4)]:
        for i in range(repeats):
            if i == 0:
                cin = net.shape[x][1]
                left = net.conv(net.conv(x, cin, 3, 2, groups=cin), c // 2, act="relu")
                right = x
            else:
                left, right = net.split(x, [c // 2, c // 2])
            r = net.conv(right, c // 2, act="relu")
            r = net.conv(r, c // 2, 3, 2 if i == 0 else 1, groups=c // 2)
            r = net.conv(r, c // 2, act="relu")
            x = _shuffle(net, net.concat([left, r]))
    x = net.conv(x, 1024, act="relu")
    net.output(net.gemm(net.gap(x), 1000))
    return net.model()


def resnet18(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """torchvision ResNet-18: basic blocks, projection shortcuts, residual Add then ReLU."""
    net = Net("resnet18", [1, 3, size, size], seed)
    x = net.pool(net.conv("images", 64, 7, 2, act="relu"), "MaxPool", 3, 2, 1)
    for stage, width in enumerate([64, 128, 256, 512]):
        for i in range(2):
            stride = 2 if i == 0 and stage > 0 else 1
            short = net.conv(x, width, 1, stride) if stride != 1 else x
            y = net.conv(net.conv(x, width, 3, stride, act="relu"), width, 3)
            x = net.act(net.add(y, short), "relu")
    net.output(net.gemm(net.gap(x), 1000))
    return net.model()


def regnetx_400mf(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """torchvision RegNetX-400MF: grouped 3x3 convs (group width 16), depths 1/2/7/12."""
    net = Net("regnetx_400mf", [1, 3, size, size], seed)
    x = net.conv("images", 32, 3, 2, act="relu")
    for depth, width in [(1, 32), (2, 64), (7, 160), (12, 400)]:
        for i in range(depth):
            stride = 2 if i == 0 else 1
            cin = net.shape[x][1]
            short = net.conv(x, width, 1, stride) if stride != 1 or cin != width else x
            y = net.conv(x, width, act="relu")
            y = net.conv(y, width, 3, stride, groups=width // 16, act="relu")
            x = net.act(net.add(net.conv(y, width), short), "relu")
    net.output(net.gemm(net.gap(x), 1000))
    return net.model()


def squeezenet(size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """SqueezeNet 1.1: fire modules (1x1 squeeze, 1x1 and 3x3 expands concatenated)."""
    net = Net("squeezenet", [1, 3, size, size], seed)
    x = net.pool(net.conv("images", 64, 3, 2, act="relu", p=0), "MaxPool", 3, 2)
    for squeeze, expand, pool in [(16, 64, False), (16, 64, True), (32, 128, False),
                                  (32, 128, True), (48, 192, False), (48, 192, False),
                                  (64, 256, False), (64, 256, False)]:  # fmt: skip
        s = net.conv(x, squeeze, act="relu")
        x = net.concat([net.conv(s, expand, act="relu"), net.conv(s, expand, 3, act="relu")])
        if pool:
            x = net.pool(x, "MaxPool", 3, 2)
    x = net.gap(net.conv(x, 1000, act="relu"))
    n = net.shape[x][0]
    net.output(net.softmax(net.op("Flatten", [x], [n, 1000], axis=1)))
    return net.model()


def _bn_relu(net: Net, x: str) -> str:
    """A BatchNorm no conv precedes (DenseNet's pre-activation), then ReLU."""
    c = net.shape[x][1]
    params = [net.rng.uniform(0.5, 1.5, c), net.rng.normal(0, 0.1, c),
              net.rng.normal(0, 0.1, c), net.rng.uniform(0.5, 1.5, c)]  # fmt: skip
    names = [net.const(p.astype(np.float32), "bn") for p in params]
    return net.act(net.op("BatchNormalization", [x, *names], net.shape[x]), "relu")


def densenet121(size: int = 224, seed: int = 0, blocks: tuple = (6, 12, 24, 16)) -> onnx.ModelProto:
    """torchvision DenseNet-121: BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 layers concatenated (growth
    32), transitions with AveragePool."""
    net = Net("densenet121", [1, 3, size, size], seed)
    x = net.pool(net.conv("images", 64, 7, 2, act="relu"), "MaxPool", 3, 2, 1)
    for b, layers in enumerate(blocks):
        for _ in range(layers):
            y = net.conv(_bn_relu(net, x), 128)
            x = net.concat([x, net.conv(_bn_relu(net, y), 32, 3)])
        if b < len(blocks) - 1:
            x = net.conv(_bn_relu(net, x), net.shape[x][1] // 2)
            x = net.pool(x, "AveragePool", 2, 2)
    net.output(net.gemm(net.gap(_bn_relu(net, x)), 1000))
    return net.model()
