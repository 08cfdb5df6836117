"""The vendor loading path's speed-ups keep its results: RegisterFile's vectorised command
split equals a per-command reading, and lookup-table fits are remembered per distinct table
(benchmarks/vendor_load.py --fixtures measures the time)."""

from __future__ import annotations

import struct
from pathlib import Path

from rknnrt.model.vendor_rknn import fileformat, int8, lut

ARCH = Path(__file__).parent / "fixtures_arch"


def _per_command(m: fileformat.VendorModel) -> tuple[dict, dict]:
    """(first task's registers, every register's values) per op, one command at a time."""
    regcmd = m.data(m.by_kind(fileformat.KIND_REGCMD))
    tasks = m.data(m.by_kind(fileformat.KIND_TASKS))
    words = struct.unpack(f"<{len(regcmd) // 8}Q", regcmd)
    first: dict[int, dict[int, int]] = {}
    values: dict[int, dict[int, set[int]]] = {}
    for k in range(len(tasks) // int8.TASK.size):
        _, op, _, _, _, _, count, _, addr = int8.TASK.unpack_from(tasks, k * int8.TASK.size)
        entries = words[addr // 8 : addr // 8 + count]
        if lut.is_upload(list(entries)):
            continue
        regs: dict[int, int] = {}
        for e in entries:
            regs.setdefault(e & 0xFFFF, (e >> 16) & 0xFFFFFFFF)
            values.setdefault(op, {}).setdefault(e & 0xFFFF, set()).add((e >> 16) & 0xFFFFFFFF)
        first.setdefault(op, regs)
    return first, values


def test_register_file_equals_a_per_command_reading() -> None:
    for stem in ("effnet_rk3588_i8", "transformer_rk3576_fp16", "mbv2_rk3566_i8"):
        m = fileformat.parse(memoryview((ARCH / f"{stem}.rknn").read_bytes()))
        regs = int8.RegisterFile(m)
        first, values = _per_command(m)
        assert regs.first == first
        for n in m.nodes:
            for reg, want in values.get(n.index, {}).items():
                assert regs.register_values(n, reg) == want
        assert regs.register_values(m.nodes[0], 0x4068) == values.get(0, {}).get(0x4068, set())
