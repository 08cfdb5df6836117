"""Header enum numbers <-> the runtime core's names, and attribute structs <-> core Attrs."""

from __future__ import annotations

from ..core.errors import PARAM_INVALID, RknnError
from ..core.io.attrs import Attr
from ..model import dtypes
from . import constants as c
from .structs import rknn_tensor_attr

# rknn_tensor_type number -> name, from model/dtypes.py (its numbers are tested equal to the
# header's, constants.py)
TYPE_NAMES = {code: t.name for code, t in dtypes.BY_RKNN.items()}
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


def type_name(code: int, what: str) -> str:
    if code not in TYPE_NAMES:
        raise RknnError(PARAM_INVALID, f"{what}: invalid rknn_tensor_type {code}")
    return TYPE_NAMES[code]


def format_name(code: int, what: str) -> str:
    if code not in FORMAT_NAMES:
        raise RknnError(PARAM_INVALID, f"{what}: invalid rknn_tensor_format {code}")
    return FORMAT_NAMES[code]


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
