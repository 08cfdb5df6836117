"""DPU lookup tables of fused int8 activations (ConvSigmoid, ConvExSwish; rk3588/rk3566).

The compiler uploads the activation as a table in a task of its own (LUT_ACCESS_CFG 0x20000,
then 513 LE entries for LUT inputs x in [LE_START, 0]; 0x30000, then 513 LO entries for
[0, LO_END]); the convolution task then feeds the table x = acc x C / 2^14 x the BN multiplier.
The table holds f(x s) for one input step s per unit of x: sigmoid as floor(2^15 sigmoid),
swish as round(K swish) with a second constant K. Neither s nor K is stored; both are fitted
here and the table is accepted only if every entry is within one of the fit
(docs/vendor-rknn.md, "Lookup tables").
"""

from __future__ import annotations

import numpy as np

LUT_ACCESS_CFG, LUT_ACCESS_DATA, LUT_LE_START = 0x4100, 0x4104, 0x4110
# The BN multiplier (operand in bits 31:16, shift in bits 13:8) in front of the table.
BN_MUL_CFG = {"RKNPU v2": 0x4068, "RKNPU lite": 0x4068}
# rk3576 keeps it in a constant '<conv output>_BnCfg_BNcfgTensor' instead: u16 word 16 is the
# operand, word 24 the shift configuration (0x1010: shift in bits 13:8, as BN_MUL_CFG).
BN_CFG_SUFFIX, BN_CFG_OPERAND, BN_CFG_SHIFT = "_BnCfg_BNcfgTensor", 16, 24
ENTRIES = 513
ONE = 32768  # sigmoid table value of 1.0
SWISH_MIN_AT, SWISH_MIN = -1.2784645, -0.2784645  # argmin and min of z sigmoid(z)


def is_upload(entries: list[int]) -> bool:
    return sum(e & 0xFFFF == LUT_ACCESS_DATA for e in entries) > 2


def uploaded_le_table(entries: list[int]) -> np.ndarray | None:
    """The LE table a task uploads, or None (rk3566 uploads LE and LO in two tasks)."""
    table: list[int] = []
    writing = False
    for entry in entries:
        reg, value = entry & 0xFFFF, (entry >> 16) & 0xFFFFFFFF
        if reg == LUT_ACCESS_CFG:
            writing = value == 0x20000
        elif reg == LUT_ACCESS_DATA and writing and len(table) < ENTRIES:
            table.append(value - (1 << 32) if value >= 1 << 31 else value)
    return np.array(table, np.float64) if len(table) == ENTRIES else None


def _inputs(start: int) -> np.ndarray:
    return start + np.arange(ENTRIES) * (-start / (ENTRIES - 1))


def sigmoid_step(le: np.ndarray, start: int) -> float | None:
    """s of le[i] = floor(2^15 sigmoid(x_i s)), x_i = start .. 0; None if no such s fits."""
    if start >= 0:
        return None
    x = _inputs(start)
    mid = (le > 0.02 * ONE) & (le < 0.98 * ONE) & (x != 0)
    if mid.sum() < 16:
        return None
    p = (le[mid] + 0.5) / ONE
    s = float(np.median(np.log(p / (1 - p)) / x[mid]))
    fit = np.floor(ONE / (1 + np.exp(-x * s)))
    return s if s > 0 and np.abs(fit - le).max() <= 1 else None


def swish_step(le: np.ndarray, start: int) -> float | None:
    """s of le[i] = round(K swish(x_i s)) for some K; None if no such (s, K) fits. The table's
    minimum sits at z = -1.278: a first s, refined on a grid of +-5%."""
    if start >= 0 or le.min() >= 0:
        return None
    x = _inputs(start)
    first = SWISH_MIN_AT / x[int(np.argmin(le))]
    best: tuple[float, float] | None = None
    for s in first * np.linspace(0.95, 1.05, 1001):
        z = x * s
        f = z / (1 + np.exp(-z))
        k = float(f @ le / (f @ f))
        err = float(np.abs(np.round(k * f) - le).max())
        if best is None or err < best[0]:
            best = (err, float(s))
    return best[1] if best is not None and best[0] <= 1 else None


STEP = {"Sigmoid": sigmoid_step, "ExSwish": swish_step}


def bn_multiplier(regs: dict[int, int], npu_format: str,
                  bn_cfg: bytes | None) -> float | None:  # fmt: skip
    """The BN multiplier feeding the table: from the BN_MUL_CFG register, or on rk3576 from
    the output's BnCfg constant; None where neither holds it."""
    mul_reg = BN_MUL_CFG.get(npu_format)
    if mul_reg is not None and mul_reg in regs:
        mul = regs[mul_reg]
        operand, shift = mul >> 16, (mul >> 8) & 0x3F
    elif npu_format == "RKNPU f2" and bn_cfg is not None and len(bn_cfg) >= 2 * BN_CFG_SHIFT + 2:
        words = np.frombuffer(bn_cfg, "<u2", BN_CFG_SHIFT + 1)
        operand, shift = int(words[BN_CFG_OPERAND]), (int(words[BN_CFG_SHIFT]) >> 8) & 0x3F
    else:
        return None
    return operand / 2.0**shift if operand else None


def input_scale(regs: dict[int, int], table: np.ndarray, kind: str,
                multiplier: float | None) -> float | None:  # fmt: skip
    """The real pre-activation value of one unit of acc x C / 2^14 (BN multiplier x the
    table's input step), or None where the multiplier or the table do not decode."""
    if multiplier is None or kind not in STEP:
        return None
    start = regs.get(LUT_LE_START, 0)
    start = start - (1 << 32) if start >= 1 << 31 else start
    step = fitted_step(kind, table, start)
    return None if step is None else multiplier * step


# The compiler uploads the same table for every layer of a kind (effnet: 6 uploads, 2 tables)
# and a swish fit costs tens of ms: each distinct table is fitted once per process.
_FITTED: dict[tuple[str, int, bytes], float | None] = {}
MAX_FITTED = 64


def fitted_step(kind: str, table: np.ndarray, start: int) -> float | None:
    """STEP[kind](table, start), remembered (a pure function of its arguments)."""
    key = (kind, start, table.tobytes())
    if key not in _FITTED:
        if len(_FITTED) >= MAX_FITTED:
            _FITTED.clear()
        _FITTED[key] = STEP[kind](table, start)
    return _FITTED[key]
