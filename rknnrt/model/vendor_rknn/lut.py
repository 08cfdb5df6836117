"""DPU lookup tables of fused int8 activations (ConvSigmoid, ConvExSwish, ConvExGelu,
ConvHardSwish, ConvHardSigmoid).

The compiler uploads the activation as a table in a task of its own (LUT_ACCESS_CFG 0x20000,
then 513 LE entries for LUT inputs x in [LE_START, 0] = [-2^14, 0]; 0x30000, then 513 LO
entries for [0, 2^14]); the convolution task then feeds the table x = acc x C / 2^14 x the BN
multiplier (plus an addend: `bn_addend`). Each activation has one fixed table, whatever the
layer or its calibration (toolkit 2.5.0, every fixture and probe on all five platforms): the
table covers z = x Z / 2^14 for the activation's own span Z and holds round(32767 f(z) /
f(Z)) (sigmoid: round(32767 f(z)); HardSwish and HardSigmoid: 2^15 / 3 hswish(z) and 2^15
hsig(z), clamped to 32767). So the real pre-activation value of one unit of x is Z / 2^14; a
table that is not the known one is refused (docs/vendor-rknn.md, "Lookup tables").
"""

from __future__ import annotations

import math

import numpy as np

LUT_ACCESS_CFG, LUT_ACCESS_DATA, LUT_LE_START = 0x4100, 0x4104, 0x4110
# The BN multiplier (operand in bits 31:16, shift in bits 13:8) in front of the table.
BN_MUL_CFG = {"RKNPU v2": 0x4068, "RKNPU lite": 0x4068, "RKNPU t4": 0x4068, "RKNPU t3": 0x4068}
# rk3576 keeps it in a constant '<conv output>_BnCfg_BNcfgTensor' instead: u16 word 16 is the
# operand, word 24 the shift configuration (0x1010: shift in bits 13:8, as BN_MUL_CFG).
BN_CFG_SUFFIX, BN_CFG_OPERAND, BN_CFG_SHIFT = "_BnCfg_BNcfgTensor", 16, 24
# The BN addend (int32): rk3588/rk3566 add it after the multiplier (in units of 2^-shift of
# x), rk3562 before it (0x4064), rk3576 before it too, as u32 word 0 of the BnCfg constant.
BN_ALU_CFG = 0x4064
ADD_AFTER = ("RKNPU v2", "RKNPU lite")
ENTRIES = 513
LE_START = -(1 << 14)
TOP = 32767  # the largest table value


def _erf(z: np.ndarray) -> np.ndarray:
    return np.array([math.erf(v) for v in np.ravel(z)]).reshape(np.shape(z))


def _hsig(z: np.ndarray) -> np.ndarray:
    return np.clip(z / 6 + 0.5, 0, 1)


def _scaled(f, span: float):
    """The table of a function normalised at its span: 32767 f(z) / f(span), rounded."""
    return lambda z: np.round(TOP * f(z) / f(np.float64(span)))


# activation -> (span Z: x = 2^14 is z = Z, table values of z)
TABLES = {
    "Sigmoid": (6.31, lambda z: np.round(TOP / (1 + np.exp(-z)))),
    "ExSwish": (5.8, _scaled(lambda z: z / (1 + np.exp(-z)), 5.8)),
    "ExGelu": (2 * math.sqrt(2), _scaled(lambda z: z / 2 * (1 + _erf(z / math.sqrt(2))),
                                         2 * math.sqrt(2))),  # fmt: skip
    "HardSwish": (3.0, lambda z: np.minimum(np.round(2**15 / 3 * z * _hsig(z)), TOP)),
    "HardSigmoid": (3.0, lambda z: np.minimum(np.round(2**15 * _hsig(z)), TOP)),
}


def is_upload(entries: list[int]) -> bool:
    return sum(e & 0xFFFF == LUT_ACCESS_DATA for e in entries) > 2


def uploaded_le_table(regs: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """The LE table a task uploads, or None (rk3566 uploads LE and LO in two tasks). `regs`,
    `values`: the task's commands split (register, 32-bit value), as integer arrays. The data
    writes that count are those after a LUT_ACCESS_CFG of 0x20000 (until the next CFG), the
    first ENTRIES of them; one array pass, not a loop over the ~1,100 commands of a task."""
    regs, values = np.asarray(regs, np.int64), np.asarray(values, np.int64)
    at = np.arange(regs.size)
    cfg = regs == LUT_ACCESS_CFG
    # each command's latest CFG command (-1: none yet) decides whether data writes count
    latest = np.maximum.accumulate(np.where(cfg, at, -1)) if regs.size else at
    writing = (latest >= 0) & (values[np.maximum(latest, 0)] == 0x20000)
    table = values[(regs == LUT_ACCESS_DATA) & writing][:ENTRIES]
    if table.size != ENTRIES:
        return None
    return np.where(table >= 1 << 31, table - (1 << 32), table).astype(np.float64)


def table_step(kind: str, le: np.ndarray, start: int) -> float | None:
    """Z / 2^14, the real value of one unit of the table's input, if `le` is the known LE
    table of `kind` (every entry within one; the first, x = -2^14, is not compared: GELU's
    holds -1 there); else None."""
    if kind not in TABLES or start != LE_START or le.shape != (ENTRIES,):
        return None
    span, values = TABLES[kind]
    z = np.linspace(-span, 0.0, ENTRIES)
    return span / 2**14 if np.abs(values(z)[1:] - le[1:]).max() <= 1 else None


def _operand_shift(regs: dict[int, int], npu_format: str,
                   bn_cfg: bytes | None) -> tuple[int, int] | None:  # fmt: skip
    mul_reg = BN_MUL_CFG.get(npu_format)
    if mul_reg is not None and mul_reg in regs:
        mul = regs[mul_reg]
        return mul >> 16, (mul >> 8) & 0x3F
    if npu_format == "RKNPU f2" and bn_cfg is not None and len(bn_cfg) >= 2 * BN_CFG_SHIFT + 2:
        words = np.frombuffer(bn_cfg, "<u2", BN_CFG_SHIFT + 1)
        return int(words[BN_CFG_OPERAND]), (int(words[BN_CFG_SHIFT]) >> 8) & 0x3F
    return None


def bn_multiplier(regs: dict[int, int], npu_format: str,
                  bn_cfg: bytes | None) -> float | None:  # fmt: skip
    """The BN multiplier feeding the table: from the BN_MUL_CFG register, or on rk3576 from
    the output's BnCfg constant; None where neither holds it."""
    found = _operand_shift(regs, npu_format, bn_cfg)
    return found[0] / 2.0**found[1] if found is not None and found[0] else None


def bn_addend(regs: dict[int, int], npu_format: str, bn_cfg: bytes | None) -> float | None:
    """The BN addend in units of the table's input x (0 where none is programmed), or None
    where the multiplier is not found."""
    found = _operand_shift(regs, npu_format, bn_cfg)
    if found is None or not found[0]:
        return None
    operand, shift = found
    if npu_format in BN_MUL_CFG:
        raw = regs.get(BN_ALU_CFG, 0)
    elif bn_cfg is not None and len(bn_cfg) >= 4:
        raw = int(np.frombuffer(bn_cfg, "<u4", 1)[0])
    else:
        return None
    value = raw - (1 << 32) if raw >= 1 << 31 else raw
    return value / 2.0**shift if npu_format in ADD_AFTER else value * operand / 2.0**shift


def input_scale(regs: dict[int, int], table: np.ndarray, kind: str,
                multiplier: float | None) -> float | None:  # fmt: skip
    """The real pre-activation value of one unit of acc x C / 2^14 (BN multiplier x the
    table's input step), or None where the multiplier or the table do not decode."""
    if multiplier is None:
        return None
    start = regs.get(LUT_LE_START, 0)
    start = start - (1 << 32) if start >= 1 << 31 else start
    step = table_step(kind, table, start)
    return None if step is None else multiplier * step
