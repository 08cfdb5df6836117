"""Vendor fixtures of tests/vendor/fixtures_heads (make_arch_fixtures.py builds them with
`--only yolohead vitembed shuffle attnv v8head atrous oc1 bnzp grouped widestem widestem24
--out ...`):
the parts of real networks whose compiled form the architecture blocks of make_arch_fixtures.py
do not reach. Each builder takes make_arch_fixtures' `Net` and returns (input, input shape,
output, output shape)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper as h


def _ints(net: Any, *v: int) -> str:
    return net.const(np.array(v, np.int64))


def m_yolohead(net: Any):
    """A YOLOv5 detect head with its decode, on two scales (as tools/real_arch's yolov5s, not
    the model zoo's cut export): per scale a 1x1 conv to 3 anchors x 7, Reshape, Transpose,
    Sigmoid, Split, xy = (2 s + grid) stride, wh = (2 s)^2 anchor (Pow), Concat, Reshape; the
    scales' detections joined. The compiler folds the grid and the anchors into NC1HWC2
    constants (the anchors' planes padded) and joins the detections along axis 0."""
    na, no = 3, 7
    f1 = net.silu(net.conv("x", 3, 16, 3, 2))
    f2 = net.silu(net.conv(f1, 16, 16, 3, 2))
    anchors = [(10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119)]
    parts = []
    for k, (feat, n, stride) in enumerate(((f1, 16, 8), (f2, 8, 16))):
        p = net.conv(feat, 16, na * no, 1)
        p = net.op("Reshape", [p, _ints(net, 1, na, no, n, n)])
        p = net.op("Sigmoid", [net.op("Transpose", [p], perm=[0, 1, 3, 4, 2])])
        xy, wh, conf = (net.name("split") for _ in range(3))
        net.nodes.append(h.make_node("Split", [p, _ints(net, 2, 2, no - 4)], [xy, wh, conf],
                                     axis=4))  # fmt: skip
        yy, xx = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        grid = (np.stack([xx, yy], -1)[None, None] - 0.5).astype(np.float32)
        two = net.const(np.float32(2))
        xy = net.op("Mul", [net.op("Add", [net.op("Mul", [xy, two]), net.const(grid)]),
                            net.const(np.float32(stride))])  # fmt: skip
        anchor = np.array(anchors[k], np.float32).reshape(1, na, 1, 1, 2)
        wh = net.op("Mul", [net.op("Pow", [net.op("Mul", [wh, two]), net.const(np.float32(2))]),
                            net.const(anchor)])  # fmt: skip
        box = net.op("Concat", [xy, wh, conf], axis=4)
        parts.append(net.op("Reshape", [box, _ints(net, 1, na * n * n, no)]))
    return "x", [1, 3, 32, 32], net.op("Concat", parts, axis=1), [1, na * (256 + 64), no]


def m_vitembed(net: Any):
    """A ViT/DeiT embedding: 4x4 patches of a 16x16 image (a conv), flattened to 16 tokens, a
    class token joined in front (a constant Concat operand), a position embedding of 17 tokens
    added (both NC1HWC2 constants; 17 positions pad their planes), LayerNorm and a linear."""
    d = 32
    p = net.op("Conv", ["x", net.const((net.rng.standard_normal((d, 3, 4, 4)) / 7)
                                       .astype(np.float32)),
                        net.const((0.1 * net.rng.standard_normal(d)).astype(np.float32))],
               kernel_shape=[4, 4], strides=[4, 4])  # fmt: skip
    tokens = net.op("Transpose", [net.op("Reshape", [p, _ints(net, 1, d, 16)])], perm=[0, 2, 1])
    cls = (0.02 * net.rng.standard_normal((1, 1, d))).astype(np.float32)
    x = net.op("Concat", [net.const(cls), tokens], axis=1)
    x = net.op("Add", [x, net.const((0.02 * net.rng.standard_normal((1, 17, d)))
                                    .astype(np.float32))])  # fmt: skip
    g = (1 + 0.1 * net.rng.standard_normal(d)).astype(np.float32)
    x = net.op("LayerNormalization", [x, net.const(g), net.const(np.zeros(d, np.float32))],
               axis=-1, epsilon=1e-6)  # fmt: skip
    w = (net.rng.standard_normal((d, 10)) / np.sqrt(d)).astype(np.float32)
    return "x", [1, 3, 16, 16], net.op("MatMul", [x, net.const(w)]), [1, 17, 10]


def m_shuffle(net: Any):
    """Two ShuffleNetV2 units on 12 channels (channel Split 6 + 6, a branch: 1x1 + Relu,
    depthwise 3x3, 1x1 + Relu; Concat and the channel shuffle: Reshape, Transpose, Reshape),
    then a 1x1 conv. With halves that are no whole number of the NPU's channel blocks (6, as
    ShuffleNetV2 x1.0's 58), the compiler writes each Concat and shuffle as two 1x1 convs with
    0/1 selection weights and an Add."""
    y = "x"
    for _ in range(2):
        x1, x2 = net.name("split"), net.name("split")
        net.nodes.append(h.make_node("Split", [y, _ints(net, 6, 6)], [x1, x2], axis=1))
        b = net.op("Relu", [net.conv(x2, 6, 6, 1)])
        b = net.op("Relu", [net.conv(net.conv(b, 6, 6, 3, 1, group=6), 6, 6, 1)])
        y = net.op("Reshape", [net.op("Concat", [x1, b], axis=1), _ints(net, 1, 2, 6, 8, 8)])
        y = net.op("Reshape", [net.op("Transpose", [y], perm=[0, 2, 1, 3, 4]),
                               _ints(net, 1, 12, 8, 8)])  # fmt: skip
    return "x", [1, 12, 8, 8], net.conv(y, 12, 8, 1), [1, 8, 8, 8]


def m_attnv(net: Any):
    """Attention whose values are wider than its queries and keys (YOLO11's PSA block: key
    dim half the head dim): 12 tokens of width 32, 2 heads, Q and K heads of 8, V heads of 16,
    softmax(Q K^T / sqrt(8)) V, heads joined."""
    t, heads = 12, 2

    def proj(width: int) -> str:
        w = (net.rng.standard_normal((32, width)) / np.sqrt(32)).astype(np.float32)
        y = net.op("MatMul", ["x", net.const(w)])
        y = net.op("Reshape", [y, _ints(net, 1, t, heads, width // heads)])
        return net.op("Transpose", [y], perm=[0, 2, 1, 3])

    q, k, v = proj(16), proj(16), proj(32)
    kt = net.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = net.op("Mul", [net.op("MatMul", [q, kt]), net.const(np.float32(1 / np.sqrt(8)))])
    a = net.op("MatMul", [net.op("Softmax", [s], axis=-1), v])
    a = net.op("Reshape", [net.op("Transpose", [a], perm=[0, 2, 1, 3]), _ints(net, 1, t, 32)])
    return "x", [1, t, 32], a, [1, t, 32]


def m_v8head(net: Any):
    """A YOLOv8 head with its decode (as tools/real_arch's yolov8n): two scales' box (64) and
    class (80) maps joined to [1, 144, 80] (8x8 + 4x4 positions) and split again; the boxes
    through the DFL (Reshape, Transpose, Softmax, a 1x1 conv of weights 0..15) and dist2bbox
    (a Split in halves, anchor points, strides), the class scores through a Sigmoid. The
    compiler lays [1, 144, 80] out as [144, 1, 1, 80] and splits it along axis 0, an axis the
    file leaves at its default."""
    f1 = net.silu(net.conv("x", 3, 16, 3, 2))
    f2 = net.silu(net.conv(f1, 16, 16, 3, 2))
    maps, points, strides = [], [], []
    for feat, n, stride in ((f1, 8, 2), (f2, 4, 4)):
        y = net.op("Concat", [net.conv(feat, 16, 64, 1), net.conv(feat, 16, 80, 1)], axis=1)
        maps.append(net.op("Reshape", [y, _ints(net, 1, 144, n * n)]))
        yy, xx = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
        points.append(np.stack([xx.ravel(), yy.ravel()]))
        strides.append(np.full(n * n, stride))
    a = sum(n * n for n in (8, 4))
    y = net.op("Concat", maps, axis=2)
    box, cls = net.name("split"), net.name("split")
    net.nodes.append(h.make_node("Split", [y, _ints(net, 64, 80)], [box, cls], axis=1))
    d = net.op("Reshape", [box, _ints(net, 1, 4, 16, a)])
    d = net.op("Softmax", [net.op("Transpose", [d], perm=[0, 2, 1, 3])], axis=1)
    bins = net.const(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1))
    d = net.op("Reshape", [net.op("Conv", [d, bins], kernel_shape=[1, 1]), _ints(net, 1, 4, a)])
    lt, rb = net.name("split"), net.name("split")
    net.nodes.append(h.make_node("Split", [d, _ints(net, 2, 2)], [lt, rb], axis=1))
    anchor = net.const(np.concatenate(points, 1)[None].astype(np.float32))
    x1y1, x2y2 = net.op("Sub", [anchor, lt]), net.op("Add", [anchor, rb])
    cxy = net.op("Div", [net.op("Add", [x1y1, x2y2]), net.const(np.float32(2))])
    dbox = net.op("Concat", [cxy, net.op("Sub", [x2y2, x1y1])], axis=1)
    dbox = net.op("Mul", [dbox, net.const(np.concatenate(strides)[None].astype(np.float32))])
    y = net.op("Concat", [dbox, net.op("Sigmoid", [cls])], axis=1)
    return "x", [1, 3, 16, 16], y, [1, 84, a]


def m_atrous(net: Any):
    """DeepLabV3's atrous convolutions: 3x3 convs of dilation 24 and 36 on a 38x38 map (the
    ASPP branches), summed; the compiler writes the wider ones as Pad, Gather, Pad, Gather
    around a dense conv."""
    x = net.op("Relu", [net.conv("x", 3, 8, 3, 1)])
    parts = []
    for d in (24, 36):
        w = (net.rng.standard_normal((8, 8, 3, 3)) / 8).astype(np.float32)
        parts.append(net.op("Conv", [x, net.const(w)], kernel_shape=[3, 3], pads=[d] * 4,
                            dilations=[d, d]))  # fmt: skip
    return "x", [1, 3, 38, 38], net.op("Sum", parts), [1, 8, 38, 38]


def m_oc1(net: Any):
    """Convolutions with one output channel (a YOLOv8 DFL's, a segmentation head's mask): a
    1x1 one without bias and a 3x3 one with, both of signed seeded weights, joined. Their int8
    bias blobs hold A alone (the weight zero point sits in a register)."""
    f = net.op("Relu", [net.conv("x", 3, 16, 3)])
    w = (net.rng.standard_normal((1, 16, 1, 1)) / 4).astype(np.float32)
    a = net.op("Conv", [f, net.const(w, "w")], kernel_shape=[1, 1])
    return "x", [1, 3, 8, 8], net.op("Concat", [a, net.conv(f, 16, 1, 3)], axis=1), [1, 2, 8, 8]


def m_widestem(net: Any, size: int = 32):
    """Stems of more than 32 output channels (ResNet's 7x7 of 64, a 3x3 and a 6x6 of 64,
    stride 2) on a 3-channel input: rk3576 and rv1126b store their weights in blocks of 32 output
    channels, one block after the other, in a layout that depends on the input's size (32 x 32:
    [KH][OC][KW -> 8][IC]; 24 x 24, `widestem24`: [KH][KW][OC][IC]). Each stem's Relu is
    pooled to a quarter of the input's width, the three summed."""
    a = net.op("MaxPool", [net.op("Relu", [net.conv("x", 3, 64, 7, 2)])], kernel_shape=[2, 2],
               strides=[2, 2])  # fmt: skip
    b = net.op("MaxPool", [net.op("Relu", [net.conv("x", 3, 64, 3)])], kernel_shape=[4, 4],
               strides=[4, 4])  # fmt: skip
    c = net.op("MaxPool", [net.op("Relu", [net.op("Conv", ["x", net.const(
        (net.rng.standard_normal((64, 3, 6, 6)) / 8 + 0.02).astype(np.float32), "w")],
        kernel_shape=[6, 6], strides=[2, 2], pads=[2, 2, 2, 2])])], kernel_shape=[2, 2],
        strides=[2, 2])  # fmt: skip
    q = size // 4
    return "x", [1, 3, size, size], net.op("Add", [net.op("Add", [a, b]), c]), [1, 64, q, q]


def m_bnzp(net: Any):
    """DenseNet's standalone BatchNormalization + Relu on inputs whose zero point is not 0:
    after a MaxPool of a Relu (zero point -128, as DenseNet-121's first) and after a Concat
    of a pooled map and a conv (another zero point), each followed by a 1x1 conv."""
    f = net.op("MaxPool", [net.op("Relu", [net.conv("x", 3, 16, 3)])], kernel_shape=[2, 2],
               strides=[2, 2])  # fmt: skip
    y = net.conv(net.op("Relu", [net.bn(f, 16)]), 16, 8, 1)
    c = net.op("Concat", [f, net.conv(f, 16, 8, 3)], axis=1)
    z = net.conv(net.op("Relu", [net.bn(c, 24)]), 24, 8, 1)
    return "x", [1, 3, 16, 16], net.op("Concat", [y, z], axis=1), [1, 16, 8, 8]


def m_grouped(net: Any):
    """RegNetX's grouped convolutions (group width 16): 3x3 stride 2 with 2 groups of 16, then
    3x3 with 4 groups of 16, each + Relu, and a 1x1 conv. The compiler writes each as a Split,
    one conv per group and a Concat."""
    f = net.op("Relu", [net.conv("x", 3, 32, 3)])
    g = net.op("Relu", [net.conv(f, 32, 32, 3, 2, group=2)])
    g = net.op("Relu", [net.conv(net.conv(g, 32, 64, 1), 64, 64, 3, 1, group=4)])
    return "x", [1, 3, 16, 16], net.conv(g, 64, 16, 1), [1, 16, 8, 8]


# Heads and embeddings whose constants the compiler stores in NC1HWC2, and a ShuffleNet unit
# whose shuffle it writes as selection convs, convs with one output channel, standalone
# BatchNormalizations on inputs with a zero point, grouped convs (fixtures_heads/)
HEAD_PROBES = {"yolohead": m_yolohead, "vitembed": m_vitembed, "shuffle": m_shuffle,
               "attnv": m_attnv, "v8head": m_v8head, "atrous": m_atrous,
               "oc1": m_oc1, "bnzp": m_bnzp, "grouped": m_grouped,
               "widestem": m_widestem, "widestem24": lambda net: m_widestem(net, 24)}  # fmt: skip
