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
