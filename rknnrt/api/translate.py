"""Header enum numbers <-> the runtime core's names, and attribute structs <-> core Attrs."""

from __future__ import annotations

from ..core import log
from ..core.attrs import Attr
from ..core.errors import PARAM_INVALID, RknnError
from . import constants as c
from .structs import rknn_tensor_attr

TYPE_NAMES = {
    c.RKNN_TENSOR_FLOAT32: "float32", c.RKNN_TENSOR_FLOAT16: "float16",
    c.RKNN_TENSOR_INT8: "int8", c.RKNN_TENSOR_UINT8: "uint8", c.RKNN_TENSOR_INT16: "int16",
    c.RKNN_TENSOR_UINT16: "uint16", c.RKNN_TENSOR_INT32: "int32",
    c.RKNN_TENSOR_UINT32: "uint32", c.RKNN_TENSOR_INT64: "int64", c.RKNN_TENSOR_BOOL: "bool",
    c.RKNN_TENSOR_INT4: "int4", c.RKNN_TENSOR_BFLOAT16: "bfloat16",
}  # fmt: skip
TYPE_CODES = {name: code for code, name in TYPE_NAMES.items()}
FORMAT_NAMES = {
    c.RKNN_TENSOR_NCHW: "NCHW", c.RKNN_TENSOR_NHWC: "NHWC",
    c.RKNN_TENSOR_NC1HWC2: "NC1HWC2", c.RKNN_TENSOR_UNDEFINED: "UNDEFINED",
}  # fmt: skip
FORMAT_CODES = {name: code for code, name in FORMAT_NAMES.items()}
QNT_CODES = {
    "NONE": c.RKNN_TENSOR_QNT_NONE, "DFP": c.RKNN_TENSOR_QNT_DFP,
    "AFFINE": c.RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC,
}  # fmt: skip

# rknn_query_cmd number -> name (the NC1HWC2 aliases share numbers with NATIVE_*).
QUERY_NAMES = {
    getattr(c, name): name
    for name in dir(c)
    if name.startswith("RKNN_QUERY_") and "NC1HWC2" not in name and name != "RKNN_QUERY_CMD_MAX"
}

_PRIORITY_BITS = c.RKNN_FLAG_PRIOR_MEDIUM | c.RKNN_FLAG_PRIOR_LOW
_INIT_FLAGS = {
    getattr(c, name): name
    for name in (
        "RKNN_FLAG_ASYNC_MASK", "RKNN_FLAG_COLLECT_PERF_MASK", "RKNN_FLAG_MEM_ALLOC_OUTSIDE",
        "RKNN_FLAG_SHARE_WEIGHT_MEM", "RKNN_FLAG_FENCE_IN_OUTSIDE", "RKNN_FLAG_FENCE_OUT_OUTSIDE",
        "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY", "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE",
        "RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU", "RKNN_FLAG_ENABLE_SRAM",
        "RKNN_FLAG_SHARE_SRAM", "RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY",
        "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE", "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE",
        "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY",
    )
}  # fmt: skip


def type_name(code: int, what: str) -> str:
    if code not in TYPE_NAMES:
        raise RknnError(PARAM_INVALID, f"{what}: invalid rknn_tensor_type {code}")
    return TYPE_NAMES[code]


def format_name(code: int, what: str) -> str:
    if code not in FORMAT_NAMES:
        raise RknnError(PARAM_INVALID, f"{what}: invalid rknn_tensor_format {code}")
    return FORMAT_NAMES[code]


def init_flags(flag: int) -> tuple[frozenset[str], str]:
    """(names of the set RKNN_FLAG_* bits, priority); unknown bits get one warning line."""
    flag &= 0xFFFFFFFF
    priority_bits = flag & _PRIORITY_BITS
    priority = {0: "HIGH", c.RKNN_FLAG_PRIOR_MEDIUM: "MEDIUM", c.RKNN_FLAG_PRIOR_LOW: "LOW"}.get(
        priority_bits, "LOW"
    )
    if priority_bits == _PRIORITY_BITS:
        log.warning("rknn_init: PRIOR_MEDIUM and PRIOR_LOW both set; using PRIOR_LOW")
    names = frozenset(name for bit, name in _INIT_FLAGS.items() if flag & bit)
    unknown = flag & ~(_PRIORITY_BITS | sum(_INIT_FLAGS))
    if unknown:
        log.warning(f"rknn_init: unknown flag bits {unknown:#x} ignored (flag={flag:#x})")
    return names, priority


def fill_attr(out: rknn_tensor_attr, attr: Attr) -> None:
    """Write a core Attr into the caller's rknn_tensor_attr (index stays the caller's)."""
    out.index = attr.index
    out.n_dims = len(attr.dims)
    for i in range(16):
        out.dims[i] = attr.dims[i] if i < len(attr.dims) else 0
    out.name = attr.name.encode()[:255]
    out.n_elems = attr.n_elems
    out.size = attr.size
    out.fmt = FORMAT_CODES[attr.fmt]
    out.type = TYPE_CODES[attr.dtype]
    out.qnt_type = QNT_CODES[attr.qnt_type]
    out.fl = attr.fl
    out.zp = attr.zp
    out.scale = attr.scale
    out.w_stride = attr.w_stride
    out.size_with_stride = attr.size_with_stride
    out.pass_through = attr.pass_through
    out.h_stride = attr.h_stride
