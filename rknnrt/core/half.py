"""float32 -> float16 conversion of input data, through onnxruntime's vectorised Cast.

numpy converts element by element: 0.4 ms for a 1x3x224x224 input, 6-8% of a float16
SqueezeNet or ShuffleNet run; onnxruntime's Cast takes 0.02 ms. Both round to nearest even and
agree bit for bit on every float32 that is not a NaN (checked over every 7th float32 bit
pattern); onnxruntime writes every NaN as the canonical quiet NaN where numpy keeps its
payload, so an array holding a NaN keeps numpy's conversion and stored bits stay what they
were. Small arrays keep numpy's too (a session call costs more than it saves).
"""

from __future__ import annotations

import threading

import numpy as np

from .lazy_imports import onnx, ort

MIN_ELEMENTS = 4096
_lock = threading.Lock()
_sessions: list = []  # the one Cast session, made on first use


def _cast_session():
    with _lock:
        if not _sessions:
            h = onnx.helper
            graph = h.make_graph(
                [h.make_node("Cast", ["x"], ["y"], to=onnx.TensorProto.FLOAT16)], "to_half",
                [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT16, None)],
            )  # fmt: skip
            model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
            options = ort.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = 1  # no thread pool of its own to wake or spin
            _sessions.append(ort.InferenceSession(model.SerializeToString(), options,
                                                  providers=["CPUExecutionProvider"]))  # fmt: skip
        return _sessions[0]


def to_float16(src: np.ndarray, out: np.ndarray) -> None:
    """out[...] = src (float32, out's shape) rounded to float16, as numpy's copyto does."""
    if (src.size < MIN_ELEMENTS or src.dtype != np.float32 or out.dtype != np.float16
            or not out.flags.c_contiguous or not src.flags.aligned
            or np.isnan(src.max())):  # fmt: skip
        np.copyto(out, src, casting="unsafe")
        return
    src = np.ascontiguousarray(src).reshape(out.shape)
    session = _cast_session()
    binding = session.io_binding()
    binding.bind_input("x", "cpu", 0, np.float32, list(src.shape),
                       src.__array_interface__["data"][0])  # fmt: skip
    binding.bind_output("y", "cpu", 0, np.float16, list(out.shape),
                        out.__array_interface__["data"][0])  # fmt: skip
    session.run_with_iobinding(binding)
