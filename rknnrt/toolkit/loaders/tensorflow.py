"""`load_tflite` and `load_tensorflow` through tf2onnx (the `tensorflow` extra)."""

from __future__ import annotations

import os
from typing import Any

import onnx

from ...model import files
from ..errors import ConversionError
from . import require

OPSET = 13


def _exists(path: str | os.PathLike, what: str) -> str:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConversionError(f"cannot read {what} {path!r}: no such file")
    return path


def load_tflite(model: str | os.PathLike) -> onnx.ModelProto:
    path = _exists(model, "TFLite model")
    tf2onnx = require("tf2onnx", "tensorflow", "load_tflite")
    try:
        proto, _ = tf2onnx.convert.from_tflite(path, opset=OPSET)
    except Exception as exc:  # tf2onnx raises many types
        raise ConversionError(f"tf2onnx could not convert {path!r}: {exc}") from None
    return proto


def load_tensorflow(tf_pb: str | os.PathLike, inputs: list[str], input_size_list: Any,
                    outputs: list[str]) -> onnx.ModelProto:  # fmt: skip
    """A frozen GraphDef (.pb); `inputs`/`outputs` are node names, sizes are NHWC as in TF."""
    path = _exists(tf_pb, "TensorFlow model")
    if not inputs or not outputs or not input_size_list or len(inputs) != len(input_size_list):
        raise ConversionError("load_tensorflow needs inputs, outputs and one size per input")
    tf2onnx = require("tf2onnx", "tensorflow", "load_tensorflow")
    tf = require("tensorflow", "tensorflow", "load_tensorflow")
    try:
        graph_def = tf.compat.v1.GraphDef()
        graph_def.ParseFromString(files.read_bytes(path))
        names_in = [n if ":" in n else f"{n}:0" for n in inputs]
        names_out = [n if ":" in n else f"{n}:0" for n in outputs]
        proto, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=names_in,
                                                  output_names=names_out, opset=OPSET)  # fmt: skip
    except Exception as exc:  # TensorFlow and tf2onnx raise many types
        raise ConversionError(f"tf2onnx could not convert {path!r}: {exc}") from None
    for vi, size in zip(proto.graph.input, input_size_list):
        dims = vi.type.tensor_type.shape.dim
        for d, v in zip(dims, size):
            d.dim_value = int(v)
    return proto
