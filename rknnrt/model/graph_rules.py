"""Rules for the graph section, checked at init before onnxruntime sees the graph.

A model file comes from strangers, so its graph may ask onnxruntime to read files
(external-data references resolve against the working directory), carry strings that are not
UTF-8 (onnxruntime then prints "EP Error" lines to stdout and retries), use operators no
model file needs (control flow, model/op_rules.py), or hold node attributes that onnxruntime
accepts at load and rejects on every run. All are refused here with one ModelFormatError.
"""

from __future__ import annotations

import functools
from typing import Any

import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .attribute_rules import check_attributes
from .errors import ModelFormatError
from .op_rules import check_ops

WEIGHT_LOCATION = "@weights"  # the only external-data location a model file may name
_EXTERNAL_KEYS = {"location", "offset", "length"}
_MAX_NUMBER_DIGITS = 19  # offsets and lengths fit an int64
_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_TENSOR = onnx.TensorProto.DESCRIPTOR
_GRAPH = onnx.GraphProto.DESCRIPTOR
_SHAPE = onnx.TensorShapeProto.DESCRIPTOR
_INITIALIZER_FIELD = _GRAPH.fields_by_name["initializer"]


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


def _first_fault(message: Message, top: bool) -> tuple[str, str] | None:
    """(path, what) of the first string that is not UTF-8 or the first tensor that refers to
    external data other than a top-level initializer; None when there is none. upb hands out
    invalid UTF-8 in proto2 strings as bytes, which "".join refuses (the fast test)."""
    if (
        message.DESCRIPTOR is _TENSOR
        and not top
        and (message.data_location == onnx.TensorProto.EXTERNAL or len(message.external_data))
    ):
        return "", "refers to external data: only the graph's initializers may"
    if message.DESCRIPTOR is _SHAPE:  # the most frequent message: dims in one go
        try:
            "".join([text for d in message.dim for text in (d.dim_param, d.denotation)])
        except TypeError:
            return ".dim", "is not valid UTF-8"
        return None
    for fd, value in message.ListFields():
        kind = fd.type
        if kind == _STRING:
            try:
                "".join(value) if fd.is_repeated else "".join((value,))
            except TypeError:
                return f".{fd.name}", "is not valid UTF-8"
        elif kind == _MESSAGE:
            items = value if fd.is_repeated else (value,)
            # only ModelProto.graph.initializer[k] may be external (the caller passes top)
            child_top = fd is _INITIALIZER_FIELD and message.DESCRIPTOR is _GRAPH and top
            for k, item in enumerate(items):
                fault = _first_fault(item, child_top)
                if fault is not None:
                    index = f"[{k}]" if fd.is_repeated else ""
                    return f".{fd.name}{index}{fault[0]}", fault[1]
    return None


def _walk(model: onnx.ModelProto) -> None:
    for fd, value in model.ListFields():
        items = value if fd.is_repeated else (value,)
        for k, item in enumerate(items) if fd.type == _MESSAGE else ():
            fault = _first_fault(item, fd.name == "graph")
            if fault is not None:
                index = f"[{k}]" if fd.is_repeated else ""
                where = f"model.{fd.name}{index}{fault[0]}"
                if fault[1].startswith("refers"):
                    raise ModelFormatError(f"{where} {fault[1]} be stored in the weights section")
                raise ModelFormatError(f"{where} {fault[1]}")
        if fd.type == _STRING:
            try:
                "".join(value) if fd.is_repeated else "".join((value,))
            except TypeError:
                raise ModelFormatError(f"model.{fd.name} is not valid UTF-8") from None


def check_graph(graph: bytes | memoryview, use_cache: bool = True) -> dict[str, tuple[int, int]]:
    """Refuse what onnxruntime must never see; returns name -> (offset, length) of the
    constants stored in the weights section. A graph already checked in this process (the
    same bytes: contexts of one model) is not checked again."""
    data = bytes(graph)
    if use_cache and len(data) <= _CACHED_GRAPH_BYTES:
        return dict(_checked(data))
    return dict(_check(data))


_CACHED_GRAPH_BYTES = 1 << 20  # weights live outside the graph: real graphs are kilobytes


@functools.lru_cache(maxsize=16)
def _checked(graph: bytes) -> tuple[tuple[str, tuple[int, int]], ...]:
    return _check(graph)  # keyed by the exact bytes (hash and equality), never by a checksum


def _check(graph: bytes) -> tuple[tuple[str, tuple[int, int]], ...]:
    model = parse(graph)
    external: dict[str, tuple[int, int]] = {}
    for k, tensor in enumerate(model.graph.initializer):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            where = f"graph initializer #{k}"
            offset, length = _weight_ref(tensor, where)
            if not isinstance(tensor.name, str) or tensor.name in external:
                raise ModelFormatError(f"{where}: invalid or repeated name")
            external[tensor.name] = (offset, length)
    _walk(model)
    check_ops(model)  # before anything infers shapes: no subgraph, no operator outside the list
    check_attributes(model)  # after the walk: its strings are valid
    return tuple(external.items())


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
