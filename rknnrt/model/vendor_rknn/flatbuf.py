"""A bounds-checked, schema-less FlatBuffer table reader.

The vendor publishes no schema, so fields are addressed by their vtable slot (0-based). Every
offset is checked against the buffer before it is followed, so a corrupted file raises
VendorFormatError instead of reading out of bounds or looping; nothing is ever executed.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import VendorFormatError

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_VT_HEAD = struct.Struct("<HH")
_SCALARS: dict[str, struct.Struct] = {}  # one compiled Struct per scalar format


class Table:
    """One FlatBuffer table at `pos` of `buf`; `where` names it in error messages."""

    __slots__ = ("buf", "pos", "where", "_slots", "_size")

    def __init__(self, buf: memoryview, pos: int, where: str) -> None:
        self.buf, self.pos, self.where = buf, pos, where
        size = len(buf)
        if not 0 <= pos <= size - 4:
            raise VendorFormatError(
                f"vendor .rknn model: table {where} at {pos} lies outside the file"
            )
        vt = pos - _I32.unpack_from(buf, pos)[0]
        if not 0 <= vt <= size - 4:
            raise VendorFormatError(
                f"vendor .rknn model: table {where} has a vtable outside the file"
            )
        vt_size, _ = _VT_HEAD.unpack_from(buf, vt)
        if vt_size < 4 or vt_size % 2 or vt + vt_size > size:
            raise VendorFormatError(f"vendor .rknn model: table {where} has a malformed vtable")
        # the whole vtable at once: a file's tables are read field by field, ~10 each
        self._slots = struct.unpack_from(f"<{(vt_size - 4) // 2}H", buf, vt + 4)
        self._size = size

    def _field(self, slot: int, width: int) -> int:
        """Absolute position of field `slot` (0 when absent), checked to hold `width` bytes."""
        slots = self._slots
        rel = slots[slot] if slot < len(slots) else 0
        if not rel:
            return 0
        at = self.pos + rel
        if at + width > self._size:
            raise VendorFormatError(
                f"vendor .rknn model: field {slot} of {self.where} lies outside the file"
            )
        return at

    def has(self, slot: int) -> bool:
        return self._field(slot, 0) != 0

    def scalar(self, slot: int, fmt: str, default: int | float = 0) -> int | float:
        packer = _SCALARS.get(fmt)
        if packer is None:
            packer = _SCALARS.setdefault(fmt, struct.Struct(fmt))
        at = self._field(slot, packer.size)
        return packer.unpack_from(self.buf, at)[0] if at else default

    def _target(self, slot: int) -> int:
        """Where the offset stored in field `slot` points (0 when absent)."""
        at = self._field(slot, 4)
        if not at:
            return 0
        target = at + _U32.unpack_from(self.buf, at)[0]
        if target > self._size - 4:
            raise VendorFormatError(
                f"vendor .rknn model: field {slot} of {self.where} points outside the file"
            )
        return target

    def vector(self, slot: int, elem_size: int) -> tuple[int, int]:
        """(start, count) of the vector in field `slot`; (0, 0) when absent. (_target's
        checks inlined: the reader's most frequent call.)"""
        slots = self._slots
        rel = slots[slot] if slot < len(slots) else 0
        if not rel:
            return 0, 0
        at, size, buf = self.pos + rel, self._size, self.buf
        if at + 4 > size:
            raise VendorFormatError(
                f"vendor .rknn model: field {slot} of {self.where} lies outside the file"
            )
        at += _U32.unpack_from(buf, at)[0]
        if at > size - 4:
            raise VendorFormatError(
                f"vendor .rknn model: field {slot} of {self.where} points outside the file"
            )
        count = _U32.unpack_from(buf, at)[0]
        if count * elem_size > size - at - 4:
            raise VendorFormatError(
                f"vendor .rknn model: vector {slot} of {self.where} ({count} items) "
                "overruns the file"
            )
        return at + 4, count

    def raw(self, slot: int) -> memoryview | None:
        start, count = self.vector(slot, 1)
        return self.buf[start : start + count] if start else None

    def string(self, slot: int) -> str | None:
        data = self.raw(slot)
        if data is None:
            return None
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise VendorFormatError(
                f"vendor .rknn model: string {slot} of {self.where} is not UTF-8"
            ) from None

    def array(self, slot: int, dtype: str) -> np.ndarray | None:
        """A copy of the scalar vector in field `slot` as `dtype` (e.g. '<i4')."""
        item = np.dtype(dtype).itemsize
        start, count = self.vector(slot, item)
        if not start:
            return None
        return np.frombuffer(self.buf, dtype, count, start).copy()

    def ints(self, slot: int) -> list[int] | None:
        start, count = self.vector(slot, 4)
        if not start:
            return None
        return list(struct.unpack_from(f"<{count}i", self.buf, start))

    def floats(self, slot: int) -> list[float] | None:
        """The float32 vector in field `slot` as Python floats (exact widenings)."""
        start, count = self.vector(slot, 4)
        if not start:
            return None
        return list(struct.unpack_from(f"<{count}f", self.buf, start))

    def table(self, slot: int) -> Table | None:
        at = self._target(slot)
        return Table(self.buf, at, f"{self.where}.{slot}") if at else None

    def tables(self, slot: int) -> list[Table]:
        start, count = self.vector(slot, 4)
        offsets = struct.unpack_from(f"<{count}I", self.buf, start) if count else ()
        return [Table(self.buf, start + 4 * k + rel, f"{self.where}.{slot}[{k}]")
                for k, rel in enumerate(offsets)]  # fmt: skip
