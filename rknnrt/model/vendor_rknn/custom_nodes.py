"""Custom operators in vendor files: the nodes the application's registered ops compute.

A vendor file built with `reg_custom_op` lists its custom op types in Model field 21 (comma
separated, e.g. "cstDualResidual,cstChannelAffine"); each such node runs on the CPU (node field
3 = 0) and keeps its ONNX attributes in node field 9 as a BSON document:
`{name: {"dtype": code, "value": v}}`, with code "f" (double), "fs" (array of doubles), "i"
(int32), "is" (array of int32), "s" (string); tensor attributes are stored as null (the toolkit
drops them). The node becomes an rknnrt custom node (model/custom_ops.py: domain
`rknnrt.custom`, attributes typed as ONNX stores them: float32, int64, bytes), which the
runtime runs through the ops registered after `rknn_init` (rknn_register_custom_ops), exactly as
it runs its own models' custom nodes. As the vendor documents it, an op's compute reads and
writes float32 NCHW: the rebuilt graph feeds it the inputs' float values and rounds its outputs
to their stored types (int8 or float16) like any op's (graph.GraphBuilder.store).
"""

from __future__ import annotations

import struct

import numpy as np
from onnx import TensorProto
from onnx import helper as oh

from ..custom_ops import CUSTOM_DOMAIN, make_attribute
from ..errors import VendorFormatError
from .fileformat import Node
from .graph import GraphBuilder, operands

MAX_DEPTH = 4  # {attrs: {name: {"value": [...]}}} is three deep
MAX_BYTES = 1 << 20
_I32, _I64, _F64 = struct.Struct("<i"), struct.Struct("<q"), struct.Struct("<d")


def _error(where: str, what: str) -> VendorFormatError:
    return VendorFormatError(f"vendor .rknn model: the attributes of custom op {where} {what}")


def _cstring(buf: bytes, at: int, end: int, where: str) -> tuple[str, int]:
    stop = buf.find(b"\0", at, end)
    if stop < 0:
        raise _error(where, "hold an unterminated name")
    return buf[at:stop].decode("utf-8", "replace"), stop + 1


def read_bson(buf: bytes, at: int, where: str, depth: int = 0) -> tuple[dict, int]:
    """The BSON document at `at` of `buf` as {key: value} and the offset after it. Every
    length is checked against the document's; an element type outside the few the toolkit
    writes is refused by number."""
    if depth > MAX_DEPTH or at + 5 > len(buf):
        raise _error(where, "are nested too deeply or truncated")
    (size,) = _I32.unpack_from(buf, at)
    end = at + size
    if size < 5 or end > len(buf) or buf[end - 1] != 0:
        raise _error(where, "have an invalid document length")
    out: dict = {}
    pos = at + 4
    while pos < end - 1:
        kind = buf[pos]
        key, pos = _cstring(buf, pos + 1, end - 1, where)
        if kind == 0x01:  # double
            if pos + 8 > end:
                raise _error(where, "are truncated")
            out[key], pos = _F64.unpack_from(buf, pos)[0], pos + 8
        elif kind == 0x02:  # string: int32 length (with its NUL), bytes
            (n,) = _I32.unpack_from(buf, pos) if pos + 4 <= end else (-1,)
            if n < 1 or pos + 4 + n > end:
                raise _error(where, "hold an invalid string")
            out[key], pos = buf[pos + 4 : pos + 3 + n].decode("utf-8", "replace"), pos + 4 + n
        elif kind in (0x03, 0x04):  # document, array (a document keyed "0", "1", ...)
            value, pos = read_bson(buf, pos, where, depth + 1)
            out[key] = list(value.values()) if kind == 0x04 else value
        elif kind == 0x08:  # bool
            if pos + 1 > end:
                raise _error(where, "are truncated")
            out[key], pos = bool(buf[pos]), pos + 1
        elif kind == 0x0A:  # null
            out[key] = None
        elif kind in (0x10, 0x12):  # int32, int64
            fmt = _I32 if kind == 0x10 else _I64
            if pos + fmt.size > end:
                raise _error(where, "are truncated")
            out[key], pos = fmt.unpack_from(buf, pos)[0], pos + fmt.size
        else:
            raise _error(where, f"hold a value of BSON type {kind:#x}, which is not decoded")
    return out, end


# the stored dtype code -> the attribute's value as model/custom_ops.make_attribute takes it
# (an empty list as a typed empty array: onnx cannot infer a type from no values)
_CODES = {
    "f": lambda v: float(v),
    "fs": lambda v: [float(x) for x in v] or np.zeros(0, np.float32),
    "i": lambda v: int(v),
    "is": lambda v: [int(x) for x in v] or np.zeros(0, np.int64),
    "s": lambda v: str(v).encode(),
}


def attributes(n: Node) -> dict[str, object]:
    """The stored attributes of custom node `n`, by name (tensor attributes, stored as null,
    are absent: the vendor's toolkit does not keep them)."""
    where = f"{n.op_type} ('{n.name}')"
    raw = n.attr_blob
    if raw is None or len(raw) == 0:
        return {}
    if len(raw) > MAX_BYTES:
        raise _error(where, f"are {len(raw)} bytes")
    doc, _ = read_bson(bytes(raw), 0, where)
    attrs: dict[str, object] = {}
    for name, entry in doc.items():
        if entry is None:
            continue
        if not isinstance(entry, dict) or entry.get("dtype") not in _CODES:
            code = entry.get("dtype") if isinstance(entry, dict) else type(entry).__name__
            raise _error(where, f"hold '{name}' of type '{code}', which is not decoded")
        try:
            attrs[name] = _CODES[entry["dtype"]](entry.get("value"))
        except (TypeError, ValueError):
            raise _error(where, f"hold '{name}' whose value does not match its type") from None
    return attrs


def decode(b: GraphBuilder, n: Node) -> list[str]:
    """One custom node of the rebuilt graph: float32 NCHW values in and out, with value_info
    giving the runtime each one's type and shape (onnx cannot infer a custom op's)."""
    ins = operands(b, n)
    outs = [b.m.tensors[i] for i in n.outputs]
    in_names = [b.value(t) for t in ins]
    out_names = [b.fresh("cst") for _ in outs]
    node = oh.make_node(n.op_type, in_names, out_names, name=n.name or n.op_type,
                        domain=CUSTOM_DOMAIN)  # fmt: skip
    node.attribute.extend(make_attribute(k, v) for k, v in sorted(attributes(n).items()))
    b.nodes.append(node)
    for name, t in [*zip(in_names, ins), *zip(out_names, outs)]:
        if not t.shape or min(t.shape) <= 0:
            raise VendorFormatError(
                f"vendor .rknn model: tensor '{t.name}' of custom op {n.op_type} has no shape"
            )
        b.graph.value_info.append(oh.make_tensor_value_info(name, TensorProto.FLOAT, t.shape))
    return out_names
