"""A float or quantised graph run with chosen intermediate tensors as outputs: what
calibration, accuracy analysis, hybrid-layer ranking and evaluation drift all read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..sessions import factory, policies


def probe_session(model: onnx.ModelProto, outputs: Sequence[str],
                  threads: int | None = None) -> Any:  # fmt: skip
    """An onnxruntime session of `model` whose outputs are `outputs`, with graph optimisation
    off so that every named tensor is computed as the graph states it."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in outputs)
    return factory.create(probe, policies.ANALYSIS, threads=threads)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity in float64; two all-zero tensors agree (1), one alone does not (0)."""
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = float(np.linalg.norm(a64)), float(np.linalg.norm(b64))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a64, b64) / (na * nb))
