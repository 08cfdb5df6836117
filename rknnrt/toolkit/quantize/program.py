"""`QuantizedProgram`: what quantisation hands the rest of the converter (quantize_model makes
it; hybrid.py ranks layers of one). Its own module so that both import it from here."""

from __future__ import annotations

from dataclasses import dataclass

import onnx


@dataclass(frozen=True)
class QuantizedProgram:
    """What quantisation hands the rest of the converter."""

    program: onnx.ModelProto  # the QDQ program
    io_qparams: dict[str, tuple[float, int]]  # (scale, zp) of the graph's int8 inputs/outputs
    tensor_qparams: dict[str, tuple[float, int]]  # (scale, zp) of every int8 tensor, by name
    # the float graph quantisation worked on (opset-upgraded, the vendor's rewrites applied):
    # tensor_qparams name its tensors
    source: onnx.ModelProto | None = None
