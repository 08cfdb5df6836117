"""The emulated NPU program: the model's graph section run by onnxruntime on the CPU.

One Program is built per model at rknn_init and shared by contexts made with rknn_dup_context:
onnxruntime sessions are safe to run from several threads, and the weights are not copied again.
"""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort

from ..model.meta import ModelMeta
from .errors import MODEL_INVALID, RknnError


def _session_options() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # onnxruntime's own warnings are not the runtime's to print
    threads = os.environ.get("RKNNRT_NUM_THREADS")
    if threads and threads.isdigit():
        options.intra_op_num_threads = int(threads)
    return options


class Program:
    """A compiled graph plus the weights it reads (views of the context's weight memory)."""

    def __init__(self, meta: ModelMeta, graph: bytes, weights: np.ndarray) -> None:
        options = _session_options()
        names, values = [], []
        for w in meta.weights:
            dtype = np.dtype(np.bool_) if w.dtype == "bool" else np.dtype(w.dtype)
            view = weights[w.offset : w.offset + w.nbytes].view(dtype).reshape(w.shape)
            names.append(w.name)
            values.append(ort.OrtValue.ortvalue_from_numpy(view))
        if names:
            options.add_external_initializers(names, values)
        try:
            self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises several types for a bad graph
            raise RknnError(MODEL_INVALID, f"the model's graph cannot be loaded: {exc}") from None
        self._keep = (weights, values)  # onnxruntime may read the weights in place
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        expected_in = [t.name for t in meta.inputs]
        expected_out = [t.name for t in meta.outputs]
        if self.input_names != expected_in or self.output_names != expected_out:
            raise RknnError(
                MODEL_INVALID,
                f"graph IO {self.input_names} -> {self.output_names} does not match the "
                f"metadata {expected_in} -> {expected_out}",
            )

    def run(self, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self.output_names, feed)
