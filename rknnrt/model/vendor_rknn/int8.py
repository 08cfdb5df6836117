"""int8 convolutions: recovering float weights and biases the way the vendor's NPU computes.

The file stores the quantised weights q (packed), a bias blob per group of 8 output channels
`[8 x i32 A | 8 x i16 B | 8 x u16 C]` and, in the compiled register commands of the op's first
task, the output conversion (OUT_CVT) offset/scale/shift. With
A = round(b / (s_in * s_w)) - zp_in * sum(q - zw), B = -zw and C = round(s_w / max(s_w) * 2^14),
the per-channel weight scale is s_w = C / 2^14 * scale / 2^shift * s_out / s_in
(docs/vendor-rknn.md). The weight scale itself is not stored.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import VendorFormatError
from . import lut, mini_weights, weights
from .fileformat import KIND_REGCMD, KIND_TASKS, Node, Tensor, VendorModel

# OUT_CVT offset, scale, shift register addresses per NPU generation (Model field 1).
OUT_CVT = {
    "RKNPU v2": (0x4080, 0x4084, 0x4088),  # rk3588
    "RKNPU lite": (0x4080, 0x4084, 0x4088),  # rk3566/rk3568
    "RKNPU f2": (0x40AC, 0x40B0, 0x40B4),  # rk3576
    "RKNPU t4": (0x40AC, 0x40B0, 0x40B4),  # rk3562
    "RKNPU f3": (0x40AC, 0x40B0, 0x40B4),  # rv1126b
    "RKNPU t3": (0x4080, 0x4084, 0x4088),  # rv1103/rv1106 (mini format)
    # rv1103b/rv1106b: the scale in bits 15:0 and the shift in bits 23:16 of one register
    "RKNPU w1": (0x408C, 0x4090, 0x4090),
}
TASK = struct.Struct("<8IQ")  # flags, op index, enable mask, 3 x irq, count, offset, address
# Output channels per bias-blob group `[g x i32 A | g x i16 B | g x u16 C]` (NPU format).
BIAS_GROUP = {"RKNPU v2": 8, "RKNPU lite": 4, "RKNPU f2": 8, "RKNPU t4": 4, "RKNPU f3": 8,
              "RKNPU t3": 4, "RKNPU w1": 4}  # fmt: skip
# Bias blobs of another layout (B between two halves of A and C: mini_weights.w1_bias_blob).
_BIAS_UNPACK = {"RKNPU w1": mini_weights.w1_bias_blob}
# rv1126b's int8 weights and bias blobs are byte for byte rk3576's (the same ONNX model built
# for both), so it follows rk3576's int8 rules.
INT8_FAMILY = {"RKNPU f3": "RKNPU f2"}
# A conv with one output channel (a YOLOv8 DFL's weights 0..15) has a bias blob of A alone: its
# -zw is the signed low half of this DPU register, and its C is 2^14 (the one channel is its
# own maximum) (rk3562 and rv1106 also set bit 31). rk3576 and rv1126b program no such
# register: their -zw is the int32 at byte 0 of the constant `<conv output>_BScfgTensor` (the
# rest of its first 32 bytes zero, then bytes that differ between builds of one model: not
# read). rv1106b's is the low byte of CNA register 0x1078 (repeated in bits 15:8; -zw = 128
# as 0x80), beside the input's zero point in 0x1088 (probes of 16 one-channel convs).
SINGLE_CHANNEL_ZW = {"RKNPU v2": 0x4054, "RKNPU lite": 0x4054, "RKNPU t4": 0x4054,
                     "RKNPU t3": 0x4054}  # fmt: skip
SINGLE_CHANNEL_ZW_BYTE = {"RKNPU w1": 0x1078}
SINGLE_CHANNEL_ZW_SUFFIX = "_BScfgTensor"
SINGLE_CHANNEL_ZW_CONST = ("RKNPU f2",)  # by family(): rv1126b's "RKNPU f3" too
# Depthwise weights as (w, -zw) pairs with a bias blob without B (weights.unpack_depthwise_pairs).
DEPTHWISE_PAIRS = ("RKNPU f2", "RKNPU t4", "RKNPU t3", "RKNPU w1")
# rv1106 and rv1106b pair each weight with its own -zw (mini_weights.py)
_PAIR_UNPACK = {"RKNPU t3": mini_weights.unpack_depthwise,
                "RKNPU w1": mini_weights.unpack_depthwise_split}  # fmt: skip


def family(npu_format: str) -> str:
    """The NPU format whose int8 packing rules `npu_format` follows."""
    return INT8_FAMILY.get(npu_format, npu_format)


def _first_value(regs: np.ndarray, values: np.ndarray, reg: int) -> int | None:
    """The first value a task's commands write to `reg`, or None."""
    at = np.flatnonzero(regs == reg)
    return int(values[at[0]]) if at.size else None


class RegisterFile:
    """The register values each op's first convolution task programs (op index -> regs)."""

    def __init__(self, m: VendorModel) -> None:
        self.model = m
        self.cvt = OUT_CVT.get(m.npu_format)
        self.by_op: dict[int, dict[int, int]] = {}
        self.first: dict[int, dict[int, int]] = {}  # op index -> its first computing task's
        # op index -> (registers, values) of each of its computing tasks, as arrays
        self._tasks: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        reg_t, task_t = m.by_kind(KIND_REGCMD), m.by_kind(KIND_TASKS)
        if reg_t is None or task_t is None:
            return
        # op index -> the LE table (LUT input <= 0) a lookup-table upload task writes
        self.lut_by_op: dict[int, np.ndarray] = {}
        regcmd = np.frombuffer(m.data(reg_t), "<u8", len(m.data(reg_t)) // 8)
        # each command is reg | value << 16 | target << 48: split once, not per entry (a
        # Python loop over the commands was most of an int8 file's rknn_init)
        all_regs = (regcmd & 0xFFFF).astype(np.int64)
        all_values = ((regcmd >> 16) & 0xFFFFFFFF).astype(np.int64)
        tasks = m.data(task_t)
        for k in range(len(tasks) // TASK.size):
            _, op, _, _, _, _, count, _, addr = TASK.unpack_from(tasks, k * TASK.size)
            first = addr // 8
            if addr % 8 or first + count > regcmd.size:
                raise VendorFormatError(f"vendor .rknn model: task {k} points outside the commands")
            reg, value = all_regs[first : first + count], all_values[first : first + count]
            if np.count_nonzero(reg == lut.LUT_ACCESS_DATA) > 2:  # lut.is_upload
                table = lut.uploaded_le_table(reg, value)
                if table is not None:  # (rk3566 uploads the LE and LO tables in two tasks)
                    self.lut_by_op.setdefault(op, table)
                continue
            self._tasks.setdefault(op, []).append((reg, value))
            # the op's first task, and its first that programs the output conversion (a
            # convolution task: enable mask 0x1d on rk3588, 0x1f on rk3566; pooling tasks do
            # not set it), as dicts of each register's first value; other tasks need none (an
            # op has tens of tasks: a dict per task was most of this constructor)
            want_cvt = self.cvt is not None and op not in self.by_op
            if op in self.first and not want_cvt:
                continue
            # a dict of the reversed commands keeps each register's first value
            regs = dict(zip(reg[::-1].tolist(), value[::-1].tolist()))
            self.first.setdefault(op, regs)
            if want_cvt and all(r in regs for r in self.cvt):
                self.by_op[op] = regs

    def register_values(self, n: Node, reg: int) -> set[int]:
        """Every value op `n`'s tasks write to register `reg`."""
        return {v for regs, values in self._tasks.get(n.index, []) for v in
                values[regs == reg].tolist()}  # fmt: skip

    def out_cvts(self, n: Node) -> list[tuple[int, int, int]]:
        """(offset, scale, shift) of each of op `n`'s tasks that programs the output
        conversion, in task order (offset signed, scale's low 16 bits). A task that programs
        the scale and the shift but not the offset has offset 0: the compiler leaves that
        register out when it is 0 (a real-size DeiT's attention whose output zero point is 0)."""
        rows = []
        for regs, values in self._tasks.get(n.index, []) if self.cvt is not None else []:
            # each register's first value in the task (None: not written)
            offset, scale, shift = (_first_value(regs, values, r) for r in self.cvt)
            if scale is not None and shift is not None:
                offset = offset or 0
                rows.append((offset - (1 << 32) if offset >> 31 else offset, scale & 0xFFFF, shift))
        return rows

    def register_values_where(self, n: Node, reg: int, key: int, key_value: int) -> set[int]:
        """Every value op `n`'s tasks write to `reg` in the tasks that set `key` to
        `key_value` (each task's first value of `key`)."""
        found = set()
        for regs, values in self._tasks.get(n.index, []):
            keyed = values[regs == key]
            if keyed.size and int(keyed[0]) == key_value:
                found |= set(values[regs == reg].tolist())
        return found

    def first_task(self, n: Node) -> dict[int, int] | None:
        """The registers of op `n`'s first task that is no lookup-table upload."""
        return self.first.get(n.index)

    def out_cvt(self, n: Node) -> tuple[int, int, int]:
        regs = self.by_op.get(n.index)
        if self.cvt is None or regs is None or any(r not in regs for r in self.cvt):
            raise VendorFormatError(
                f"vendor .rknn model: int8 op {n.op_type} '{n.name}': its output conversion "
                "registers are not decoded"
            )
        offset, scale, shift = (regs[r] for r in self.cvt)
        if self.cvt[1] == self.cvt[2]:  # one register: the shift in bits 23:16 (rv1106b)
            shift = (shift >> 16) & 0xFF
        # the scale is 16 bits; rk3576 sets bit 16 in fused element-wise convolutions
        return offset, scale & 0xFFFF, shift

    def _bn_cfg(self, n: Node) -> bytes | None:
        out = self.model.tensors[n.outputs[0]].name if n.outputs else ""
        return self.model.named_constant(out + lut.BN_CFG_SUFFIX)

    def _not_decoded(self, n: Node, kind: str) -> VendorFormatError:
        return VendorFormatError(
            f"vendor .rknn model: int8 op {n.op_type} '{n.name}': its {kind} lookup table "
            f"or the multiplier feeding it is not decoded ({self.model.npu_format})"
        )

    def activation_input_scale(self, n: Node, kind: str) -> float:
        """Real value per unit of acc x C / 2^14 of a convolution fused with a lookup-table
        activation (`kind` Sigmoid, ExSwish, ExGelu, HardSwish or HardSigmoid; lut.py)."""
        regs, table = self.by_op.get(n.index), self.lut_by_op.get(n.index)
        scale = None
        if regs is not None and table is not None:
            fmt = family(self.model.npu_format)
            multiplier = lut.bn_multiplier(regs, fmt, self._bn_cfg(n))
            scale = lut.input_scale(regs, table, kind, multiplier)
        if scale is None:
            raise self._not_decoded(n, kind)
        return scale

    def activation_addend(self, n: Node, kind: str) -> float:
        """The real value the NPU adds to the convolution's output before its lookup table
        (the table's input step times the BN addend; HardSigmoid's beta - 1/2 over its alpha)."""
        regs = self.by_op.get(n.index) or {}
        fmt = family(self.model.npu_format)
        cfg = self._bn_cfg(n)
        addend, multiplier = lut.bn_addend(regs, fmt, cfg), lut.bn_multiplier(regs, fmt, cfg)
        if addend is None or multiplier is None:
            raise self._not_decoded(n, kind)
        return addend * self.activation_input_scale(n, kind) / multiplier


def _bias_blob(raw: memoryview, channels: int, group: int, name: str) -> tuple[np.ndarray, ...]:
    groups, stride = -(-channels // group), 8 * group
    if len(raw) < groups * stride:
        raise VendorFormatError(f"vendor .rknn model: int8 bias '{name}' is too short")
    blob = np.frombuffer(raw, np.uint8, groups * stride).reshape(groups, stride)
    a = blob[:, : 4 * group].copy().view("<i4").reshape(-1)[:channels].astype(np.float64)
    b = blob[:, 4 * group : 6 * group].copy().view("<i2").reshape(-1)[:channels]
    c = blob[:, 6 * group :].copy().view("<u2").reshape(-1)[:channels]
    return a, b.astype(np.float64), c.astype(np.float64)


@dataclass
class ConvInt8:
    """An int8 convolution's weights as the NPU computes with them: float weights
    (q - zw) * scale per output channel, and the float bias; `acc_bias` is that bias in
    accumulator units (s_in x scale per channel), an integer."""

    q: np.ndarray  # int8 [oc, ic, kh, kw] (depthwise: [channels, 1, kh, kw])
    zw: np.ndarray  # float32 [oc]
    scale: np.ndarray  # float32 [oc]
    bias: np.ndarray  # float32 [oc]
    acc_bias: np.ndarray  # int64 [oc]


def _bias_blob_without_b(raw: memoryview, channels: int, group: int,
                         name: str) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    groups, stride = -(-channels // group), 6 * group
    if len(raw) < groups * stride:
        raise VendorFormatError(f"vendor .rknn model: int8 bias '{name}' is too short")
    blob = np.frombuffer(raw, np.uint8, groups * stride).reshape(groups, stride)
    a = blob[:, : 4 * group].copy().view("<i4").reshape(-1)[:channels].astype(np.float64)
    c = blob[:, 4 * group :].copy().view("<u2").reshape(-1)[:channels].astype(np.float64)
    return a, c


def conv_weights(regs: RegisterFile, n: Node, x: Tensor, w: Tensor, bias: Tensor, y: Tensor,
                 depthwise: bool, activation: str | None = None,
                 mul_operand: Tensor | None = None) -> ConvInt8:  # fmt: skip
    """The weights and bias reproducing the NPU's int8 convolution `n` (`activation`: its
    output feeds that lookup table, which sets the scale instead of OUT_CVT; `mul_operand`: a
    fused Mul's int8 operand, which the NPU multiplies in as q - zp, without its scale)."""
    oc, ic, kh, kw = w.shape
    identity = _identity_conv(regs, n, x, w, bias, y, depthwise)
    if identity is not None:
        return identity
    pairs_zw = None
    fmt = family(regs.model.npu_format)
    if fmt in DEPTHWISE_PAIRS and depthwise:
        q, pairs_zw = _PAIR_UNPACK.get(fmt, weights.unpack_depthwise_pairs)(
            _data(regs, w), w.native_shape, ic, kh, kw, w.name
        )
    elif (
        fmt == "RKNPU f2" and len(w.native_shape) == 6 and w.native_shape[-1] == 4 and not depthwise
    ):
        q = weights.unpack_kh_oc_kw_ic4(_data(regs, w), w.native_shape, oc, ic, kh, kw, w.name)
    else:
        q = weights.unpack(_data(regs, w), "int8", w.native_shape, oc, ic, kh, kw, w.name)
    if depthwise:  # channels live on the input axis of the packed form
        q = q.reshape(ic, 1, kh, kw)
        oc, ic = ic, 1
    if not (x.scale and y.scale):
        raise VendorFormatError(f"vendor .rknn model: int8 op '{n.name}' lacks IO scales")
    group = BIAS_GROUP.get(regs.model.npu_format)
    if group is None:
        raise VendorFormatError(
            f"vendor .rknn model: int8 convolutions of NPU format '{regs.model.npu_format}' "
            f"(op '{n.name}') are not decoded"
        )
    if pairs_zw is not None:  # rk3576 depthwise: blob groups [A | C], zero points in q
        a, c = _bias_blob_without_b(_data(regs, bias), oc, group, bias.name)
        b = -pairs_zw
    elif fmt in _BIAS_UNPACK:
        a, b, c = _BIAS_UNPACK[fmt](_data(regs, bias), oc, bias.name)
    else:
        a, b, c = _bias_blob(_data(regs, bias), oc, group, bias.name)
    if oc == 1 and not depthwise and not b.any() and not c.any():
        b, c = _single_channel_zw(regs, n), np.array([2.0**14])
    s_in, s_out = float(x.scale[0]), float(y.scale[0])
    if activation is not None:
        post = regs.activation_input_scale(n, activation)
    else:
        _, scale, shift = regs.out_cvt(n)
        if shift > 63 or scale == 0:
            raise VendorFormatError(
                f"vendor .rknn model: int8 op '{n.name}' has an invalid OUT_CVT"
            )
        post = scale / 2.0**shift * s_out
        if mul_operand is not None:
            if not mul_operand.scale:
                raise VendorFormatError(f"vendor .rknn model: int8 op '{n.name}': its Mul "
                                        "operand has no scale")  # fmt: skip
            post /= float(mul_operand.scale[0])
    zw = -b
    s_w = c / 2.0**14 * post / s_in
    qw = q.astype(np.float64) - zw[:, None, None, None]
    zp_in = float(x.zp[0]) if x.zp else 0.0
    acc_bias = a + zp_in * qw.reshape(oc, -1).sum(1)  # integers, exact in float64
    bf = acc_bias * s_in * s_w
    return ConvInt8(q, zw.astype(np.float32), s_w.astype(np.float32), bf.astype(np.float32),
                    np.rint(acc_bias).astype(np.int64))


def _single_channel_zw(regs: RegisterFile, n: Node) -> np.ndarray:
    """-zw of int8 conv `n`, whose one output channel's bias blob holds A alone."""
    m = regs.model
    value: int | None = None
    if family(m.npu_format) in SINGLE_CHANNEL_ZW_CONST:
        out = m.tensors[n.outputs[0]].name if n.outputs else ""
        raw = m.named_constant(out + SINGLE_CHANNEL_ZW_SUFFIX)
        value = int(np.frombuffer(raw, "<i4", 1)[0]) if raw is not None and len(raw) >= 4 else None
    elif m.npu_format in SINGLE_CHANNEL_ZW:
        found = (regs.first_task(n) or {}).get(SINGLE_CHANNEL_ZW[m.npu_format])
        if found is not None:
            low = found & 0xFFFF
            value = low - 0x10000 if low & 0x8000 else low
    elif m.npu_format in SINGLE_CHANNEL_ZW_BYTE:
        found = (regs.first_task(n) or {}).get(SINGLE_CHANNEL_ZW_BYTE[m.npu_format])
        if found is not None:
            byte = found & 0xFF
            value = 128 if byte == 0x80 else (byte - 0x100 if byte & 0x80 else byte)
    if value is None or not -127 <= value <= 128:  # -zw of an int8 zero point
        raise VendorFormatError(
            f"vendor .rknn model: int8 conv '{n.name}' has one output channel, whose weight "
            f"zero point is not decoded ({m.npu_format}: "
            + ("its value is out of range)" if value is not None else "not found)")
        )
    return np.array([value], np.float64)


def _identity_conv(regs: RegisterFile, n: Node, x: Tensor, w: Tensor, bias: Tensor, y: Tensor,
                   depthwise: bool) -> ConvInt8 | None:  # fmt: skip
    """The compiler's 1x1 depthwise identity conv (`Pre_weight<input>`, inserted where a model
    input feeds a CPU op first): weights 1 for each channel then zero padding, and a bias blob
    of one i32 A per channel, no B/C groups (zeros follow). Its scale is OUT_CVT's alone."""
    channels = w.shape[1]
    if not depthwise or w.shape[2:] != [1, 1] or not (x.scale and y.scale):
        return None
    q, blob = np.frombuffer(_data(regs, w), np.int8), np.frombuffer(_data(regs, bias), np.uint8)
    if (q.size < channels or blob.size < 4 * channels or not np.all(q[:channels] == 1)
            or q[channels:].any() or blob[4 * channels :].any()):  # fmt: skip
        return None
    a = blob[: 4 * channels].copy().view("<i4").astype(np.float64)
    _, scale, shift = regs.out_cvt(n)
    if shift > 63 or scale == 0:
        raise VendorFormatError(f"vendor .rknn model: int8 op '{n.name}' has an invalid OUT_CVT")
    s_in = float(x.scale[0])
    s_w = np.full(channels, scale / 2.0**shift * float(y.scale[0]) / s_in)
    zp_in = float(x.zp[0]) if x.zp else 0.0
    return ConvInt8(np.ones((channels, 1, 1, 1), np.int8), np.zeros(channels, np.float32),
                    s_w.astype(np.float32), ((a + zp_in) * s_in * s_w).astype(np.float32),
                    np.rint(a + zp_in).astype(np.int64))  # fmt: skip


def _data(regs: RegisterFile, t: Tensor) -> memoryview:
    return regs.model.data(t)
