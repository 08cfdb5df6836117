"""Per-layer drift: where along the graph the int8 program departs from the float model.

The converter's float graph (after its passes) and its w8a8 QDQ program are rebuilt from the
ONNX model and the calibration set, every stored tensor is made an output of both, and each
tensor's cosine between the two is averaged over the given samples (the worst ones of an
evaluation). rknn-toolkit2's `accuracy_analysis` answers the same question for one input; when
rknnrt's `RKNN.accuracy_analysis` lands, this function is the piece it can share (or replace).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ..model import numerics
from ..toolkit import passes, quantize
from ..toolkit.probe import cosine, probe_session


def _normalise(
    arrays: Sequence[np.ndarray], mean: Sequence[Any], std: Sequence[Any]
) -> list[np.ndarray]:
    out = []
    for k, x in enumerate(arrays):
        x = np.asarray(x, np.float32)
        if x.ndim == 4:
            if k < len(mean) and mean[k] is not None:
                x = x - np.asarray(mean[k], np.float32).reshape(1, -1, 1, 1)
            if k < len(std) and std[k] is not None:
                x = x / np.asarray(std[k], np.float32).reshape(1, -1, 1, 1)
        out.append(x)
    return out


def layer_drift(
    onnx_model: onnx.ModelProto | str | bytes,
    calibration: Sequence[Sequence[np.ndarray]],
    samples: Sequence[Sequence[np.ndarray]],
    mean: Sequence[Any] = (),
    std: Sequence[Any] = (),
    algorithm: str = "normal",
    per_channel: bool = True,
) -> list[dict[str, Any]]:
    """Mean cosine (float vs int8) of every stored tensor over `samples`, in graph order.

    `calibration` and `samples`: per sample, one array per input in the ONNX layout (NCHW),
    before mean/std (as images are read); `mean`/`std` and `algorithm`/`per_channel` as the
    model was converted with."""
    model = (
        onnx_model
        if isinstance(onnx_model, onnx.ModelProto)
        else (
            onnx.load_model_from_string(onnx_model)
            if isinstance(onnx_model, bytes)
            else onnx.load(onnx_model)
        )
    )
    prepared = passes.run_all(model)
    calib = [_normalise(s, mean, std) for s in calibration]
    quantized = quantize.quantize_model(
        prepared,
        calib,
        algorithm=algorithm,
        per_channel=per_channel,
        progress=lambda done, total: None,
    )
    program = quantized.program
    produced = {o for n in program.graph.node for o in n.output}
    inputs = [i.name for i in prepared.graph.input]
    order = [o for n in prepared.graph.node for o in n.output]
    tensors = [t for t in order if f"{t}__dq" in produced]
    float_session = probe_session(prepared, tensors, threads=1)
    int8_session = probe_session(program, [f"{t}__dq" for t in tensors], threads=1)
    sums = np.zeros(len(tensors))
    for sample in samples:
        x = _normalise(sample, mean, std)
        float_values = float_session.run(None, dict(zip(inputs, x)))
        feed = {}
        for name, array in zip(inputs, x):
            scale, zp = quantized.io_qparams.get(name, (None, None))
            if scale is None:
                feed[name] = array
            else:
                feed[name] = numerics.quantize(array, scale, zp)
        int8_values = int8_session.run(None, feed)
        sums += [cosine(a, b) for a, b in zip(float_values, int8_values)]
    count = max(len(samples), 1)
    return [{"tensor": t, "cosine": float(s / count)} for t, s in zip(tensors, sums)]
