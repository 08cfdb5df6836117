"""Regenerate tests/vendor/fixtures_arch/: the op types and weight packings of the networks users
ship (issue 24), in small form, built with the vendor's rknn-toolkit2 2.5.0.

Run with the vendor's separate environment (never a dependency of rknnrt):

    /work/vendor_env/bin/python tests/vendor/make_arch_fixtures.py [--only NAME ...]
                                 [--platforms rk3588 ...] [--dtypes i8 fp16]
    /work/vendor_env/bin/python tests/vendor/make_arch_fixtures.py --mini [--only NAME ...]
    /work/vendor_env/bin/python tests/vendor/make_arch_fixtures.py \\
        --only yolohead vitembed shuffle attnv v8head atrous oc1 bnzp grouped widestem widestem24 \\
        --out $PWD/tests/vendor/fixtures_heads

Each model is a reduced block of a real architecture (few channels, 16-32 pixels, seeded
weights) with the same op types and packings the vendor's compiler emits for the full network:
MobileNetV2 (ReLU6 -> ConvClip), MobileNetV3 (HardSwish, HardSigmoid, SE), EfficientNet-B0
(depthwise conv + SiLU, SE), a YOLO neck (Resize nearest and bilinear, Concat, SiLU), DenseNet
(BatchNormalization + Relu after a Concat), a transformer block (LayerNorm, MatMul, Softmax,
GELU, residual Adds), Pad and Slice, and the rk3576 stem and depthwise packings (7x7 stem with 3
input channels, 64-channel depthwise, a global pool). Files, inputs, simulator outputs and the
toolkit's report are written as make_fixtures.py writes them.

`--mini` writes tests/vendor/fixtures_mini/ instead: the rv1103/rv1106 "mini" format (0x1004)
of make_fixtures.py's small models and of the models above, int8 only (the toolkit refuses a
float build for these targets: "Current target_platform(rv1106) not support do_quantization =
False!"), for rv1106, plus a few rv1103 files (byte for byte rv1106's but for the platform
name), rv1106b files (another NPU format, "RKNPU w1") and a few rv1103b files (rv1106b's but
for the platform name).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import traceback

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
from head_probes import HEAD_PROBES  # noqa: E402

PLATFORMS = ("rk3588", "rk3576", "rk3566", "rk3562", "rv1126b")


class Net:
    """A tiny graph builder: conv/bn helpers with seeded weights."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.k = 0

    def name(self, hint: str) -> str:
        self.k += 1
        return f"{hint}{self.k}"

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(nh.from_array(array, name))
        return name

    def op(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(h.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 3, s: int = 1, group: int = 1) -> str:
        fan = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(fan)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.1).astype(np.float32)
        return self.op("Conv", [x, self.const(w, "w"), self.const(b, "b")], kernel_shape=[k, k],
                       strides=[s, s], pads=[k // 2] * 4, group=group)  # fmt: skip

    def bn(self, x: str, c: int) -> str:
        r = self.rng
        parts = [1 + 0.2 * r.standard_normal(c), 0.1 * r.standard_normal(c),
                 0.1 * r.standard_normal(c), 0.5 + r.uniform(0, 1, c)]  # fmt: skip
        names = [self.const(p.astype(np.float32), "bn") for p in parts]
        return self.op("BatchNormalization", [x, *names], epsilon=1e-5)

    def relu6(self, x: str) -> str:
        return self.op("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))])

    def silu(self, x: str) -> str:
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def se(self, x: str, c: int, mid: int, act: str, gate: str) -> str:
        g = self.op("GlobalAveragePool", [x])
        g = self.conv(g, c, mid, 1)
        g = self.op("Relu", [g]) if act == "relu" else self.silu(g)
        g = self.conv(g, mid, c, 1)
        g = self.op("HardSigmoid", [g], alpha=1 / 6, beta=0.5) if gate == "hard" else \
            self.op("Sigmoid", [g])  # fmt: skip
        return self.op("Mul", [x, g])


def m_mbv2(net: Net) -> tuple[str, list, str, list]:
    """MobileNetV2: conv s2 + ReLU6, inverted residual (1x1 + ReLU6, dw 3x3 + ReLU6, 1x1, Add),
    global average pool, Gemm."""
    y = net.relu6(net.conv("x", 3, 16, 3, 2))
    e = net.relu6(net.conv(y, 16, 48, 1))
    d = net.relu6(net.conv(e, 48, 48, 3, 1, group=48))
    y = net.op("Add", [net.conv(d, 48, 16, 1), y])
    y = net.relu6(net.conv(y, 16, 32, 1))
    g = net.op("Flatten", [net.op("GlobalAveragePool", [y])])
    w = (net.rng.standard_normal((10, 32)) * 0.2).astype(np.float32)
    out = net.op("Gemm", [g, net.const(w), net.const(np.zeros(10, np.float32))], transB=1)
    return "x", [1, 3, 32, 32], out, [1, 10]


def m_mbv3(net: Net):
    """MobileNetV3: conv s2 + HardSwish, dw + ReLU, SE with a HardSigmoid gate, 1x1 + HardSwish,
    an Add then a standalone HardSwish."""
    y = net.op("HardSwish", [net.conv("x", 3, 16, 3, 2)])
    d = net.op("Relu", [net.conv(y, 16, 16, 3, 1, group=16)])
    d = net.se(d, 16, 8, "relu", "hard")
    p = net.conv(d, 16, 16, 1)
    y = net.op("HardSwish", [net.op("Add", [p, y])])
    out = net.op("HardSwish", [net.conv(y, 16, 24, 1)])
    return "x", [1, 3, 32, 32], out, [1, 24, 16, 16]


def m_effnet(net: Net):
    """EfficientNet-B0's MBConv: conv s2 + SiLU, depthwise 3x3 + SiLU, SE (SiLU, Sigmoid),
    1x1 project, then expand + depthwise 5x5 s2 + SiLU."""
    y = net.silu(net.conv("x", 3, 16, 3, 2))
    d = net.silu(net.conv(y, 16, 16, 3, 1, group=16))
    d = net.se(d, 16, 4, "silu", "sigmoid")
    y = net.conv(d, 16, 16, 1)
    e = net.silu(net.conv(y, 16, 64, 1))
    d = net.silu(net.conv(e, 64, 64, 5, 2, group=64))
    out = net.conv(d, 64, 24, 1)
    return "x", [1, 3, 32, 32], out, [1, 24, 8, 8]


def m_yoloneck(net: Net):
    """A YOLO neck: two scales, nearest 2x upsample + Concat, conv + SiLU, bilinear 2x upsample
    (half_pixel), a standalone SiLU after a Concat, a 1x1 head conv."""
    a = net.silu(net.conv("x", 3, 16, 3, 2))  # 16x16
    b = net.silu(net.conv(a, 16, 32, 3, 2))  # 8x8
    roi, scales = net.const(np.zeros(0, np.float32)), net.const(np.array([1, 1, 2, 2], np.float32))
    up = net.op("Resize", [b, roi, scales], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")  # fmt: skip
    c = net.op("Concat", [up, a], axis=1)
    c = net.silu(net.conv(c, 48, 16, 1))
    up2 = net.op("Resize", [c, roi, scales], mode="linear",
                 coordinate_transformation_mode="half_pixel")  # fmt: skip
    c2 = net.silu(net.op("Concat", [up2, net.conv("x", 3, 8, 1)], axis=1))
    out = net.conv(c2, 24, 12, 1)
    return "x", [1, 3, 32, 32], out, [1, 12, 32, 32]


def m_densenet(net: Net):
    """DenseNet: conv, a dense layer whose input is a Concat (BN + Relu cannot fold into a
    conv), transition BN + Relu + conv + average pool."""
    y = net.conv("x", 3, 16, 3, 2)
    z = net.conv(net.op("Relu", [net.bn(y, 16)]), 16, 8, 3)
    c = net.op("Concat", [y, z], axis=1)
    t = net.op("Relu", [net.bn(c, 24)])
    t = net.conv(t, 24, 16, 1)
    c2 = net.op("Concat", [c, t], axis=1)
    out = net.op("AveragePool", [net.bn(c2, 40)], kernel_shape=[2, 2], strides=[2, 2])
    return "x", [1, 3, 32, 32], out, [1, 40, 8, 8]


def m_transformer(net: Net):
    """A ViT encoder block on 12 tokens of width 32 (head dim 16: every axis told apart):
    LayerNorm, QKV MatMuls, 2-head attention (Reshape, Transpose, MatMul, Softmax, MatMul),
    output projection, residual, LayerNorm, MLP with GELU (erf form), residual."""
    t, d, heads = 12, 32, 2

    def ln(x: str) -> str:
        g = (1 + 0.1 * net.rng.standard_normal(d)).astype(np.float32)
        bb = (0.1 * net.rng.standard_normal(d)).astype(np.float32)
        return net.op("LayerNormalization", [x, net.const(g), net.const(bb)], axis=-1,
                      epsilon=1e-6)  # fmt: skip

    def linear(x: str, cin: int, cout: int) -> str:
        w = (net.rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32)
        y = net.op("MatMul", [x, net.const(w)])
        return net.op(
            "Add", [y, net.const((0.05 * net.rng.standard_normal(cout)).astype(np.float32))]
        )

    def split_heads(x: str) -> str:
        r = net.op("Reshape", [x, net.const(np.array([1, t, heads, d // heads], np.int64))])
        return net.op("Transpose", [r], perm=[0, 2, 1, 3])

    n1 = ln("x")
    q, k, v = (split_heads(linear(n1, d, d)) for _ in range(3))
    kt = net.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = net.op("Mul", [net.op("MatMul", [q, kt]), net.const(np.float32(1 / np.sqrt(d // heads)))])
    a = net.op("MatMul", [net.op("Softmax", [s], axis=-1), v])
    a = net.op("Reshape", [net.op("Transpose", [a], perm=[0, 2, 1, 3]),
                           net.const(np.array([1, t, d], np.int64))])  # fmt: skip
    x1 = net.op("Add", ["x", linear(a, d, d)])
    m = linear(ln(x1), d, 2 * d)
    erf = net.op("Erf", [net.op("Div", [m, net.const(np.float32(np.sqrt(2)))])])
    g = net.op("Mul", [net.op("Mul", [m, net.op("Add", [erf, net.const(np.float32(1))])]),
                       net.const(np.float32(0.5))])  # fmt: skip
    out = net.op("Add", [x1, linear(g, 2 * d, d)])
    return "x", [1, t, d], out, [1, t, d]


def _ints(net: Net, *v: int) -> str:
    return net.const(np.array(v, np.int64))


def m_slice(net: Net):
    """Slices of the channels and of the rows (steps 1 and 2) and their Concat."""
    y = net.op("Relu", [net.conv("x", 3, 16, 3)])
    s1 = net.op("Slice", [y, _ints(net, 0), _ints(net, 8), _ints(net, 1)])
    s1 = net.op("Slice", [s1, _ints(net, 2), _ints(net, 18), _ints(net, 2), _ints(net, 2)])
    s2 = net.op("Slice", [y, _ints(net, 8, 2), _ints(net, 16, 18), _ints(net, 1, 2),
                          _ints(net, 1, 2)])  # fmt: skip
    out = net.conv(net.op("Concat", [s1, s2], axis=1), 16, 8, 1)
    return "x", [1, 3, 18, 16], out, [1, 8, 8, 16]


def m_pad(net: Net):
    """An asymmetric constant Pad after a Relu (a Pad straight before a conv is folded)."""
    y = net.op("Relu", [net.conv("x", 3, 8, 3)])
    pads = np.array([0, 0, 1, 0, 0, 0, 2, 1], np.int64)
    p = net.op("Pad", [y, net.const(pads), net.const(np.float32(0.5))], mode="constant")
    return "x", [1, 3, 8, 8], net.conv(p, 8, 8, 1), [1, 8, 11, 9]


def m_clip(net: Net):
    """Clip(-1.5, 2.5) fused into a conv (not ReLU6: a lower bound below 0)."""
    c = net.conv("x", 3, 16, 3)
    y = net.op("Clip", [c, net.const(np.float32(-1.5)), net.const(np.float32(2.5))])
    return "x", [1, 3, 8, 8], y, [1, 16, 8, 8]


def m_hsig(net: Net):
    """HardSigmoid(0.2, 0.4) and HardSigmoid(1/6, 1/2) fused into convs, then an Add."""
    a = net.op("HardSigmoid", [net.conv("x", 3, 16, 3)], alpha=0.2, beta=0.4)
    c = net.op("HardSigmoid", [net.conv("x", 3, 16, 3)], alpha=1 / 6, beta=0.5)
    return "x", [1, 3, 8, 8], net.op("Add", [a, c]), [1, 16, 8, 8]


def m_argmax(net: Net):
    """A segmentation head: conv, bilinear 2x upsample, ArgMax over the classes (as
    PP-HumanSeg's; the vendor runs ArgMax on the CPU with an int64 output)."""
    y = net.conv(net.op("Relu", [net.conv("x", 3, 8, 3, 2)]), 8, 4, 1)
    roi, scales = net.const(np.zeros(0, np.float32)), net.const(np.array([1, 1, 2, 2], np.float32))
    up = net.op("Resize", [y, roi, scales], mode="linear",
                coordinate_transformation_mode="half_pixel")  # fmt: skip
    return "x", [1, 3, 16, 16], net.op("ArgMax", [up], axis=1, keepdims=1), [1, 1, 16, 16]


def m_stem(net: Net):
    """ResNet/RegNet stem and head: 7x7 s2 conv 3->32 + Relu, 3x3 max pool, depthwise 3x3 with
    64+ channels (tiled by 64 on rk3576), global average pool."""
    y = net.op("Relu", [net.conv("x", 3, 32, 7, 2)])
    y = net.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = net.op("Relu", [net.conv(y, 32, 96, 1)])
    y = net.op("Relu", [net.conv(y, 96, 96, 3, 1, group=96)])
    out = net.op("GlobalAveragePool", [y])
    return "x", [1, 3, 32, 32], out, [1, 96, 1, 1]


MODELS = {f.__name__[2:]: f for f in (m_mbv2, m_mbv3, m_effnet, m_yoloneck, m_densenet,
                                      m_transformer, m_slice, m_pad, m_clip, m_hsig,
                                      m_argmax, m_stem)}  # fmt: skip
# Each model's weight seed (1000 + position): stable when models are added at the end
# ("padslice" is retired: the toolkit 2.5.0 failed to build its Pad without a constant value).
SEED_ORDER = ("densenet", "effnet", "mbv2", "mbv3", "padslice", "stem", "transformer",
              "yoloneck", "slice", "pad", "clip", "hsig", "argmax")  # fmt: skip
OPSETS = {"transformer": 17}
def m_convprobe(net: Net, cin: int, cout: int, kernel: tuple[int, int], pads: list[int],
                strides: list[int], dilations: list[int], group: int = 1):
    """One Conv + Relu on a 12x13 input: pins the mini format's convolution registers
    (strides, dilations, pads) and weight packings (channel counts, depthwise)."""
    kh, kw = kernel
    w = (net.rng.standard_normal((cout, cin // group, kh, kw)) /
         np.sqrt(cin // group * kh * kw)).astype(np.float32)  # fmt: skip
    b = (net.rng.standard_normal(cout) * 0.1).astype(np.float32)
    y = net.op("Conv", ["x", net.const(w, "w"), net.const(b, "b")], kernel_shape=[kh, kw],
               pads=pads, strides=strides, dilations=dilations, group=group)  # fmt: skip
    size = [(n + pads[a] + pads[a + 2] - dilations[a] * (k - 1) - 1) // strides[a] + 1
            for a, (n, k) in enumerate(((12, kh), (13, kw)))]  # fmt: skip
    return "x", [1, cin, 12, 13], net.op("Relu", [y]), [1, cout, *size]


# Mini-format probes (one convolution each; built for --mini only), seeds 2000 + position.
PROBES = {
    "asym": dict(cin=3, cout=8, kernel=(3, 5), pads=[2, 1, 0, 2], strides=[2, 1],
                 dilations=[1, 1]),
    "dilated": dict(cin=8, cout=8, kernel=(3, 3), pads=[2, 1, 2, 1], strides=[1, 2],
                    dilations=[2, 1]),
    "dw5": dict(cin=16, cout=16, kernel=(5, 5), pads=[2, 2, 2, 2], strides=[2, 2],
                dilations=[1, 1], group=16),
    "dw40": dict(cin=40, cout=40, kernel=(3, 3), pads=[1, 1, 1, 1], strides=[1, 1],
                 dilations=[1, 1], group=40),
    "c20": dict(cin=20, cout=36, kernel=(3, 3), pads=[1, 1, 1, 1], strides=[1, 1],
                dilations=[1, 1]),
    "c70": dict(cin=70, cout=24, kernel=(1, 1), pads=[0, 0, 0, 0], strides=[1, 1],
                dilations=[1, 1]),
    "group2": dict(cin=16, cout=16, kernel=(3, 3), pads=[1, 1, 1, 1], strides=[1, 1],
                   dilations=[1, 1], group=2),
}  # fmt: skip
# Mini-format Clip probes (rv1106 int8 keeps only a lower bound's integer part): a lower bound
# above 0 (refused by name) and a negative upper bound (decoded), seeds 3000 + position.
CLIP_PROBES = {"cliplo": (0.5, 2.5), "cliphi": (-1.5, -0.5)}


def m_clip_bounds(net: Net, lo: float, hi: float):
    """One conv + Clip(lo, hi)."""
    c = net.conv("x", 3, 16, 3)
    y = net.op("Clip", [c, net.const(np.float32(lo)), net.const(np.float32(hi))])
    return "x", [1, 3, 8, 8], y, [1, 16, 8, 8]


# An attention probe with scale 1, which rv1106 programs in no task (the softmax's tasks
# write the same register): seed 3100.
ATTN_PROBES = {"attn1": 1.0}


def m_attention(net: Net, scale: float):
    """Q, K, V projections of 12 tokens of width 32, 2 heads, softmax(Q K^T scale) V and an
    output projection (the transformer block's attention alone)."""
    t, d, heads = 12, 32, 2

    def linear(x: str) -> str:
        w = (net.rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
        b = (0.05 * net.rng.standard_normal(d)).astype(np.float32)
        return net.op("Add", [net.op("MatMul", [x, net.const(w)]), net.const(b)])

    def split_heads(x: str) -> str:
        r = net.op("Reshape", [x, net.const(np.array([1, t, heads, d // heads], np.int64))])
        return net.op("Transpose", [r], perm=[0, 2, 1, 3])

    q, k, v = (split_heads(linear("x")) for _ in range(3))
    kt = net.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = net.op("Mul", [net.op("MatMul", [q, kt]), net.const(np.float32(scale))])
    a = net.op("MatMul", [net.op("Softmax", [s], axis=-1), v])
    a = net.op("Reshape", [net.op("Transpose", [a], perm=[0, 2, 1, 3]),
                           net.const(np.array([1, t, d], np.int64))])  # fmt: skip
    return "x", [1, t, d], linear(a), [1, t, d]


MINI_PLATFORMS = ("rv1106",)
# rv1103 files are rv1106's but for the platform name, rv1103b files rv1106b's; rv1106b
# ("RKNPU w1", another register map and packings) for one model of each decoded rule.
MINI_EXTRA = {"rv1103": ("convpool", "residual", "swish"),
              "rv1106b": ("convpool", "residual", "swish", "twoinput", "oddwidth", "gap", "mlp",
                          "sigmoid", "transpose", "wide", "pixels", "fire", "avgpool", "pad",
                          "clip", "hsig", "mbv2", "asym", "dilated", "dw5", "c20", "cliplo",
                          "cliphi", "attn1"),
              "rv1103b": ("convpool", "residual", "swish")}  # fmt: skip
# head probes (head_probes.py) in the mini format too: a conv of one output channel and the
# YOLO heads' NC1HWC2 constants (anchors, grids, anchor points), for rv1106 and rv1106b
MINI_HEADS = ("oc1", "yolohead", "v8head")


def mini_builds(only: list[str] | None) -> list[tuple[str, str]]:
    """(model, platform) of the mini-format fixtures."""
    names = [*mf.MODELS, *MODELS, *PROBES, *CLIP_PROBES, *ATTN_PROBES]
    builds = [(name, p) for p in MINI_PLATFORMS for name in names]
    builds += [(name, p) for p, extra in MINI_EXTRA.items() for name in extra]
    builds += [(name, p) for p in ("rv1106", "rv1106b") for name in MINI_HEADS]
    return [(name, p) for name, p in builds if only is None or name in only]


def any_onnx(name: str) -> onnx.ModelProto:
    ours = name in MODELS or name in PROBES or name in CLIP_PROBES or name in ATTN_PROBES \
        or name in HEAD_PROBES  # fmt: skip
    return make_onnx(name) if ours else mf.make_onnx(name)


def make_onnx(name: str) -> onnx.ModelProto:
    if name in PROBES:
        net = Net(2000 + list(PROBES).index(name))
        x, xshape, y, yshape = m_convprobe(net, **PROBES[name])  # type: ignore[arg-type]
    elif name in CLIP_PROBES:
        net = Net(3000 + list(CLIP_PROBES).index(name))
        x, xshape, y, yshape = m_clip_bounds(net, *CLIP_PROBES[name])
    elif name in ATTN_PROBES:
        net = Net(3100 + list(ATTN_PROBES).index(name))
        x, xshape, y, yshape = m_attention(net, ATTN_PROBES[name])
    elif name in HEAD_PROBES:
        net = Net(3200 + list(HEAD_PROBES).index(name))
        x, xshape, y, yshape = HEAD_PROBES[name](net)
    else:
        net = Net(1000 + SEED_ORDER.index(name))
        x, xshape, y, yshape = MODELS[name](net)
    y_type = TP.INT64 if name == "argmax" else TP.FLOAT
    graph = h.make_graph(net.nodes, name, [h.make_tensor_value_info(x, TP.FLOAT, xshape)],
                         [h.make_tensor_value_info(y, y_type, yshape)], net.inits)  # fmt: skip
    opset = 17 if name in ATTN_PROBES or name in ("vitembed", "attnv") else OPSETS.get(name, 14)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "fixtures_arch"))
    ap.add_argument("--only", nargs="*", default=None, help="model names to rebuild")
    ap.add_argument("--platforms", nargs="*", default=list(PLATFORMS))
    ap.add_argument("--dtypes", nargs="*", default=list(mf.DTYPES))
    ap.add_argument("--mini", action="store_true", help="the rv1103/rv1106 fixtures_mini set")
    args = ap.parse_args()
    if args.mini:
        if args.out == ap.get_default("out"):
            args.out = os.path.join(here, "fixtures_mini")
        builds = [(name, p, "i8") for name, p in mini_builds(args.only)]
    else:
        builds = [(name, p, d) for name in args.only or list(MODELS) for p in args.platforms
                  for d in args.dtypes]  # fmt: skip
    os.makedirs(args.out, exist_ok=True)
    report_path = os.path.join(args.out, "reported.json")
    reported = {}
    if os.path.exists(report_path):
        with open(report_path) as f:
            reported = json.load(f)
    for name, platform, dtype in builds:
        work = tempfile.mkdtemp(prefix="rknnrt_vendor_arch_")
        os.chdir(work)  # the toolkit writes its check*.onnx files into the cwd
        try:
            reported[f"{name}_{platform}_{dtype}"] = mf.build_one(
                name, platform, dtype, args.out, work, any_onnx(name)
            )
            print("built", name, platform, dtype, flush=True)
        except Exception:  # noqa: BLE001 - report and go on with the others
            print("FAILED", name, platform, dtype, file=sys.stderr, flush=True)
            traceback.print_exc()
        finally:
            os.chdir(here)
            shutil.rmtree(work, ignore_errors=True)
        with open(report_path, "w") as f:
            json.dump(reported, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
