"""Attention: the compiler's fused exSDPAttention (softmax(Q K^T s) V) and exMatMul.

exSDPAttention's three inputs are Q, K and V, each [heads, head dim, 1, tokens] (the compiler
keeps a transformer's features on the channels and its tokens on the width). The scale s is not
an attribute: rk3588/rk3562 program it as float16 in bits 31:16 of register 0x4068 of the op's
tasks (the one non-zero value they write there; in int8 files a multiplier in bits 31:16 over
2^(bits 13:8); rv1106 int8 likewise, in its tasks whose BN_CFG is 0x2), rk3576/rv1126b as
float16 word 0 of the constant `<output>_qk_conv_mul_add_output_BNcfgTensor` (inferred from
toolkit 2.5.0 builds with s = 1/4 and 0.3). int8 files of rk3576/rv1126b keep it as a
multiplier and shift instead: u16 word 0 of `<output>_qk_conv_mul_add_output_BnCfg_BNcfgTensor`
over 2^(word 8's low byte) (word 8 repeats the shift in its high byte). For s = 1 no format
programs a scale (builds with s in {0.05, 0.125, 0.25, 1/sqrt(8), 0.3, 0.7, 1, 2.5}, int8 on
all four, s = 1 in float16 on rk3588 and rk3576). Where 1/sqrt(head dim) rounds to the
stored value, that exact value is used (the usual scale).
"""

from __future__ import annotations

import numpy as np

from ..errors import VendorFormatError
from .decoders import OpTable
from .fileformat import CONST_KINDS, Node, Tensor
from .graph import GraphBuilder, operands, output

OPS = OpTable()
SCALE_REG = {"RKNPU v2": 0x4068, "RKNPU t4": 0x4068, "RKNPU t3": 0x4068}
# rv1106 also writes 0x4068 in its softmax's tasks (0x6a660000, BN_CFG 0x20000): its scale is
# the value of the tasks whose BN_CFG (0x4060) is 0x2, the multiply alone (toolkit 2.5.0 builds
# with s in {0.05, 0.125, 0.25, 0.3, 0.7, 1, 2.5}; s = 1 programs no such task)
SCALE_TASK_KEY = {"RKNPU t3": (0x4060, 0x2)}
SCALE_CFG_SUFFIX = "_qk_conv_mul_add_output_BNcfgTensor"
SCALE_INT8_SUFFIX = "_qk_conv_mul_add_output_BnCfg_BNcfgTensor"
SCALE_INT8_SHIFT_WORD = 8
# the Q K^T step's constant, in every build: with it, no scale programmed means s = 1
QK_SUFFIX = "_qk_conv_mul_add_output_rs_weight"
SCALE_CFG_FORMATS = ("RKNPU f2", "RKNPU f3")
PROBS_ZP = -128  # softmax probabilities: a range from 0, on an int8 grid
SYMMETRIC_LEVELS = 127  # a symmetric int8 grid's steps on either side of 0


def _const_words(b: GraphBuilder, name: str) -> np.ndarray | None:
    raw = b.m.named_constant(name)
    return None if raw is None else np.frombuffer(raw, "<u2", len(raw) // 2)


def _snap(multiplier: int, shift: int, usual: float) -> float:
    """multiplier / 2^shift, or the usual 1/sqrt(head dim) where it rounds to that."""
    step = 2.0**-shift
    scale = multiplier * step
    return usual if abs(usual - scale) <= step / 2 else scale


def _scale(b: GraphBuilder, n: Node, head_dim: int) -> float:
    fmt, name = b.m.npu_format, output(b, n).name
    usual = head_dim**-0.5
    unity = any(t.name == name + QK_SUFFIX for t in b.m.tensors)
    scale = None
    if fmt in SCALE_REG:
        if fmt in SCALE_TASK_KEY:
            written = b.registers().register_values_where(n, SCALE_REG[fmt],
                                                          *SCALE_TASK_KEY[fmt]) - {0}  # fmt: skip
        else:
            written = b.registers().register_values(n, SCALE_REG[fmt]) - {0}
        if not written and unity:
            return 1.0
        value = written.pop() if len(written) == 1 else 0
        if b.quantized and value >> 16:  # multiplier in bits 31:16, shift in bits 13:8
            return _snap(value >> 16, (value >> 8) & 0x3F, usual)
        scale = float(np.array(value >> 16, np.uint16).view(np.float16)) if value else None
    elif fmt in SCALE_CFG_FORMATS:
        words = _const_words(b, name + (SCALE_INT8_SUFFIX if b.quantized else SCALE_CFG_SUFFIX))
        if words is None and unity:
            return 1.0
        if b.quantized and words is not None and words.size > SCALE_INT8_SHIFT_WORD:
            shift = int(words[SCALE_INT8_SHIFT_WORD]) & 0xFF
            if int(words[SCALE_INT8_SHIFT_WORD]) >> 8 == shift and words[0]:
                return _snap(int(words[0]), shift, usual)
        elif not b.quantized and words is not None and words.size:
            scale = float(np.array(words[0], np.uint16).view(np.float16))
    if scale is None or not (np.isfinite(scale) and scale > 0):
        raise VendorFormatError(
            f"vendor .rknn model: the scale of exSDPAttention '{n.name}' ({fmt}) is not decoded"
        )
    return usual if float(np.float16(usual)) == scale else scale


@OPS.register("exSDPAttention")
def attention(b: GraphBuilder, n: Node) -> str:
    real = operands(b, n)
    # Q and K [H, D, 1, T], V [H, Dv, 1, T]: values may be wider (YOLO11's PSA: D = Dv / 2)
    if len(real) != 3 or any(len(t.shape) != 4 or t.shape[2] != 1 for t in real) or \
            real[0].shape != real[1].shape or real[0].shape[0] != real[2].shape[0] or \
            real[1].shape[3] != real[2].shape[3]:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: exSDPAttention '{n.name}' with inputs "
            f"{[t.shape for t in real]} is not supported"
        )
    q, k, v = (b.value(t) for t in real)
    scale = _scale(b, n, real[0].shape[1])
    # The mini format (rv1103/rv1106) stores no calibrated ranges, so Q's symmetric step and
    # the grids inside are unknown there: its attention runs without them (the agreement
    # bounds of tests/vendor/test_vendor_mini.py state what that costs).
    ranged = all(t.has_range for t in real)
    grids = _int8_grids(b, n, real, scale) if b.quantized and ranged else None
    # [H, D, 1, T] -> [H, 1, T, D]
    qt, vt = (b.add("Transpose", [x], "tok", perm=[0, 2, 3, 1]) for x in (q, v))
    kt = b.add("Transpose", [k], "kt", perm=[0, 2, 1, 3])  # [H, 1, D, T]
    qk = b.add("MatMul", [qt, kt], "qk")
    if grids is not None:
        qk = b.on_grid(qk, *grids[0], "qk_grid")
    scores = b.add("Mul", [qk, b.const(np.array(scale, np.float32), "s")], "scores")
    probs = b.add("Softmax", [scores], "attn", axis=-1)
    if grids is not None:
        probs = b.on_grid(probs, *grids[1], "p_grid")
    y = b.add("MatMul", [probs, vt], "pv")  # [H, 1, T, D]
    return b.add("Transpose", [y], "back", perm=[0, 3, 1, 2])


def _int8_grids(b: GraphBuilder, n: Node, qkv: list[Tensor],
                scale: float) -> tuple[tuple[float, int], tuple[float, int]]:  # fmt: skip
    """The two int8 grids an int8 exSDPAttention rounds to inside (scale, zero point): the raw
    Q K^T (before s) and the softmax probabilities. The simulator takes both from its
    quantisation config; the file keeps them in the output conversions of the op's tasks
    (rknn-toolkit2 2.5.0, the transformer fixtures of rk3588, rk3562, rk3576, rv1126b): the
    Q K^T tasks program (zp, m, shift) with m / 2^shift = s_k s_qsym / (s grid), s_qsym Q's
    symmetric step (`symmetric_scale`: the NPU multiplies a symmetric Q), and the P V tasks
    (out zp, m, shift) with m / 2^shift = 2 s_p s_v / s_out; the probabilities' zero point is
    -128 (their range starts at 0). Both multipliers have 15 bits: the grids are the config's
    to 2e-5 (0.10114 Q K^T, 0.0023029 P: 0 differences on the fixture)."""
    rows = [r for r in b.regs.out_cvts(n) if 0 < r[2] < 32 and r[1] > 1 and r[1] != 1 << r[2]]
    distinct = list(dict.fromkeys(rows))
    out = output(b, n)
    q, k, v = qkv
    if len(distinct) != 2 or distinct[1][0] != (out.zp[0] if out.zp else 0) or not (
            q.scale and k.scale and v.scale and out.scale):  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: the int8 grids inside exSDPAttention '{n.name}' are not "
            f"decoded (output conversions {distinct})"
        )
    (qk_zp, qk_m, qk_shift), (_, pv_m, pv_shift) = distinct
    qk_grid = k.scale[0] * symmetric_scale(n, q) / (scale * qk_m / 2**qk_shift)
    p_grid = pv_m / 2**pv_shift * out.scale[0] / (2 * v.scale[0])
    return (qk_grid, qk_zp), (p_grid, PROBS_ZP)


def symmetric_scale(n: Node, t: Tensor) -> float:
    """The symmetric int8 step of feature `t`'s calibrated range, max(|lo|, |hi|) / 127 in
    float32: an int8 exMatMul's second operand is requantised to it (zero point 0) before the
    product, by the simulator (its quantisation config marks the tensor `qmode: symmetric` for
    that op) and by the NPU (a task of the op requantises it: OUT_CVT 32506 / 2^15 = s / s_sym
    for rk3566's Q; rknn-toolkit2 2.5.0, the transformer fixture), and exSDPAttention's Q K^T
    conversion is computed with Q's (`_int8_grids`). The range is the tensor's stored one
    (fields 8/9)."""
    if not t.has_range or max(abs(t.lo[0]), abs(t.hi[0])) <= 0:
        raise VendorFormatError(
            f"vendor .rknn model: int8 {n.op_type} '{n.name}': operand '{t.name}' stores no "
            "calibrated range"
        )
    return float(np.float32(max(abs(t.lo[0]), abs(t.hi[0]))) / np.float32(SYMMETRIC_LEVELS))


@OPS.register("exMatMul")
def matmul(b: GraphBuilder, n: Node) -> str:
    """exMatMul of two features A [N, S, 1, Wa] and B [N, S, 1, Wb]: out[n, i, 0, j] =
    sum_s A[n, s, 0, i] B[n, s, 0, j] (the contraction runs over the channels of both), times
    an optional scalar constant (a fused Mul). Seen as rk3566's attention (Q K^T, then P V),
    told apart with 12 tokens and head dim 16."""
    real = operands(b, n)
    feats = [t for t in real if t.kind not in CONST_KINDS]
    consts = [t for t in real if t.kind in CONST_KINDS]
    out = output(b, n)
    if len(feats) != 2 or len(consts) > 1 or any(len(t.shape) != 4 or t.shape[2] != 1
                                                 for t in feats) or \
            feats[0].shape[:2] != [feats[1].shape[0], feats[1].shape[1]] or \
            out.shape != [feats[0].shape[0], feats[0].shape[3], 1, feats[1].shape[3]]:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: exMatMul '{n.name}' with inputs {[t.shape for t in real]} "
            f"and output {out.shape} is not supported"
        )
    a, bb = (b.add("Reshape", [b.value(t), b.const(np.array([t.shape[0], t.shape[1], -1],
                                                             np.int64), "shape")], "mm_in")
             for t in feats)  # fmt: skip
    if b.quantized and feats[1].has_range:
        bb = b.on_grid(bb, symmetric_scale(n, feats[1]), 0, "mm_sym")
    y = b.add("MatMul", [b.add("Transpose", [a], "mm_t", perm=[0, 2, 1]), bb], "mm")
    if consts:
        factor = b.m.const(consts[0]).astype(np.float32).reshape(-1)
        if factor.size != 1:
            raise VendorFormatError(f"vendor .rknn model: exMatMul '{n.name}' has a non-scalar "
                                    "factor")  # fmt: skip
        y = b.add("Mul", [y, b.const(factor.reshape(()), "mm_s")], "mm_scaled")
    return b.add("Reshape", [y, b.const(np.array(out.shape, np.int64), "shape")], "mm_out")
