"""The vendor .rknn "mini" container (format version 0x1004: rv1103/rv1106), into a VendorModel.

The mini runtime (librknnmrt) maps one file image: a 64-byte header, a 64-byte section table,
then the task records, the register commands, the compiler's helper constants, the weight
memory and a FlatBuffer describing the graph, then the JSON trailer v6 files carry too. The
FlatBuffer follows v6's schema with fewer fields (no IO JSON, memory table or data buffers;
constants point into the weight memory) and without convolution attributes, which this
reader recovers from the convolution's register commands (`conv_attrs`). Field numbers were
found from toolkit 2.5.0 builds (docs/vendor-rknn.md, "The mini format"); anything else is
refused by name.
"""

from __future__ import annotations

import json
import struct
from math import prod

import numpy as np

from ..errors import VendorFormatError
from . import conv_ops, fileformat, int8
from .fileformat import (
    CONST_KINDS,
    KIND_CONST_AUX,
    KIND_CONST_CPU,
    KIND_REGCMD,
    KIND_TASKS,
    InputNorm,
    Node,
    Tensor,
    VendorModel,
)
from .flatbuf import Table
from .graph import LAYOUT_NC1HWC2

HEADER = struct.Struct("<4sIQQ")  # magic, zero, format version, payload length (from 0x40)
PAYLOAD_AT = 0x40
# 0x40: FlatBuffer bytes, task bytes, task count, register-command bytes, internal size,
# weight size, helper-constant bytes (zeros follow up to 0x80, where the sections start in the
# order tasks, register commands, helper constants, weights, FlatBuffer).
SECTIONS = struct.Struct("<7I")
SECTIONS_END = 0x80
TASK_SIZE = 40
MAX_JSON = 1 << 20
NPU_FORMATS = fileformat.MINI_NPU_FORMATS

# CNA registers of a convolution task (the encoding Mesa's RK3588 NPU driver documents): the
# strides and dilations (CONV_CON3) and the top/left padding (PAD_CON0).
CNA_CONV_CON3, CNA_PAD_CON0 = 0x1014, 0x1068
# rv1103b/rv1106b ("RKNPU w1") map the CNA differently (toolkit 2.5.0 builds of one conv with
# each stride, dilation, pad and kernel varied alone, docs/vendor-rknn.md): 0x100c x stride bits
# 3:0, y stride bits 7:4, x dilation - 1 bits 19:16, y dilation - 1 bits 27:24; the top pad in
# bits 27:24 of 0x1028, the left pad in bits 15:8 of 0x1084 (bottom 23:16, right 31:24; the
# least that give the output size, as computed below).
W1_CONV_CFG, W1_TOP_PAD, W1_PADS = 0x100C, 0x1028, 0x1084


class _Attrs:
    """Conv attributes in the v6 node's slot order (conv_ops: 1 dilations, 2 group,
    3 kernel_shape, 4 pads, 5 strides), for convolutions whose mini record stores none."""

    def __init__(self, values: dict[int, list[int]]) -> None:
        self.values = values

    def has(self, slot: int) -> bool:
        return slot in self.values

    def ints(self, slot: int) -> list[int] | None:
        return self.values.get(slot)

    def scalar(self, slot: int, fmt: str, default: int | float = 0) -> int | float:
        value = self.values.get(slot)
        return value[0] if value else default

    def string(self, slot: int) -> str | None:
        return None


def _floats(t: Table, slot: int) -> list[float]:
    return t.floats(slot) or []


def _tensor(index: int, t: Table) -> Tensor:
    code = int(t.scalar(0, "<b"))
    dtype = fileformat.ONNX_DTYPES.get(code, f"onnx:{code}")
    scale = _floats(t, 6)
    return Tensor(
        index=index, name=t.string(5) or "", dtype=dtype, layout_tag=int(t.scalar(1, "<b")),
        kind=int(t.scalar(2, "<b")), native_shape=t.ints(3) or [], shape=t.ints(4) or [],
        qnt_method="layer" if scale else "", qnt_type="int8" if dtype == "int8" and scale else "",
        scale=scale, zp=t.ints(7) or [], size=int(t.scalar(8, "<i")),
        offset=int(t.scalar(9, "<i")), buffer=-1, width_align=int(t.scalar(12, "<i")),
    )  # fmt: skip


def _node(index: int, n: Table, count: int) -> Node:
    ins, outs = n.ints(4) or [], n.ints(5) or []
    if any(not 0 <= i < count for i in ins + outs):
        raise VendorFormatError(
            f"vendor .rknn model: node {index} names a tensor that does not exist"
        )
    return Node(index, n.string(1) or "", n.string(2) or "", int(n.scalar(3, "<B")), ins, outs,
                int(n.scalar(6, "<B")), n.table(7))  # fmt: skip


def flatbuffer_offset(buf: memoryview) -> int:
    """Where the FlatBuffer begins in a mini file (after the sections before it)."""
    sizes = SECTIONS.unpack_from(buf, PAYLOAD_AT)
    return SECTIONS_END + sizes[1] + sizes[3] + sizes[5] + sizes[6]


def _sections(buf: memoryview) -> tuple[dict[str, memoryview], dict, int, int]:
    """(sections by name, JSON trailer, internal size, task count)."""
    if len(buf) < SECTIONS_END:
        raise VendorFormatError(
            f"vendor .rknn model (mini format) is too small: {len(buf)} bytes"
        )
    _, _, _, payload = HEADER.unpack_from(buf, 0)
    fb_size, task_bytes, tasks, reg_bytes, internal, weight, aux = SECTIONS.unpack_from(
        buf, PAYLOAD_AT
    )
    end = PAYLOAD_AT + payload
    sizes = (("tasks", task_bytes), ("regcmd", reg_bytes), ("aux", aux),
             ("weights", weight), ("flatbuffer", fb_size))  # fmt: skip
    if end + 8 > len(buf) or SECTIONS_END + sum(s for _, s in sizes) != end:
        raise VendorFormatError(
            "vendor .rknn model (mini format): the section sizes do not add up to the file "
            "(truncated?)"
        )
    if tasks * TASK_SIZE > task_bytes or reg_bytes % 8:
        raise VendorFormatError("vendor .rknn model (mini format): malformed task section")
    out, at = {}, SECTIONS_END
    for name, size in sizes:
        out[name] = buf[at : at + size]
        at += size
    (json_len,) = struct.unpack_from("<Q", buf, end)
    if json_len > min(MAX_JSON, len(buf) - end - 8):
        raise VendorFormatError(
            "vendor .rknn model (mini format): the JSON trailer overruns the file (truncated?)"
        )
    try:
        trailer = json.loads(bytes(buf[end + 8 : end + 8 + json_len]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise VendorFormatError("vendor .rknn model: the JSON trailer is not valid JSON") from None
    if not isinstance(trailer, dict):
        raise VendorFormatError("vendor .rknn model: the JSON trailer is not a JSON object")
    return out, trailer, internal, tasks


def is_mini(buf: memoryview) -> bool:
    return len(buf) >= 16 and HEADER.unpack_from(buf, 0)[2] == fileformat.MINI_FORMAT_VERSION


def read(buf: memoryview) -> VendorModel:
    """Either vendor container: the mini format (0x1004) here, version 6 in fileformat."""
    return parse(buf) if is_mini(buf) else fileformat.parse(buf)


def parse(buf: memoryview) -> VendorModel:
    """Read a vendor .rknn mini file; VendorFormatError (one line) when it cannot."""
    parts, trailer, internal, task_count = _sections(buf)
    fb = parts["flatbuffer"]
    if len(fb) < 8 or bytes(fb[4:8]) != b"RKNN":
        raise VendorFormatError("vendor .rknn model: the FlatBuffer lacks its 'RKNN' identifier")
    root = Table(fb, struct.unpack_from("<I", fb, 0)[0], "model")
    npu_format = root.string(1) or ""
    platform = (root.string(6) or "").lower()
    if npu_format not in NPU_FORMATS:
        raise VendorFormatError(
            f"vendor .rknn model (mini format, {platform}): NPU format '{npu_format}' is not "
            f"supported ({', '.join(NPU_FORMATS)} is)"
        )
    graphs = root.tables(2)
    if len(graphs) != 1:
        raise VendorFormatError(
            f"vendor .rknn model (mini format): {len(graphs)} graphs (one is supported)"
        )
    g = graphs[0]
    tensors = [_tensor(i, t) for i, t in enumerate(g.tables(0))]
    nodes = [_node(i, n, len(tensors)) for i, n in enumerate(g.tables(1))]
    ins, outs = g.ints(2) or [], g.ints(3) or []
    if not ins or not outs or any(not 0 <= i < len(tensors) for i in ins + outs):
        raise VendorFormatError("vendor .rknn model: the graph's input/output list is invalid")
    buffers = _buffers(tensors, parts, task_count)
    m = VendorModel(
        format_version=int(root.scalar(0, "<i")), npu_format=npu_format, platform=platform,
        compiler_version=root.string(5) or "", toolkit_version=str(trailer.get("version", "")),
        model_name=str(trailer.get("name", "")), source=root.string(7) or "",
        custom_string=root.string(8) or "", generator_text=root.string(3) or "{}",
        io_types={tensors[i].name: {"dtype": tensors[i].dtype} for i in ins + outs},
        shape_mode="static_shape", weight_size=len(parts["weights"]), internal_size=internal,
        tensors=tensors, nodes=nodes, inputs=ins, outputs=outs,
        norms=[InputNorm(_floats(t, 0), _floats(t, 1)) for t in g.tables(4)], buffers=buffers,
        input_shape_sets=[[tensors[i].shape for i in ins]],
        output_shape_sets=[[tensors[i].shape for i in outs]],
    )  # fmt: skip
    _conv_attributes(m)
    return m


def _stored_values(t: Tensor) -> int:
    """How many values constant `t` holds: its shape's, or where it is stored NC1HWC2 (native
    [N, C1, H, W, C2]) each (n, c1) plane's H x W positions padded to a multiple of 4, as v6
    files store them (graph.from_nc1hwc2: a YOLOv8 head's anchor points [2, 1, 1, 8400] as
    [2, 1, 1, 8400, 16]; YOLOv5's anchors [3, 1, 1, 2] as 3 planes of 4 positions)."""
    native = t.native_shape
    if t.layout_tag != LAYOUT_NC1HWC2 or len(native) != 5:
        return prod(t.shape)
    positions = -(-native[2] * native[3] // 4) * 4
    return native[0] * native[1] * positions * native[4]


def _buffers(tensors: list[Tensor], parts: dict[str, memoryview], task_count: int
             ) -> list[memoryview]:  # fmt: skip
    """Give every constant its bytes of the weight memory (offset, size), and the register
    commands and tasks their sections, as v6 files' data buffers."""
    buffers = []
    for t in tensors:
        if t.kind in CONST_KINDS:
            # helper constants (kind 8) have a section of their own
            memory = parts["aux" if t.kind == KIND_CONST_AUX else "weights"]
            if t.offset < 0 or t.size < 0 or t.offset + t.size > len(memory):
                raise VendorFormatError(
                    f"vendor .rknn model: constant '{t.name}' lies outside its memory section"
                )
            data = memory[t.offset : t.offset + t.size]
            if t.kind == KIND_CONST_CPU and t.dtype in fileformat.ONNX_DTYPES.values():
                # CPU constants are allocated in 64-byte units: keep the values only
                data = data[: _stored_values(t) * np.dtype(t.dtype).itemsize]
        elif t.kind == KIND_REGCMD:
            data = parts["regcmd"]
        elif t.kind == KIND_TASKS:
            data = parts["tasks"][: task_count * TASK_SIZE]
        else:
            continue
        t.buffer = len(buffers)
        buffers.append(data)
    return buffers


def _conv_attributes(m: VendorModel) -> None:
    """Give every convolution its attributes from its first task's registers."""
    regs = int8.RegisterFile(m)
    for n in m.nodes:
        if n.op_type in conv_ops.FUSIONS and n.attrs is None:
            n.attrs = _Attrs(conv_attrs(m, n, regs.first_task(n) or {}))  # type: ignore[assignment]


def _cna_fields(npu_format: str, regs: dict[int, int]
                ) -> tuple[list[int], list[int], int, int, int] | None:  # fmt: skip
    """(strides, dilations, top pad, left pad, the stride register) of a conv task's CNA
    registers, per NPU format; None where a register is missing."""
    if npu_format == "RKNPU w1":
        if any(r not in regs for r in (W1_CONV_CFG, W1_TOP_PAD, W1_PADS)):
            return None
        cfg = regs[W1_CONV_CFG]
        strides = [(cfg >> 4) & 0xF, cfg & 0xF]
        dilations = [((cfg >> 24) & 0xF) + 1, ((cfg >> 16) & 0xF) + 1]
        return strides, dilations, (regs[W1_TOP_PAD] >> 24) & 0xF, (regs[W1_PADS] >> 8) & 0xFF, cfg
    if CNA_CONV_CON3 not in regs or CNA_PAD_CON0 not in regs:
        return None
    con3, pad0 = regs[CNA_CONV_CON3], regs[CNA_PAD_CON0]
    # d - 1 in bits 25:21 (rows) and 20:16 (columns); pads: top bits 3:0, left bits 11:8
    dilations = [((con3 >> 21) & 0x1F) + 1, ((con3 >> 16) & 0x1F) + 1]
    return [(con3 >> 3) & 7, con3 & 7], dilations, pad0 & 0xF, (pad0 >> 8) & 0xF, con3


def conv_attrs(m: VendorModel, n: Node, regs: dict[int, int]) -> dict[int, list[int]]:
    """The attributes of convolution `n` (no attribute table in mini files): the kernel from
    its weight's shape, strides and dilations from CNA_CONV_CON3, top/left pads from
    CNA_PAD_CON0 and bottom/right pads as the least that give the output's size."""
    ins = [m.tensors[i] for i in n.inputs]
    decoded = _cna_fields(m.npu_format, regs)
    if len(ins) < 2 or not n.outputs or len(ins[1].shape) != 4 or decoded is None:
        raise VendorFormatError(
            f"vendor .rknn model (mini format): the attributes of {n.op_type} '{n.name}' are "
            "not decoded"
        )
    x, w, y = ins[0], ins[1], m.tensors[n.outputs[0]]
    strides, dilations, top, left, con3 = decoded
    oc, ic, kh, kw = w.shape
    group = 1
    if len(x.shape) == 4 and len(y.shape) == 4 and oc == 1 and ic == x.shape[1] == y.shape[1] > 1:
        group = ic  # depthwise: stored as [1, C, KH, KW], as in v6 files
    if group == 1 and len(x.shape) == 4 and ic != x.shape[1]:
        raise VendorFormatError(
            f"vendor .rknn model (mini format): grouped convolution '{n.name}' is not supported"
        )
    if len(x.shape) != 4 or len(y.shape) != 4 or min(strides) < 1:
        raise VendorFormatError(
            f"vendor .rknn model (mini format): convolution '{n.name}' has undecodable "
            f"strides or shapes (stride register {con3:#x})"
        )
    pads_end = []
    for axis, (k, d, s, begin) in enumerate(((kh, dilations[0], strides[0], top),
                                             (kw, dilations[1], strides[1], left))):  # fmt: skip
        size, out = x.shape[2 + axis], y.shape[2 + axis]
        end = max(0, (out - 1) * s + d * (k - 1) + 1 - size - begin)
        if (size + begin + end - d * (k - 1) - 1) // s + 1 != out:
            raise VendorFormatError(
                f"vendor .rknn model (mini format): convolution '{n.name}': its registers do "
                "not give its output size"
            )
        pads_end.append(end)
    return {1: dilations, 2: [group], 3: [kh, kw], 4: [top, left, *pads_end], 5: strides}
