"""A bounds-checked, schema-less FlatBuffer table reader.

The vendor publishes no schema, so fields are addressed by their vtable slot (0-based). Every
offset is checked against the buffer before it is followed, so a corrupted file raises
VendorFormatError instead of reading out of bounds or looping; nothing is ever executed.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import VendorFormatError

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class Table:
    """One FlatBuffer table at `pos` of `buf`; `where` names it in error messages."""

    __slots__ = ("buf", "pos", "where", "_vt", "_nfields")

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
        vt_size, _ = struct.unpack_from("<HH", buf, vt)
        if vt_size < 4 or vt_size % 2 or vt + vt_size > size:
            raise VendorFormatError(f"vendor .rknn model: table {where} has a malformed vtable")
        self._vt = vt
        self._nfields = (vt_size - 4) // 2

    def _field(self, slot: int, width: int) -> int:
        """Absolute position of field `slot` (0 when absent), checked to hold `width` bytes."""
        if slot >= self._nfields:
            return 0
        rel = _U16.unpack_from(self.buf, self._vt + 4 + 2 * slot)[0]
        if not rel:
            return 0
        at = self.pos + rel
        if at + width > len(self.buf):
            raise VendorFormatError(
                f"vendor .rknn model: field {slot} of {self.where} lies outside the file"
            )
        return at

    def has(self, slot: int) -> bool:
        return self._field(slot, 0) != 0

    def scalar(self, slot: int, fmt: str, default: int | float = 0) -> int | float:
        at = self._field(slot, struct.calcsize(fmt))
        return struct.unpack_from(fmt, self.buf, at)[0] if at else default

    def _target(self, slot: int) -> int:
        """Where the offset stored in field `slot` points (0 when absent)."""
        at = self._field(slot, 4)
        if not at:
            return 0
        target = at + _U32.unpack_from(self.buf, at)[0]
        if target > len(self.buf) - 4:
            raise VendorFormatError(
                f"vendor .rknn model: field {slot} of {self.where} points outside the file"
            )
        return target

    def vector(self, slot: int, elem_size: int) -> tuple[int, int]:
        """(start, count) of the vector in field `slot`; (0, 0) when absent."""
        at = self._target(slot)
        if not at:
            return 0, 0
        count = _U32.unpack_from(self.buf, at)[0]
        if count * elem_size > len(self.buf) - at - 4:
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
        values = self.array(slot, "<i4")
        return None if values is None else [int(v) for v in values]

    def table(self, slot: int) -> Table | None:
        at = self._target(slot)
        return Table(self.buf, at, f"{self.where}.{slot}") if at else None

    def tables(self, slot: int) -> list[Table]:
        start, count = self.vector(slot, 4)
        out = []
        for k in range(count):
            at = start + 4 * k
            out.append(Table(self.buf, at + _U32.unpack_from(self.buf, at)[0],
                             f"{self.where}.{slot}[{k}]"))  # fmt: skip
        return out
