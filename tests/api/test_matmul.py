"""rknn_matmul_api.h through the C-shaped API, checked against references computed here.

Nothing here uses rknnrt's own layout or quantisation helpers: data is laid out with the index
formulas of facts §5.11 (UG Table 3-5 blocks, the K split of H/UG 3.5.4.1), int4 is packed
even-index-low (docs/matmul.md), and results are compared with numpy: int64 sums for integer
types, float64 sums of the fp16-rounded inputs (within fp32 rounding) for float types.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry

E_LINE = re.compile(r"^E RKNN: \[\d\d:\d\d:\d\d\.\d{3}\] (rknn_\w+)\b")
T = {name: getattr(rk, "RKNN_" + name) for name in (
    "FLOAT16_MM_FLOAT16_TO_FLOAT32", "INT8_MM_INT8_TO_INT32", "INT8_MM_INT8_TO_INT8",
    "FLOAT16_MM_FLOAT16_TO_FLOAT16", "FLOAT16_MM_INT8_TO_FLOAT32", "FLOAT16_MM_INT8_TO_FLOAT16",
    "FLOAT16_MM_INT4_TO_FLOAT32", "FLOAT16_MM_INT4_TO_FLOAT16", "INT8_MM_INT8_TO_FLOAT32",
    "INT4_MM_INT4_TO_INT16", "INT8_MM_INT4_TO_INT32", "FLOAT16_MM_INT4_TO_BFLOAT16",
    "INT8_MM_INT4_TO_FLOAT16")}  # fmt: skip
# (A, B, C) element types of each rknn_matmul_type (rknn_matmul_api.h comments).
DTYPES = {T[n]: tuple(x.lower() for x in re.split("_MM_|_TO_", n)) for n in T}
# UG Table 3-6, plus the choices docs/matmul.md records (rk3576 gets the undocumented mixed
# types, rv1126b only FLOAT16_MM_FLOAT16_TO_FLOAT32).
G1 = ["INT8_MM_INT8_TO_INT32", "FLOAT16_MM_FLOAT16_TO_FLOAT32"]
SUPPORTED = {
    "rk3588": ["FLOAT16_MM_FLOAT16_TO_FLOAT16", "FLOAT16_MM_FLOAT16_TO_FLOAT32",
               "INT8_MM_INT8_TO_INT32", "INT8_MM_INT8_TO_FLOAT32", "INT8_MM_INT8_TO_INT8",
               "INT4_MM_INT4_TO_INT16"],
    "rk3576": ["FLOAT16_MM_FLOAT16_TO_FLOAT16", "FLOAT16_MM_FLOAT16_TO_FLOAT32",
               "INT8_MM_INT8_TO_INT32", "FLOAT16_MM_INT8_TO_FLOAT32", "FLOAT16_MM_INT4_TO_FLOAT16",
               "FLOAT16_MM_INT4_TO_FLOAT32", "INT8_MM_INT4_TO_INT32", "FLOAT16_MM_INT8_TO_FLOAT16",
               "FLOAT16_MM_INT4_TO_BFLOAT16", "INT8_MM_INT4_TO_FLOAT16"],
    "rk3562": G1, "rk3566": G1, "rk3568": G1, "rv1126b": ["FLOAT16_MM_FLOAT16_TO_FLOAT32"],
}  # fmt: skip
# UG Table 3-5: native A [K/s, M, s] and native B [N/sN, K/sK, sN, sK], keyed by A's type.
_A16 = {"int4": 32, "int8": 16, "float16": 8}
_B16 = {"int4": (64, 32), "int8": (32, 32), "float16": (16, 32)}
NATIVE_A = {"rk3588": _A16, "rk3576": _A16, "rk3562": {"int8": 16, "float16": 8},
            "rk3566": {"int8": 8, "float16": 4}, "rk3568": {"int8": 8, "float16": 4},
            "rv1126b": {"int8": 16, "float16": 8}}  # fmt: skip
NATIVE_B = {"rk3588": _B16, "rk3576": _B16, "rk3562": {"int8": (16, 32), "float16": (8, 32)},
            "rk3566": {"int8": (16, 32), "float16": (8, 16)},
            "rk3568": {"int8": (16, 32), "float16": (8, 16)},
            "rv1126b": {"int8": (16, 32), "float16": (8, 32)}}  # fmt: skip
K_SEGMENT = {"rk3588": 8192, "rk3576": 4096}  # H / UG 3.5.4.1
TP_NORM = {p: p not in ("rk3566", "rk3568") for p in SUPPORTED}
NP = {"int4": np.int8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
      "float16": np.float16, "float32": np.float32, "bfloat16": np.uint16}  # fmt: skip
EPS32 = 2.0**-24
RNG = np.random.default_rng(20240607)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# -- independent encoders ----------------------------------------------------------------------
def pack_int4(values: np.ndarray) -> np.ndarray:
    """Even flat index in the low nibble, odd in the high one."""
    v = values.reshape(-1).astype(np.int64)
    out = np.zeros(cdiv(v.size, 2), np.int64)
    np.add.at(out, np.arange(v.size) // 2, (v & 0xF) << (4 * (np.arange(v.size) % 2)))
    return out.astype(np.uint8)


def unpack_int4(raw: np.ndarray, count: int) -> np.ndarray:
    i = np.arange(count)
    nib = (raw[i // 2].astype(np.int64) >> (4 * (i % 2))) & 0xF
    return np.where(nib > 7, nib - 16, nib)


def to_bytes(flat: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "int4":
        return pack_int4(flat)
    return np.ascontiguousarray(flat.astype(NP[dtype])).view(np.uint8).reshape(-1)


def perf_index(rows: int, cols: int, sub: int) -> np.ndarray:
    """Index in [cols/sub, rows, sub] of every element (r, c): facts §5.11."""
    r, c = np.indices((rows, cols))
    return (c // sub) * rows * sub + r * sub + c % sub


def native_b_index(k: int, n: int, sub_n: int, sub_k: int, segment: int | None) -> np.ndarray:
    """Index of every element (k, n) of native B, K segment after K segment."""
    kk, nn = np.indices((k, n))
    index = np.empty((k, n), np.int64)
    offset = 0
    starts = range(0, k, segment) if segment and k > segment else [0]
    for start in starts:
        stop = min(start + segment, k) if segment and k > segment else k
        k1 = cdiv(stop - start, sub_k)
        kl, nl = kk[start:stop] - start, nn[start:stop]
        index[start:stop] = (
            offset + (((nl // sub_n) * k1 + kl // sub_k) * sub_n + nl % sub_n) * sub_k + kl % sub_k
        )
        offset += cdiv(n, sub_n) * k1 * sub_n * sub_k
    return index


def scatter(values: np.ndarray, index: np.ndarray, total: int) -> np.ndarray:
    flat = np.zeros(total, values.dtype)
    flat[index.reshape(-1)] = values.reshape(-1)
    return flat


def random_matrix(dtype: str, shape: tuple[int, int]) -> np.ndarray:
    if dtype == "float16":
        return RNG.standard_normal(shape).astype(np.float16)
    lo, hi = (-8, 7) if dtype == "int4" else (-128, 127)
    return RNG.integers(lo, hi + 1, shape).astype(np.int8)


def round_away(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, np.floor(x + 0.5), -np.floor(-x + 0.5))


# -- the reference ------------------------------------------------------------------------------
@dataclass
class Quant:
    b_quant: int = rk.RKNN_QUANT_TYPE_PER_LAYER_SYM
    group: int = 0
    sa: float = 1.0
    za: int = 0
    sb: np.ndarray = field(default_factory=lambda: np.ones(1, np.float32))
    zb: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    sc: float = 1.0
    zc: int = 0

    def per_k(self, values: np.ndarray, k: int, n: int) -> np.ndarray:
        """[K, N] of per-layer, per-channel ([N]) or per-group ([K/g][N]) values."""
        if values.size == 1:
            return np.full((k, n), values[0], np.float64)
        if values.size == n:
            return np.broadcast_to(values.astype(np.float64), (k, n))
        return np.repeat(values.reshape(-1, n).astype(np.float64), self.group, axis=0)


def reference(mtype: int, a: np.ndarray, b: np.ndarray, q: Quant) -> tuple[np.ndarray, np.ndarray]:
    """(expected C, allowed absolute error) in C's element type semantics."""
    at, bt, ct = DTYPES[mtype]
    k, n = b.shape
    sa, sc = float(np.float32(q.sa)), float(np.float32(q.sc))
    if bt == "float16":
        b_centred = b.astype(np.float64)
        sb = np.ones((k, n))
    else:
        b_centred = b.astype(np.int64) - q.per_k(q.zb, k, n).astype(np.int64)
        sb = q.per_k(q.sb.astype(np.float32), k, n)
    if ct in ("int32", "int16"):  # raw sums; per-channel B renormalised to the largest scale
        if q.sb.size > 1:
            b_centred = round_away(b_centred * (sb / sb.max())).astype(np.int64)
        acc = (a.astype(np.int64) - q.za) @ b_centred
        lo, hi = (-(2**15), 2**15 - 1) if ct == "int16" else (-(2**31), 2**31 - 1)
        return np.clip(acc, lo, hi), np.zeros(1)
    if ct == "int8":
        acc = (a.astype(np.int64) - q.za) @ b_centred
        y = acc * (sa * sb[0] / sc)
        return np.clip(round_away(y) + q.zc, -128, 127), np.zeros(1)
    if at == "float16":
        deq = b_centred * sb
        a64 = a.astype(np.float64)
    else:
        deq = b_centred * sb  # exact in float64 for these magnitudes
        a64 = a.astype(np.float64) - q.za
    exact = a64 @ deq * (sa / sc)
    bound = (np.abs(a64) @ np.abs(deq)) * abs(sa / sc) * (k + 4) * EPS32
    rounding = {"float32": EPS32, "float16": 2.0**-11, "bfloat16": 2.0**-8}[ct]
    return exact, bound + rounding * np.abs(exact) + 2.0**-24


def decode_c(raw: np.ndarray, attr: rk.rknn_matmul_tensor_attr, m: int, n: int, native: bool):
    ct = {rk.RKNN_TENSOR_FLOAT32: "float32", rk.RKNN_TENSOR_FLOAT16: "float16",
          rk.RKNN_TENSOR_INT32: "int32", rk.RKNN_TENSOR_INT16: "int16", rk.RKNN_TENSOR_INT8: "int8",
          rk.RKNN_TENSOR_BFLOAT16: "bfloat16"}[attr.type]  # fmt: skip
    flat = raw[: attr.size].view(NP[ct])
    if native:  # "read the native C layout from io_attr.C.dims" (facts §5.11)
        flat = flat[perf_index(m, n, attr.dims[2])]
    values = flat.reshape(m, n)
    if ct == "bfloat16":
        return (values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values.astype(np.float64) if ct.startswith("float") else values.astype(np.int64)


# -- driving the C API ---------------------------------------------------------------------------
def mem_of(buf: np.ndarray) -> rk.rknn_tensor_mem:
    """An rknn_tensor_mem filled by hand for memory the test owns."""
    mem = rk.rknn_tensor_mem()
    mem.virt_addr, mem.size, mem.fd = buf.ctypes.data, buf.nbytes, -1
    return mem


def make_info(mtype: int, m: int, k: int, n: int, b_layout: int = 0, ac_layout: int = 0,
              q: Quant | None = None, ac_asym: bool = False) -> rk.rknn_matmul_info:  # fmt: skip
    info = rk.rknn_matmul_info()
    info.M, info.K, info.N, info.type = m, k, n, mtype
    info.B_layout, info.AC_layout = b_layout, ac_layout
    info.AC_quant_type = int(ac_asym)
    if q is not None:
        info.B_quant_type, info.group_size = q.b_quant, q.group
    return info


def set_quant(capi, ctx, name: bytes, scale, zp) -> None:
    params = rk.rknn_quant_params()
    params.name = name
    scale = np.ascontiguousarray(scale, np.float32)
    zp = np.ascontiguousarray(zp, np.int32)
    params.scale = scale.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    params.scale_len = scale.size
    params.zp = zp.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    params.zp_len = zp.size
    assert capi(rk.rknn_matmul_set_quant_params, ctx, params) == 0


def apply_quant(capi, ctx, mtype: int, q: Quant) -> None:
    at, bt, ct = DTYPES[mtype]
    if at == bt == "float16":
        return
    set_quant(capi, ctx, b"A", [q.sa], [q.za])
    set_quant(capi, ctx, b"B", q.sb, q.zb)
    if ct not in ("int32", "int16"):
        set_quant(capi, ctx, b"C", [q.sc], [q.zc])


@pytest.fixture
def platform(monkeypatch):
    def use(name: str) -> None:
        monkeypatch.setenv("RKNNRT_PLATFORM", name)

    return use


@pytest.fixture
def matmul(capi):
    """`matmul(info) -> (ctx, io_attr)`; contexts are destroyed after the test."""
    made = []

    def create(info: rk.rknn_matmul_info) -> tuple[rk.rknn_matmul_ctx, rk.rknn_matmul_io_attr]:
        ctx, io = rk.rknn_matmul_ctx(), rk.rknn_matmul_io_attr()
        assert capi(rk.rknn_matmul_create, ctx, info, io) == 0
        made.append(ctx)
        return ctx, io

    yield create
    for ctx in made:
        rk.rknn_matmul_destroy(ctx)


def run_case(capi, matmul, plat: str, mtype: int, shape, b_layout: int, ac_layout: int,
             q: Quant, ac_asym: bool = False) -> None:  # fmt: skip
    m, k, n = shape
    at, bt, ct = DTYPES[mtype]
    ctx, io = matmul(make_info(mtype, m, k, n, b_layout, ac_layout, q, ac_asym))
    a, b = random_matrix(at, (m, k)), random_matrix(bt, (k, n))
    if ac_layout:
        sub = NATIVE_A[plat][at]
        assert list(io.A.dims[:3]) == [cdiv(k, sub), m, sub]
        a_flat = scatter(a, perf_index(m, k, sub), cdiv(k, sub) * m * sub)
    else:
        assert list(io.A.dims[:2]) == [m, k]
        a_flat = a.reshape(-1)
    if b_layout == rk.RKNN_MM_LAYOUT_NATIVE:
        sub_n, sub_k = NATIVE_B[plat][at]
        assert list(io.B.dims[:4]) == [cdiv(n, sub_n), cdiv(k, sub_k), sub_n, sub_k]
        total = cdiv(n, sub_n) * cdiv(k, sub_k) * sub_n * sub_k
        b_flat = scatter(b, native_b_index(k, n, sub_n, sub_k, K_SEGMENT.get(plat)), total)
    elif b_layout == rk.RKNN_MM_LAYOUT_TP_NORM:
        assert list(io.B.dims[:2]) == [n, k]
        b_flat = b.T.reshape(-1)
    else:
        assert list(io.B.dims[:2]) == [k, n]
        b_flat = b.reshape(-1)
    a_buf, b_buf = to_bytes(a_flat, at), to_bytes(b_flat, bt)
    assert (a_buf.size, b_buf.size) == (io.A.size, io.B.size)
    c_buf = np.full(io.C.size, 0xAB, np.uint8)
    apply_quant(capi, ctx, mtype, q)
    for buf, attr in ((a_buf, io.A), (b_buf, io.B), (c_buf, io.C)):
        assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(buf), attr) == 0
    assert capi(rk.rknn_matmul_run, ctx) == 0
    got = decode_c(c_buf, io.C, m, n, bool(ac_layout))
    expected, tolerance = reference(mtype, a, b, q)
    if ct.startswith("int"):
        np.testing.assert_array_equal(got, expected)
    else:
        assert np.all(np.abs(got - expected) <= tolerance), np.max(
            np.abs(got - expected) - tolerance
        )


def layout_quant(mtype: int, k: int, n: int) -> Quant:
    """Per-layer quantisation as the vendor demo sets it (scales 0.2 / 0.1 / 0.8)."""
    at, bt, ct = DTYPES[mtype]
    if bt == "float16":
        return Quant()
    if ct == "int8":
        return Quant(sa=0.2, sb=np.array([0.1], np.float32), sc=0.8)
    if ct.startswith("float") or ct == "bfloat16":
        return Quant(sa=0.5 if at != "float16" else 1.0, sb=np.array([0.05], np.float32))
    return Quant()


LAYOUT_CASES = [
    pytest.param(plat, name, bl, acl, id=f"{plat}-{name}-B{bl}-AC{acl}")
    for plat, names in SUPPORTED.items() for name in names
    for bl in (0, 1, 2) if bl != 2 or TP_NORM[plat] for acl in (0, 1)
]  # fmt: skip


@pytest.mark.parametrize("plat, name, b_layout, ac_layout", LAYOUT_CASES)
def test_every_type_and_layout_matches_reference(capi, matmul, platform, plat, name, b_layout,
                                                 ac_layout):  # fmt: skip
    """Shapes on no native block boundary: M=3, K=70, N=37."""
    platform(plat)
    mtype = T[name]
    run_case(
        capi, matmul, plat, mtype, (3, 70, 37), b_layout, ac_layout, layout_quant(mtype, 70, 37)
    )


QUANT_CASES = [  # (platform, type, B quant, group size, A/C asymmetric)
    ("rk3588", "INT8_MM_INT8_TO_INT8", "PER_LAYER_SYM", 0, False),
    ("rk3588", "INT8_MM_INT8_TO_INT8", "PER_LAYER_ASYM", 0, True),
    ("rk3588", "INT8_MM_INT8_TO_INT8", "PER_CHANNEL_SYM", 0, False),
    ("rk3588", "INT8_MM_INT8_TO_INT8", "PER_CHANNEL_ASYM", 0, True),
    ("rk3588", "INT8_MM_INT8_TO_INT32", "PER_LAYER_ASYM", 0, True),
    ("rk3588", "INT8_MM_INT8_TO_INT32", "PER_CHANNEL_SYM", 0, False),
    ("rk3588", "INT8_MM_INT8_TO_INT32", "PER_CHANNEL_ASYM", 0, False),
    ("rk3588", "INT8_MM_INT8_TO_FLOAT32", "PER_LAYER_ASYM", 0, True),
    ("rk3588", "INT8_MM_INT8_TO_FLOAT32", "PER_GROUP_SYM", 32, False),
    ("rk3588", "INT8_MM_INT8_TO_FLOAT32", "PER_GROUP_ASYM", 16, True),
    ("rk3588", "INT4_MM_INT4_TO_INT16", "PER_LAYER_ASYM", 0, True),
    ("rk3576", "FLOAT16_MM_INT8_TO_FLOAT32", "PER_CHANNEL_SYM", 0, False),
    ("rk3576", "FLOAT16_MM_INT8_TO_FLOAT32", "PER_GROUP_ASYM", 32, False),
    ("rk3576", "FLOAT16_MM_INT8_TO_FLOAT16", "PER_CHANNEL_ASYM", 0, False),
    ("rk3576", "FLOAT16_MM_INT4_TO_FLOAT32", "PER_CHANNEL_SYM", 0, False),
    ("rk3576", "FLOAT16_MM_INT4_TO_FLOAT32", "PER_GROUP_SYM", 32, False),
    ("rk3576", "FLOAT16_MM_INT4_TO_FLOAT16", "PER_GROUP_SYM", 32, False),
    ("rk3576", "FLOAT16_MM_INT4_TO_BFLOAT16", "PER_GROUP_ASYM", 32, False),
    ("rk3576", "INT8_MM_INT4_TO_INT32", "PER_LAYER_ASYM", 0, True),
    ("rk3576", "INT8_MM_INT4_TO_INT32", "PER_CHANNEL_SYM", 0, False),
    ("rk3576", "INT8_MM_INT4_TO_FLOAT16", "PER_GROUP_SYM", 32, True),
    ("rk3576", "INT8_MM_INT4_TO_FLOAT16", "PER_CHANNEL_ASYM", 0, False),
]


@pytest.mark.parametrize("plat, name, quant, group, ac_asym", QUANT_CASES,
                         ids=[f"{c[1]}-{c[2]}-g{c[3]}" for c in QUANT_CASES])  # fmt: skip
def test_quantisation_modes_match_reference(capi, matmul, platform, plat, name, quant, group,
                                            ac_asym):  # fmt: skip
    platform(plat)
    mtype = T[name]
    at, bt, ct = DTYPES[mtype]
    m, k, n = 5, 96, 40
    count = {"LAYER": 1, "CHANNEL": n, "GROUP": k // group * n if group else 0}[quant.split("_")[1]]
    zlo, zhi = (-8, 7) if bt == "int4" else (-128, 127)
    q = Quant(
        b_quant=getattr(rk, "RKNN_QUANT_TYPE_" + quant), group=group,
        sa=0.25 if at != "float16" else 1.5, za=int(RNG.integers(-5, 6)) * ac_asym,
        sb=RNG.uniform(0.01, 0.2, count).astype(np.float32),
        zb=RNG.integers(zlo // 2, zhi // 2, count) * quant.endswith("ASYM"),
        sc=0.75 if ct != "int8" else 40.0, zc=int(RNG.integers(-9, 9)) * (ac_asym and ct == "int8"),
    )  # fmt: skip
    if at == "float16":
        q.za = 0
    run_case(capi, matmul, plat, mtype, (m, k, n), 0, 0, q, ac_asym)


@pytest.mark.parametrize("plat, name", [
    ("rk3588", "FLOAT16_MM_FLOAT16_TO_FLOAT32"), ("rk3588", "INT8_MM_INT8_TO_INT32"),
    ("rk3588", "INT4_MM_INT4_TO_INT16"), ("rk3576", "FLOAT16_MM_INT4_TO_FLOAT32"),
    ("rk3576", "INT8_MM_INT8_TO_INT32"),
])  # fmt: skip
@pytest.mark.parametrize("b_layout", [0, 1])
def test_large_k_is_split_in_native_b(capi, matmul, platform, plat, name, b_layout):
    """K past the split threshold, with a remainder segment that is not block aligned."""
    platform(plat)
    mtype = T[name]
    k = K_SEGMENT[plat] + 100
    run_case(capi, matmul, plat, mtype, (2, k, 40), b_layout, 1, layout_quant(mtype, k, 40))


ROUND_TRIPS = sorted({
    (plat, DTYPES[T[name]][1]): name for plat, names in SUPPORTED.items() for name in names
}.items())  # one type per (platform, B dtype)  # fmt: skip


@pytest.mark.parametrize("plat, b_type, name", [(p, b, n) for (p, b), n in ROUND_TRIPS])
def test_b_normal_to_native_round_trips(capi, platform, plat, b_type, name):
    platform(plat)
    mtype = T[name]
    info = make_info(mtype, 1, 1, 1)
    sub_n, sub_k = NATIVE_B[plat][DTYPES[mtype][0]]
    for k, n in [(70, 37), (K_SEGMENT.get(plat, 96) + 40, 24)]:
        b = random_matrix(b_type, (k, n))
        index = native_b_index(k, n, sub_n, sub_k, K_SEGMENT.get(plat))
        total = cdiv(n, sub_n) * cdiv(k, sub_k) * sub_n * sub_k
        expected = to_bytes(scatter(b, index, total), b_type)
        out = np.full(expected.size, 0x5A, np.uint8)
        src = to_bytes(b.reshape(-1), b_type)
        assert capi(rk.rknn_B_normal_layout_to_native_layout, src.ctypes.data, out, k, n, info) == 0
        np.testing.assert_array_equal(out, expected)
        back = unpack_int4(out, total) if b_type == "int4" else out.view(NP[b_type])
        np.testing.assert_array_equal(back[index], b)  # and the formula inverts it


def test_dynamic_shape_switches_between_three_shapes(capi, platform):
    platform("rk3588")
    mtype = T["INT8_MM_INT8_TO_INT8"]
    shapes = [(4, 64, 32), (1, 100, 50), (7, 33, 64)]
    dyn = (rk.rknn_matmul_shape * 3)(*[rk.rknn_matmul_shape(*s) for s in shapes])
    io = (rk.rknn_matmul_io_attr * 3)()
    ctx = rk.rknn_matmul_ctx()
    info = make_info(mtype, 0, 0, 0, b_layout=1, ac_layout=1)
    assert capi(rk.rknn_matmul_create_dynamic_shape, ctx, info, 3, dyn, io) == 0
    try:
        bufs = {x: np.zeros(max(getattr(a, x).size for a in io), np.uint8) for x in "ABC"}
        set_quant(capi, ctx, b"A", [0.5], [0])
        set_quant(capi, ctx, b"C", [3.0], [0])
        for i in (0, 2, 1, 0, 2):
            m, k, n = shapes[i]
            assert capi(rk.rknn_matmul_set_dynamic_shape, ctx, dyn[i]) == 0
            sub_a, (sub_n, sub_k) = NATIVE_A["rk3588"]["int8"], NATIVE_B["rk3588"]["int8"]
            assert list(io[i].A.dims[:3]) == [cdiv(k, sub_a), m, sub_a]
            a, b = random_matrix("int8", (m, k)), random_matrix("int8", (k, n))
            bufs["A"][: io[i].A.size] = to_bytes(
                scatter(a, perf_index(m, k, sub_a), io[i].A.size), "int8"
            )
            b_flat = scatter(b, native_b_index(k, n, sub_n, sub_k, 8192), io[i].B.size)
            bufs["B"][: io[i].B.size] = to_bytes(b_flat, "int8")
            for x in "ABC":
                assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(bufs[x]), getattr(io[i], x)) == 0
            assert capi(rk.rknn_matmul_run, ctx) == 0
            got = decode_c(bufs["C"], io[i].C, m, n, True)
            expected, _ = reference(mtype, a, b, Quant(sa=0.5, sc=3.0))
            np.testing.assert_array_equal(got, expected)
    finally:
        assert rk.rknn_matmul_destroy(ctx) == 0


def test_dynamic_shape_keeps_b_while_k_and_n_stay(capi, platform, rknn_log):
    """The vendor demo's "feature + const" mode: B bound once, then only A and C per M. A
    change of K or N drops B (its layout changes) and the run asks for it again."""
    platform("rk3588")
    mtype = T["INT8_MM_INT8_TO_INT32"]
    shapes = [(1, 64, 32), (4, 64, 32), (4, 128, 32)]
    dyn = (rk.rknn_matmul_shape * 3)(*[rk.rknn_matmul_shape(*s) for s in shapes])
    io = (rk.rknn_matmul_io_attr * 3)()
    ctx = rk.rknn_matmul_ctx()
    assert (
        capi(rk.rknn_matmul_create_dynamic_shape, ctx, make_info(mtype, 0, 0, 0), 3, dyn, io) == 0
    )
    try:
        b = random_matrix("int8", (64, 32))
        b_buf = to_bytes(b.reshape(-1), "int8").copy()
        bufs = {x: np.zeros(max(getattr(a, x).size for a in io), np.uint8) for x in "AC"}
        assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(b_buf), io[0].B) == 0
        for i in (0, 1, 0):
            m = shapes[i][0]
            assert capi(rk.rknn_matmul_set_dynamic_shape, ctx, dyn[i]) == 0
            a = random_matrix("int8", (m, 64))
            bufs["A"][: io[i].A.size] = to_bytes(a.reshape(-1), "int8")
            for x in "AC":
                assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(bufs[x]), getattr(io[i], x)) == 0
            assert capi(rk.rknn_matmul_run, ctx) == 0
            got = decode_c(bufs["C"], io[i].C, m, 32, False)
            np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
        assert capi(rk.rknn_matmul_set_dynamic_shape, ctx, dyn[2]) == 0  # K changes
        for x in "AC":
            assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(bufs[x]), getattr(io[2], x)) == 0
        assert capi(rk.rknn_matmul_run, ctx) == rk.RKNN_ERR_PARAM_INVALID
        assert "B not set" in rknn_log.take("E")[-1]
    finally:
        assert rk.rknn_matmul_destroy(ctx) == 0


def test_deprecated_dyn_shape_name_warns_and_works(capi, rknn_log):
    dyn = (rk.rknn_matmul_shape * 1)(rk.rknn_matmul_shape(2, 32, 16))
    io = (rk.rknn_matmul_io_attr * 1)()
    ctx = rk.rknn_matmul_ctx()
    info = make_info(T["FLOAT16_MM_FLOAT16_TO_FLOAT32"], 0, 0, 0)
    assert capi(rk.rknn_matmul_create_dyn_shape, ctx, info, 1, dyn, io) == 0
    assert any("deprecated" in line for line in rknn_log.take("W"))
    assert list(io[0].C.dims[:2]) == [2, 16]
    assert rk.rknn_matmul_destroy(ctx) == 0


@pytest.mark.parametrize("dtype_name, m, k, n, sizes", [
    ("FLOAT16_MM_FLOAT16_TO_FLOAT32", 1, 32, 16, (64, 1024, 64)),  # airockchip/rknn-toolkit2#154
    ("INT8_MM_INT8_TO_INT32", 4, 64, 32, (256, 2048, 512)),  # rockchip-linux/rknpu2#88
])  # fmt: skip
def test_io_attr_as_boards_print_it(capi, matmul, dtype_name, m, k, n, sizes):
    ctx, io = matmul(make_info(T[dtype_name], m, k, n))
    assert [io.A.name, io.B.name, io.C.name] == [b"A", b"B", b"C"]
    assert (io.A.size, io.B.size, io.C.size) == sizes
    assert [list(x.dims[: x.n_dims]) for x in (io.A, io.B, io.C)] == [[m, k], [k, n], [m, n]]


def test_vendor_demo_flow_with_rknn_create_mem(capi):
    """rknn_create_mem on the matmul context, fill virt_addr, bind, run, read C, free."""
    if not hasattr(rk, "rknn_create_mem"):
        pytest.skip("rknn_create_mem is not there yet")
    m, k, n = 4, 64, 32
    ctx, io = rk.rknn_matmul_ctx(), rk.rknn_matmul_io_attr()
    assert capi(rk.rknn_matmul_create, ctx, make_info(T["INT8_MM_INT8_TO_INT32"], m, k, n), io) == 0
    mems = [rk.rknn_create_mem(ctx, x.size) for x in (io.A, io.B, io.C)]
    assert all(mems)
    a, b = random_matrix("int8", (m, k)), random_matrix("int8", (k, n))
    for mem, data in zip(mems, (a, b)):
        ctypes.memmove(mem.contents.virt_addr, data.ctypes.data, data.nbytes)
    for mem, attr in zip(mems, (io.A, io.B, io.C)):
        assert capi(rk.rknn_matmul_set_io_mem, ctx, mem, attr) == 0
    assert capi(rk.rknn_matmul_run, ctx) == 0
    c = np.ctypeslib.as_array(ctypes.cast(mems[2].contents.virt_addr,
                                          ctypes.POINTER(ctypes.c_int32)), (m, n))  # fmt: skip
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
    for mem in mems:
        assert capi(rk.rknn_destroy_mem, ctx, mem) == 0
    assert capi(rk.rknn_matmul_destroy, ctx) == 0


def test_inputs_are_copied_at_set_io_mem(capi, matmul, rknn_log):
    """UG 3.5.2: set_io_mem rearranges A and B; changing them afterwards needs another call.
    With rknnrt's own memory the stale run is explained in a W line."""
    if not hasattr(rk, "rknn_create_mem"):
        pytest.skip("rknn_create_mem is not there yet")
    m, k, n = 2, 32, 16
    ctx, io = matmul(make_info(T["INT8_MM_INT8_TO_INT32"], m, k, n))
    mems = [rk.rknn_create_mem(ctx, x.size) for x in (io.A, io.B, io.C)]
    views = [np.ctypeslib.as_array(ctypes.cast(x.contents.virt_addr, ctypes.POINTER(ctypes.c_int8)),
                                   (x.contents.size,)) for x in mems]  # fmt: skip
    views[0][:], views[1][:] = 1, 2
    for mem, attr in zip(mems, (io.A, io.B, io.C)):
        assert capi(rk.rknn_matmul_set_io_mem, ctx, mem, attr) == 0
    c = views[2].view(np.int32)
    assert capi(rk.rknn_matmul_run, ctx) == 0 and np.all(c == 64)
    views[0][:] = 3
    rknn_log.clear()
    assert capi(rk.rknn_matmul_run, ctx) == 0 and np.all(c == 64)
    assert any("changed after rknn_matmul_set_io_mem" in w for w in rknn_log.take("W"))
    assert capi(rk.rknn_matmul_set_io_mem, ctx, mems[0], io.A) == 0
    assert capi(rk.rknn_matmul_run, ctx) == 0 and np.all(c == 192)
    for mem in mems:
        assert capi(rk.rknn_destroy_mem, ctx, mem) == 0


def test_get_quant_params_gives_normalised_b_scale(capi, matmul):
    """RT: with per-channel B, C's scale is approximately A's scale times the returned one."""
    m, k, n = 3, 64, 32
    mtype = T["INT8_MM_INT8_TO_INT32"]
    sb = RNG.uniform(0.02, 0.1, n).astype(np.float32)
    q = Quant(b_quant=rk.RKNN_QUANT_TYPE_PER_CHANNEL_SYM, sa=0.05, sb=sb, zb=np.zeros(n, np.int64))
    ctx, io = matmul(make_info(mtype, m, k, n, q=q))
    set_quant(capi, ctx, b"A", [q.sa], [0])
    set_quant(capi, ctx, b"B", sb, np.zeros(n))
    a, b = random_matrix("int8", (m, k)), random_matrix("int8", (k, n))
    c = np.zeros((m, n), np.int32)
    for buf, attr in ((a, io.A), (b, io.B), (c, io.C)):
        assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(buf), attr) == 0
    assert capi(rk.rknn_matmul_run, ctx) == 0
    params, scale = rk.rknn_quant_params(), ctypes.c_float()
    got_scales = np.zeros(n, np.float32)
    params.scale, params.scale_len = got_scales.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n
    assert capi(rk.rknn_matmul_get_quant_params, ctx, params, ctypes.byref(scale)) == 0
    assert scale.value == pytest.approx(float(sb.max()))
    assert params.name == b"B"
    np.testing.assert_array_equal(got_scales, sb)
    np.testing.assert_array_equal(c, reference(mtype, a, b, q)[0])
    real = (a.astype(np.float64) * q.sa) @ (b.astype(np.float64) * sb)
    step = 0.5 * np.float64(q.sa) * scale.value * np.abs(a).sum(axis=1, keepdims=True)
    assert np.all(np.abs(c * q.sa * scale.value - real) <= step + 1e-9)


def test_fp16_rounding_of_inputs_is_what_users_see(capi, matmul):
    """airockchip/rknn-toolkit2#471: A = 0.1 (fp16 0.0999755859375), B = 1, K = 256 -> 25.59375."""
    ctx, io = matmul(make_info(T["FLOAT16_MM_FLOAT16_TO_FLOAT32"], 1, 256, 16))
    a, b = np.full((1, 256), 0.1, np.float16), np.ones((256, 16), np.float16)
    c = np.zeros((1, 16), np.float32)
    for buf, attr in ((a, io.A), (b, io.B), (c, io.C)):
        assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(buf), attr) == 0
    assert capi(rk.rknn_matmul_run, ctx) == 0
    assert np.all(c == np.float32(256 * 0.0999755859375))


def test_core_masks(capi, matmul, platform, rknn_log):
    platform("rk3588")
    ctx, _ = matmul(make_info(T["INT8_MM_INT8_TO_INT32"], 1, 32, 32))
    for mask in (rk.RKNN_NPU_CORE_AUTO, rk.RKNN_NPU_CORE_0, rk.RKNN_NPU_CORE_1, rk.RKNN_NPU_CORE_2):
        assert capi(rk.rknn_matmul_set_core_mask, ctx, mask) == 0
    rknn_log.clear()
    # The board's answer to combined cores (airockchip/rknn-toolkit2#7): -1 and AUTO.
    assert capi(rk.rknn_matmul_set_core_mask, ctx, rk.RKNN_NPU_CORE_0_1) == rk.RKNN_ERR_FAIL
    assert "Not support core mask: 3, fallback to single core auto mode" in rknn_log.take("E")[0]
    assert registry.get(ctx.value).core_mask == rk.RKNN_NPU_CORE_AUTO


# -- misuse: every wrong call returns the vendor's code and writes one E line naming the call --
def one_error(rknn_log, function: str, pattern: str) -> None:
    errors = rknn_log.take("E")
    assert len(errors) == 1, errors
    assert E_LINE.match(errors[0])[1] == function, errors[0]
    assert re.search(pattern, errors[0]), errors[0]


CREATE_ERRORS = [  # (platform, info overrides, code, message)
    ("rk3566", {"type": T["FLOAT16_MM_FLOAT16_TO_FLOAT16"]}, rk.RKNN_ERR_PARAM_INVALID,
     "unsupported matmul dtype: RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16 on rk3566"),
    ("rv1126b", {"type": T["INT8_MM_INT8_TO_INT32"]}, rk.RKNN_ERR_PARAM_INVALID,
     "unsupported matmul dtype"),
    ("rv1106", {}, rk.RKNN_ERR_FAIL, "not supported on rv1106"),
    ("rk2118", {}, rk.RKNN_ERR_FAIL, "not supported on rk2118"),
    ("rk3588", {"type": 13}, rk.RKNN_ERR_PARAM_INVALID, r"info->type = 13"),
    ("rk3568", {"B_layout": 2}, rk.RKNN_ERR_PARAM_INVALID, "TP_NORM is not supported on rk3568"),
    ("rk3588", {"AC_layout": 2}, rk.RKNN_ERR_PARAM_INVALID, "AC_layout"),
    ("rk3588", {"B_layout": 7}, rk.RKNN_ERR_PARAM_INVALID, "B_layout = 7"),
    ("rk3588", {"M": 0}, rk.RKNN_ERR_PARAM_INVALID, "must all be > 0"),
    ("rk3562", {"K": 10241}, rk.RKNN_ERR_PARAM_INVALID, r"K = 10241 > 10240"),
    ("rk3588", {"N": 4097}, rk.RKNN_ERR_PARAM_INVALID, r"N = 4097 > 4096"),
    ("rk3588", {"type": T["INT8_MM_INT8_TO_FLOAT32"], "B_quant_type": 2},
     rk.RKNN_ERR_PARAM_INVALID, "PER_CHANNEL_SYM is not supported for RKNN_INT8_MM_INT8_TO_F"),
    ("rk3588", {"type": T["INT8_MM_INT8_TO_FLOAT32"], "B_quant_type": 4},
     rk.RKNN_ERR_PARAM_INVALID, "group_size 0 must be > 0"),
    ("rk3588", {"type": T["INT8_MM_INT8_TO_FLOAT32"], "B_quant_type": 4, "group_size": 48},
     rk.RKNN_ERR_PARAM_INVALID, "not a multiple of group_size 48"),
    ("rk3588", {"AC_quant_type": 2}, rk.RKNN_ERR_PARAM_INVALID, "AC_quant_type"),
    ("nosuchsoc", {}, rk.RKNN_ERR_FAIL, "RKNNRT_PLATFORM='nosuchsoc'"),
]  # fmt: skip


@pytest.mark.parametrize("plat, fields, code, message", CREATE_ERRORS,
                         ids=[f"{c[0]}-{c[3][:30]}" for c in CREATE_ERRORS])  # fmt: skip
def test_create_misuse(capi, platform, rknn_log, plat, fields, code, message):
    platform(plat)
    info = make_info(T["INT8_MM_INT8_TO_INT32"], 2, 64, 32)
    for key, value in fields.items():
        setattr(info, key, value)
    ctx, io = rk.rknn_matmul_ctx(), rk.rknn_matmul_io_attr()
    rknn_log.clear()
    assert capi(rk.rknn_matmul_create, ctx, info, io) == code
    one_error(rknn_log, "rknn_matmul_create", message)
    assert ctx.value == 0


@pytest.mark.parametrize("null, pattern", [(0, "ctx is NULL"), (1, "info is NULL"),
                                           (2, "io_attr is NULL")])  # fmt: skip
def test_create_null_arguments(capi, rknn_log, null, pattern):
    args = [rk.rknn_matmul_ctx(), make_info(T["INT8_MM_INT8_TO_INT32"], 1, 32, 32),
            rk.rknn_matmul_io_attr()]  # fmt: skip
    args[null] = None
    assert capi(rk.rknn_matmul_create, *args) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_matmul_create", pattern)


@pytest.fixture
def bound(capi, matmul):
    """An INT8_MM_INT8_TO_INT8 context (2x64x32) with nothing bound, and its buffers."""
    ctx, io = matmul(make_info(T["INT8_MM_INT8_TO_INT8"], 2, 64, 32))
    bufs = {x: np.zeros(getattr(io, x).size, np.uint8) for x in "ABC"}
    return ctx, io, bufs


def _quant(name: bytes, scale, zp=()):
    params = rk.rknn_quant_params()
    params.name = name
    s, z = np.asarray(scale, np.float32), np.asarray(zp, np.int32)
    params.scale, params.scale_len = s.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), s.size
    params.zp, params.zp_len = z.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), z.size
    params._keep = (s, z)
    return params


def test_run_before_set_io_mem_fails(capi, bound, rknn_log):
    ctx, io, bufs = bound
    assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(bufs["A"]), io.A) == 0
    assert capi(rk.rknn_matmul_run, ctx) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_matmul_run", r"B, C not set: call rknn_matmul_set_io_mem")


def test_set_io_mem_misuse(capi, bound, rknn_log):
    ctx, io, bufs = bound
    small = np.zeros(io.B.size - 1, np.uint8)
    assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(small), io.B) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_matmul_set_io_mem", r"mem of 2047 bytes < io_attr.B.size = 2048")
    other = rk.rknn_matmul_tensor_attr.from_buffer_copy(io.A)
    other.dims[0] = 3
    assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(bufs["A"]), other) == -5
    one_error(rknn_log, "rknn_matmul_set_io_mem", r"not the current shape's")
    other.name = b"D"
    assert capi(rk.rknn_matmul_set_io_mem, ctx, mem_of(bufs["A"]), other) == -5
    one_error(rknn_log, "rknn_matmul_set_io_mem", r"'D' is not A, B or C")
    null = rk.rknn_tensor_mem()
    assert capi(rk.rknn_matmul_set_io_mem, ctx, null, io.A) == -5
    one_error(rknn_log, "rknn_matmul_set_io_mem", r"virt_addr is NULL")
    assert capi(rk.rknn_matmul_set_io_mem, ctx, None, io.A) == -5
    one_error(rknn_log, "rknn_matmul_set_io_mem", r"mem is NULL")


@pytest.mark.parametrize("params, pattern", [
    (lambda: _quant(b"X", [1.0]), r"'X' is not A, B or C"),
    (lambda: _quant(b"A", [1.0, 2.0]), r"scale_len 2 / zp_len 0 must be 1"),
    (lambda: _quant(b"A", [1.0], [3]), r"zero points must lie in \[0, 0\].*PER_LAYER_SYM"),
    (lambda: _quant(b"B", [0.0]), r"finite and > 0"),
    (lambda: _quant(b"C", [1.0], [200]), r"zero points"),
])  # fmt: skip
def test_set_quant_params_misuse(capi, bound, rknn_log, params, pattern):
    ctx, _, _ = bound
    assert capi(rk.rknn_matmul_set_quant_params, ctx, params()) == rk.RKNN_ERR_PARAM_INVALID
    one_error(rknn_log, "rknn_matmul_set_quant_params", pattern)


def test_quant_params_refused_where_nothing_is_quantised(capi, matmul, rknn_log):
    ctx, _ = matmul(make_info(T["FLOAT16_MM_FLOAT16_TO_FLOAT32"], 1, 32, 32))
    assert capi(rk.rknn_matmul_set_quant_params, ctx, _quant(b"A", [1.0])) == -5
    one_error(rknn_log, "rknn_matmul_set_quant_params", "has no quantisation parameters")
    params, scale = rk.rknn_quant_params(), ctypes.c_float()
    assert capi(rk.rknn_matmul_get_quant_params, ctx, params, scale) == -5
    one_error(
        rknn_log, "rknn_matmul_get_quant_params", "only supported for RKNN_INT8_MM_INT8_TO_INT32"
    )


def test_set_dynamic_shape_unknown_shape(capi, bound, rknn_log):
    ctx, _, _ = bound
    assert capi(rk.rknn_matmul_set_dynamic_shape, ctx, rk.rknn_matmul_shape(2, 64, 33)) == -5
    one_error(rknn_log, "rknn_matmul_set_dynamic_shape", r"choose one of \(2, 64, 32\)")


def test_core_mask_on_single_core_platform_fails(capi, matmul, platform, rknn_log):
    platform("rk3566")
    ctx, _ = matmul(make_info(T["INT8_MM_INT8_TO_INT32"], 1, 32, 32))
    assert capi(rk.rknn_matmul_set_core_mask, ctx, rk.RKNN_NPU_CORE_0) == rk.RKNN_ERR_FAIL
    one_error(rknn_log, "rknn_matmul_set_core_mask", "not supported on rk3566")


def test_destroyed_and_foreign_handles(capi, ctx, rknn_log):
    mctx, io = rk.rknn_matmul_ctx(), rk.rknn_matmul_io_attr()
    assert (
        capi(rk.rknn_matmul_create, mctx, make_info(T["INT8_MM_INT8_TO_INT32"], 1, 32, 32), io) == 0
    )
    assert capi(rk.rknn_matmul_destroy, mctx) == 0
    for call in (rk.rknn_matmul_run, rk.rknn_matmul_destroy):
        assert capi(call, mctx) == rk.RKNN_ERR_CTX_INVALID
        one_error(rknn_log, call.__name__, "invalid context")
    assert capi(rk.rknn_matmul_run, ctx) == rk.RKNN_ERR_CTX_INVALID  # a model context
    one_error(rknn_log, "rknn_matmul_run", "is not a matmul context")
    assert capi(rk.rknn_matmul_run, 0) == rk.RKNN_ERR_CTX_INVALID
    one_error(rknn_log, "rknn_matmul_run", "invalid context 0x0")


def test_tampered_mem_size_is_not_trusted(capi):
    """set_io_mem uses the size rknnrt allocated, not what the struct now says."""
    ctx, io = rk.rknn_matmul_ctx(), rk.rknn_matmul_io_attr()
    assert capi(rk.rknn_matmul_create, ctx, make_info(T["INT8_MM_INT8_TO_INT32"], 4, 64, 64),
                io) == 0  # fmt: skip
    small = rk.rknn_create_mem(ctx, 16)
    small.contents.size = io.C.size  # lie about the size
    assert capi(rk.rknn_matmul_set_io_mem, ctx, small, io.C) == rk.RKNN_ERR_PARAM_INVALID
    assert capi(rk.rknn_destroy_mem, ctx, small) == 0
    assert capi(rk.rknn_matmul_destroy, ctx) == 0
