"""The two models of an evaluation: the converted model on rknnrt's runtime (through the public
C-shaped API, as a board application) and the float reference on onnxruntime.

Both run with a fixed number of onnxruntime intra-op threads (default 1): one thread per worker
is what lets workers scale, and it makes every run's arithmetic the same in every process. The
runtime's switch for it is the documented `RKNNRT_NUM_THREADS` variable, read at rknn_init.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator, Sequence

import numpy as np

import rknnrt as rk

from ..model import container, dtypes
from ..model.meta import ModelMeta
from ..sessions import factory, policies
from .data import InputSpec, to_nchw

# numpy dtype -> rknn_tensor_type of the types fed as they are (others as float32)
_RK_TYPES = {t.numpy: t.rknn for t in dtypes.named("uint8", "int8", "float32", "float16")}


class EvaluationError(RuntimeError):
    """A model that cannot be loaded or run; the message says which and why."""


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    previous = os.environ.get("RKNNRT_NUM_THREADS")
    if count is not None:
        os.environ["RKNNRT_NUM_THREADS"] = str(count)
    try:
        yield
    finally:
        if count is not None:
            if previous is None:
                os.environ.pop("RKNNRT_NUM_THREADS", None)
            else:
                os.environ["RKNNRT_NUM_THREADS"] = previous


def normalisation(model: bytes) -> tuple[list[list[float] | None], list[list[float] | None]]:
    """The mean and std per input that the runtime applies (from the model's metadata); None
    where the file does not say (a vendor file: give them to the reference yourself)."""
    try:
        sections = container.read(memoryview(model))
        meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
    except Exception:  # a vendor file or a corrupt one: the runtime reports the latter
        return [], []
    return [t.mean for t in meta.inputs], [t.std for t in meta.inputs]


class ModelRunner:
    """One rknnrt context: model loaded once, then `run(inputs)` per sample."""

    def __init__(self, model: bytes, threads: int | None = 1) -> None:
        self.ctx = rk.rknn_context(0)
        with _threads(threads):
            ret = rk.rknn_init(ctypes.byref(self.ctx), model, len(model), 0, None)
        if ret != rk.RKNN_SUCC:
            raise EvaluationError(f"rknn_init failed with status {ret}")
        num = rk.rknn_input_output_num()
        self._query(rk.RKNN_QUERY_IN_OUT_NUM, num)
        self.inputs = [self._input_spec(i) for i in range(num.n_input)]
        self.n_outputs = num.n_output
        self.output_names = []
        for i in range(num.n_output):
            attr = rk.rknn_tensor_attr(index=i)
            self._query(rk.RKNN_QUERY_OUTPUT_ATTR, attr)
            self.output_names.append(attr.name.decode())

    def _query(self, cmd: int, info: ctypes.Structure) -> None:
        ret = rk.rknn_query(self.ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))
        if ret != rk.RKNN_SUCC:
            raise EvaluationError(f"rknn_query({cmd}) failed with status {ret}")

    def _input_spec(self, index: int) -> InputSpec:
        attr = rk.rknn_tensor_attr(index=index)
        self._query(rk.RKNN_QUERY_INPUT_ATTR, attr)
        dims = tuple(attr.dims[: attr.n_dims])
        return InputSpec(
            attr.name.decode(), dims, attr.n_dims == 4 and attr.fmt == rk.RKNN_TENSOR_NHWC
        )

    def run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        c_inputs = (rk.rknn_input * len(arrays))()
        for i, (x, spec) in enumerate(zip(arrays, self.inputs)):
            if x.dtype not in _RK_TYPES:
                x = np.ascontiguousarray(x, np.float32)
            c_inputs[i].index, c_inputs[i].buf, c_inputs[i].size = i, x.ctypes.data, x.nbytes
            c_inputs[i].type = _RK_TYPES[x.dtype]
            nchw = spec.nhwc and tuple(x.shape) != spec.dims
            c_inputs[i].fmt = (
                rk.RKNN_TENSOR_NCHW
                if nchw
                else (rk.RKNN_TENSOR_NHWC if x.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED)
            )
        if rk.rknn_inputs_set(self.ctx, len(arrays), c_inputs) or rk.rknn_run(self.ctx, None):
            raise EvaluationError("rknn_inputs_set/rknn_run failed (see the E RKNN: line)")
        outs = (rk.rknn_output * self.n_outputs)()
        for o in outs:
            o.want_float = 1
        if rk.rknn_outputs_get(self.ctx, self.n_outputs, outs, None):
            raise EvaluationError("rknn_outputs_get failed (see the E RKNN: line)")
        try:
            results = []
            for i, o in enumerate(outs):
                attr = rk.rknn_tensor_attr(index=i)
                self._query(rk.RKNN_QUERY_CURRENT_OUTPUT_ATTR, attr)
                data = np.frombuffer((ctypes.c_char * o.size).from_address(o.buf), np.float32)
                results.append(data.reshape(list(attr.dims[: attr.n_dims])).copy())
        finally:
            rk.rknn_outputs_release(self.ctx, self.n_outputs, outs)
        return results

    def close(self) -> None:
        if self.ctx.value:
            rk.rknn_destroy(self.ctx)
            self.ctx.value = 0


class Reference:
    """The float model on onnxruntime, fed what the runtime computes from the same bytes:
    (x - mean) / std in the ONNX layout."""

    def __init__(
        self,
        onnx_model: str | bytes,
        inputs: Sequence[InputSpec],
        mean: Sequence[Sequence[float] | None],
        std: Sequence[Sequence[float] | None],
        threads: int | None = 1,
    ) -> None:
        try:
            self.session = factory.create(onnx_model, policies.REFERENCE, threads=threads)
        except Exception as exc:
            raise EvaluationError(f"cannot load the reference model: {exc}") from None
        self.names = [i.name for i in self.session.get_inputs()]
        if len(self.names) != len(inputs):
            raise EvaluationError(
                f"the reference has {len(self.names)} inputs, the model {len(inputs)}"
            )
        self.inputs = list(inputs)
        self.scales = []
        for k in range(len(inputs)):
            m = mean[k] if k < len(mean) else None
            s = std[k] if k < len(std) else None
            self.scales.append(
                (
                    None if m is None else np.asarray(m, np.float32).reshape(1, -1, 1, 1),
                    None if s is None else np.asarray(s, np.float32).reshape(1, -1, 1, 1),
                )
            )

    def run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        feed = {}
        for name, x, spec, (m, s) in zip(self.names, arrays, self.inputs, self.scales):
            x = to_nchw(x, spec).astype(np.float32)
            if x.ndim == 4:
                if m is not None:
                    x = x - m
                if s is not None:
                    x = x / s
            feed[name] = x
        return [np.asarray(o, np.float32) for o in self.session.run(None, feed)]
