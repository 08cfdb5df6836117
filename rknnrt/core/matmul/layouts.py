"""Matmul data layouts as tiny pure functions (facts §5.11; pictures in docs/matmul.md).

Every function works on logical matrices (A [M, K], B [K, N], C [M, N]) and flat element
arrays in the memory order of a layout; none of them knows about platforms or contexts.

- NORM: row-major [rows, cols]. TP_NORM (B only): row-major [N, K].
- perf ("native" A and C): [ceil(cols/sub), rows, sub], element (r, c) at
  (c // sub) * rows * sub + r * sub + c % sub; the padding columns are zero.
- native B: [ceil(N/subN), ceil(K/subK), subN, subK], element (k, n) at
  ((n // subN * K1 + k // subK) * subN + n % subN) * subK + k % subK; when the platform splits K
  (`segment` rows), each K segment is laid out so in turn, one after the other.
- int4: two values a byte, the element of even flat index in the low nibble (rknnrt's choice,
  see docs/matmul.md); values are two's complement in [-8, 7].
- C's elements: `to_dtype` (saturation, int8 rounding, fp16/bf16 rounding) and `half`, the fast
  float32 -> float16 conversion.
"""

from __future__ import annotations

import numpy as np

from ...model import dtypes, numerics
from ...sessions import factory, policies

TYPES = ("int4", "int8", "int16", "float16", "bfloat16", "int32", "float32")  # A, B and C's
BITS = {t.name: t.bits for t in dtypes.named(*TYPES)}
# numpy storage of each dtype once unpacked (bfloat16 as its raw bits; int4 widened to int8).
NUMPY = {t.name: t.storage.type for t in dtypes.named(*TYPES)}
RANGE = {name: dtypes.int_range(name) for name in ("int4", "int8", "int16", "int32")}


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def nbytes(count: int, dtype: str) -> int:
    """Bytes of `count` elements of `dtype` (int4 packs two a byte, rounding up)."""
    return ceil_div(count * BITS[dtype], 8)


# -- int4 ---------------------------------------------------------------------------------
def pack_int4(values: np.ndarray) -> np.ndarray:
    """Flat int4 values in [-8, 7] -> bytes, even index in the low nibble."""
    flat = np.asarray(values).reshape(-1).astype(np.uint8) & 0x0F
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray, count: int) -> np.ndarray:
    """The first `count` int4 values of `packed` bytes, as int8 in [-8, 7]."""
    raw = np.asarray(packed, np.uint8).reshape(-1)[: ceil_div(count, 2)]
    nibbles = np.empty(raw.size * 2, np.uint8)
    nibbles[0::2] = raw & 0x0F
    nibbles[1::2] = raw >> 4
    return ((nibbles[:count].astype(np.int8) ^ 8) - 8).astype(np.int8)


def to_bytes(flat: np.ndarray, dtype: str) -> np.ndarray:
    """A flat element array (NUMPY[dtype]) as the bytes memory holds."""
    if dtype == "int4":
        return pack_int4(flat)
    return np.ascontiguousarray(flat, NUMPY[dtype]).reshape(-1).view(np.uint8)


def from_bytes(raw: np.ndarray, count: int, dtype: str) -> np.ndarray:
    """`count` elements of `dtype` read from the start of the byte array `raw`."""
    if dtype == "int4":
        return unpack_int4(raw, count)
    return raw[: nbytes(count, dtype)].view(NUMPY[dtype])


# -- perf layout (native A and C) -------------------------------------------------------------
def perf_dims(rows: int, cols: int, sub: int) -> list[int]:
    return [ceil_div(cols, sub), rows, sub]


def to_perf(x: np.ndarray, sub: int) -> np.ndarray:
    """[rows, cols] -> flat [cols/sub, rows, sub] (padding zero)."""
    rows, cols = x.shape
    c1 = ceil_div(cols, sub)
    padded = np.zeros((rows, c1 * sub), x.dtype)
    padded[:, :cols] = x
    return padded.reshape(rows, c1, sub).transpose(1, 0, 2).reshape(-1)


def from_perf(flat: np.ndarray, rows: int, cols: int, sub: int) -> np.ndarray:
    """flat [cols/sub, rows, sub] -> a [rows, cols] view (padding dropped)."""
    c1 = ceil_div(cols, sub)
    blocks = flat[: c1 * rows * sub].reshape(c1, rows, sub)
    return blocks.transpose(1, 0, 2).reshape(rows, c1 * sub)[:, :cols]


# -- native B ------------------------------------------------------------------------------
def native_b_dims(k: int, n: int, sub_n: int, sub_k: int) -> list[int]:
    return [ceil_div(n, sub_n), ceil_div(k, sub_k), sub_n, sub_k]


def k_segments(k: int, segment: int | None) -> list[tuple[int, int]]:
    """[(start, stop)] of the K segments native B is laid out in (one when not split)."""
    if not segment or k <= segment:
        return [(0, k)]
    return [(s, min(s + segment, k)) for s in range(0, k, segment)]


def _block_b(b: np.ndarray, sub_n: int, sub_k: int) -> np.ndarray:
    k, n = b.shape
    k1, n1 = ceil_div(k, sub_k), ceil_div(n, sub_n)
    padded = np.zeros((k1 * sub_k, n1 * sub_n), b.dtype)
    padded[:k, :n] = b
    return padded.reshape(k1, sub_k, n1, sub_n).transpose(2, 0, 3, 1).reshape(-1)


def to_native_b(b: np.ndarray, sub_n: int, sub_k: int, segment: int | None) -> np.ndarray:
    """[K, N] -> flat native B, K segment after K segment (padding zero)."""
    parts = [_block_b(b[s:e], sub_n, sub_k) for s, e in k_segments(b.shape[0], segment)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def from_native_b(
    flat: np.ndarray, k: int, n: int, sub_n: int, sub_k: int, segment: int | None
) -> np.ndarray:
    """flat native B -> a new [K, N] array."""
    n1 = ceil_div(n, sub_n)
    out = np.empty((k, n), flat.dtype)
    pos = 0
    for s, e in k_segments(k, segment):
        k1 = ceil_div(e - s, sub_k)
        count = n1 * k1 * sub_n * sub_k
        block = flat[pos : pos + count].reshape(n1, k1, sub_n, sub_k)
        out[s:e] = block.transpose(1, 3, 0, 2).reshape(k1 * sub_k, n1 * sub_n)[: e - s, :n]
        pos += count
    return out


# -- C's elements ---------------------------------------------------------------------------
def to_dtype(values: np.ndarray, dtype: str, zp: float = 0.0) -> np.ndarray:
    """C's elements from the scaled sums: saturated integers, int8 rounded, floats rounded."""
    if dtype == "float32":
        return values.astype(np.float32, copy=False)
    if dtype == "float16":
        with np.errstate(over="ignore"):  # IEEE: beyond 65504 is infinity
            return values.astype(np.float16)
    if dtype == "bfloat16":
        bits = values.astype(np.float32).view(np.uint32)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return np.where(np.isnan(values), 0x7FC0, rounded).astype(np.uint16)
    if dtype == "int8":  # the matmul API rounds C half away from zero (C's round())
        return numerics.requantize(values, zp, rounding=numerics.half_away_from_zero)
    lo, hi = RANGE[dtype]
    return np.clip(values, lo, hi).astype(NUMPY[dtype])


_HALF_SESSION: list = []  # onnxruntime session of one Cast(float -> float16), made on first use


def half(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 -> float16, bit for bit numpy's astype (IEEE nearest-even, overflow to inf), via
    onnxruntime's vectorised Cast: numpy converts one element at a time, 25x slower."""
    if not _HALF_SESSION:
        from onnx import TensorProto, helper

        cast = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)
        graph = helper.make_graph(
            [cast], "half", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        _HALF_SESSION.append(factory.create(model, policies.HELPER))
    values = np.ascontiguousarray(values)
    out = np.empty(values.shape, np.float16) if out is None else out
    binding = _HALF_SESSION[0].io_binding()
    binding.bind_cpu_input("x", values)
    binding.bind_output("y", "cpu", 0, np.float16, list(out.shape), out.ctypes.data)
    _HALF_SESSION[0].run_with_iobinding(binding)
    return out
