"""The vendor .rknn container, format version 6: header, FlatBuffer, JSON trailer.

Field numbers are FlatBuffer vtable slots (0-based) found by comparing toolkit 2.5.0 builds
with its logs (docs/vendor-rknn.md lists each one). Unknown fields are ignored; a field this
reader relies on that is missing or out of bounds raises VendorFormatError.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from ..errors import VendorFormatError
from . import literal
from .flatbuf import Table

HEADER = struct.Struct("<4sIQQ")  # magic, zero, format version, FlatBuffer length
HEADER_SIZE = 64
FORMAT_VERSION = 6
MINI_FORMAT_VERSION = 0x1004  # rv1103/rv1106 "mini" files: not a FlatBuffer
MAX_JSON = 1 << 20

# Tensor field 0: ONNX TensorProto data type codes.
ONNX_DTYPES = {t.onnx: t.name for t in dtypes.named(
    "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "bool", "float16", "uint32",
    "uint64")}  # fmt: skip
# Tensor field 2: what the tensor is.
KIND_INPUT, KIND_OUTPUT, KIND_FEATURE, KIND_CONST_NPU, KIND_CONST_CPU = 1, 2, 3, 4, 5
KIND_CONST_AUX, KIND_REGCMD, KIND_TASKS = 8, 9, 10
CONST_KINDS = (KIND_CONST_NPU, KIND_CONST_CPU, KIND_CONST_AUX)
# Model field 1: the NPU generation string per platform family.
NPU_FORMATS = {"RKNPU v2": ("rk3588",), "RKNPU lite": ("rk3566", "rk3568"),
               "RKNPU f2": ("rk3576",), "RKNPU t4": ("rk3562",),
               "RKNPU f3": ("rv1126b",)}  # fmt: skip
# The same field in the mini files (mini_format.py).
MINI_NPU_FORMATS = {"RKNPU t3": ("rv1103", "rv1106"), "RKNPU w1": ("rv1103b", "rv1106b")}


@dataclass
class Tensor:
    index: int
    name: str
    dtype: str  # field 0, ONNX code mapped to a numpy name
    layout_tag: int  # field 1: 64 NC1HWC2, 65 packed weight, 0/2 plain
    kind: int  # field 2
    native_shape: list[int]  # field 3
    shape: list[int]  # field 4: the original model's (NCHW) shape
    qnt_method: str  # field 6
    qnt_type: str  # field 7: "int8" or ""
    scale: list[float]  # field 10
    zp: list[int]  # field 11
    size: int  # field 12: allocated bytes
    offset: int  # field 13: offset in internal (features) or weight (consts) memory
    buffer: int  # field 18: index into Model field 20, -1 when absent
    width_align: int  # field 20: inputs with C <= 4 only
    # fields 8/9: the calibrated range of a quantised feature (float32; what the scale and zero
    # point were made from), empty elsewhere
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)

    @property
    def has_range(self) -> bool:
        """Whether fields 8/9 hold a calibrated range (the mini format stores none)."""
        return bool(self.lo and self.hi)


@dataclass
class Node:
    index: int
    op_type: str  # field 1
    name: str  # field 2
    target: int  # field 3: 2 NPU, 0 CPU
    inputs: list[int]  # field 4
    outputs: list[int]  # field 5
    attr_tag: int  # field 7: union type
    attrs: Table | None  # field 8: union table, ONNX attribute names in alphabetical order
    attr_blob: memoryview | None = None  # field 9: a custom op's attributes (custom_nodes.py)

    def attr_ints(self, slot: int) -> list[int] | None:
        return self.attrs.ints(slot) if self.attrs is not None else None

    def attr_int(self, slot: int, default: int = 0) -> int:
        if self.attrs is None:
            return default
        return int(self.attrs.scalar(slot, "<i", default))


@dataclass
class InputNorm:
    mean: list[float]
    std: list[float]


@dataclass
class VendorModel:
    format_version: int
    npu_format: str
    platform: str
    compiler_version: str
    toolkit_version: str
    model_name: str
    source: str
    custom_string: str
    # field 3, the toolkit's Python-literal "generator" dict: nothing at load reads it, so
    # it is kept as text and parsed (literal.py) only when asked for (`generator`)
    generator_text: str
    io_types: dict[str, dict]  # fields 12/13 merged: name -> {"dtype", "layout"}
    shape_mode: str
    weight_size: int
    internal_size: int
    tensors: list[Tensor]
    nodes: list[Node]
    inputs: list[int]
    outputs: list[int]
    norms: list[InputNorm]
    buffers: list[memoryview] = field(repr=False, default_factory=list)
    # Dynamic-shape files hold one graph per shape set (Model field 2): each graph's NCHW input
    # shapes, in stored order (static files: the one graph's).
    input_shape_sets: list[list[list[int]]] = field(default_factory=list)
    output_shape_sets: list[list[list[int]]] = field(default_factory=list)
    # the custom op types of a file built with reg_custom_op (is_custom_op; custom_nodes.py)
    custom_op_types: tuple[str, ...] = ()

    @property
    def generator(self) -> dict:
        return literal.parse_dict(self.generator_text)

    def data(self, tensor: Tensor) -> memoryview:
        """The bytes of a constant tensor (its buffer)."""
        if not 0 <= tensor.buffer < len(self.buffers):
            raise VendorFormatError(
                f"vendor .rknn model: tensor '{tensor.name}' has no data buffer"
            )
        return self.buffers[tensor.buffer]

    def const(self, tensor: Tensor, dtype: str | None = None) -> np.ndarray:
        return np.frombuffer(self.data(tensor), np.dtype(dtype or tensor.dtype)).copy()

    def named_constant(self, name: str) -> bytes | None:
        """The bytes of the constant tensor named `name`, or None where there is none: the
        compiler's configuration constants are found by name (`<output>_BnCfg_BNcfgTensor`),
        no node lists them among its inputs."""
        found = next((t for t in self.tensors if t.name == name and t.kind in CONST_KINDS), None)
        return bytes(self.data(found)) if found is not None else None

    def by_kind(self, kind: int) -> Tensor | None:
        return next((t for t in self.tensors if t.kind == kind), None)


def _floats(table: Table, slot: int) -> list[float]:
    return table.floats(slot) or []


def _tensor(index: int, t: Table) -> Tensor:
    code = int(t.scalar(0, "<b"))
    method = t.raw(6)
    return Tensor(
        index=index, name=t.string(5) or "", dtype=ONNX_DTYPES.get(code, f"onnx:{code}"),
        layout_tag=int(t.scalar(1, "<b")), kind=int(t.scalar(2, "<b")),
        native_shape=t.ints(3) or [], shape=t.ints(4) or [],
        qnt_method=bytes(method).decode("ascii", "replace") if method is not None else "",
        qnt_type=t.string(7) or "", scale=_floats(t, 10), zp=t.ints(11) or [],
        size=int(t.scalar(12, "<i")), offset=int(t.scalar(13, "<i")),
        buffer=int(t.scalar(18, "<i", -1)) if t.has(18) else -1,
        width_align=int(t.scalar(20, "<i")), lo=_floats(t, 8), hi=_floats(t, 9),
    )  # fmt: skip


def _node(index: int, n: Table, count: int, custom: tuple[str, ...]) -> Node:
    ins, outs = n.ints(4) or [], n.ints(5) or []
    if any(not 0 <= i < count for i in ins + outs):
        raise VendorFormatError(
            f"vendor .rknn model: node {index} names a tensor that does not exist"
        )
    op_type, target = n.string(1) or "", int(n.scalar(3, "<B"))
    blob = None  # field 9 of the other ops is not read
    if is_custom_op(op_type, target, custom):
        blob = n.raw(9) if n.has(9) else memoryview(b"")
    return Node(index, op_type, n.string(2) or "", target, ins, outs,
                int(n.scalar(7, "<B")), n.table(8), blob)  # fmt: skip


CUSTOM_PREFIX = "cst"  # the prefix the vendor recommends for custom op types


def is_custom_op(op_type: str, target: int, listed: tuple[str, ...]) -> bool:
    """A custom op: listed in Model field 21, or, in a file whose list is empty (toolkit 2.5.0
    writes it only in the first build of a process), a CPU node (field 3 = 0) of a "cst" type.
    Any other op type rknnrt does not decode stays refused by name."""
    return op_type in listed or (not listed and target == 0 and op_type.startswith(CUSTOM_PREFIX))


def _json_object(raw: bytes, what: str) -> dict:
    try:
        value = json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise VendorFormatError(f"vendor .rknn model: the {what} is not valid JSON") from None
    if not isinstance(value, dict):
        raise VendorFormatError(f"vendor .rknn model: the {what} is not a JSON object")
    return value


def parse(buf: memoryview) -> VendorModel:
    """Read a vendor .rknn v6 file; VendorFormatError (one line) when it cannot."""
    if len(buf) < HEADER_SIZE:
        raise VendorFormatError(f"vendor .rknn model is too small: {len(buf)} bytes")
    _, _, version, fb_len = HEADER.unpack_from(buf, 0)
    if version == MINI_FORMAT_VERSION:
        raise VendorFormatError(
            "vendor .rknn model format 0x1004 (rv1103/rv1106 'mini' runtime) is not supported"
        )
    if version != FORMAT_VERSION:
        raise VendorFormatError(
            f"vendor .rknn model format version {version} is not supported (6 is)"
        )
    if fb_len < 8 or HEADER_SIZE + fb_len + 8 > len(buf):
        raise VendorFormatError("vendor .rknn model: the FlatBuffer overruns the file (truncated?)")
    fb = buf[HEADER_SIZE : HEADER_SIZE + fb_len]
    trailer_at = HEADER_SIZE + fb_len
    (json_len,) = struct.unpack_from("<Q", buf, trailer_at)
    if json_len > min(MAX_JSON, len(buf) - trailer_at - 8):
        raise VendorFormatError(
            "vendor .rknn model: the JSON trailer overruns the file (truncated?)"
        )
    trailer = _json_object(bytes(buf[trailer_at + 8 : trailer_at + 8 + json_len]), "JSON trailer")
    if bytes(fb[4:8]) != b"RKNN":
        raise VendorFormatError("vendor .rknn model: the FlatBuffer lacks its 'RKNN' identifier")
    root = Table(fb, struct.unpack_from("<I", fb, 0)[0], "model")
    graphs = root.tables(2)
    if not graphs:
        raise VendorFormatError("vendor .rknn model: no graph")
    g = graphs[0]
    tensors = [_tensor(i, t) for i, t in enumerate(g.tables(0))]
    custom = tuple(t for t in (root.string(21) or "").split(",") if t)
    nodes = [_node(i, n, len(tensors), custom) for i, n in enumerate(g.tables(1))]
    ins, outs = g.ints(2) or [], g.ints(3) or []
    if not ins or not outs or any(not 0 <= i < len(tensors) for i in ins + outs):
        raise VendorFormatError("vendor .rknn model: the graph's input/output list is invalid")
    norms = [InputNorm(_floats(t, 0), _floats(t, 1)) for t in g.tables(4)]
    mem = root.table(19)
    sizes = [int(mem.scalar(k, "<Q")) for k in range(2)] if mem is not None else [0, 0]
    buffers = []
    for b in root.tables(20):
        data = b.raw(0)
        buffers.append(data if data is not None else memoryview(b""))
    # graph 0's tensors are decoded above; only the other shape sets' graphs are read again
    shape_sets = [[list(tensors[i].shape) for i in ins], *(_io_shapes(g, 2) for g in graphs[1:])]
    out_sets = [[list(tensors[i].shape) for i in outs], *(_io_shapes(g, 3) for g in graphs[1:])]
    io_types = {}
    for slot in (12, 13):
        io_types.update(_json_object((root.string(slot) or "").encode(), f"IO table {slot}"))
    return VendorModel(
        format_version=int(root.scalar(0, "<i")),
        npu_format=root.string(1) or "",
        platform=(root.string(8) or "").lower(),
        compiler_version=root.string(7) or "",
        toolkit_version=str(trailer.get("version", "")),
        model_name=str(trailer.get("name", "")),
        source=root.string(9) or "",
        custom_string=root.string(11) or "",
        generator_text=root.string(3) or "{}",
        io_types=io_types,
        shape_mode=root.string(16) or "static_shape",
        weight_size=sizes[0], internal_size=sizes[1],
        tensors=tensors, nodes=nodes, inputs=ins, outputs=outs, norms=norms, buffers=buffers,
        input_shape_sets=shape_sets, output_shape_sets=out_sets,
        custom_op_types=tuple(dict.fromkeys(n.op_type for n in nodes if n.attr_blob is not None)),
    )  # fmt: skip


def _io_shapes(graph: Table, slot: int) -> list[list[int]]:
    """The shapes of a graph's inputs (slot 2) or outputs (slot 3)."""
    tables = graph.tables(0)
    shapes = []
    for i in graph.ints(slot) or []:
        if not 0 <= i < len(tables):
            raise VendorFormatError("vendor .rknn model: a graph's input list is invalid")
        shapes.append(tables[i].ints(4) or [])  # the tensor's field 4 (Tensor.shape)
    return shapes
