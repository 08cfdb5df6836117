"""Convolutions and the activations the compiler fused after them (ConvRelu, ConvAdd, ...).

A fused op type names its steps after "Conv": `ConvAddRelu` is a convolution, then an Add of
its extra operand, then a Relu. Each registered name maps to its steps (FUSIONS); an unlisted
combination is refused by name. int8 weights, biases and scales: int8.py.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from onnx import TensorProto

from ..errors import VendorFormatError
from . import act_ops, int8, lut, weights
from .decoders import OpTable
from .fileformat import CONST_KINDS, Node, Tensor
from .graph import GraphBuilder, is_helper

# NPU formats whose weight packing was checked against the vendor simulator (fixtures), per
# weight type.
VERIFIED_PACKINGS = {
    "float16": ("RKNPU v2", "RKNPU lite", "RKNPU f2", "RKNPU t4", "RKNPU f3"),
    "int8": ("RKNPU v2", "RKNPU lite", "RKNPU f2", "RKNPU t4", "RKNPU f3", "RKNPU t3",
             "RKNPU w1"),
}
# Conv attribute slots (ONNX names in alphabetical order; pooling: window_ops.py).
CONV_DILATIONS, CONV_GROUP, CONV_KERNEL, CONV_PADS, CONV_STRIDES = 1, 2, 3, 4, 5
# op type -> the steps fused after the convolution
FUSIONS: dict[str, tuple[str, ...]] = {
    "Conv": (),
    "ConvRelu": ("Relu",),
    "ConvAdd": ("Add",),
    "ConvAddRelu": ("Add", "Relu"),
    "ConvMul": ("Mul",),
    "ConvSigmoid": ("Sigmoid",),
    "ConvExSwish": ("ExSwish",),
    "ConvClip": ("Clip",),
    "ConvHardSwish": ("HardSwish",),
    "ConvHardSigmoid": ("HardSigmoid",),
    "ConvExGelu": ("ExGelu",),
}
# Where a fused Clip keeps its bounds (inferred from toolkit 2.5.0 builds of Clip(lo, hi) with
# lo in {0, -1.5, 0.5, -3, -2, -0.25}, docs/vendor-rknn.md). rk3588/rk3566/rk3562 shift the
# conv's output by -lo, clamp it to [0, hi - lo] and add lo back; rk3576/rv1126b clamp to
# [lo, hi] (float16) or, in int8, shift, clamp to [0, hi - lo] and add lo back. float16 values
# are float32 register values; int8 values are int32 in units of the output conversion's input
# (OUT_CVT scale / 2^shift x the output scale). Per NPU format and dtype: (shift -lo, lo added
# back, span hi - lo) or, for the float16 [lo, hi] form, (None, lo, hi).
CLIP_REGS: dict[tuple[str, bool], tuple[int | None, int, int]] = {
    ("RKNPU v2", False): (0x4064, 0x4090, 0x406C), ("RKNPU lite", False): (0x4064, 0x4090, 0x406C),
    ("RKNPU t4", False): (0x4040, 0x4064, 0x4078),
    ("RKNPU f2", False): (None, 0x4074, 0x4078), ("RKNPU f3", False): (None, 0x4074, 0x4078),
    ("RKNPU v2", True): (0x4064, 0x4090, 0x406C), ("RKNPU lite", True): (0x4064, 0x4090, 0x406C),
    ("RKNPU t4", True): (0x4064, 0x4090, 0x4078),
    ("RKNPU f2", True): (None, 0x4090, 0x4078), ("RKNPU f3", True): (None, 0x4090, 0x4078),
}  # fmt: skip
OPS = OpTable()


# fused steps whose float16 result does not change when their input is rounded to float16
# first (float16 bounds); before any other, a float16 file's convolution is rounded, as the
# simulator runs the convolution and the step as two ops (tests/vendor/test_vendor_fp16_layers)
_COMMUTE_WITH_ROUNDING = ("Relu", "Clip")


def _conv(b: GraphBuilder, n: Node, steps: tuple[str, ...]) -> str:
    """A convolution (the weight and bias are its second and third inputs) and the steps
    the compiler fused after it (`steps`, from the op type)."""
    m = b.m
    ins = [m.tensors[i] for i in n.inputs]
    if len(ins) < 2:
        raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' lacks its weight")
    x, w = ins[:2]
    if m.npu_format not in VERIFIED_PACKINGS.get(w.dtype, ()):
        raise VendorFormatError(
            f"vendor .rknn model: {w.dtype} weight packing of NPU format '{m.npu_format}' "
            f"({m.platform}; op '{n.name}') is not verified"
        )
    # A convolution the compiler tiled (`*_tile1`) may come without a bias.
    bias = ins[2] if len(ins) > 2 and ins[2].kind in CONST_KINDS else None
    rest = ins[3:] if bias is not None else ins[2:]
    group = n.attr_int(CONV_GROUP, 1) or 1
    kernel = n.attr_ints(CONV_KERNEL)
    if len(w.shape) != 4 or not kernel:
        raise VendorFormatError(
            f"vendor .rknn model: op '{n.name}' has an undecodable weight shape"
        )
    oc, ic, kh, kw = w.shape
    depthwise = group > 1 and oc == 1 and ic == group
    if group > 1 and not depthwise:
        raise VendorFormatError(
            f"vendor .rknn model: grouped convolution '{n.name}' is not supported"
        )
    # The weights stay in their stored type inside the graph (half or a quarter of float32
    # bytes to serialise and load); onnxruntime folds the conversion once at session creation.
    acc_unit = float("nan")
    integer = None
    if w.dtype == "float16":
        w16 = weights.unpack(m.data(w), "float16", w.native_shape, oc, ic, kh, kw, w.name)
        if depthwise:
            w16 = w16.reshape(ic, 1, kh, kw)
        weight = b.add("Cast", [b.weight(w16, "w")], "wf", to=TensorProto.FLOAT)
        channels = ic if depthwise else oc
        # (the compiler's depthwise convs for AveragePools come without a bias)
        bf = m.const(bias, "<f4") if bias is not None else np.zeros(channels, np.float32)
        if bf.size < channels:
            raise VendorFormatError(f"vendor .rknn model: the bias of '{n.name}' is too short")
        bf = bf[:channels]
    elif w.dtype == "int8":
        if bias is None:  # the scales are recovered from the bias blob
            raise VendorFormatError(f"vendor .rknn model: int8 op '{n.name}' without a bias blob")
        operands = [t for t in rest if not is_helper(t)]
        mul_operand = operands[0] if steps == ("Mul",) and len(operands) == 1 else None
        conv = int8.conv_weights(b.regs, n, x, w, bias, m.tensors[n.outputs[0]], depthwise,
                                 _lut_activation(steps), mul_operand)  # fmt: skip
        integer = _integer_operands(b, x, conv)
        if integer is not None:
            x_value, weight, bias_value = integer
        else:
            per_channel = (-1, 1, 1, 1)
            q = b.add("Cast", [b.weight(conv.q, "wq")], "wqf", to=TensorProto.FLOAT)
            centred = b.add("Sub", [q, b.const(conv.zw.reshape(per_channel), "wzp")], "wc")
            weight = b.add("Mul", [centred, b.const(conv.scale.reshape(per_channel), "ws")],
                           "wf")  # fmt: skip
        bf = conv.bias
        # real value of one accumulator unit of channel 0 (rv1106 keeps a Clip's upper bound so)
        acc_unit = float(x.scale[0]) * float(conv.scale[0])
    else:
        raise VendorFormatError(f"vendor .rknn model: conv weight type {w.dtype} is not supported")
    attrs = dict(kernel_shape=kernel, group=group)
    for key, slot in (("dilations", CONV_DILATIONS), ("pads", CONV_PADS),
                      ("strides", CONV_STRIDES)):  # fmt: skip
        value = n.attr_ints(slot)
        if value:
            attrs[key] = value
    if integer is None:
        x_value, bias_value = b.conv_input(x), b.const(bf.astype(np.float32), "b")
    y = b.add("Conv", [x_value, weight, bias_value], "conv", **attrs)
    extra = [t for t in rest if not is_helper(t)]
    table = _lut_activation(steps) if b.quantized else None
    if table is not None:  # the BN addend in front of the table (HardSigmoid's beta)
        addend = b.regs.activation_addend(n, table)
        if addend:
            y = b.add("Add", [y, b.const(np.array(addend, np.float32), "bn_add")], "pre_lut")
    for step in steps:
        if not (b.quantized or step in _COMMUTE_WITH_ROUNDING):
            y = b.to_float16(y)  # the simulator rounds each op's output: the conv's first
        if step in ("Add", "Mul"):
            if len(extra) != 1:
                raise VendorFormatError(
                    f"vendor .rknn model: {n.op_type} '{n.name}' needs one operand"
                )
            y = b.add(step, [y, b.value(extra[0])], "fused")
        elif step == "Relu":
            y = b.add("Relu", [y], "relu")
        elif step == "Clip":
            y = _clip(b, n, y, acc_unit)
        elif b.quantized and _lut_activation(steps) is None:  # a table after other steps
            raise VendorFormatError(
                f"vendor .rknn model: int8 op {n.op_type} '{n.name}' (its pre-activation "
                "scale is not decoded) is not supported"
            )
        elif step == "Sigmoid":
            y = b.add("Sigmoid", [y], "sigmoid")
        elif step == "HardSwish":
            y = b.add("Mul", [y, b.add("HardSigmoid", [y], "hsig", alpha=1 / 6, beta=0.5)],
                      "hswish")  # fmt: skip
        elif step == "HardSigmoid":
            # int8: alpha and beta - 1/2 are in the conv's scale and the addend (lut.py)
            alpha, beta = (1 / 6, 0.5) if b.quantized else _hard_sigmoid(b, n)
            y = b.add("HardSigmoid", [y], "hsig", alpha=alpha, beta=beta)
        elif step == "ExGelu":
            y = act_ops.gelu(b, y)
        else:  # ExSwish
            y = b.add("Mul", [y, b.add("Sigmoid", [y], "sigmoid")], "swish")
    return y


def _integer_operands(b: GraphBuilder, x: Tensor,
                      conv: int8.ConvInt8) -> tuple[str, str, str] | None:  # fmt: skip
    """(input, weight, bias) of int8 conv `conv` as rknnrt's converter writes them: the int8
    input and weights and an int32 bias (in accumulator units s_in x s_w) each through a
    DequantizeLinear, so that the runtime sums them in integers as the NPU does (onnxruntime's
    integer kernels, core/program/int8_islands.py, int8_depthwise.py). None where the file's
    values have no such form (a weight zero point outside int8, a bias outside int32, a
    channel scale that is not positive): the arithmetic form is written instead."""
    zw, scale = conv.zw, conv.scale
    if x.index not in b.int8_values or not np.all((zw >= -128) & (zw <= 127)) \
            or not np.all(np.isfinite(scale) & (scale > 0)) \
            or np.abs(conv.acc_bias).max(initial=0) >= 2**31:  # fmt: skip
        return None
    weight = b.add("DequantizeLinear", [b.weight(conv.q.astype(np.int8), "wq"),
                                        b.const(scale, "ws"), b.const(zw.astype(np.int8), "wzp")],
                   "wf", axis=0)  # fmt: skip
    bias_scale = (np.float32(x.scale[0]) * scale).astype(np.float32)  # (toolkit/quantize/qdq.py)
    bias = b.add("DequantizeLinear", [b.weight(conv.acc_bias.astype(np.int32), "bq"),
                                      b.const(bias_scale, "bs"),
                                      b.const(np.zeros(scale.size, np.int32), "bzp")],
                 "bf", axis=0)  # fmt: skip
    return b.value(x), weight, bias


def _float_reg(regs: dict[int, int], reg: int) -> float:
    return float(np.array(regs.get(reg, 0), np.uint32).view(np.float32))


def _int_reg(regs: dict[int, int], reg: int) -> int:
    return int(np.array(regs.get(reg, 0), np.uint32).view(np.int32))


def clip_bounds(b: GraphBuilder, n: Node) -> tuple[float, float]:
    """The (lo, hi) of a fused Clip, in real values (CLIP_REGS)."""
    fmt, quantized = b.m.npu_format, b.quantized
    regs = b.registers().first_task(n)
    where = CLIP_REGS.get((fmt, quantized))
    lo = hi = float("nan")
    if regs is not None and where is not None and all(r in regs for r in where if r):
        shift, lo_reg, span_reg = where
        read = _int_reg if quantized else _float_reg
        lo, span = float(read(regs, lo_reg)), float(read(regs, span_reg))
        if shift is not None and -read(regs, shift) != lo:
            lo = float("nan")  # (the shift and the value added back disagree)
        if quantized:  # each register holds its value to about one unit
            _, scale, cvt_shift = b.regs.out_cvt(n)
            out = b.m.tensors[n.outputs[0]]
            unit = scale / 2.0**cvt_shift * float(out.scale[0]) if out.scale else float("nan")
            lo, span = (_shortest(v * unit, unit) for v in (lo, span))
        hi = span if shift is None and not quantized else lo + span
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise VendorFormatError(
            f"vendor .rknn model: the bounds of ConvClip '{n.name}' ({fmt}) are not decoded"
        )
    return float(np.float32(lo)), float(np.float32(hi))


def _shortest(value: float, tolerance: float) -> float:
    """The decimal with the fewest significant digits within `tolerance` of `value`: the
    bound the user wrote, of which an int8 register keeps about the nearest unit. The vendor's
    simulator clips at that bound, and a scale calibrated on the clipped range often puts it
    on a rounding tie of the output (Clip(0.5, 3): 0.5 / (3 / 255) = 42.5)."""
    if not np.isfinite(value) or not tolerance > 0:
        return value
    for digits in range(1, 8):
        candidate = float(f"{value:.{digits}g}")
        if abs(candidate - value) <= tolerance:
            return candidate
    return value


def _clip(b: GraphBuilder, n: Node, y: str, acc_unit: float) -> str:
    """A fused Clip with the bounds its registers hold (in int8 before the output's own
    rounding and saturation); rv1103/rv1106 int8: `_mini_clip`."""
    fmt = b.m.npu_format
    if b.quantized and fmt in MINI_CLIP_REGS:
        return _mini_clip(b, n, y, acc_unit)
    lo, hi = _w1_clip_bounds(b, n, acc_unit) if b.quantized and fmt in W1_CLIP_REGS \
        else clip_bounds(b, n)  # fmt: skip
    bounds = [b.const(np.array(v, np.float32), "clip") for v in (lo, hi)]
    return b.add("Clip", [y, *bounds], "clip")


# rv1103/rv1106 (RKNPU t3) int8 ConvClip (toolkit 2.5.0 builds of one conv + Clip(lo, hi), lo
# from -3 to 2.2, hi from -1 to 6, docs/vendor-rknn.md): BN_CFG 0x4060 is 0x20010 where lo is
# not 0 (0x12 where it is), 0x4064 holds lo's integer part (truncated toward 0, in real units:
# -1.5 -> -1, 0.5 -> 0) and 0x4018 its negation, and 0x4028 (also 0x40e4) hi in units of channel
# 0's accumulator (s_in x s_w[0]). The fraction of lo is stored nowhere.
MINI_CLIP_REGS = {"RKNPU t3": (0x4060, 0x4064, 0x4028)}
MINI_CLIP_LO_SET = 0x20000  # the BN_CFG bit set where lo is not 0


# rv1103b/rv1106b (RKNPU w1) int8 ConvClip (the same builds for rv1106b): 0x4050 holds lo in
# units of the output conversion's input (OUT_CVT scale / 2^shift x the output scale), 0x4060
# (and 0x4068) hi - lo in units of channel 0's accumulator, as rv1106's hi.
W1_CLIP_REGS = {"RKNPU w1": (0x4050, 0x4060)}


def _w1_clip_bounds(b: GraphBuilder, n: Node, acc_unit: float) -> tuple[float, float]:
    regs = b.registers().first_task(n) or {}
    lo_reg, span_reg = W1_CLIP_REGS[b.m.npu_format]
    out = b.m.tensors[n.outputs[0]]
    lo = hi = float("nan")
    if lo_reg in regs and span_reg in regs and out.scale and np.isfinite(acc_unit):
        _, scale, shift = b.regs.out_cvt(n)
        unit = scale / 2.0**shift * float(out.scale[0])
        lo = _shortest(_int_reg(regs, lo_reg) * unit, unit)
        span = _int_reg(regs, span_reg) * acc_unit
        hi = _shortest(lo + span, acc_unit + abs(span) * 2.0**-12)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise VendorFormatError(
            f"vendor .rknn model: the bounds of ConvClip '{n.name}' ({b.m.npu_format}) are not "
            "decoded"
        )
    return float(np.float32(lo)), float(np.float32(hi))


def _mini_clip(b: GraphBuilder, n: Node, y: str, acc_unit: float) -> str:
    """rv1106's int8 Clip(lo, hi). The simulator clips at lo and hi, then rounds to the
    output's grid, which calibration on the clipped tensor spans from min(lo', 0) to
    max(hi', 0) (lo <= lo', hi' <= hi the calibrated range, each end within half a step): so a
    lower bound <= 0 is the grid's saturation, exactly, and needs no register; above 0 (the
    grid then starts at 0) it would need the fraction the file does not keep, so it is
    refused by name. The upper bound is decoded (a negative one is not the saturation)."""
    regs = b.registers().first_task(n) or {}
    cfg_reg, lo_reg, hi_reg = MINI_CLIP_REGS[b.m.npu_format]
    out = b.m.tensors[n.outputs[0]]
    if any(r not in regs for r in (cfg_reg, lo_reg, hi_reg)) or not out.zp \
            or not np.isfinite(acc_unit):  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: the bounds of ConvClip '{n.name}' ({b.m.npu_format}) are "
            "not decoded"
        )
    lo_int, lo_set = _int_reg(regs, lo_reg), bool(regs[cfg_reg] & MINI_CLIP_LO_SET)
    # lo_int 0 with lo set: lo in (-1, 0) or (0, 1); the grid starting at 0 says lo >= 0
    # unless the data never went below 0, so the sign is unknown there
    if lo_int > 0 or (lo_set and lo_int == 0 and out.zp[0] == -128):
        raise VendorFormatError(
            f"vendor .rknn model: int8 ConvClip '{n.name}' with a lower bound above 0 is not "
            f"supported ({b.m.platform} stores only its integer part, {lo_int})"
        )
    # acc_unit comes from channel 0's 14-bit C (int8.py), the compiler's from its float scale
    value = _int_reg(regs, hi_reg) * acc_unit
    hi = _shortest(value, acc_unit + abs(value) * 2.0**-12)
    if not lo_set:  # lo = 0: the grid starts at 0 only if the data went above 0
        y = b.add("Relu", [y], "relu")
    return b.add("Min", [y, b.const(np.array(hi, np.float32), "clip_hi")], "clip")


# A fused HardSigmoid feeds a linear lookup table u -> clamp(u / 2^16 + 1/2) with
# u = 32767.5 (alpha x + beta - 1/2): rk3588/rk3566 program the multiplier 32767.5 alpha as
# float16 in bits 31:16 of 0x4068 and add 32767.5 (beta - 1/2) as float32 (0x4064) after it;
# rk3562 programs the same registers but adds (beta - 1/2) / alpha before the multiplier, as
# rk3576/rv1126b do, which keep the multiplier in u16 word 16 of the output's BnCfg constant
# and the addend in its float32 word 0. Inferred from HardSigmoid(0.2, 0.4) and (1/6, 1/2)
# builds; the multiplier has float16 precision, so the alphas of PyTorch (1/6) and of ONNX's
# default (0.2) are taken exactly where they round to it.
HSIG_UNIT = 32767.5
HSIG_REGS = {"RKNPU v2": (0x4064, 0x4068), "RKNPU lite": (0x4064, 0x4068),
             "RKNPU t4": (0x4064, 0x4068)}  # fmt: skip
HSIG_ADD_AFTER = ("RKNPU v2", "RKNPU lite")  # the addend follows the multiplier
HSIG_ALPHAS = act_ops.HSIG_ALPHAS


def _hard_sigmoid(b: GraphBuilder, n: Node) -> tuple[float, float]:
    fmt = b.m.npu_format
    mul = add = None
    if fmt in HSIG_REGS:
        regs = b.registers().first_task(n) or {}
        add_reg, mul_reg = HSIG_REGS[fmt]
        if mul_reg in regs and not (regs[mul_reg] >> 8) & 0x3F:
            mul, add = regs[mul_reg] >> 16, _float_reg(regs, add_reg)
    else:
        raw = b.m.named_constant(b.m.tensors[n.outputs[0]].name + lut.BN_CFG_SUFFIX) or b""
        if len(raw) >= 2 * lut.BN_CFG_OPERAND + 2:
            mul = int(np.frombuffer(raw, "<u2", lut.BN_CFG_OPERAND + 1)[-1])
            add = float(np.frombuffer(raw, "<f4", 1)[0])
    if mul is None or add is None:
        raise VendorFormatError(
            f"vendor .rknn model: the parameters of {n.op_type} '{n.name}' ({fmt}) are not decoded"
        )
    scaled = float(np.array(mul, np.uint16).view(np.float16))
    alpha = next((a for a in HSIG_ALPHAS if float(np.float16(a * HSIG_UNIT)) == scaled),
                 scaled / HSIG_UNIT)  # fmt: skip
    beta = 0.5 + (add / HSIG_UNIT if fmt in HSIG_ADD_AFTER else add * alpha)
    if not (np.isfinite(alpha) and np.isfinite(beta) and alpha > 0):
        raise VendorFormatError(f"vendor .rknn model: {n.op_type} '{n.name}' has invalid "
                                "parameters")  # fmt: skip
    return alpha, float(np.float32(beta))


LUT_STEPS = (("Sigmoid",), ("ExSwish",), ("ExGelu",), ("HardSwish",), ("HardSigmoid",))


def _lut_activation(steps: tuple[str, ...]) -> str | None:
    """The lookup-table activation whose table sets the conv's int8 scale (int8.py), if any."""
    return steps[0] if steps in LUT_STEPS else None


for _op_type, _steps in FUSIONS.items():
    OPS.register(_op_type, shape_free=True)(partial(_conv, steps=_steps))
