"""The int8 numerics, defined once: quantise, dequantise, requantise, the zero point and the
rounding rules. The runtime, the converter, the vendor reader, the matmul API, evaluation and
the accuracy analysis all call these, so "where does int8 rounding happen?" has one answer.

The affine grid: q = clip(round(x / scale) + zp, qmin, qmax) and x' = (q - zp) * scale.
What differs from one place to another is named at the call, never left to numpy's dtype rules:

- the rounding: `half_to_even` (IEEE nearest-even: the NPU's tensors, onnxruntime's
  QuantizeLinear, the vendor simulator) or `half_away_from_zero` (C's round(): the matmul API's
  int8 C and its renormalised B);
- the precision of the division: `FLOAT32_DIVISION` (x and scale as float32, what the vendor
  simulator and onnxruntime compute; it decides values within a float32 rounding of a .5 tie)
  or `FLOAT64_DIVISION` (int32 biases; the float64 alternative tools/vendor_diff measures);
- the target type's range (saturation), from the integer dtype written.

Each function keeps one fixed order of operations (divide, round, add zp, saturate; subtract
zp, multiply), so a caller gets the same bits whether it passes arrays or writes in place.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# The precision a quantisation divides in (x and scale converted to it first).
FLOAT32_DIVISION = np.float32  # the vendor's: NPU, simulator, onnxruntime's QuantizeLinear
FLOAT64_DIVISION = np.float64
INT8_MIN, INT8_MAX = -128, 127
LEVELS = INT8_MAX - INT8_MIN  # 255 steps between the ends of an int8 range

Rounding = Callable[..., np.ndarray]


# -- rounding rules ------------------------------------------------------------------------------
def half_to_even(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Round to the nearest integer, ties to even (IEEE; numpy's rint and round)."""
    return np.rint(x, out=out)


def half_away_from_zero(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Round to the nearest integer, ties away from zero, as floor(|x| + 0.5) with x's sign in
    x's own precision (so the largest float below 0.5 gives 1 where C's round() gives 0)."""
    magnitude = np.abs(x)
    magnitude += 0.5
    np.floor(magnitude, out=magnitude)
    return np.copysign(magnitude, x, out=out)


# -- the affine grid -----------------------------------------------------------------------------
_LIMITS: dict[np.dtype, tuple[int, int]] = {}  # np.iinfo per integer dtype (it costs ~3 us)


def _saturate(steps: np.ndarray, zp, rounding: Rounding, target: np.dtype) -> np.ndarray:
    """`steps` (float, owned by the caller) rounded, shifted by zp and clipped to `target`'s
    range, in place."""
    limits = _LIMITS.get(target)
    if limits is None:
        info = np.iinfo(target)
        limits = _LIMITS[target] = (int(info.min), int(info.max))
    lo, hi = limits
    rounding(steps, out=steps)
    # a Python number converts to steps' type inside the ufunc, as np.asarray would (cheaper)
    np.add(steps, zp if type(zp) in (int, float) else np.asarray(zp, steps.dtype), out=steps)
    np.clip(steps, lo, hi, out=steps)
    return steps


def _grid(x, scale, zp, division, rounding: Rounding, target: np.dtype,
          work: np.ndarray | None) -> np.ndarray:  # fmt: skip
    """round(x / scale) + zp saturated to `target`, still as floats of `division`."""
    if work is None:
        x = np.asarray(x, division)
    # a Python float converts to x's type inside the ufunc when x is already of `division`
    s = scale if type(scale) is float and x.dtype.type is division else np.asarray(scale, division)
    # `work`: the caller's scratch of `division` (possibly x itself)
    steps = np.divide(x, s, out=work)
    return _saturate(steps, zp, rounding, target)


def quantize(
    x,
    scale,
    zp=0,
    *,
    division: type = FLOAT32_DIVISION,
    rounding: Rounding = half_to_even,
    dtype=np.int8,
    out: np.ndarray | None = None,
    work: np.ndarray | None = None,
) -> np.ndarray:
    """clip(rounding(x / scale) + zp) as `dtype` (or into `out`, whose dtype then decides the
    range): x and scale converted to `division` before dividing. `scale` and `zp` may be arrays
    that broadcast with x (per channel). `work`: a scratch array of `division` and x's shape
    (x itself to convert in place), so that a hot path allocates nothing."""
    target = np.dtype(dtype) if out is None else out.dtype
    steps = _grid(x, scale, zp, division, rounding, target, work)
    if out is None:
        return steps.astype(target)
    np.copyto(out, steps, casting="unsafe")
    return out


def dequantize(q, scale, zp=0, *, precision: type = np.float32,
               out: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """(q - zp) * scale, both steps in `precision` (float32: the runtime's and the NPU's; the
    subtraction is exact for int8 and int32-range zero points). `out`: written in place (the
    subtraction cast into it first, then multiplied there)."""
    z, s = np.asarray(zp, precision), np.asarray(scale, precision)
    if out is None:
        steps = np.subtract(q, z, dtype=precision)  # q converted to `precision` first
        if s.ndim == 0 and isinstance(steps, np.ndarray):  # scaled where it lies
            return np.multiply(steps, s, out=steps)
        return steps * s
    np.subtract(q, z, out=out, casting="unsafe")
    np.multiply(out, s, out=out)
    return out


def fake_quantize(x, scale, zp=0, *, division: type = FLOAT32_DIVISION,
                  rounding: Rounding = half_to_even) -> np.ndarray:  # fmt: skip
    """The value x takes on the int8 grid: dequantize(quantize(x)), without the integer copy."""
    steps = _grid(x, scale, zp, division, rounding, np.dtype(np.int8), None)
    return dequantize(steps, scale, zp, precision=steps.dtype.type)


def requantize(steps: np.ndarray, zp=0, *, rounding: Rounding, dtype=np.int8) -> np.ndarray:
    """clip(rounding(steps) + zp) as `dtype`, where `steps` is already in the output's units
    (an accumulator times its multiplier), computed in steps' float type (float64 for an
    integer accumulator); `rounding` has no default: each caller names its hardware's rule."""
    work = np.array(steps, dtype=np.result_type(steps, 0.5))
    return _saturate(work, zp, rounding, np.dtype(dtype)).astype(dtype)


# -- zero point and scale ------------------------------------------------------------------------
def zero_point(lo: float, scale: float) -> int:
    """The zero point that puts `lo` on -128: -128 - round(lo / scale), the division in float64
    (Python floats), half to even, saturated to int8 (the vendor's 'normal' rule)."""
    return int(np.clip(INT8_MIN - half_to_even(float(lo) / float(scale)), INT8_MIN, INT8_MAX))


def widened(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] widened to hold 0 (an affine int8 range always represents 0 exactly)."""
    return min(float(lo), 0.0), max(float(hi), 0.0)


def affine_params(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zp) of the range [lo, hi] widened to hold 0: scale = (hi - lo) / 255 and
    zero_point(lo, scale), in float64. The caller rejects an empty range first."""
    lo, hi = widened(lo, hi)
    scale = (hi - lo) / float(LEVELS)
    return scale, zero_point(lo, scale)


def represented_range(scale: float, zp: int) -> tuple[float, float]:
    """The real values of int8's two ends, -128 and 127, under (scale, zp)."""
    return (INT8_MIN - zp) * scale, (INT8_MAX - zp) * scale
