"""The matmul API's types, shapes and attributes (facts §4.2, §5.11): what rknn_matmul_create
checks and reports before any data is bound. core/matmul/engine.py runs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import log, platforms, switches
from ..errors import FAIL, PARAM_INVALID, RknnError
from ..platforms import MatmulFacts, Platform
from . import layouts as lay

PLATFORM_ENV = switches.PLATFORM.name  # the emulated SoC, read at rknn_matmul_create
DEFAULT_PLATFORM = switches.PLATFORM.default
QUANT_TYPES = (
    "PER_LAYER_SYM",
    "PER_LAYER_ASYM",
    "PER_CHANNEL_SYM",
    "PER_CHANNEL_ASYM",
    "PER_GROUP_SYM",
    "PER_GROUP_ASYM",
)  # rknn_matmul_quant_type, in enum order
LAYOUTS = ("NORM", "NATIVE", "TP_NORM")  # RKNN_MM_LAYOUT_*, in enum order
_TOKENS = {name.upper(): name for name in lay.TYPES}  # as in RKNN_INT8_MM_INT8_TO_INT32
EXACT_INT_LIMIT = 2**24  # float32 holds every integer up to this


class MatmulType(NamedTuple):
    name: str
    a: str
    b: str
    c: str

    @classmethod
    def parse(cls, name: str) -> MatmulType:
        a, rest = name.removeprefix("RKNN_").split("_MM_")
        b, c = rest.split("_TO_")
        return cls(name, _TOKENS[a], _TOKENS[b], _TOKENS[c])

    @property
    def raw_output(self) -> bool:  # C holds the integer sums themselves
        return self.c in ("int32", "int16")

    @property
    def float_output(self) -> bool:
        return self.c in ("float32", "float16", "bfloat16")

    def b_quant_allowed(self, quant: str) -> bool:
        if self.b == "float16":
            return quant == "PER_LAYER_SYM"
        if quant.startswith("PER_CHANNEL"):  # refused for 9 (airockchip/rknn-toolkit2#550 log)
            return self.a != self.b or self.c in ("int32", "int8")
        if quant.startswith("PER_GROUP"):  # group scales need a float output
            return self.float_output
        return True


TYPES = {t.name: t for t in map(MatmulType.parse, (
    "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32", "RKNN_INT8_MM_INT8_TO_INT32", "RKNN_INT8_MM_INT8_TO_INT8",
    "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16", "RKNN_FLOAT16_MM_INT8_TO_FLOAT32",
    "RKNN_FLOAT16_MM_INT8_TO_FLOAT16", "RKNN_FLOAT16_MM_INT4_TO_FLOAT32",
    "RKNN_FLOAT16_MM_INT4_TO_FLOAT16", "RKNN_INT8_MM_INT8_TO_FLOAT32",
    "RKNN_INT4_MM_INT4_TO_INT16", "RKNN_INT8_MM_INT4_TO_INT32",
    "RKNN_FLOAT16_MM_INT4_TO_BFLOAT16", "RKNN_INT8_MM_INT4_TO_FLOAT16",
))}  # fmt: skip


class Shape(NamedTuple):
    M: int
    K: int
    N: int


@dataclass(frozen=True)
class MatmulSpec:
    """rknn_matmul_info in the runtime's names (M, K, N travel as Shapes)."""

    type: str
    b_layout: str = "NORM"
    ac_layout: str = "NORM"
    b_quant: str = "PER_LAYER_SYM"
    ac_quant: str = "PER_LAYER_SYM"
    group_size: int = 0


@dataclass(frozen=True)
class TensorAttr:
    """One rknn_matmul_tensor_attr: name, dims in the chosen layout, bytes and dtype."""

    name: str
    dims: tuple[int, ...]
    size: int
    dtype: str


@dataclass
class Window:
    """The caller's memory behind one rknn_tensor_mem (`size` bytes at virt_addr + offset)."""

    cpu: np.ndarray  # uint8 view: what the CPU reads and writes
    # The NPU's view where rknnrt models a cache (asked for when needed: holding a view of an
    # mmap would keep it from being unmapped), and whether the memory is still alive.
    device: Callable[[], np.ndarray | None] | None = None
    alive: Callable[[], bool] | None = None


def emulated_platform() -> Platform:
    name = switches.platform_name()
    try:
        return platforms.get(name)
    except KeyError:
        known = ", ".join(platforms.PLATFORMS)
        raise RknnError(
            FAIL, f"{PLATFORM_ENV}={name!r} is not a platform; use one of {known}"
        ) from None


def facts_for(platform: Platform) -> MatmulFacts:
    if platform.matmul_facts is None:
        raise RknnError(
            FAIL,
            f"the matmul API is not supported on {platform.name} "
            f"({platform.runtime_library}); set {PLATFORM_ENV} to an RK35xx or rv1126b",
        )
    return platform.matmul_facts


def check_spec(platform: Platform, spec: MatmulSpec) -> MatmulType:
    """The type of a valid spec; RKNN_ERR_PARAM_INVALID naming the fix otherwise."""
    facts = facts_for(platform)
    mtype = TYPES[spec.type]
    if spec.type not in facts.types:
        raise RknnError(
            PARAM_INVALID,
            f"unsupported matmul dtype: {spec.type} on {platform.name}"
            f"; supported: {', '.join(sorted(facts.types))}",
        )
    if spec.b_layout == "TP_NORM" and not facts.tp_norm:
        raise RknnError(
            PARAM_INVALID,
            f"B_layout RKNN_MM_LAYOUT_TP_NORM is not supported on "
            f"{platform.name}; use NORM or NATIVE",
        )
    if spec.ac_layout == "TP_NORM":
        raise RknnError(PARAM_INVALID, "AC_layout must be RKNN_MM_LAYOUT_NORM or NATIVE")
    if not mtype.b_quant_allowed(spec.b_quant):
        raise RknnError(
            PARAM_INVALID,
            f"B_quant_type = RKNN_QUANT_TYPE_{spec.b_quant} is not supported for {spec.type}",
        )
    if spec.ac_quant not in ("PER_LAYER_SYM", "PER_LAYER_ASYM"):
        raise RknnError(PARAM_INVALID, "AC_quant_type must be PER_LAYER_SYM or PER_LAYER_ASYM")
    if spec.b_quant.startswith("PER_GROUP") and spec.group_size <= 0:
        raise RknnError(PARAM_INVALID, f"group_size {spec.group_size} must be > 0 for per-group B")
    return mtype


def plan(
    facts: MatmulFacts, mtype: MatmulType, spec: MatmulSpec, shape: Shape, what: str = "info"
) -> dict[str, TensorAttr]:
    """io_attr for one valid shape: A, B, C with dims in the chosen layouts."""
    m, k, n = shape
    if min(shape) <= 0:
        raise RknnError(PARAM_INVALID, f"{what}: M, K, N = {m}, {k}, {n} must all be > 0")
    if facts.k_max is not None and k > facts.k_max:
        raise RknnError(PARAM_INVALID, f"{what}: K = {k} > {facts.k_max}, the limit here")
    if n > facts.n_max[mtype.a]:
        raise RknnError(PARAM_INVALID, f"{what}: N = {n} > {facts.n_max[mtype.a]}, the limit here")
    if spec.b_quant.startswith("PER_GROUP") and k % spec.group_size:
        raise RknnError(
            PARAM_INVALID, f"{what}: K = {k} is not a multiple of group_size {spec.group_size}"
        )
    sub_n, sub_k = facts.b_sub[mtype.a]
    dims = {
        "A": [m, k] if spec.ac_layout == "NORM" else lay.perf_dims(m, k, facts.a_sub[mtype.a]),
        "B": {"NORM": [k, n], "TP_NORM": [n, k]}.get(spec.b_layout)
        or lay.native_b_dims(k, n, sub_n, sub_k),
        "C": [m, n] if spec.ac_layout == "NORM" else lay.perf_dims(m, n, facts.c_sub[mtype.c]),
    }
    dtypes = {"A": mtype.a, "B": mtype.b, "C": mtype.c}
    attrs = {}
    for name, d in dims.items():
        size = lay.nbytes(int(np.prod(d)), dtypes[name])
        if size >= 2**32:
            raise RknnError(PARAM_INVALID, f"{what}: {name} would need {size} bytes (> 4 GiB)")
        attrs[name] = TensorAttr(name, tuple(d), size, dtypes[name])
    if k % sub_k or n % sub_n:
        log.warning(
            f"rknn_matmul_create: K = {k}, N = {n} are not multiples of {sub_k}, "
            f"{sub_n} (the native B blocks the header asks for); rknnrt zero-pads"
        )
    return attrs
