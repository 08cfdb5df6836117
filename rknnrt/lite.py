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
from .api.marshal import log_error
from .client import Client, ClientError
from .model import dtypes, files

# numpy dtype -> rknn_tensor_type of the types inference() passes as they are
_TYPES = {t.numpy: t.rknn for t in dtypes.named(
    "float32", "float16", "uint8", "int8", "int16", "int32", "int64", "bool")}  # fmt: skip
_FORMATS = {"nhwc": rk.RKNN_TENSOR_NHWC, "nchw": rk.RKNN_TENSOR_NCHW}
# what an input is fed as (_feed_dtype): an integer model input's own type; the types the
# runtime takes as they are for an int8/uint8 input, and for the others
_INTEGER_INPUTS = {rk.RKNN_TENSOR_INT32: np.dtype(np.int32),
                   rk.RKNN_TENSOR_INT64: np.dtype(np.int64),
                   rk.RKNN_TENSOR_BOOL: np.dtype(np.bool_),
                   rk.RKNN_TENSOR_INT16: np.dtype(np.int16)}
_BYTE_INPUT_FEEDS = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.uint8, np.int8))
_OTHER_INPUT_FEEDS = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.uint8))
_FLOAT32 = np.dtype(np.float32)


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
        self._client: Client | None = None
        self._n_inputs = self._n_outputs = 0
        self._input_ranks: list[int] = []
        self._input_types: list[int] = []
        self._input_sizes: list[int] = []
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
        try:
            self._client = Client(self._model, flag)
            if core_mask != self.NPU_CORE_AUTO:
                self._client.set_core_mask(core_mask)
        except ClientError:  # the runtime printed why
            self.release()
            return -1
        self._n_inputs, self._n_outputs = len(self._client.inputs), len(self._client.outputs)
        self._input_ranks = [a.n_dims for a in self._client.inputs]
        self._input_types = [a.type for a in self._client.inputs]
        self._input_sizes = [a.n_elems for a in self._client.inputs]
        self._current_shapes = None
        return 0

    @property
    def _ctx(self) -> rk.rknn_context:
        """The context handle (0 before init_runtime): for callers of the C API beside this."""
        return self._client.ctx if self._client is not None else rk.rknn_context(0)

    def _query(self, cmd: int, info: ctypes.Structure) -> int:
        """The status of one query of the initialised context (-1 when there is none)."""
        return self._client.status(cmd, info) if self._client is not None else -1

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
        if model_type in _INTEGER_INPUTS:
            return _INTEGER_INPUTS[model_type]
        accepted = _BYTE_INPUT_FEEDS \
            if model_type in (rk.RKNN_TENSOR_INT8, rk.RKNN_TENSOR_UINT8) \
            else _OTHER_INPUT_FEEDS  # fmt: skip
        return dtype if dtype in accepted else _FLOAT32

    def _choose_shapes(self, arrays: list[np.ndarray], fmts: list[int]) -> None:
        """Dynamic-shape models: the shape set matching the arrays (NHWC dims for 4-D)."""
        shapes = [tuple(x.shape) if f != rk.RKNN_TENSOR_NCHW else
                  (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
                  for x, f in zip(arrays, fmts)]  # fmt: skip
        if shapes == self._current_shapes:
            return
        self._client.set_input_shapes(shapes)
        self._current_shapes = shapes

    def inference(
        self, inputs: Sequence[np.ndarray], data_format: str | Sequence[str] | None = None,
        inputs_pass_through: Sequence[int] | None = None, get_frame_id: bool = False,
    ) -> list[np.ndarray] | None:  # fmt: skip
        """float32 outputs (dequantised), or None after an `E RKNN:` line. `data_format`:
        'nhwc' (default for 4-D) or 'nchw', one for all inputs or one per input.
        `get_frame_id` is accepted for compatibility and has no effect."""
        client = self._client
        if client is None:
            log_error("inference: runtime not initialised; call init_runtime first")
            return None
        if inputs is None:
            log_error("inference: inputs is None; give one array per model input")
            return None
        try:
            arrays, fmts = self._prepare(inputs, data_format)
            for i, x in enumerate(arrays if not client.dynamic else ()):
                if x.size != self._input_sizes[i]:  # never silently cut or padded
                    want = client.inputs[i]
                    dims = list(want.dims[: want.n_dims])
                    raise ValueError(f"input {i} has {x.size} values {list(x.shape)}, the model "
                                     f"wants {want.n_elems} {dims}")  # fmt: skip
        except ValueError as exc:
            log_error(f"inference: {exc}")
            return None
        try:
            if client.dynamic:
                self._choose_shapes(arrays, fmts)
            return client.infer(arrays, [_TYPES[x.dtype] for x in arrays], fmts,
                                inputs_pass_through)
        except ClientError:  # the runtime printed why
            return None

    def io_num(self) -> tuple[int, int]:
        """(inputs, outputs) of the initialised model (rknnrt extension)."""
        return self._n_inputs, self._n_outputs

    def input_shapes(self) -> list[tuple[tuple[int, ...], np.dtype]]:
        """Each input's shape (NHWC for 4-D) and the dtype it is fed as (rknnrt extension)."""
        out = []
        for i in range(self._n_inputs):
            attr = rk.rknn_tensor_attr(index=i)
            self._query(rk.RKNN_QUERY_INPUT_ATTR, attr)
            dtype = {v: k for k, v in _TYPES.items()}.get(attr.type, np.dtype(np.float32))
            out.append((tuple(attr.dims[: attr.n_dims]), dtype))
        return out

    def perf_detail(self) -> str | None:
        """The per-layer table of the last run (rknnrt extension; needs perf_debug=True)."""
        detail = rk.rknn_perf_detail()
        if self._query(rk.RKNN_QUERY_PERF_DETAIL, detail):
            return None
        return (detail.perf_data or b"").decode(errors="replace")

    def perf_run_us(self) -> int | None:
        """Microseconds of the last run (rknnrt extension)."""
        perf = rk.rknn_perf_run()
        if self._query(rk.RKNN_QUERY_PERF_RUN, perf):
            return None
        return int(perf.run_duration)

    def mem_size(self) -> dict[str, int] | None:
        """RKNN_QUERY_MEM_SIZE as a dict (rknnrt extension)."""
        mem = rk.rknn_mem_size()
        if self._query(rk.RKNN_QUERY_MEM_SIZE, mem):
            return None
        return {name: int(getattr(mem, name)) for name, _ in mem._fields_
                if name != "reserved"}  # fmt: skip

    def register_custom_ops(self, ops: Sequence[object]) -> int:
        """rknn_register_custom_ops on this context, after init_runtime (rknnrt extension):
        each op an rknn_custom_op or a toolkit2-style class (op_type, compute(node, inputs))."""
        if self._client is None:
            log_error("register_custom_ops: the runtime is not initialised; call init_runtime")
            return -1
        try:
            self._client.register_custom_ops(ops)
        except ClientError:
            return -1
        return 0

    def get_sdk_version(self) -> str:
        version = rk.rknn_sdk_version()
        if self._query(rk.RKNN_QUERY_SDK_VERSION, version):
            return ""
        api, drv = version.api_version.decode(), version.drv_version.decode()
        return f"RKNN VERSION:\n  API: {api}\n  DRV: rknnrt: {api}, driver: {drv}"

    def list_support_target_platform(self, rknn_model: str | None = None) -> list[str]:
        """The platforms rknnrt simulates (the vendor lists those the model can run on)."""
        from .model import targets

        return list(targets.NAMES)

    def release(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
