"""`load_pytorch`: a TorchScript file (or a torch.nn.Module, an rknnrt extension) exported to
ONNX with torch's own exporter at the sizes `input_size_list` gives (NCHW, batch first)."""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Sequence
from typing import Any

import onnx

from ..errors import ConversionError
from . import require

EXPORT_OPSET = 13


def _sizes(input_size_list: Any) -> list[list[int]]:
    if not input_size_list or not all(isinstance(s, Sequence) and s for s in input_size_list):
        raise ConversionError("load_pytorch needs input_size_list, e.g. [[1, 3, 224, 224]]")
    try:
        return [[int(d) for d in size] for size in input_size_list]
    except (TypeError, ValueError):
        raise ConversionError(f"input_size_list {input_size_list!r}: dims must be "
                              "integers") from None  # fmt: skip


def load(model: str | os.PathLike | Any, input_size_list: Any) -> onnx.ModelProto:
    sizes = _sizes(input_size_list)
    torch = require("torch", "pytorch", "load_pytorch")
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise ConversionError(f"cannot read PyTorch model {path!r}: no such file")
        try:
            module = torch.jit.load(path, map_location="cpu")
        except Exception as exc:  # torch raises RuntimeError and friends
            raise ConversionError(f"{path!r} is not a TorchScript model (save it with "
                                  f"torch.jit.trace(...).save): {exc}") from None  # fmt: skip
    else:
        module = model
    return export(torch, module, sizes)


def export(torch: Any, module: Any, sizes: list[list[int]]) -> onnx.ModelProto:
    """The module traced at `sizes` (zeros) through torch.onnx.export."""
    if hasattr(module, "eval"):
        module.eval()
    args = tuple(torch.zeros(size, dtype=torch.float32) for size in sizes)
    names = [f"input{k}" for k in range(len(sizes))]
    buffer = io.BytesIO()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes are not the user's concern
            torch.onnx.export(module, args, buffer, input_names=names,
                              opset_version=EXPORT_OPSET, dynamo=False)  # fmt: skip
    except TypeError:  # exporters without the dynamo switch
        buffer = io.BytesIO()
        with torch.no_grad():
            torch.onnx.export(module, args, buffer, input_names=names,
                              opset_version=EXPORT_OPSET)  # fmt: skip
    except Exception as exc:  # the exporter's errors come in many types
        raise ConversionError(f"torch.onnx.export failed: {exc}") from None
    try:
        return onnx.load_model_from_string(buffer.getvalue())
    except Exception as exc:  # protobuf errors
        raise ConversionError(f"torch.onnx.export produced no readable model: {exc}") from None
