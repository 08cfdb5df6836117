"""The one output pipeline: dequantise -> layout -> cast (facts §5.2, §5.5).

rknn_outputs_get (`output_as`: float32 with want_float, else the model's dtype, in the model
layout) and memory bound with rknn_set_io_mem (`write_output`: any bound type and layout) both
go through `_staged`, so the two cannot drift apart again (issue 10: an int8 output bound as
FLOAT32 NHWC used to get the raw int8 values re-laid out).
"""

from __future__ import annotations

import numpy as np

from ...model import numerics
from ...model.dtypes import numpy_dtype
from ...model.meta import TensorSpec
from . import layouts

FLOATS = ("float32", "float16")
# Types an output may be bound as with rknn_set_io_mem.
BOUND_OUTPUT_TYPES = ("float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")


def dequantize(result: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """(q - zp) * scale for an int8 output with affine parameters; a float32 copy otherwise."""
    if spec.qnt_type != "AFFINE" or result.dtype != np.int8:
        return result.astype(np.float32)
    return numerics.dequantize(result, spec.scale, spec.zp)


def _staged(result: np.ndarray, spec: TensorSpec, dtype: str, fmt: str, c2: int) -> np.ndarray:
    """`result` (model layout and dtype) dequantised when a float type is asked of an int8
    output, then laid out as `fmt`; the final cast is the caller's (into its target)."""
    data = dequantize(result, spec) if dtype in FLOATS and result.dtype == np.int8 else result
    if data.ndim == 4 and fmt == "NHWC":
        return layouts.nchw_to_nhwc(data)
    if data.ndim == 4 and fmt == "NC1HWC2":
        return layouts.nchw_to_nc1hwc2(data, c2)
    return data


def output_as(result: np.ndarray, spec: TensorSpec, dtype: str, fmt: str = "NCHW",
              c2: int = 0) -> np.ndarray:  # fmt: skip
    """A C-contiguous array of `dtype` in `fmt`; `result` itself when nothing changes."""
    data = _staged(result, spec, dtype, fmt, c2)
    target = numpy_dtype(dtype)
    if data.dtype == target and data.flags.c_contiguous:
        return data
    return np.ascontiguousarray(data, dtype=target)


def write_output(result: np.ndarray, spec: TensorSpec, dst: np.ndarray, dtype: str, fmt: str,
                 c2: int) -> None:  # fmt: skip
    """Store `result` into `dst` (uint8 bytes) as `dtype` in `fmt`, casting on the copy."""
    data = _staged(result, spec, dtype, fmt, c2)
    target = numpy_dtype(dtype)
    need = data.size * target.itemsize
    np.copyto(dst[:need].view(target).reshape(data.shape), data, casting="unsafe")
