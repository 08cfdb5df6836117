"""YOLO-family detectors of the real-architecture set, with the heads ultralytics exports:
v5 (anchor head: Sigmoid, grid decode), v8 and v11 (DFL: Softmax over 16 bins and a 1x1 conv,
box decode, Concat of boxes and Sigmoid class scores); v11 with its C2PSA attention block."""

from __future__ import annotations

import numpy as np
import onnx

from .graph import Net

CLASSES = 80


def _bottleneck(net: Net, x: str, c: int, shortcut: bool, k: int = 3) -> str:
    y = net.conv(net.conv(x, c, k, act="silu"), c, 3, act="silu")
    return net.add(x, y) if shortcut else y


def _c2f(net: Net, x: str, cout: int, n: int, shortcut: bool, c3k: bool = False) -> str:
    """C2f (v8) and C3k2 (v11: the same split/concat layout)."""
    hidden = cout // 2
    parts = net.split(net.conv(x, 2 * hidden, act="silu"), [hidden, hidden])
    for _ in range(n):
        if c3k:  # C3k: a small C3 inside
            a = net.conv(parts[-1], hidden // 2, act="silu")
            b = net.conv(parts[-1], hidden // 2, act="silu")
            a = _bottleneck(net, _bottleneck(net, a, hidden // 2, True), hidden // 2, True)
            parts.append(net.conv(net.concat([a, b]), hidden, act="silu"))
        else:
            parts.append(_bottleneck(net, parts[-1], hidden, shortcut))
    return net.conv(net.concat(parts), cout, act="silu")


def _c3(net: Net, x: str, cout: int, n: int, shortcut: bool) -> str:
    hidden = cout // 2
    a = net.conv(x, hidden, act="silu")
    for _ in range(n):
        a = _bottleneck(net, a, hidden, shortcut, k=1)
    return net.conv(net.concat([a, net.conv(x, hidden, act="silu")]), cout, act="silu")


def _sppf(net: Net, x: str, cout: int) -> str:
    y = net.conv(x, net.shape[x][1] // 2, act="silu")
    pools = [y]
    for _ in range(3):
        pools.append(net.pool(pools[-1], "MaxPool", 5, 1, 2))
    return net.conv(net.concat(pools), cout, act="silu")


def _c2psa(net: Net, x: str) -> str:
    """v11's C2PSA: one PSA block (multi-head attention over the map, positional depthwise
    conv, conv feed-forward) on half the channels."""
    n, c, h, w = net.shape[x]
    half = c // 2
    a, b = net.split(net.conv(x, c, act="silu"), [half, half])
    heads = max(1, half // 64)
    key_dim = half // heads // 2
    head_dim = half // heads
    qkv = net.conv(b, half + 2 * key_dim * heads)
    qkv = net.reshape(qkv, [n, heads, 2 * key_dim + head_dim, h * w])
    q, k, v = net.split(qkv, [key_dim, key_dim, head_dim], axis=2)
    attn = net.matmul(net.transpose(q, [0, 1, 3, 2]), k)
    attn = net.softmax(net.mul(attn, net.const(np.float32(key_dim**-0.5))))
    y = net.reshape(net.matmul(v, net.transpose(attn, [0, 1, 3, 2])), [n, half, h, w])
    y = net.add(y, net.conv(net.reshape(v, [n, half, h, w]), half, 3, groups=half))
    b = net.add(b, net.conv(y, half))
    b = net.add(b, net.conv(net.conv(b, 2 * half, act="silu"), half))
    return net.conv(net.concat([a, b]), c, act="silu")


def _up(net: Net, x: str) -> str:
    _, _, h, w = net.shape[x]
    return net.resize(x, [2 * h, 2 * w])


def _anchors(sizes: list[tuple[int, int]], strides: list[int]) -> tuple[np.ndarray, np.ndarray]:
    points, scale = [], []
    for (h, w), s in zip(sizes, strides):
        ys, xs = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        points.append(np.stack([xs.reshape(-1), ys.reshape(-1)]))
        scale.append(np.full(h * w, s))
    return (np.concatenate(points, 1)[None].astype(np.float32),
            np.concatenate(scale)[None, None].astype(np.float32))  # fmt: skip


def _dfl_head(net: Net, feats: list[str], v11: bool) -> str:
    """ultralytics' Detect: per level Concat(box 64, class 80), all levels concatenated, DFL
    (Softmax over 16 bins, 1x1 conv with weights 0..15), distances to boxes, Sigmoid scores."""
    n = net.shape[feats[0]][0]
    c2 = max(16, net.shape[feats[0]][1] // 4, 64)
    c3 = max(net.shape[feats[0]][1], min(CLASSES, 100))
    levels = []
    for f in feats:
        box = net.conv(net.conv(net.conv(f, c2, 3, act="silu"), c2, 3, act="silu"), 64)
        if v11:  # depthwise-separable class branch
            cin = net.shape[f][1]
            y = net.conv(net.conv(f, cin, 3, groups=cin, act="silu"), c3, act="silu")
            y = net.conv(net.conv(y, c3, 3, groups=c3, act="silu"), c3, act="silu")
        else:
            y = net.conv(net.conv(f, c3, 3, act="silu"), c3, 3, act="silu")
        cls = net.conv(y, CLASSES)
        _, _, h, w = net.shape[box]
        levels.append(net.reshape(net.concat([box, cls]), [n, 64 + CLASSES, h * w]))
    x = net.concat(levels, axis=2)
    total = net.shape[x][2]
    box, cls = net.split(x, [64, CLASSES])
    bins = net.softmax(net.transpose(net.reshape(box, [n, 4, 16, total]), [0, 2, 1, 3]), axis=1)
    weight = net.const(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "dfl")
    dist = net.reshape(net.op("Conv", [bins, weight], [n, 1, 4, total], kernel_shape=[1, 1]),
                       [n, 4, total])  # fmt: skip
    lt, rb = net.split(dist, [2, 2])
    sizes = [tuple(net.shape[f][2:]) for f in feats]
    size = net.shape["images"][2]
    points, strides = _anchors(sizes, [size // h for h, _ in sizes])
    anchor = net.const(points, "anchors")
    x1y1, x2y2 = net.binary("Sub", anchor, lt), net.add(anchor, rb)
    centre = net.binary("Div", net.add(x1y1, x2y2), net.const(np.float32(2)))
    wh = net.binary("Sub", x2y2, x1y1)
    boxes = net.mul(net.concat([centre, wh]), net.const(strides, "strides"))
    return net.concat([boxes, net.act(cls, "sigmoid")])


def _yolo_v8_like(name: str, size: int, seed: int, v11: bool) -> onnx.ModelProto:
    net = Net(name, [1, 3, size, size], seed)
    block = (lambda x, c, n, sc: _c2f(net, x, c, n, sc, c3k=v11 and c >= 128)) if v11 else \
        (lambda x, c, n, sc: _c2f(net, x, c, n, sc))  # fmt: skip
    x = net.conv(net.conv("images", 16, 3, 2, act="silu"), 32, 3, 2, act="silu")
    x = block(x, 64 if v11 else 32, 1, True)
    p3 = block(net.conv(x, 64, 3, 2, act="silu"), 128 if v11 else 64, 1 if v11 else 2, True)
    p4 = block(net.conv(p3, 128, 3, 2, act="silu"), 128, 1 if v11 else 2, True)
    p5 = _sppf(net, block(net.conv(p4, 256, 3, 2, act="silu"), 256, 1, True), 256)
    if v11:
        p5 = _c2psa(net, p5)
    h4 = block(net.concat([_up(net, p5), p4]), 128, 1, False)
    out3 = block(net.concat([_up(net, h4), p3]), 64, 1, False)
    out4 = block(net.concat([net.conv(out3, 64, 3, 2, act="silu"), h4]), 128, 1, False)
    out5 = block(net.concat([net.conv(out4, 128, 3, 2, act="silu"), p5]), 256, 1, False)
    net.output(_dfl_head(net, [out3, out4, out5], v11))
    return net.model()


def yolov8n(size: int = 640, seed: int = 0) -> onnx.ModelProto:
    """ultralytics YOLOv8n (C2f, SPPF, DFL head)."""
    return _yolo_v8_like("yolov8n", size, seed, v11=False)


def yolo11n(size: int = 640, seed: int = 0) -> onnx.ModelProto:
    """ultralytics YOLO11n (C3k2, SPPF, C2PSA attention, depthwise class branch, DFL head)."""
    return _yolo_v8_like("yolo11n", size, seed, v11=True)


def _yolov5_body(net: Net, size: int) -> list[str]:
    """YOLOv5 v6's backbone and neck at the s width (SiLU, C3, SPPF): the P3-P5 features."""
    x = net.conv(net.conv("images", 32, 6, 2, p=2, act="silu"), 64, 3, 2, act="silu")
    x = _c3(net, x, 64, 1, True)
    p3 = _c3(net, net.conv(x, 128, 3, 2, act="silu"), 128, 2, True)
    p4 = _c3(net, net.conv(p3, 256, 3, 2, act="silu"), 256, 3, True)
    x = _sppf(net, _c3(net, net.conv(p4, 512, 3, 2, act="silu"), 512, 1, True), 512)
    h10 = net.conv(x, 256, act="silu")
    x = _c3(net, net.concat([_up(net, h10), p4]), 256, 1, False)
    h14 = net.conv(x, 128, act="silu")
    out3 = _c3(net, net.concat([_up(net, h14), p3]), 128, 1, False)
    out4 = _c3(net, net.concat([net.conv(out3, 128, 3, 2, act="silu"), h14]), 256, 1, False)
    out5 = _c3(net, net.concat([net.conv(out4, 256, 3, 2, act="silu"), h10]), 512, 1, False)
    return [out3, out4, out5]


def yolov5su(size: int = 640, seed: int = 0) -> onnx.ModelProto:
    """ultralytics YOLOv5su: YOLOv5s's body with the v8 DFL head. Its P5 feature (the last
    C3's SiLU Mul, 512 channels) feeds two 3x3 convs whose reductions (4608) the vendor tiles
    in two: the graph whose int8 build once failed on a duplicated Split output name."""
    net = Net("yolov5su", [1, 3, size, size], seed)
    net.output(_dfl_head(net, _yolov5_body(net, size), v11=False))
    return net.model()


def yolov5s(size: int = 640, seed: int = 0) -> onnx.ModelProto:
    """YOLOv5s v6 (SiLU, C3, SPPF) with its anchor head: Sigmoid, grid and anchor decode."""
    net = Net("yolov5s", [1, 3, size, size], seed)
    out3, out4, out5 = _yolov5_body(net, size)
    anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]
    rows = []
    for feat, anchor in zip([out3, out4, out5], anchors):
        n, _, h, w = net.shape[feat]
        stride = size // h
        y = net.reshape(net.conv(feat, 3 * (5 + CLASSES)), [n, 3, 5 + CLASSES, h, w])
        y = net.act(net.transpose(y, [0, 1, 3, 4, 2]), "sigmoid")
        xy, wh, conf = net.split(y, [2, 2, 1 + CLASSES], axis=4)
        gy, gx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        grid = (np.stack([gx, gy], -1)[None, None] - 0.5).astype(np.float32)
        xy = net.mul(net.add(net.mul(xy, net.const(np.float32(2))), net.const(grid, "grid")),
                     net.const(np.float32(stride)))  # fmt: skip
        pairs = np.array(anchor, np.float32).reshape(1, 3, 1, 1, 2)
        wh = net.mul(net.op("Pow", [net.mul(wh, net.const(np.float32(2))),
                                    net.const(np.float32(2))], net.shape[wh]),
                     net.const(pairs, "anchor"))  # fmt: skip
        rows.append(net.reshape(net.concat([xy, wh, conf], axis=4), [n, 3 * h * w, 5 + CLASSES]))
    net.output(net.concat(rows, axis=1))
    return net.model()
