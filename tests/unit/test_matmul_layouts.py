"""Matmul layouts, element encodings and platform facts, against hand-made tables.

Expected values are written out here from the sources (UG Table 3-5, the index formulas of facts
§5.11, the header's K-split example), never computed with the functions under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.core import platforms
from rknnrt.core.matmul import engine as mm
from rknnrt.core.matmul import layouts as lay


# -- int4 ---------------------------------------------------------------------------------
def test_int4_even_index_goes_to_the_low_nibble():
    assert lay.pack_int4(np.array([1, -1, 7, -8, 3])).tolist() == [0xF1, 0x87, 0x03]


def test_int4_unpack_sign_extends():
    assert lay.unpack_int4(np.array([0xF1, 0x87, 0x03], np.uint8), 5).tolist() == [1, -1, 7, -8, 3]


def test_int4_round_trip_every_value():
    values = np.tile(np.arange(-8, 8), 3)
    assert lay.unpack_int4(lay.pack_int4(values), values.size).tolist() == values.tolist()


@pytest.mark.parametrize("dtype, count, size", [("int4", 5, 3), ("int4", 64, 32), ("int8", 5, 5),
                                                ("float16", 5, 10), ("int32", 3, 12)])  # fmt: skip
def test_nbytes(dtype, count, size):
    assert lay.nbytes(count, dtype) == size


# -- perf layout (native A and C) ---------------------------------------------------------------
def test_perf_layout_of_a_small_matrix():
    """A [2, 5] with sub 4 -> [2, 2, 4]: block 0 holds k 0..3 of both rows, block 1 k 4 + pad."""
    a = np.arange(10).reshape(2, 5)  # a[m, k] = 5m + k
    expected = [0, 1, 2, 3, 5, 6, 7, 8, 4, 0, 0, 0, 9, 0, 0, 0]
    assert lay.to_perf(a, 4).tolist() == expected
    assert lay.perf_dims(2, 5, 4) == [2, 2, 4]
    assert lay.from_perf(np.array(expected), 2, 5, 4).tolist() == a.tolist()


def test_perf_layout_matches_the_index_formula():
    rows, cols, sub = 7, 45, 16
    x = np.arange(rows * cols).reshape(rows, cols) + 1
    flat = lay.to_perf(x, sub)
    for r in range(rows):
        for c in range(cols):
            assert flat[(c // sub) * rows * sub + r * sub + c % sub] == x[r, c]
    assert np.count_nonzero(flat) == rows * cols  # padding is zero


# -- native B ------------------------------------------------------------------------------
def test_native_b_of_a_small_matrix():
    """B [3, 3] with subN 2, subK 2 -> [2, 2, 2, 2]; each subK run is one n's consecutive k."""
    b = np.arange(1, 10).reshape(3, 3)  # b[k, n] = 3k + n + 1
    expected = [1, 4, 2, 5,  7, 0, 8, 0,  3, 6, 0, 0,  9, 0, 0, 0]  # fmt: skip
    assert lay.to_native_b(b, 2, 2, None).tolist() == expected
    assert lay.native_b_dims(3, 3, 2, 2) == [2, 2, 2, 2]
    assert lay.from_native_b(np.array(expected), 3, 3, 2, 2, None).tolist() == b.tolist()


@pytest.mark.parametrize("k, segment", [(70, None), (100, 64), (128, 64), (129, 64)])
def test_native_b_matches_the_index_formula(k, segment):
    n, sub_n, sub_k = 37, 16, 32
    b = np.arange(k * n).reshape(k, n) + 1
    flat = lay.to_native_b(b, sub_n, sub_k, segment)
    n1 = -(-n // sub_n)
    offset, starts = 0, list(range(0, k, segment)) if segment and k > segment else [0]
    for start in starts:
        stop = min(start + segment, k) if segment and k > segment else k
        k1 = -(-(stop - start) // sub_k)
        for kk in range(start, stop):
            for nn in range(n):
                local = kk - start
                index = ((nn // sub_n * k1 + local // sub_k) * sub_n + nn % sub_n) * sub_k
                assert flat[offset + index + local % sub_k] == b[kk, nn]
        offset += n1 * k1 * sub_n * sub_k
    assert flat.size == offset and np.count_nonzero(flat) == k * n
    assert np.array_equal(lay.from_native_b(flat, k, n, sub_n, sub_k, segment), b)


def test_k_segments_follow_the_header_example():
    """H / UG 3.5.4.1, RK3576: K = 10240 with 4096-row segments -> 4096, 4096, 2048."""
    assert lay.k_segments(10240, 4096) == [(0, 4096), (4096, 8192), (8192, 10240)]
    assert lay.k_segments(4096, 4096) == [(0, 4096)]
    assert lay.k_segments(20488, 8192) == [(0, 8192), (8192, 16384), (16384, 20488)]


# -- element encodings of C -------------------------------------------------------------------
def test_int8_output_rounds_half_away_from_zero_and_saturates():
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 126.6, 127.5, -128.7, 1000.0, -1e9])
    assert lay.to_dtype(values, "int8").tolist() == [1, 2, 3, -1, -2, 127, 127, -128, 127, -128]
    assert lay.to_dtype(np.array([10.4, 120.0]), "int8", zp=-3).tolist() == [7, 117]


def test_integer_outputs_saturate():
    assert lay.to_dtype(np.array([40000.0, -40000.0, 5.0]), "int16").tolist() == [32767, -32768, 5]
    assert lay.to_dtype(np.array([2.0**40, -(2.0**40)]), "int32").tolist() == [2**31 - 1, -(2**31)]


def test_float16_output_is_ieee_round_to_nearest_even():
    values = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 70000.0, -70000.0], np.float32)
    got = lay.to_dtype(values, "float16")
    assert got.tolist() == [1.0, 1 + 2.0**-9, np.inf, -np.inf]


def test_fast_half_is_numpys_conversion_bit_for_bit():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.array([65504, 65519.99, 65520, 1e9, -np.inf, 0.0, -0.0, 2.0**-25, 2.0**-24,
                      3 * 2.0**-26, 6.1e-5, 1 + 2.0**-11], np.float32)  # fmt: skip
    values = np.concatenate([values, edges]).reshape(2, -1)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = values.astype(np.float16)
    got = lay.half(values)
    finite = ~np.isnan(expected)
    assert np.array_equal(got.view(np.uint16)[finite], expected.view(np.uint16)[finite])
    assert np.array_equal(np.isnan(got), ~finite)


def test_bfloat16_output_rounds_to_nearest_even():
    values = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, -2.5, np.nan], np.float32)
    bits = lay.to_dtype(values, "bfloat16")
    assert bits.tolist() == [0x3F80, 0x3F82, 0xC020, 0x7FC0]


# -- types and platform facts -------------------------------------------------------------------
def test_every_header_type_is_known():
    assert len(mm.TYPES) == 13
    t = mm.TYPES["RKNN_FLOAT16_MM_INT4_TO_BFLOAT16"]
    assert (t.a, t.b, t.c) == ("float16", "int4", "bfloat16")
    assert mm.TYPES["RKNN_INT4_MM_INT4_TO_INT16"].raw_output


@pytest.mark.parametrize("name, a_sub, b_sub", [
    # UG Table 3-5, by A's type: native A [K/s, M, s] and native B [N/sN, K/sK, sN, sK]
    ("rk3588", {"int4": 32, "int8": 16, "float16": 8},
     {"int4": (64, 32), "int8": (32, 32), "float16": (16, 32)}),
    ("rk3576", {"int4": 32, "int8": 16, "float16": 8},
     {"int4": (64, 32), "int8": (32, 32), "float16": (16, 32)}),
    ("rk3562", {"int8": 16, "float16": 8}, {"int8": (16, 32), "float16": (8, 32)}),
    ("rk3566", {"int8": 8, "float16": 4}, {"int8": (16, 32), "float16": (8, 16)}),
    ("rk3568", {"int8": 8, "float16": 4}, {"int8": (16, 32), "float16": (8, 16)}),
])  # fmt: skip
def test_native_blocks_are_ug_table_3_5(name, a_sub, b_sub):
    facts = platforms.get(name).matmul_facts
    assert dict(facts.a_sub) == a_sub and dict(facts.b_sub) == b_sub
    assert facts.c_sub["int32"] == facts.c_sub["float32"] == 4
    assert facts.c_sub["int16"] == 8


def test_platform_limits_and_support():
    get = platforms.get
    assert get("rk3588").matmul_facts.k_segment == 8192
    assert get("rk3576").matmul_facts.k_segment == 4096
    assert get("rk3562").matmul_facts.k_max == 10240
    assert not get("rk3566").matmul_facts.tp_norm and get("rk3562").matmul_facts.tp_norm
    assert get("rk3588").matmul_facts.n_max["int4"] == 8192
    for name in ("rv1103", "rv1106", "rv1103b", "rv1106b", "rk2118"):
        assert get(name).matmul_facts is None
    rk3588 = get("rk3588").matmul_facts.types
    assert "RKNN_INT4_MM_INT4_TO_INT16" in rk3588
    assert "RKNN_FLOAT16_MM_INT4_TO_FLOAT16" not in rk3588


def test_io_attr_plan_for_native_layouts():
    """rk3588 int8, M=3 K=70 N=37: A [5, 3, 16], B [2, 3, 32, 32], C int32 [10, 3, 4]."""
    facts = platforms.get("rk3588").matmul_facts
    spec = mm.MatmulSpec("RKNN_INT8_MM_INT8_TO_INT32", b_layout="NATIVE", ac_layout="NATIVE")
    attrs = mm.plan(facts, mm.TYPES[spec.type], spec, mm.Shape(3, 70, 37))
    assert [(a.dims, a.size, a.dtype) for a in attrs.values()] == [
        ((5, 3, 16), 240, "int8"), ((2, 3, 32, 32), 6144, "int8"), ((10, 3, 4), 480, "int32"),
    ]  # fmt: skip


def test_io_attr_plan_for_int4_and_tp_norm():
    facts = platforms.get("rk3588").matmul_facts
    spec = mm.MatmulSpec("RKNN_INT4_MM_INT4_TO_INT16", b_layout="TP_NORM")
    attrs = mm.plan(facts, mm.TYPES[spec.type], spec, mm.Shape(3, 5, 7))
    assert [(a.dims, a.size) for a in attrs.values()] == [((3, 5), 8), ((7, 5), 18), ((3, 7), 42)]
