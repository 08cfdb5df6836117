"""model/numerics.py: each rounding rule on ties, negative values and saturation, and where
float32 and float64 division part. Expected values are worked out by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.model import numerics as nm

# x / s is exactly 94.5 in float32 but 94.50000207... in float64 (both are float32 numbers).
TIE_X, TIE_S = np.float32(6.104437351226807), np.float32(0.0645972192287445)


# -- rounding rules ------------------------------------------------------------------------------
def test_half_to_even_ties_go_to_the_even_neighbour():
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 0.49999997, 2.5000002], np.float32)
    assert nm.half_to_even(x).tolist() == [0, 2, 2, 4, 0, -2, -2, 0, 3]


def test_half_away_from_zero_ties_go_outwards():
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 0.4, -2.4999998, 1.4999999], np.float32)
    assert nm.half_away_from_zero(x).tolist() == [1, 2, 3, 4, -1, -2, -3, 0, -2, 1]


def test_half_away_from_zero_is_floor_of_magnitude_plus_half():
    # The largest float below 0.5 rounds to 1: |x| + 0.5 rounds up to 1.0 in x's own precision
    # (0.49999997 + 0.5 lies halfway between float32's 0.99999994 and 1.0); C's round() says 0.
    # The matmul API has always computed it so; the rule keeps it.
    below = np.array([np.nextafter(np.float32(0.5), np.float32(0))], np.float32)
    assert below[0] == np.float32(0.49999997) and nm.half_away_from_zero(below).tolist() == [1]
    below64 = np.array([np.nextafter(0.5, 0.0)])
    assert nm.half_away_from_zero(below64).tolist() == [1] and nm.half_to_even(below64)[0] == 0


def test_half_away_from_zero_keeps_the_sign_of_zero_and_writes_in_place():
    x = np.array([-0.25, 0.25, -7.5], np.float64)
    out = np.empty(3)
    assert nm.half_away_from_zero(x, out=out) is out
    assert out.tolist() == [0.0, 0.0, -8.0] and np.signbit(out).tolist() == [True, False, True]
    assert x.tolist() == [-0.25, 0.25, -7.5]  # the input is left alone


# -- quantise ------------------------------------------------------------------------------------
def test_quantize_rounds_ties_to_even_then_adds_the_zero_point():
    x = np.array([0.25, 0.75, 1.25, -0.25, -0.75, -1.25], np.float32)  # x / 0.5: +-0.5, 1.5, 2.5
    q = nm.quantize(x, 0.5, 3)
    assert q.dtype == np.int8 and q.tolist() == [3, 5, 5, 3, 1, 1]


def test_quantize_named_half_away_rounding_at_the_call():
    x = np.array([0.25, 0.75, 1.25, -0.25, -1.25], np.float32)
    assert nm.quantize(x, 0.5, 0, rounding=nm.half_away_from_zero).tolist() == [1, 2, 3, -1, -3]


def test_quantize_saturates_to_the_written_type():
    x = np.array([1000.0, -1000.0, np.inf, -np.inf, 63.4, -64.6], np.float32)
    assert nm.quantize(x, 0.5, 0).tolist() == [127, -128, 127, -128, 127, -128]
    u8 = np.empty(6, np.uint8)
    nm.quantize(x, 0.5, 128, out=u8)  # the range comes from `out`: 0..255
    assert u8.tolist() == [255, 0, 255, 0, 255, 0]
    bias = np.array([2.0**40, -(2.0**40), 2.5, -3.5])
    q32 = nm.quantize(bias, 1.0, division=nm.FLOAT64_DIVISION, dtype=np.int32)
    assert q32.dtype == np.int32 and q32.tolist() == [2**31 - 1, -(2**31), 2, -4]


def test_float32_and_float64_division_part_at_a_float32_tie():
    assert TIE_X / TIE_S == np.float32(94.5)  # the premise: float32's quotient is the tie
    assert 94.5 < float(TIE_X) / float(TIE_S) < 94.5001  # float64's lies just above it
    assert nm.quantize(np.array([TIE_X]), TIE_S).tolist() == [94]  # vendor: float32, even
    assert nm.quantize(np.array([TIE_X]), TIE_S, division=nm.FLOAT64_DIVISION).tolist() == [95]
    # a float64 x is divided in float32 all the same when the rule says so
    assert nm.quantize(np.array([TIE_X], np.float64), float(TIE_S)).tolist() == [94]


def test_quantize_per_channel_scales_and_zero_points_broadcast():
    w = np.array([[0.1, -0.1], [0.5, 1.0]], np.float32)
    scale = np.array([[0.1], [0.25]], np.float32)
    zp = np.array([[-1], [2]], np.int8)
    assert nm.quantize(w, scale, zp).tolist() == [[0, -2], [4, 6]]


def test_quantize_in_place_uses_the_work_array_and_leaves_x_alone_otherwise():
    x = np.array([0.75, -3.0, 100.0], np.float32)
    copy = x.copy()
    out = np.empty(3, np.int8)
    assert nm.quantize(x, 0.5, 0, out=out) is out and out.tolist() == [2, -6, 127]
    assert x.tolist() == copy.tolist()
    nm.quantize(x, 0.5, 0, work=x, out=out)  # x itself as the scratch: it holds the steps
    assert x.tolist() == [2.0, -6.0, 127.0] and out.tolist() == [2, -6, 127]


# -- dequantise, fake quantise, requantise ------------------------------------------------------
def test_dequantize_subtracts_the_zero_point_then_scales_in_float32():
    q = np.array([-128, 0, 127], np.int8)
    got = nm.dequantize(q, 0.1, -3)
    assert got.dtype == np.float32
    assert got.tolist() == [np.float32(-125) * np.float32(0.1), np.float32(3) * np.float32(0.1),
                            np.float32(130) * np.float32(0.1)]  # fmt: skip
    wide = nm.dequantize(q, 0.1, -3, precision=np.float64)
    assert wide.dtype == np.float64 and wide.tolist() == [-125 * 0.1, 3 * 0.1, 130 * 0.1]


def test_dequantize_broadcasts_per_channel_parameters_and_takes_scalars():
    q = np.array([[-128, 0], [5, 127]], np.int8)
    got = nm.dequantize(q, np.array([[0.5], [0.25]], np.float32), np.array([[1], [-1]]))
    assert got.dtype == np.float32 and got.tolist() == [[-64.5, -0.5], [1.5, 32.0]]
    wide = nm.dequantize(q[:1], np.array([0.5, 2.0, 4.0]).reshape(3, 1, 1), 0)  # grows
    assert wide.shape == (3, 1, 2) and wide[:, 0, 0].tolist() == [-64.0, -256.0, -512.0]
    assert nm.dequantize(np.int8(7), 0.5, 1) == np.float32(3.0)  # a scalar in, a scalar out
    assert nm.dequantize(7, 0.5, 1).dtype == np.float32


def test_dequantize_into_an_output_array():
    q = np.array([1, 2, 3], np.uint8)
    out = np.empty(3, np.float32)
    assert nm.dequantize(q, 0.5, 2, out=out) is out and out.tolist() == [-0.5, 0.0, 0.5]


def test_fake_quantize_gives_the_grid_value_and_saturates():
    x = np.array([0.26, -0.74, 100.0, -100.0], np.float32)
    got = nm.fake_quantize(x, 0.5, 0)
    assert got.dtype == np.float32 and got.tolist() == [0.5, -0.5, 63.5, -64.0]
    assert nm.fake_quantize(got, 0.5, 0).tolist() == got.tolist()  # on the grid already


def test_requantize_needs_its_rounding_named():
    steps = np.array([2.5, -2.5, 126.5, 200.0, -200.0])
    with pytest.raises(TypeError):
        nm.requantize(steps, 0)  # type: ignore[call-arg]
    assert nm.requantize(steps, 1, rounding=nm.half_away_from_zero).tolist() == [4, -2, 127, 127,
                                                                                  -128]  # fmt: skip
    assert nm.requantize(steps, 1, rounding=nm.half_to_even).tolist() == [3, -1, 127, 127, -128]
    assert steps.tolist() == [2.5, -2.5, 126.5, 200.0, -200.0]


def test_requantize_an_integer_accumulator_rounds_in_float64():
    assert nm.requantize(np.array([5, -300], np.int64), 0, rounding=nm.half_to_even).tolist() == [
        5, -128]  # fmt: skip


# -- zero point, scale and range ------------------------------------------------------------------
def test_zero_point_rounds_a_tie_half_to_even_in_float64():
    # lo / scale = -1.25 / 0.5 = -2.5 exactly: half to even -> -2, zp = -128 + 2
    assert nm.zero_point(-1.25, 0.5) == -126
    assert nm.zero_point(-0.75, 0.5) == -126  # -1.5 -> -2
    assert nm.zero_point(0.0, 0.5) == -128
    assert nm.zero_point(-1000.0, 0.5) == 127  # saturated


def test_affine_params_widen_the_range_to_hold_zero():
    assert nm.affine_params(-1.25, 126.25) == (0.5, -126)
    assert nm.affine_params(0.5, 2.0) == (2.0 / 255, -128)  # lo widened to 0
    assert nm.affine_params(-2.0, -0.5) == (2.0 / 255, 127)  # hi widened to 0


def test_represented_range_is_the_two_int8_ends():
    assert nm.represented_range(0.5, -126) == (-1.0, 126.5)
    assert nm.represented_range(0.5, 0) == (-64.0, 63.5)


# -- the sites' former expressions, bit for bit ---------------------------------------------------
def _tie_heavy(seed: int) -> tuple[np.ndarray, float]:
    """float32 values on ties of a float32 scale, their float32 neighbours, random values,
    infinities and signed zeros."""
    rng = np.random.default_rng(seed)
    scale = np.float32(rng.uniform(0.001, 0.2))
    ties = ((rng.integers(-300, 300, 5000) + 0.5) * np.float64(scale)).astype(np.float32)
    up, down = np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))
    extra = np.array([np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30], np.float32)
    x = np.concatenate([ties, up, down, rng.normal(0, 10, 5000).astype(np.float32), extra])
    return x, float(scale)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_former_inline_expressions_give_the_same_bits(seed):
    x, s = _tie_heavy(seed)
    zp = [-128, -3, 0, 77][seed]
    # toolkit/accuracy, evaluation/drift, quantize/hybrid, vendor_diff.compare
    assert _same_bits(
        nm.quantize(x, s, zp), np.clip(np.round(x / s) + zp, -128, 127).astype(np.int8)
    )
    # core/io/plans: in place in float32
    t = x.copy()
    np.divide(t, s, out=t)
    np.rint(t, out=t)
    t += zp
    np.clip(t, -128, 127, out=t)
    work, out = x.copy(), np.empty(x.shape, np.int8)
    nm.quantize(work, s, zp, work=work, out=out)
    assert _same_bits(work, t) and _same_bits(out, t.astype(np.int8))
    # calibrate's mmse error and accuracy's fake quantisation
    q = np.clip(np.round(x / s) + zp, -128, 127)
    assert _same_bits(nm.fake_quantize(x, s, zp), ((q - zp) * s).astype(np.float32))
    # the qdq bias (float64 x, float32 scale, float64 division) and the float64 alternative
    wide = x.astype(np.float64) * 1e4
    bias = np.clip(np.round(wide / np.float32(s)), -(2**31), 2**31 - 1).astype(np.int32)
    got = nm.quantize(wide, np.float32(s), division=nm.FLOAT64_DIVISION, dtype=np.int32)
    assert _same_bits(got, bias)
    # matmul's C: half away from zero on float64 sums
    sums = x.astype(np.float64) / s
    away = np.copysign(np.floor(np.abs(sums) + 0.5), sums)
    assert _same_bits(nm.requantize(sums, float(zp), rounding=nm.half_away_from_zero),
                      np.clip(away + zp, -128, 127).astype(np.int8))  # fmt: skip
    # conversions / segmented dequantisation
    qi = out
    assert _same_bits(nm.dequantize(qi, s, zp), (qi.astype(np.float32) - zp) * np.float32(s))
