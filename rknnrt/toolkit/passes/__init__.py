"""Converter graph passes on `onnx.ModelProto`, and the pipeline that chains them.

Each pass module exposes `run(model) -> model`, returns a new model and leaves the
numerical result unchanged (up to float rounding).
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from rknnrt.toolkit.passes import (
    fold_batchnorm,
    fold_constants,
    fold_scale_shift,
    remove_identity,
    untie_weights,
)
from rknnrt.toolkit.passes._graph import infer_shapes

__all__ = ["PIPELINE", "fold_batchnorm", "fold_constants", "fold_scale_shift", "remove_identity",
           "run_all", "untie_weights"]  # fmt: skip

# Folding runs again last: fused Conv weights and bypassed nodes can expose new constants.
PIPELINE: tuple[Callable[[onnx.ModelProto], onnx.ModelProto], ...] = (
    untie_weights.run,
    fold_constants.run,
    remove_identity.run,
    fold_batchnorm.run,
    fold_scale_shift.run,
    fold_constants.run,
)


def run_all(model: onnx.ModelProto) -> onnx.ModelProto:
    """Apply `PIPELINE` in order, validate, and fill value_info with intermediate shapes."""
    for graph_pass in PIPELINE:
        model = graph_pass(model)
    onnx.checker.check_model(model)
    inferred = infer_shapes(model)  # onnx's infer_shapes, minus serializing big weights
    for field in ("value_info", "output"):
        del getattr(model.graph, field)[:]
        getattr(model.graph, field).extend(getattr(inferred, field))
    return model
