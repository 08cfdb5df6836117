"""How a custom operator is stored in an rknnrt model's graph (docs/custom-ops.md).

A custom operator is an ONNX node in the domain `CUSTOM_DOMAIN` whose op_type is the
registered name (the vendor recommends the "cst" prefix). Its attributes keep their ONNX types:
INT and INTS are int64, FLOAT and FLOATS float32, STRING bytes; int32 and bool values (and any
other typed array) are TENSOR attributes, so each value reaches `rknn_custom_op_get_op_attr`
with the type it was given. Both the converter and the runtime read this module.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

CUSTOM_DOMAIN = "rknnrt.custom"
STANDARD_DOMAINS = ("", "ai.onnx")


def is_custom(node: onnx.NodeProto) -> bool:
    return node.domain == CUSTOM_DOMAIN


def attribute_value(attr: AttributeProto) -> np.ndarray | bytes:
    """One stored attribute as a numpy array of its type (bytes for a string)."""
    if attr.type == AttributeProto.INT:
        return np.array([attr.i], np.int64)
    if attr.type == AttributeProto.INTS:
        return np.array(list(attr.ints), np.int64)
    if attr.type == AttributeProto.FLOAT:
        return np.array([attr.f], np.float32)
    if attr.type == AttributeProto.FLOATS:
        return np.array(list(attr.floats), np.float32)
    if attr.type == AttributeProto.STRING:
        return bytes(attr.s)
    if attr.type == AttributeProto.TENSOR:
        return np.ascontiguousarray(numpy_helper.to_array(attr.t)).reshape(-1)
    raise ValueError(f"attribute '{attr.name}' has an unsupported type {attr.type}")


def make_attribute(name: str, value: object) -> AttributeProto:
    """An attribute stored with the type of `value`: Python int -> int64, float -> float32,
    str/bytes -> string, numpy scalars and arrays (int32, int64, float32, bool, ...) exactly."""
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype == np.int64 and array.ndim == 0:
            return onnx.helper.make_attribute(name, int(array))
        if array.dtype == np.float32 and array.ndim == 0:
            return onnx.helper.make_attribute(name, float(array))
        return onnx.helper.make_attribute(name, numpy_helper.from_array(array.reshape(-1), name))
    return onnx.helper.make_attribute(name, value)


# The storage roundings the converter and the vendor reader insert around int8 tensors: not
# operators of the user's model, so a registered op never replaces them.
_NOT_REPLACEABLE = ("QuantizeLinear", "DequantizeLinear")


def builtin_op_types(model: onnx.ModelProto) -> set[str]:
    """The op types of a graph's built-in (standard) nodes a registered custom op of the same
    type may replace (rknpu2's GPU demo registers "ArgMax" for a model's ArgMax)."""
    return {n.op_type for n in model.graph.node
            if n.domain in STANDARD_DOMAINS and n.op_type not in _NOT_REPLACEABLE}  # fmt: skip


def as_custom(graph: bytes, op_types: frozenset[str]) -> bytes:
    """The graph with every built-in node of `op_types` made a custom node of the same type
    (same inputs, outputs and attributes), its outputs' types and shapes kept as value_info
    (a custom node's are not inferred)."""
    model = onnx.load_model_from_string(graph)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    known = {vi.name: vi for vi in [*inferred.input, *inferred.value_info, *inferred.output]}
    declared = {vi.name for vi in [*model.graph.value_info, *model.graph.output]}
    for node in model.graph.node:
        if node.op_type in op_types and node.domain in STANDARD_DOMAINS \
                and node.op_type not in _NOT_REPLACEABLE:  # fmt: skip
            node.domain = CUSTOM_DOMAIN
            for name in node.output:
                if name in known and name not in declared:
                    model.graph.value_info.append(known[name])
    if all(o.domain != CUSTOM_DOMAIN for o in model.opset_import):
        model.opset_import.add(domain=CUSTOM_DOMAIN, version=1)
    return model.SerializeToString()
