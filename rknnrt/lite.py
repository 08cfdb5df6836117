"""`RKNNLite`: the Python layer of rknn-toolkit-lite2, over rknnrt's C-shaped API.

Methods return 0 on success and -1 on failure (with the runtime's `E RKNN:` line), as the
vendor's do; `inference` returns a list of float32 arrays, or None on failure.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

import numpy as np

from . import api as rk
from .core.log import error as log_error

_TYPES = {
    np.dtype(np.float32): rk.RKNN_TENSOR_FLOAT32, np.dtype(np.float16): rk.RKNN_TENSOR_FLOAT16,
    np.dtype(np.uint8): rk.RKNN_TENSOR_UINT8, np.dtype(np.int8): rk.RKNN_TENSOR_INT8,
    np.dtype(np.int16): rk.RKNN_TENSOR_INT16, np.dtype(np.int32): rk.RKNN_TENSOR_INT32,
    np.dtype(np.int64): rk.RKNN_TENSOR_INT64, np.dtype(np.bool_): rk.RKNN_TENSOR_BOOL,
}  # fmt: skip
_FORMATS = {"nhwc": rk.RKNN_TENSOR_NHWC, "nchw": rk.RKNN_TENSOR_NCHW}


class RKNNLite:
    NPU_CORE_AUTO = rk.RKNN_NPU_CORE_AUTO
    NPU_CORE_0 = rk.RKNN_NPU_CORE_0
    NPU_CORE_1 = rk.RKNN_NPU_CORE_1
    NPU_CORE_2 = rk.RKNN_NPU_CORE_2
    NPU_CORE_0_1 = rk.RKNN_NPU_CORE_0_1
    NPU_CORE_0_1_2 = rk.RKNN_NPU_CORE_0_1_2
    NPU_CORE_ALL = rk.RKNN_NPU_CORE_ALL

    def __init__(self, verbose: bool = False, verbose_file: str | None = None) -> None:
        self.verbose = verbose
        self._model: bytes | None = None
        self._ctx = rk.rknn_context(0)
        self._n_inputs = self._n_outputs = 0

    def load_rknn(self, path: str | os.PathLike) -> int:
        try:
            with open(path, "rb") as f:
                self._model = f.read()
        except OSError as exc:
            log_error(f"load_rknn: cannot read {os.fspath(path)!r}: {exc}")
            return -1
        return 0

    def init_runtime(
        self, target: str | None = None, device_id: str | None = None,
        async_mode: bool = False, core_mask: int = NPU_CORE_AUTO,
    ) -> int:  # fmt: skip
        if self._model is None:
            log_error("init_runtime: no model loaded; call load_rknn first")
            return -1
        self.release()
        flag = rk.RKNN_FLAG_ASYNC_MASK if async_mode else 0
        if rk.rknn_init(ctypes.byref(self._ctx), self._model, len(self._model), flag, None):
            return -1
        if core_mask != self.NPU_CORE_AUTO and rk.rknn_set_core_mask(self._ctx, core_mask):
            self.release()
            return -1
        num = rk.rknn_input_output_num()
        rk.rknn_query(self._ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num), ctypes.sizeof(num))
        self._n_inputs, self._n_outputs = num.n_input, num.n_output
        return 0

    def inference(
        self, inputs: Sequence[np.ndarray], data_format: str | Sequence[str] | None = None,
        inputs_pass_through: Sequence[int] | None = None, get_frame_id: bool = False,
    ) -> list[np.ndarray] | None:  # fmt: skip
        """float32 outputs (dequantised), or None after an `E RKNN:` line. `data_format`:
        'nhwc' (default for 4-D) or 'nchw', one for all inputs or one per input.
        `get_frame_id` is accepted for compatibility and has no effect."""
        if not self._ctx.value:
            log_error("inference: runtime not initialised; call init_runtime first")
            return None
        arrays = [np.ascontiguousarray(x) for x in inputs]
        formats = [data_format] * len(arrays) if isinstance(data_format, (str, type(None))) \
            else list(data_format)  # fmt: skip
        passes = list(inputs_pass_through or [0] * len(arrays))
        c_inputs = (rk.rknn_input * len(arrays))()
        for i, (x, fmt, pt) in enumerate(zip(arrays, formats, passes)):
            if x.dtype not in _TYPES:
                log_error(f"inference: input {i} has unsupported dtype {x.dtype}")
                return None
            c_inputs[i].index, c_inputs[i].buf, c_inputs[i].size = i, x.ctypes.data, x.nbytes
            c_inputs[i].type, c_inputs[i].pass_through = _TYPES[x.dtype], int(pt)
            default = rk.RKNN_TENSOR_NHWC if x.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED
            c_inputs[i].fmt = _FORMATS.get((fmt or "").lower(), default)
        if rk.rknn_inputs_set(self._ctx, len(arrays), c_inputs):
            return None
        if rk.rknn_run(self._ctx, None):
            return None
        c_outputs = (rk.rknn_output * self._n_outputs)()
        for o in c_outputs:
            o.want_float = 1
        if rk.rknn_outputs_get(self._ctx, self._n_outputs, c_outputs, None):
            return None
        results = []
        try:
            for i, o in enumerate(c_outputs):
                # the shapes in effect (a dynamic-shape model's depend on its current inputs)
                attr = rk.rknn_tensor_attr(index=i)
                rk.rknn_query(self._ctx, rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR, ctypes.byref(attr),
                              ctypes.sizeof(attr))  # fmt: skip
                data = np.frombuffer((ctypes.c_char * o.size).from_address(o.buf), np.float32)
                results.append(data.reshape(list(attr.dims[: attr.n_dims])).copy())
        finally:
            rk.rknn_outputs_release(self._ctx, self._n_outputs, c_outputs)
        return results

    def get_sdk_version(self) -> str:
        version = rk.rknn_sdk_version()
        if not self._ctx.value or rk.rknn_query(
            self._ctx, rk.RKNN_QUERY_SDK_VERSION, ctypes.byref(version), ctypes.sizeof(version)
        ):
            return ""
        api, drv = version.api_version.decode(), version.drv_version.decode()
        return f"RKNN VERSION:\n  API: {api}\n  DRV: rknnrt: {api}, driver: {drv}"

    def release(self) -> None:
        if self._ctx.value:
            rk.rknn_destroy(self._ctx)
            self._ctx.value = 0
