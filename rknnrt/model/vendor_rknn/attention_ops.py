"""Attention: the compiler's fused exSDPAttention (softmax(Q K^T s) V) and exMatMul.

exSDPAttention's three inputs are Q, K and V, each [heads, head dim, 1, tokens] (the compiler
keeps a transformer's features on the channels and its tokens on the width). The scale s is not an
attribute: rk3588/rk3562 program it as float16 in bits 31:16 of register 0x4068 of the op's
tasks (the one non-zero value they write there), rk3576/rv1126b as float16 word 0 of the
constant `<output>_qk_conv_mul_add_output_BNcfgTensor` (inferred from toolkit 2.5.0 builds
with s = 1/4 and 0.3). Where 1/sqrt(head dim)
rounds to the stored float16, that exact value is used (the usual scale).
"""

from __future__ import annotations

import numpy as np

from ..errors import VendorFormatError
from .decoders import OpTable
from .fileformat import CONST_KINDS, Node
from .graph import GraphBuilder, operands, output

OPS = OpTable()
SCALE_REG = {"RKNPU v2": 0x4068, "RKNPU t4": 0x4068}
SCALE_CFG_SUFFIX = "_qk_conv_mul_add_output_BNcfgTensor"
SCALE_CFG_FORMATS = ("RKNPU f2", "RKNPU f3")


def _scale(b: GraphBuilder, n: Node, head_dim: int) -> float:
    fmt = b.m.npu_format
    half = None
    if fmt in SCALE_REG:
        written = {v >> 16 for v in b.registers().register_values(n, SCALE_REG[fmt])} - {0}
        half = written.pop() if len(written) == 1 else None
    elif fmt in SCALE_CFG_FORMATS:
        name = output(b, n).name + SCALE_CFG_SUFFIX
        cfg = next((t for t in b.m.tensors if t.name == name), None)
        raw = bytes(b.m.data(cfg)) if cfg is not None else b""
        half = int(np.frombuffer(raw, "<u2", 1)[0]) if len(raw) >= 2 else None
    scale = float(np.array(half or 0, np.uint16).view(np.float16))
    if not (np.isfinite(scale) and scale > 0):
        raise VendorFormatError(
            f"vendor .rknn model: the scale of exSDPAttention '{n.name}' ({fmt}) is not decoded"
        )
    usual = head_dim**-0.5
    return usual if float(np.float16(usual)) == scale else scale


@OPS.register("exSDPAttention")
def attention(b: GraphBuilder, n: Node) -> str:
    real = operands(b, n)
    if len(real) != 3 or any(len(t.shape) != 4 or t.shape[2] != 1 for t in real) or \
            real[0].shape != real[1].shape or real[0].shape[:2] != real[2].shape[:2]:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: exSDPAttention '{n.name}' with inputs "
            f"{[t.shape for t in real]} is not supported"
        )
    q, k, v = (b.value(t) for t in real)
    scale = _scale(b, n, real[0].shape[1])
    # [H, D, 1, T] -> [H, 1, T, D]
    qt, vt = (b.add("Transpose", [x], "tok", perm=[0, 2, 3, 1]) for x in (q, v))
    kt = b.add("Transpose", [k], "kt", perm=[0, 2, 1, 3])  # [H, 1, D, T]
    scores = b.add("Mul", [b.add("MatMul", [qt, kt], "qk"),
                           b.const(np.array(scale, np.float32), "s")], "scores")  # fmt: skip
    probs = b.add("Softmax", [scores], "attn", axis=-1)
    y = b.add("MatMul", [probs, vt], "pv")  # [H, 1, T, D]
    return b.add("Transpose", [y], "back", perm=[0, 3, 1, 2])


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
    y = b.add("MatMul", [b.add("Transpose", [a], "mm_t", perm=[0, 2, 1]), bb], "mm")
    if consts:
        factor = b.m.const(consts[0]).astype(np.float32).reshape(-1)
        if factor.size != 1:
            raise VendorFormatError(f"vendor .rknn model: exMatMul '{n.name}' has a non-scalar "
                                    "factor")  # fmt: skip
        y = b.add("Mul", [y, b.const(factor.reshape(()), "mm_s")], "mm_scaled")
    return b.add("Reshape", [y, b.const(np.array(out.shape, np.int64), "shape")], "mm_out")
