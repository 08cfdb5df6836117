"""`RKNNLite`: the Python layer of rknn-toolkit-lite2, over rknnrt's C-shaped API.

Methods return 0 on success and -1 on failure (with the runtime's `E RKNN:` line), as the
vendor's do; `inference` returns a list of float32 arrays, or None on failure.

Input rules (the vendor's): a 4-D input is NHWC unless `data_format` says 'nchw'; a 3-D array
for a 4-D input is one image (HWC, or CHW with 'nchw') and gets its batch dim; float64 and other
dtypes the runtime does not take are converted to float32; a dynamic-shape model gets its input
shapes chosen from the arrays before each run.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

import numpy as np

from . import api as rk
from .api.marshal import log_error, log_muted
from .model import files

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
        self._input_ranks: list[int] = []
        self._input_types: list[int] = []
        self._dynamic = False
        self._current_shapes: list[tuple[int, ...]] | None = None

    def load_rknn(self, path: str | os.PathLike | bytes | bytearray) -> int:
        """A model file's path (vendor), or its bytes (rknnrt extension)."""
        if isinstance(path, (bytes, bytearray, memoryview)):
            self._model = bytes(path)
            return 0
        try:
            self._model = files.read_bytes(path)
        except OSError as exc:
            log_error(f"load_rknn: cannot read {os.fspath(path)!r}: {exc}")
            return -1
        return 0

    def init_runtime(
        self, target: str | None = None, device_id: str | None = None,
        async_mode: bool = False, core_mask: int = NPU_CORE_AUTO, *, perf_debug: bool = False,
    ) -> int:  # fmt: skip
        """`perf_debug` (rknnrt extension, as the toolkit's) collects the per-layer table."""
        if self._model is None:
            log_error("init_runtime: no model loaded; call load_rknn first")
            return -1
        self.release()
        flag = rk.RKNN_FLAG_ASYNC_MASK if async_mode else 0
        flag |= rk.RKNN_FLAG_COLLECT_PERF_MASK if perf_debug else 0
        if rk.rknn_init(ctypes.byref(self._ctx), self._model, len(self._model), flag, None):
            return -1
        if core_mask != self.NPU_CORE_AUTO and rk.rknn_set_core_mask(self._ctx, core_mask):
            self.release()
            return -1
        num = rk.rknn_input_output_num()
        self._query(rk.RKNN_QUERY_IN_OUT_NUM, num)
        self._n_inputs, self._n_outputs = num.n_input, num.n_output
        attrs = [self._attr(rk.RKNN_QUERY_INPUT_ATTR, i) for i in range(self._n_inputs)]
        self._input_ranks = [a.n_dims for a in attrs]
        self._input_types = [a.type for a in attrs]
        dyn = rk.rknn_input_range(index=0)
        self._dynamic = self._query(rk.RKNN_QUERY_INPUT_DYNAMIC_RANGE, dyn, quiet=True) == 0 \
            and dyn.shape_number > 0  # fmt: skip
        self._current_shapes = None
        return 0

    def _query(self, cmd: int, info: ctypes.Structure, quiet: bool = False) -> int:
        if quiet:  # a probe whose failure is an answer, not an error
            with log_muted():
                return rk.rknn_query(self._ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))
        return rk.rknn_query(self._ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))

    def _attr(self, cmd: int, index: int) -> rk.rknn_tensor_attr:
        attr = rk.rknn_tensor_attr(index=index)
        self._query(cmd, attr)
        return attr

    def _prepare(
        self, inputs: Sequence[np.ndarray] | np.ndarray, data_format: str | Sequence[str] | None
    ) -> tuple[list[np.ndarray], list[int]]:
        """The arrays as the runtime takes them, and each one's rknn_tensor_format."""
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        arrays = [np.asarray(x) for x in inputs]
        if len(arrays) != self._n_inputs:
            raise ValueError(f"the model has {self._n_inputs} inputs, {len(arrays)} were given")
        if isinstance(data_format, (str, type(None))):
            formats = [data_format] * len(arrays)
        else:
            formats = list(data_format)
            if len(formats) != len(arrays):
                raise ValueError(f"data_format has {len(formats)} entries for {len(arrays)} inputs")
        prepared, fmts = [], []
        for i, (x, fmt) in enumerate(zip(arrays, formats)):
            name = (fmt or "nhwc").lower()
            if name not in _FORMATS:
                raise ValueError(f"data_format '{fmt}' of input {i} is not 'nhwc' or 'nchw'")
            if self._input_ranks[i] == 4 and x.ndim == 3:
                x = x[np.newaxis]  # one image: HWC (or CHW with 'nchw')
            if x.dtype.kind not in "fiub":
                raise ValueError(f"input {i} has dtype {x.dtype}, not a number type")
            x = x.astype(self._feed_dtype(i, x.dtype), copy=False)
            prepared.append(np.ascontiguousarray(x))
            fmts.append(_FORMATS[name] if x.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED)
        return prepared, fmts

    def _feed_dtype(self, index: int, dtype: np.dtype) -> np.dtype:
        """The vendor converts what the runtime would refuse: an integer model input gets its
        own type; any other input takes what the runtime accepts as given, else float32."""
        model_type = self._input_types[index]
        integer = {rk.RKNN_TENSOR_INT32: np.int32, rk.RKNN_TENSOR_INT64: np.int64,
                   rk.RKNN_TENSOR_BOOL: np.bool_, rk.RKNN_TENSOR_INT16: np.int16}  # fmt: skip
        if model_type in integer:
            return np.dtype(integer[model_type])
        accepted = (np.float32, np.float16, np.uint8, np.int8) \
            if model_type in (rk.RKNN_TENSOR_INT8, rk.RKNN_TENSOR_UINT8) \
            else (np.float32, np.float16, np.uint8)  # fmt: skip
        if dtype in accepted:
            return np.dtype(dtype)
        return np.dtype(np.float32)

    def _choose_shapes(self, arrays: list[np.ndarray], fmts: list[int]) -> None:
        """Dynamic-shape models: the shape set matching the arrays (NHWC dims for 4-D)."""
        shapes = [tuple(x.shape) if f != rk.RKNN_TENSOR_NCHW else
                  (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
                  for x, f in zip(arrays, fmts)]  # fmt: skip
        if shapes == self._current_shapes:
            return
        attrs = (rk.rknn_tensor_attr * len(arrays))()
        for i, shape in enumerate(shapes):
            attrs[i].index, attrs[i].n_dims = i, len(shape)
            attrs[i].fmt = rk.RKNN_TENSOR_NHWC if len(shape) == 4 else rk.RKNN_TENSOR_UNDEFINED
            for d, v in enumerate(shape):
                attrs[i].dims[d] = v
        if rk.rknn_set_input_shapes(self._ctx, len(arrays), attrs):
            raise RuntimeError("")  # the runtime logged why
        self._current_shapes = shapes

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
        if inputs is None:
            log_error("inference: inputs is None; give one array per model input")
            return None
        try:
            arrays, fmts = self._prepare(inputs, data_format)
            if self._dynamic:
                self._choose_shapes(arrays, fmts)
            for i, x in enumerate(arrays if not self._dynamic else ()):
                want = self._attr(rk.RKNN_QUERY_INPUT_ATTR, i)  # never silently cut or padded
                if x.size != want.n_elems:
                    dims = list(want.dims[: want.n_dims])
                    raise ValueError(f"input {i} has {x.size} values {list(x.shape)}, the model "
                                     f"wants {want.n_elems} {dims}")  # fmt: skip
        except ValueError as exc:
            log_error(f"inference: {exc}")
            return None
        except RuntimeError:
            return None
        passes = list(inputs_pass_through or [0] * len(arrays))
        c_inputs = (rk.rknn_input * len(arrays))()
        for i, (x, fmt, pt) in enumerate(zip(arrays, fmts, passes)):
            c_inputs[i].index, c_inputs[i].buf, c_inputs[i].size = i, x.ctypes.data, x.nbytes
            c_inputs[i].type, c_inputs[i].pass_through = _TYPES[x.dtype], int(pt)
            c_inputs[i].fmt = fmt
        if rk.rknn_inputs_set(self._ctx, len(arrays), c_inputs):
            return None
        if rk.rknn_run(self._ctx, None):
            return None
        return self._outputs()

    def _outputs(self) -> list[np.ndarray] | None:
        c_outputs = (rk.rknn_output * self._n_outputs)()
        for o in c_outputs:
            o.want_float = 1
        if rk.rknn_outputs_get(self._ctx, self._n_outputs, c_outputs, None):
            return None
        results = []
        try:
            for i, o in enumerate(c_outputs):
                # the shapes in effect (a dynamic-shape model's depend on its current inputs)
                attr = self._attr(rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR, i)
                data = np.frombuffer((ctypes.c_char * o.size).from_address(o.buf), np.float32)
                results.append(data.reshape(list(attr.dims[: attr.n_dims])).copy())
        finally:
            rk.rknn_outputs_release(self._ctx, self._n_outputs, c_outputs)
        return results

    def io_num(self) -> tuple[int, int]:
        """(inputs, outputs) of the initialised model (rknnrt extension)."""
        return self._n_inputs, self._n_outputs

    def input_shapes(self) -> list[tuple[tuple[int, ...], np.dtype]]:
        """Each input's shape (NHWC for 4-D) and the dtype it is fed as (rknnrt extension)."""
        out = []
        for i in range(self._n_inputs):
            attr = self._attr(rk.RKNN_QUERY_INPUT_ATTR, i)
            dtype = {v: k for k, v in _TYPES.items()}.get(attr.type, np.dtype(np.float32))
            out.append((tuple(attr.dims[: attr.n_dims]), dtype))
        return out

    def perf_detail(self) -> str | None:
        """The per-layer table of the last run (rknnrt extension; needs perf_debug=True)."""
        detail = rk.rknn_perf_detail()
        if not self._ctx.value or self._query(rk.RKNN_QUERY_PERF_DETAIL, detail):
            return None
        return (detail.perf_data or b"").decode(errors="replace")

    def perf_run_us(self) -> int | None:
        """Microseconds of the last run (rknnrt extension)."""
        perf = rk.rknn_perf_run()
        if not self._ctx.value or self._query(rk.RKNN_QUERY_PERF_RUN, perf):
            return None
        return int(perf.run_duration)

    def mem_size(self) -> dict[str, int] | None:
        """RKNN_QUERY_MEM_SIZE as a dict (rknnrt extension)."""
        mem = rk.rknn_mem_size()
        if not self._ctx.value or self._query(rk.RKNN_QUERY_MEM_SIZE, mem):
            return None
        return {name: int(getattr(mem, name)) for name, _ in mem._fields_
                if name != "reserved"}  # fmt: skip

    def register_custom_ops(self, ops: Sequence[object]) -> int:
        """rknn_register_custom_ops on this context, after init_runtime (rknnrt extension):
        each op an rknn_custom_op or a toolkit2-style class (op_type, compute(node, inputs))."""
        if not self._ctx.value:
            log_error("register_custom_ops: the runtime is not initialised; call init_runtime")
            return -1
        return -1 if rk.rknn_register_custom_ops(self._ctx, list(ops), len(ops)) else 0

    def get_sdk_version(self) -> str:
        version = rk.rknn_sdk_version()
        if not self._ctx.value or self._query(rk.RKNN_QUERY_SDK_VERSION, version):
            return ""
        api, drv = version.api_version.decode(), version.drv_version.decode()
        return f"RKNN VERSION:\n  API: {api}\n  DRV: rknnrt: {api}, driver: {drv}"

    def list_support_target_platform(self, rknn_model: str | None = None) -> list[str]:
        """The platforms rknnrt simulates (the vendor lists those the model can run on)."""
        from .model import targets

        return list(targets.NAMES)

    def release(self) -> None:
        if self._ctx.value:
            rk.rknn_destroy(self._ctx)
            self._ctx.value = 0
