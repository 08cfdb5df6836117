"""A DeepLab-shaped segmenter, a ViT/DeiT block stack and an OCR-shaped recogniser for the
real-architecture set."""

from __future__ import annotations

import numpy as np
import onnx

from .classifiers import _inverted
from .graph import Net


def deeplabv3_mobilenetv2(size: int = 513, seed: int = 0) -> onnx.ModelProto:
    """DeepLabV3 on MobileNetV2 at output stride 8 (dilated last stages), ASPP (1x1, three
    dilated 3x3, image pooling), a 21-class head resized (bilinear) to the input."""
    net = Net("deeplabv3_mobilenetv2", [1, 3, size, size], seed)
    x = net.conv("images", 32, 3, 2, act="relu6")
    stride, dilation = 2, 1
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:  # fmt: skip
        for i in range(n):
            step = s if i == 0 else 1
            if step == 2 and stride >= 8:
                dilation, step = dilation * 2, 1
            elif step == 2:
                stride *= 2
            x = _inverted(net, x, c, step, t, dilation)
    _, _, h, w = net.shape[x]
    branches = [net.conv(x, 256, act="relu")]
    branches += [net.conv(x, 256, 3, d=r, act="relu") for r in (12, 24, 36)]
    branches.append(net.resize(net.conv(net.gap(x), 256, act="relu"), [h, w], "linear"))
    x = net.conv(net.concat(branches), 256, act="relu")
    x = net.conv(net.conv(x, 256, 3, act="relu"), 21)
    net.output(net.resize(x, [size, size], "linear"))
    return net.model()


def _attention(net: Net, x: str, heads: int) -> str:
    n, tokens, dim = net.shape[x]
    head = dim // heads
    qkv = net.reshape(net.linear(x, 3 * dim), [n, tokens, 3, heads, head])
    qkv = net.transpose(qkv, [2, 0, 3, 1, 4])
    q, k, v = (net.reshape(t, [n, heads, tokens, head]) for t in net.split(qkv, [1, 1, 1], 0))
    q = net.mul(q, net.const(np.float32(head**-0.5)))
    attn = net.softmax(net.matmul(q, net.transpose(k, [0, 1, 3, 2])))
    y = net.reshape(net.transpose(net.matmul(attn, v), [0, 2, 1, 3]), [n, tokens, dim])
    return net.linear(y, dim)


def deit_tiny(size: int = 224, seed: int = 0, depth: int = 12, split_layernorm: bool = False,
              opset: int | None = None, gelu: str = "gelu") -> onnx.ModelProto:  # fmt: skip
    """DeiT-tiny (ViT-Ti/16): patch conv, class token, position embedding, pre-norm blocks
    (LayerNorm, multi-head attention with MatMul/Softmax, GELU MLP). `split_layernorm`: each
    LayerNorm as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add (opset 14 by default,
    older exporters' form; at `opset` 18 the ReduceMeans' axes are an input, onnxslim's
    form); otherwise one LayerNormalization op (opset 17). `gelu`: the erf form ("gelu") or
    the tanh approximation ("gelu_tanh")."""
    name = "deit_tiny_split_ln" if split_layernorm else "deit_tiny"
    opset = opset or (14 if split_layernorm else 17)
    net = Net(name, [1, 3, size, size], seed, opset=opset)
    dim, heads = 192, 3
    x = net.conv("images", dim, 16, 16, p=0)
    n, _, h, w = net.shape[x]
    x = net.transpose(net.reshape(x, [n, dim, h * w]), [0, 2, 1])
    cls = net.const(net.rng.normal(0, 0.02, (1, 1, dim)).astype(np.float32), "cls")
    x = net.concat([cls, x], axis=1)
    pos = net.const(net.rng.normal(0, 0.02, (1, h * w + 1, dim)).astype(np.float32), "pos")
    x = net.add(x, pos)
    for _ in range(depth):
        x = net.add(x, _attention(net, net.layer_norm(x, split_layernorm), heads))
        y = net.linear(net.linear(net.layer_norm(x, split_layernorm), 4 * dim, gelu), dim)
        x = net.add(x, y)
    x = net.layer_norm(x, split_layernorm)
    first = net.op("Gather", [x, net.const(np.array(0, np.int64))], [n, dim], axis=1)
    net.output(net.linear(first, 1000))
    return net.model()


def ocr_recogniser(height: int = 48, width: int = 320, seed: int = 0,
                   classes: int = 97) -> onnx.ModelProto:  # fmt: skip
    """A PP-OCR-recognition-shaped CRNN: depthwise-separable HardSwish backbone with
    height-only strides, the map pooled to one row, a sequence of width/4 steps, a token-wise
    classifier and Softmax (the CTC head)."""
    net = Net("ocr_recogniser", [1, 3, height, width], seed)
    x = net.conv("images", 32, 3, 2, act="hardswish")
    for cout, stride in [(64, 1), (128, 1), (128, 1), (256, (2, 1)), (256, 1), (512, (2, 1)),
                         (512, 1), (512, 1), (1024, (2, 1))]:  # fmt: skip
        c = net.shape[x][1]
        x = net.conv(net.conv(x, c, 3, stride, groups=c, act="hardswish"), cout,
                     act="hardswish")  # fmt: skip
    n, c, h, w = net.shape[x]
    x = net.op("MaxPool", [x], [n, c, 1, w // 2], kernel_shape=[h, 2], strides=[h, 2])
    seq = net.transpose(net.reshape(x, [n, c, w // 2]), [0, 2, 1])
    seq = net.linear(seq, 96, "hardswish")
    net.output(net.softmax(net.linear(seq, classes)))
    return net.model()
