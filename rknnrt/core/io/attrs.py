"""Tensor attributes as a board reports them, computed from the model's tensor specs.

Values use the runtime's names ("NHWC", "float16", "AFFINE"); the API layer turns them into the
header's enum numbers. Rules: facts §5.2 (NHWC dims for 4-D inputs, model layout for outputs,
NC1HWC2 natively, w_stride in pixels, size_with_stride in bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from ...model.meta import TensorSpec
from ..platforms import Platform
from . import layouts


@dataclass
class Attr:
    index: int
    name: str
    dims: list[int]
    fmt: str
    dtype: str
    qnt_type: str = "NONE"
    zp: int = 0
    scale: float = 1.0
    fl: int = 0
    n_elems: int = 0
    size: int = 0
    w_stride: int = 0
    size_with_stride: int = 0
    pass_through: int = 0
    h_stride: int = 0
    extra: dict = field(default_factory=dict)


def itemsize(dtype: str) -> int:
    return 1 if dtype == "bool" else np.dtype(dtype).itemsize


def _qnt(spec: TensorSpec) -> tuple[str, int, float]:
    # Float tensors are reported as AFFINE with zp 0 and scale 1, as board logs show.
    if spec.qnt_type == "NONE" and spec.dtype in ("float16", "float32"):
        return "AFFINE", 0, 1.0
    return spec.qnt_type, spec.zp, spec.scale


def _attr(index: int, spec: TensorSpec, dims: list[int], fmt: str, dtype: str) -> Attr:
    qnt_type, zp, scale = _qnt(spec)
    n = prod(dims)
    size = n * itemsize(dtype)
    return Attr(index, spec.name, dims, fmt, dtype, qnt_type, zp, scale, 0, n, size, 0, size)


def input_attr(index: int, spec: TensorSpec) -> Attr:
    """RKNN_QUERY_INPUT_ATTR: NHWC dims for 4-D inputs; w_stride is the width (no padding)."""
    if len(spec.shape) == 4:
        attr = _attr(index, spec, layouts.nchw_to_nhwc_dims(spec.shape), "NHWC", spec.dtype)
        attr.w_stride = spec.shape[3]
        return attr
    return _attr(index, spec, list(spec.shape), "UNDEFINED", spec.dtype)


def output_attr(index: int, spec: TensorSpec) -> Attr:
    """RKNN_QUERY_OUTPUT_ATTR: the original model layout (NCHW for 4-D), w_stride 0."""
    fmt = "NCHW" if len(spec.shape) == 4 else "UNDEFINED"
    return _attr(index, spec, list(spec.shape), fmt, spec.dtype)


def native_input_attr(index: int, spec: TensorSpec, platform: Platform) -> Attr:
    """RKNN_QUERY_NATIVE_INPUT_ATTR: NHWC with the platform's width alignment, or NC1HWC2."""
    fmt = layouts.native_input_format(spec.shape)
    if fmt == "NHWC":
        n, c, h, w = spec.shape
        attr = _attr(index, spec, [n, h, w, c], fmt, spec.dtype)
        attr.w_stride = layouts.w_stride(w, platform.width_align_bytes, itemsize(spec.dtype))
        attr.size_with_stride = layouts.size_with_stride(attr.dims, attr.w_stride,
                                                         itemsize(spec.dtype))  # fmt: skip
        return attr
    if fmt == "NC1HWC2":
        dims = layouts.nc1hwc2_dims(spec.shape, platform.c2_for(spec.dtype))
        return _attr(index, spec, dims, fmt, spec.dtype)
    return _attr(index, spec, list(spec.shape), fmt, spec.dtype)


def native_output_attr(index: int, spec: TensorSpec, platform: Platform, nhwc: bool) -> Attr:
    """RKNN_QUERY_NATIVE_OUTPUT_ATTR (NC1HWC2 for 4-D) or NATIVE_NHWC_OUTPUT_ATTR (NHWC)."""
    if len(spec.shape) != 4:
        return _attr(index, spec, list(spec.shape), "UNDEFINED", spec.dtype)
    if nhwc:
        return _attr(index, spec, layouts.nchw_to_nhwc_dims(spec.shape), "NHWC", spec.dtype)
    dims = layouts.nc1hwc2_dims(spec.shape, platform.c2_for(spec.dtype))
    return _attr(index, spec, dims, "NC1HWC2", spec.dtype)
