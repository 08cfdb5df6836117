"""The two models of an evaluation: the converted model on rknnrt's runtime (through the public
C-shaped API, as a board application) and the float reference on onnxruntime.

Both run with a fixed number of onnxruntime intra-op threads (default 1): one thread per worker
is what lets workers scale, and it makes every run's arithmetic the same in every process. The
count is an argument of the context (rknnrt.client.Client), never a change to os.environ.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import rknnrt as rk

from ..client import Client, ClientError
from ..model import container, dtypes
from ..model.meta import ModelMeta
from ..sessions import factory, policies
from .data import InputSpec, to_nchw

# numpy dtype -> rknn_tensor_type of the types fed as they are (others as float32)
_RK_TYPES = {t.numpy: t.rknn for t in dtypes.named("uint8", "int8", "float32", "float16")}


class EvaluationError(RuntimeError):
    """A model that cannot be loaded or run; the message says which and why."""


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
        try:
            self.client = Client(model, threads=threads)
        except ClientError as exc:
            raise EvaluationError(f"{exc.call} failed with status {exc.status}") from None
        self.inputs = [
            InputSpec(a.name.decode(), tuple(a.dims[: a.n_dims]),
                      a.n_dims == 4 and a.fmt == rk.RKNN_TENSOR_NHWC)
            for a in self.client.inputs
        ]  # fmt: skip
        self.n_outputs = len(self.client.outputs)
        self.output_names = [a.name.decode() for a in self.client.outputs]

    def run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        fed, types, fmts = [], [], []
        for x, spec in zip(arrays, self.inputs):
            if x.dtype not in _RK_TYPES:
                x = np.ascontiguousarray(x, np.float32)
            nchw = spec.nhwc and tuple(x.shape) != spec.dims
            fed.append(x)
            types.append(_RK_TYPES[x.dtype])
            fmts.append(
                rk.RKNN_TENSOR_NCHW
                if nchw
                else (rk.RKNN_TENSOR_NHWC if x.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED)
            )
        try:
            self.client.set_inputs(fed, types, fmts)
            self.client.run()
            return self.client.get_outputs()
        except ClientError as exc:
            raise EvaluationError(f"{exc} (see the E RKNN: line)") from None

    def close(self) -> None:
        self.client.close()


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
