"""Rules for the graph section, checked at init before onnxruntime sees the graph.

A model file comes from strangers, so its graph may ask onnxruntime to read files
(external-data references resolve against the working directory), carry strings that are not
UTF-8 (onnxruntime then prints "EP Error" lines to stdout and retries), or hold node
attributes that onnxruntime accepts at load and rejects on every run. All three are refused
here with one ModelFormatError.
"""

from __future__ import annotations

import re
from typing import Any

import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .errors import ModelFormatError

WEIGHT_LOCATION = "@weights"  # the only external-data location a model file may name
_EXTERNAL_KEYS = {"location", "offset", "length"}
_MAX_NUMBER_DIGITS = 19  # offsets and lengths fit an int64
_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_TENSOR = onnx.TensorProto.DESCRIPTOR
_TOP_INITIALIZER = re.compile(r"model\.graph\.initializer\[\d+\]\Z")


def parse(graph: bytes | memoryview) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(bytes(graph))
    except Exception as exc:  # protobuf raises DecodeError and, for deep nesting, others
        raise ModelFormatError(f"the graph section is not a valid ONNX model: {exc}") from None
    return model


def _weight_ref(tensor: onnx.TensorProto, where: str) -> tuple[int, int]:
    """(offset, length) of a top-level initializer stored in the weights section."""
    entries: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key in entries or entry.key not in _EXTERNAL_KEYS:
            raise ModelFormatError(f"{where}: invalid external-data entry '{entry.key}'")
        entries[entry.key] = entry.value
    if entries.get("location") != WEIGHT_LOCATION:
        raise ModelFormatError(
            f"{where} refers to external data {entries.get('location', '')!r}: a model file "
            "keeps all data inside itself"
        )
    numbers = []
    for key in ("offset", "length"):
        text = entries.get(key, "")
        if not text.isdigit() or not text.isascii() or len(text) > _MAX_NUMBER_DIGITS:
            raise ModelFormatError(f"{where}: external-data {key} {text!r} is not a valid number")
        numbers.append(int(text))
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        raise ModelFormatError(f"{where}: external-data entries on a tensor stored inline")
    return numbers[0], numbers[1]


def _walk(message: Message, where: str) -> None:
    """Every string is valid UTF-8 and no tensor but the top-level initializers refers to
    external data (upb hands out invalid UTF-8 in proto2 strings as bytes)."""
    if (
        message.DESCRIPTOR is _TENSOR
        and (message.data_location == onnx.TensorProto.EXTERNAL or len(message.external_data))
        and not _TOP_INITIALIZER.match(where)
    ):
        raise ModelFormatError(
            f"{where} refers to external data: only the graph's initializers may be stored in "
            "the weights section"
        )
    for fd, value in message.ListFields():
        if fd.type == _STRING:
            values = value if fd.is_repeated else (value,)
            if not all(isinstance(v, str) for v in values):
                raise ModelFormatError(f"{where}.{fd.name} is not valid UTF-8")
        elif fd.type == _MESSAGE:
            if fd.is_repeated:
                for k, item in enumerate(value):
                    _walk(item, f"{where}.{fd.name}[{k}]")
            else:
                _walk(value, f"{where}.{fd.name}")


def check_graph(graph: bytes | memoryview) -> dict[str, tuple[int, int]]:
    """Refuse what onnxruntime must never see; returns name -> (offset, length) of the
    constants stored in the weights section."""
    model = parse(graph)
    external: dict[str, tuple[int, int]] = {}
    for k, tensor in enumerate(model.graph.initializer):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            where = f"graph initializer #{k}"
            offset, length = _weight_ref(tensor, where)
            if not isinstance(tensor.name, str) or tensor.name in external:
                raise ModelFormatError(f"{where}: invalid or repeated name")
            external[tensor.name] = (offset, length)
    _walk(model, "model")
    from .attribute_rules import check_attributes  # needs the walked (valid) model

    check_attributes(model)
    return external


def weight_refs(graph: bytes | memoryview) -> dict[str, tuple[int, int]]:
    """name -> (offset, length) of the top-level initializers stored in the weights section,
    without the full walk of check_graph."""
    model = parse(graph)
    refs: dict[str, tuple[int, int]] = {}
    for k, tensor in enumerate(model.graph.initializer):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            refs[tensor.name] = _weight_ref(tensor, f"graph initializer #{k}")
    return refs


def cross_check(external: dict[str, tuple[int, int]], weights: list[Any]) -> None:
    """The graph's weights-section constants are exactly the metadata's weight specs."""
    specs = {w.name: (w.offset, w.nbytes) for w in weights}
    for name, span in external.items():
        if specs.get(name) != span:
            raise ModelFormatError(
                f"graph constant '{name}' at {span} is not a weight of the metadata "
                f"({specs.get(name)})"
            )
    missing = [name for name in specs if name not in external]
    if missing:
        raise ModelFormatError(f"metadata weights {missing[:3]} are not constants of the graph")
