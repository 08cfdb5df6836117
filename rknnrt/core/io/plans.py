"""Conversions between application buffers and the NPU program's tensors (facts §5.3).

An InputPlan is made once per model input at rknn_init, so that rknn_inputs_set only views the
caller's bytes, checks a size and does one numpy copy (plus normalisation when configured).
"""

from __future__ import annotations

from math import prod

import numpy as np

from ...model import numerics
from ...model.dtypes import numpy_dtype
from ...model.meta import TensorSpec
from ..errors import PARAM_INVALID, RknnError
from ..platforms import Platform
from ..program import input_casts
from . import attrs, conversions, layouts

# Buffer types rknn_inputs_set accepts per model input dtype (UG15 Table 4-1, UG Table 5-3).
_ALLOWED_SOURCES = {
    "float32": ("float32", "float16", "uint8"),
    "float16": ("float32", "float16", "uint8"),
    "int8": ("int8", "uint8", "float32", "float16"),
    "uint8": ("uint8",),
    "int16": ("int16",),
    "int32": ("int32",),
    "int64": ("int64",),
    "bool": ("bool",),
}


_FLOAT32, _INT8 = np.dtype(np.float32), np.dtype(np.int8)


class InputPlan:
    """How one model input turns caller data into the program's tensor (model layout, NCHW)."""

    def __init__(self, index: int, spec: TensorSpec, platform: Platform) -> None:
        self.index = index
        self.spec = spec
        self.shape = tuple(spec.shape)
        self.dtype = numpy_dtype(spec.dtype)
        self.n_elems = prod(spec.shape)
        self.is_4d = len(spec.shape) == 4
        self.allowed = _ALLOWED_SOURCES.get(spec.dtype, (spec.dtype,))
        self.native = attrs.native_input_attr(index, spec, platform)
        self.mean = self.std = None
        # int8 and float16 inputs are normalised and converted in float32 first
        self.staged = spec.dtype in ("int8", "float16")
        self.quantized = spec.dtype == "int8" and spec.qnt_type == "AFFINE"
        if self.is_4d and spec.dtype in (*conversions.FLOATS, "int8") and (spec.mean or spec.std):
            channels = spec.shape[1]
            mean = np.asarray(spec.mean or [0.0] * channels, np.float32).reshape(1, -1, 1, 1)
            std = np.asarray(spec.std or [1.0] * channels, np.float32).reshape(1, -1, 1, 1)
            if np.any(mean != 0) or np.any(std != 1):  # identity normalisation costs nothing
                self.mean, self.std = mean, std

    def new_buffer(self) -> np.ndarray:
        return np.zeros(self.shape, self.dtype)

    def required_bytes(self, src_dtype: str, src_fmt: str, pass_through: bool,
                       w_stride: int = 0, h_stride: int = 0) -> int:  # fmt: skip
        """Bytes a buffer of this type and layout must hold. NHWC data may have padded rows
        (w_stride pixels) and, for multi-batch inputs, padded batches (h_stride rows)."""
        if pass_through:
            return self.native.size_with_stride
        itemsize = numpy_dtype(src_dtype).itemsize
        if self.is_4d and src_fmt == "NHWC":
            return layouts.nhwc_bytes(self.shape, itemsize, w_stride, h_stride)
        return self.n_elems * itemsize

    def check_source(self, src_dtype: str, src_fmt: str) -> None:
        if src_dtype not in self.allowed:
            raise RknnError(
                PARAM_INVALID,
                f"input {self.index} ({self.spec.name}): buffer type {src_dtype} is not accepted "
                f"for a {self.spec.dtype} model input; use one of {', '.join(self.allowed)}",
            )
        if self.is_4d and src_fmt == "NC1HWC2":
            raise RknnError(
                PARAM_INVALID,
                f"input {self.index}: NC1HWC2 data must be passed with pass_through=1 "
                "(or give NCHW/NHWC data)",
            )

    def convert(
        self, raw: np.ndarray, src_dtype: str, src_fmt: str, pass_through: bool, out: np.ndarray,
        w_stride: int = 0, h_stride: int = 0,
    ) -> None:  # fmt: skip
        """Fill `out` (model shape and dtype) from the caller's bytes `raw` (uint8, 1-D)."""
        if pass_through:
            self._convert_native(raw, out)
            return
        if src_dtype not in self.allowed or (self.is_4d and src_fmt == "NC1HWC2"):
            self.check_source(src_dtype, src_fmt)
        src = numpy_dtype(src_dtype)
        need = self.required_bytes(src_dtype, src_fmt, False, w_stride, h_stride)
        if raw.size < need:
            raise RknnError(
                PARAM_INVALID,
                f"rknn_inputs_set, param input size({raw.size}) < model input size({need}): "
                f"input {self.index} needs n_elems {self.n_elems} x sizeof({src_dtype})",
            )
        data = raw[:need].view(src)
        if self.is_4d and src_fmt == "NHWC":
            rows = layouts.padded_nhwc_view(data, self.shape, w_stride, h_stride)
            data = layouts.nhwc_to_nchw(rows)
        else:
            data = data.reshape(self.shape)
        if self.mean is None and self._fast_cast(data, out):
            return
        target = np.empty(self.shape, np.float32) if self.staged else out
        np.copyto(target, data, casting="unsafe")
        if self.mean is not None:
            np.subtract(target, self.mean, out=target)
            np.divide(target, self.std, out=target)
        if self._fast_cast(target, out):
            return
        if self.quantized:  # facts §5.5: float32 division, half to even, in place
            numerics.quantize(target, self.spec.scale, self.spec.zp, work=target, out=out)
        elif self.staged:
            np.copyto(out, target, casting="unsafe")

    def _fast_cast(self, src: np.ndarray, out: np.ndarray) -> bool:
        """out[...] = float32 `src` quantised (int8 models) or rounded to float16 in one
        onnxruntime pass (or one pass of the compiled kernel, input_casts.in_one_pass), with
        numpy's values (input_casts.fits); False where that does not apply and numpy
        converts."""
        if not self.staged:
            return False
        scale, zp = (self.spec.scale, self.spec.zp) if self.quantized else (None, None)
        if input_casts.in_one_pass(src, out, scale, zp):
            return True
        if not input_casts.fits(src, out):
            return False
        if self.quantized:
            input_casts.quantize_int8(src, self.spec.scale, self.spec.zp, out)
            return True
        if out.dtype == np.float16:
            input_casts.to_float16(src, out)
            return True
        return False

    def _convert_native(self, raw: np.ndarray, out: np.ndarray) -> None:
        """pass_through=1: the bytes are already in the native layout and dtype."""
        native = self.native
        need = native.size_with_stride
        if raw.size < need:
            raise RknnError(
                PARAM_INVALID,
                f"rknn_inputs_set, param input size({raw.size}) < model input size({need}): "
                f"input {self.index} with pass_through=1 needs size_with_stride bytes of "
                f"{native.fmt} {native.dtype} data",
            )
        data = raw[:need].view(self.dtype)
        if native.fmt == "NHWC":
            n, h, w, c = native.dims
            rows = data.reshape(n, h, native.w_stride, c)
            data = layouts.nhwc_to_nchw(layouts.strip_w_stride(rows, w))
        elif native.fmt == "NC1HWC2":
            data = layouts.nc1hwc2_to_nchw(data.reshape(native.dims), self.shape[1])
        else:
            data = data.reshape(self.shape)
        np.copyto(out, data, casting="unsafe")


class OutputPlan:
    """How one program output is handed to the caller by rknn_outputs_get."""

    def __init__(self, index: int, spec: TensorSpec) -> None:
        self.index = index
        self.spec = spec
        self.dtype = numpy_dtype(spec.dtype)
        self.n_elems = prod(spec.shape)
        # an int8 output's float32 parameters: its want_float array is their dequantisation
        # alone (conversions.output_as with the model's layout, fewer steps on the hot path)
        self._affine = (np.float32(spec.scale), np.float32(spec.zp)) \
            if spec.qnt_type == "AFFINE" and spec.dtype == "int8" else None  # fmt: skip

    def convert(self, result: np.ndarray, want_float: bool) -> np.ndarray:
        """rknn_outputs_get's array: float32 (want_float) or the model's dtype, model layout."""
        target = _FLOAT32 if want_float else self.dtype
        if result.dtype == target and result.flags.c_contiguous:  # the hot path: as it is
            return result
        if want_float and self._affine is not None and result.dtype == _INT8 \
                and result.flags.c_contiguous:  # fmt: skip
            return numerics.dequantize(result, *self._affine)
        if target == _FLOAT32 and input_casts.widen_fits(result):  # a float16 output
            return input_casts.to_float32(result)
        # the type's name as the table spells it, not numpy's dtype.name (Python code in
        # numpy: ~50 us read cold after a run)
        name = "float32" if want_float else self.spec.dtype
        return conversions.output_as(result, self.spec, name)
