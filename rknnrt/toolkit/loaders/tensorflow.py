"""`load_tflite` and `load_tensorflow` through tf2onnx (the `tensorflow` extra).

TensorFlow models take NHWC images. With `input_is_nchw=False` (the vendor's default) every
4-D input becomes an NCHW graph input followed by a Transpose to the model's NHWC, so the model
is like any other from then on: mean/std per channel, datasets in NCHW, `inference` with NHWC
arrays by default (a Transpose(0,3,1,2) that follows, as tf2onnx writes, cancels with it).
`input_is_nchw=True` says the model's 4-D inputs are already NCHW: they are left as they are.
"""

from __future__ import annotations

import os
from typing import Any

import onnx
from onnx import helper

from ...model import files
from ..errors import ConversionError
from . import require

OPSET = 13


def _exists(path: str | os.PathLike, what: str) -> str:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConversionError(f"cannot read {what} {path!r}: no such file")
    return path


def inputs_as_nchw(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Every 4-D NHWC input -> an NCHW input and a Transpose back to NHWC."""
    graph = proto.graph
    front = []
    for vi in graph.input:
        shape = vi.type.tensor_type.shape
        if len(shape.dim) != 4:
            continue
        inner = f"{vi.name}__nhwc"
        for node in graph.node:
            node.input[:] = [inner if i == vi.name else i for i in node.input]
        for out in graph.output:  # an input passed straight to an output
            if out.name == vi.name:
                front.append(helper.make_node("Identity", [inner], [f"{vi.name}__out"]))
                out.name = f"{vi.name}__out"
        dims = [onnx.TensorShapeProto.Dimension() for _ in range(4)]
        for copy, k in zip(dims, (0, 3, 1, 2)):
            copy.CopyFrom(shape.dim[k])
        shape.ClearField("dim")
        shape.dim.extend(dims)
        front.insert(0, helper.make_node("Transpose", [vi.name], [inner], name=inner,
                                         perm=[0, 2, 3, 1]))  # fmt: skip
    nodes = front + list(graph.node)
    graph.ClearField("node")
    graph.node.extend(_cancel_transposes(nodes, {o.name for o in graph.output}))
    return proto


def _cancel_transposes(nodes: list, outputs: set[str]) -> list:
    """tf2onnx starts an NHWC model with Transpose(0,3,1,2) before its convolutions: after the
    inserted Transpose(0,2,3,1) the pair is the identity, so both go (onnxruntime's own
    transpose optimiser would fold them too, but not reliably inside a quantised graph)."""
    producer = {o: n for n in nodes for o in n.output}
    rename: dict[str, str] = {}
    dropped: set[int] = set()
    for node in nodes:
        if node.op_type != "Transpose" or node.output[0] in outputs:
            continue
        first = producer.get(node.input[0])
        if first is None or first.op_type != "Transpose" or not first.name.endswith("__nhwc"):
            continue
        perms = [list(a.ints) for n in (first, node) for a in n.attribute if a.name == "perm"]
        if perms == [[0, 2, 3, 1], [0, 3, 1, 2]]:
            rename[node.output[0]] = first.input[0]
            dropped.add(id(node))
    kept = [n for n in nodes if id(n) not in dropped]
    for node in kept:
        node.input[:] = [rename.get(i, i) for i in node.input]
    used = {i for n in kept for i in n.input} | outputs
    return [n for n in kept if not (n.name.endswith("__nhwc") and n.output[0] not in used)]


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
