"""Standalone activations, normalisations and Resize: ops the compiler could not fuse into a
convolution (HardSwish after an Add, SiLU after a Concat, DenseNet's BatchNormalization after a
Concat, a transformer's LayerNorm as exNorm).

Each runs in float32 on its input's real values and is rounded to its output's stored type, as
the vendor's simulator computes it (its int8 lookup tables are not read: the simulator does
not use them either).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import numerics
from ..errors import VendorFormatError
from .decoders import OpTable
from .fileformat import CONST_KINDS, Node
from .graph import GraphBuilder, operands, output, single

OPS = OpTable()
BN_EPSILON = 0  # BatchNormalization attribute slots: epsilon, momentum, training_mode
BN_DEFAULT_EPSILON = 1e-5
NORM_EPSILON, NORM_AXES = 1, 2  # exNorm attribute slots (slot 0: a string, not decoded)
# Resize attribute slots: ONNX names in alphabetical order
RESIZE_COORDINATES, RESIZE_MODE, RESIZE_NEAREST = 0, 4, 5
RESIZE_MODES = ("nearest", "linear")
RESIZE_COORDINATE_MODES = ("asymmetric", "half_pixel", "align_corners", "pytorch_half_pixel")
NEAREST_MODES = ("floor", "round_prefer_floor", "round_prefer_ceil", "ceil")
# PyTorch's HardSigmoid alpha (1/6) and ONNX's default (0.2): an alpha decoded within its
# register's precision of one of them is taken as that value exactly
HSIG_ALPHAS = (1 / 6, 0.2)
# rv1106b runs an int8 HardSigmoid the other platforms fuse into its conv on its own: a lookup
# table of a fixed ramp fed (q + offset) x multiplier / 2^shift + 1/2, the int32 offset
# round(-zp_in + (beta - 1/2) / (alpha s_in)) in 0x4034, the multiplier round(alpha s_in
# 2^shift) in 0x4038 (15 bits), shift = 15 + the low byte of 0x4080 (toolkit 2.5.0 probes of
# (alpha, beta) (0.2, 0.5), (1/6, 0.5), (0.3, 0.6) and (0.25, 0.4), each calibrated narrower
# and wider than its linear part: shifts 22 and 23; MobileNetV3's SE gates: 26)
HSIG_STANDALONE = {"RKNPU w1": (0x4034, 0x4038, 0x4080)}
HSIG_SHIFT_BASE = 15


@OPS.register("HardSwish", shape_free=True)
def hard_swish(b: GraphBuilder, n: Node) -> str:
    """x * clip(x / 6 + 1/2, 0, 1): ONNX's HardSwish has no parameters."""
    x = b.value(single(b, n))
    gate = b.add("HardSigmoid", [x], "hsig", alpha=1 / 6, beta=0.5)
    return b.add("Mul", [x, gate], "hswish")


@OPS.register("HardSigmoid", shape_free=True)
def hard_sigmoid(b: GraphBuilder, n: Node) -> str:
    """clip(alpha x + beta, 0, 1) with the alpha and beta of its registers (HSIG_STANDALONE);
    a HardSigmoid of another platform or dtype is refused by name."""
    t, fmt = single(b, n), b.m.npu_format
    at = HSIG_STANDALONE.get(fmt)
    regs = (b.registers().first_task(n) or {}) if at is not None and b.quantized else {}
    s_in = float(t.scale[0]) if t.scale else 0.0
    if at is None or any(r not in regs for r in at) or not regs[at[1]] \
            or not (np.isfinite(s_in) and s_in > 0):  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: the parameters of {n.op_type} '{n.name}' ({fmt}) are not decoded"
        )
    raw, multiplier, shift = regs[at[0]], regs[at[1]], HSIG_SHIFT_BASE + (regs[at[2]] & 0xFF)
    offset = raw - (1 << 32) if raw >= 1 << 31 else raw
    zp = t.zp[0] if t.zp else 0
    alpha = next((a for a in HSIG_ALPHAS if round(a * s_in * 2**shift) == multiplier),
                 multiplier / 2**shift / s_in)  # fmt: skip
    beta = 0.5 + (offset + zp) * alpha * s_in  # the offset's integer: the board's beta
    if not (np.isfinite(alpha) and np.isfinite(beta) and 0 < alpha < 2**16):
        raise VendorFormatError(f"vendor .rknn model: {n.op_type} '{n.name}' has invalid "
                                "parameters")  # fmt: skip
    return b.add("HardSigmoid", [b.value(t)], "hsig", alpha=float(np.float32(alpha)),
                 beta=float(np.float32(beta)))  # fmt: skip


@OPS.register("exSwish", shape_free=True)
def swish(b: GraphBuilder, n: Node) -> str:
    x = b.value(single(b, n))
    return b.add("Mul", [x, b.add("Sigmoid", [x], "sigmoid")], "swish")


def gelu(b: GraphBuilder, x: str) -> str:
    """x / 2 * (1 + erf(x / sqrt(2))), the exact form."""
    erf = b.add("Erf", [b.add("Mul", [x, b.const(np.array(0.5**0.5, np.float32), "c")], "s")],
                "erf")  # fmt: skip
    one = b.add("Add", [erf, b.const(np.array(1, np.float32), "one")], "e1")
    return b.add("Mul", [b.add("Mul", [x, one], "xe"), b.const(np.array(0.5, np.float32), "h")],
                 "gelu")  # fmt: skip


@OPS.register("exGelu", shape_free=True)
def gelu_op(b: GraphBuilder, n: Node) -> str:
    return gelu(b, b.value(single(b, n)))


def _params(b: GraphBuilder, n: Node, count: int, channels: int,
            on_grid: bool = False) -> list[np.ndarray]:  # fmt: skip
    """The op's first `count` constant parameters, `channels` values each; `on_grid`: each
    rounded to the int8 grid of its own stored scale and zero point, where it has one."""
    consts = [t for t in operands(b, n)[1:] if t.kind in CONST_KINDS][:count]
    if len(consts) != count:
        raise VendorFormatError(
            f"vendor .rknn model: {n.op_type} '{n.name}' lacks its {count} parameters"
        )
    out = []
    for t in consts:
        array = b.m.const(t).astype(np.float32).reshape(-1)
        if array.size < channels:
            raise VendorFormatError(f"vendor .rknn model: a parameter of '{n.name}' is too short")
        array = array[:channels]
        if on_grid and t.scale:
            array = numerics.fake_quantize(array, t.scale[0], t.zp[0] if t.zp else 0)
        out.append(array.astype(np.float32))
    return out


@OPS.register("BatchNormalization", "BatchNormalizationRelu", shape_free=True)
def batch_norm(b: GraphBuilder, n: Node) -> str:
    """Inference BatchNormalization (scale, bias, mean, variance, as ONNX orders them); the
    Relu variant has a Relu fused after it."""
    src = single(b, n)
    x = b.value(src)
    if len(src.shape) < 2:
        raise VendorFormatError(f"vendor .rknn model: {n.op_type} '{n.name}' has no channels")
    if b.quantized:
        y = _int8_batch_norm(b, n, x, src.shape[1], src.scale, src.zp[0] if src.zp else 0)
    else:
        eps = float(n.attrs.scalar(BN_EPSILON, "<f", BN_DEFAULT_EPSILON)) if n.attrs is not None \
            else BN_DEFAULT_EPSILON  # fmt: skip
        scale, bias, mean, var = _params(b, n, 4, src.shape[1])
        names = [b.const(p, "bn") for p in (scale, bias, mean, var)]
        y = b.add("BatchNormalization", [x, *names], "bn", epsilon=eps)
    return b.add("Relu", [y], "relu") if n.op_type.endswith("Relu") else y


def _int8_batch_norm(b: GraphBuilder, n: Node, x: str, channels: int, x_scale: list[float],
                     x_zp: int) -> str:
    """int8 files fold the normalisation into y = (q A + B) s_in s_A on the input's raw int8
    values q: A as int16 with a scale s_A of its own, B as int32 holding the input zero point's
    share (-zp A), then mean 0 and variance 1 (int32, int16) (inferred from toolkit 2.5.0
    DenseNet builds: read as x A + B s_in s_A, x = (q - zp) s_in, every element of a real-size
    DenseNet-121's BatchNormalizationRelu after a MaxPool (zp -128) was off, up to 138 steps)."""
    consts = [t for t in operands(b, n)[1:] if t.kind in CONST_KINDS][:4]
    dtypes = [t.dtype for t in consts]
    if dtypes != ["int16", "int32", "int32", "int16"] or not consts[0].scale or not x_scale:
        raise VendorFormatError(
            f"vendor .rknn model: int8 {n.op_type} '{n.name}' (parameters {dtypes}) is not decoded"
        )
    q_a, q_b, mean, var = (b.m.const(t).astype(np.float64).reshape(-1) for t in consts)
    if min(a.size for a in (q_a, q_b, mean, var)) < channels or mean[:channels].any() or \
            np.any(var[:channels] != 1):  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: int8 {n.op_type} '{n.name}' with a mean or variance is not "
            "decoded"
        )
    s_a = float(consts[0].scale[0])
    shape = [1, channels] + [1] * 2
    a = (q_a[:channels] * s_a).astype(np.float32).reshape(shape)
    # q A + B = (q - zp) A + (B + zp A): x A plus a bias in float (integers exact in float64)
    bias = ((q_b[:channels] + x_zp * q_a[:channels]) * float(x_scale[0]) *
            s_a).astype(np.float32).reshape(shape)  # fmt: skip
    y = b.add("Mul", [x, b.const(a, "bn_a")], "bn_mul")
    return b.add("Add", [y, b.const(bias, "bn_b")], "bn")


@OPS.register("exNorm")
def layer_norm(b: GraphBuilder, n: Node) -> str:
    """LayerNorm over its stored axes (one: the compiler moves the normalised axis to the
    channels, the tokens to the width)."""
    src = single(b, n)
    x = b.value(src)
    if n.attrs is None:
        raise VendorFormatError(f"vendor .rknn model: exNorm '{n.name}' has no attributes")
    axes = n.attr_ints(NORM_AXES) or []
    eps = float(n.attrs.scalar(NORM_EPSILON, "<f", 1e-5))
    rank = len(src.shape)
    if len(axes) != 1 or not -rank <= axes[0] < rank or not 0 <= eps < 1:
        raise VendorFormatError(
            f"vendor .rknn model: exNorm '{n.name}' (axes {axes}, epsilon {eps}) is not supported"
        )
    axis = axes[0] % rank
    channels = src.shape[axis]
    # int8 files: the scale and bias are stored as float16/float32 with an int8 scale and zero
    # point of their own, and the simulator normalises with them on that grid (its quantisation
    # config holds both as int8 per tensor; rknn-toolkit2 2.5.0, the transformer fixtures)
    scale, bias = _params(b, n, 2, channels, on_grid=b.quantized)
    if not b.quantized:  # float16: the simulator's LayerNormalization on float16 tensors
        return _float16_layer_norm(b, x, axis, rank, scale, bias, eps)
    shape = [1] * rank
    shape[axis] = channels
    mean = b.add("ReduceMean", [x], "mean", axes=[axis], keepdims=1)
    centred = b.add("Sub", [x, mean], "xc")
    var = b.add("ReduceMean", [b.add("Mul", [centred, centred], "sq")], "var", axes=[axis],
                keepdims=1)  # fmt: skip
    std = b.add("Sqrt", [b.add("Add", [var, b.const(np.array(eps, np.float32), "eps")], "ve")],
                "std")  # fmt: skip
    y = b.add("Div", [centred, std], "norm")
    y = b.add("Mul", [y, b.const(scale.reshape(shape), "g")], "scaled")
    return b.add("Add", [y, b.const(bias.reshape(shape), "beta")], "ln")


def _float16_layer_norm(b: GraphBuilder, x: str, axis: int, rank: int, scale: np.ndarray,
                        bias: np.ndarray, eps: float) -> str:
    """onnxruntime's LayerNormalization on float16 values (x is on float16 already), its
    scale and bias float16, over `axis` moved last: what the simulator computes (fed its inputs,
    the transformer fixture's two exNorms equal it, where ReduceMean/Sub/Sqrt/Div pieces in
    float32 or float64 left 18 and 36 of 384 off), in one op."""
    last = axis == rank - 1
    perm = [k for k in range(rank) if k != axis] + [axis]
    moved = x if last else b.add("Transpose", [x], "ln_t", perm=perm)
    h = b.add("Cast", [moved], "ln_h", to=TensorProto.FLOAT16)
    y = b.add("LayerNormalization", [h, b.const(scale.astype(np.float16), "g"),
                                     b.const(bias.astype(np.float16), "beta")], "ln",
              axis=-1, epsilon=eps)  # fmt: skip
    y = b.add("Cast", [y], "ln_f", to=TensorProto.FLOAT)
    return y if last else b.add("Transpose", [y], "ln_back",
                                perm=[perm.index(k) for k in range(rank)])  # fmt: skip


@OPS.register("Resize")
def resize(b: GraphBuilder, n: Node) -> str:
    """Resize to the output's stored size (nearest or linear, with the stored coordinate and
    nearest-rounding modes)."""
    src, out = single(b, n), output(b, n)
    x = b.value(src)
    attrs = n.attrs
    if attrs is None or len(src.shape) != 4 or len(out.shape) != 4 or \
            out.shape[:2] != src.shape[:2]:  # fmt: skip
        raise VendorFormatError(f"vendor .rknn model: Resize '{n.name}' is not supported")
    mode = attrs.string(RESIZE_MODE) or "nearest"
    coords = attrs.string(RESIZE_COORDINATES) or "half_pixel"
    nearest = attrs.string(RESIZE_NEAREST) or "round_prefer_floor"
    if mode not in RESIZE_MODES or coords not in RESIZE_COORDINATE_MODES or \
            nearest not in NEAREST_MODES:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: Resize '{n.name}' (mode {mode}, coordinates {coords}, "
            f"nearest {nearest}) is not supported"
        )
    extra = dict(nearest_mode=nearest) if mode == "nearest" else {}
    sizes = b.const(np.array(out.shape, np.int64), "sizes")
    empty = b.const(np.zeros(0, np.float32), "none")
    return b.add("Resize", [x, empty, empty, sizes], "resize", mode=mode,
                 coordinate_transformation_mode=coords, **extra)  # fmt: skip
