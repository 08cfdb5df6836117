"""The vendor loading path's speed-ups keep its results: RegisterFile's vectorised command
split equals a per-command reading, and lookup-table fits are remembered per distinct table;
the lookup-table upload is split with numpy as a per-command reading splits it; the FlatBuffer
reader's lists are the per-element ones; the generator dict is parsed only when asked for; the
program's dropped float16 roundings change no output bit (benchmarks/vendor_load.py --fixtures
measures the time)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from rknnrt.model import container
from rknnrt.model.vendor_rknn import fileformat, int8, literal, lut, mini_format
from rknnrt.model.vendor_rknn.flatbuf import Table, VendorFormatError

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


def _le_per_command(entries: list[int]) -> list[int] | None:
    """The LE table of one task, command by command (the reading lut.uploaded_le_table
    replaces)."""
    table: list[int] = []
    writing = False
    for entry in entries:
        reg, value = entry & 0xFFFF, (entry >> 16) & 0xFFFFFFFF
        if reg == lut.LUT_ACCESS_CFG:
            writing = value == 0x20000
        elif reg == lut.LUT_ACCESS_DATA and writing and len(table) < lut.ENTRIES:
            table.append(value - (1 << 32) if value >= 1 << 31 else value)
    return table if len(table) == lut.ENTRIES else None


def _split(entries: list[int]) -> tuple[np.ndarray, np.ndarray]:
    words = np.array(entries, np.uint64)
    return (words & 0xFFFF).astype(np.int64), ((words >> 16) & 0xFFFFFFFF).astype(np.int64)


def test_the_uploaded_table_equals_a_per_command_reading() -> None:
    seen = 0
    for stem in ("mbv3_rk3566_fp16", "effnet_rk3588_i8", "hsig_rk3576_i8", "yoloneck_rk3562_i8"):
        m = fileformat.parse(memoryview((ARCH / f"{stem}.rknn").read_bytes()))
        regcmd = m.data(m.by_kind(fileformat.KIND_REGCMD))
        tasks = m.data(m.by_kind(fileformat.KIND_TASKS))
        words = struct.unpack(f"<{len(regcmd) // 8}Q", regcmd)
        for k in range(len(tasks) // int8.TASK.size):
            _, _, _, _, _, _, count, _, addr = int8.TASK.unpack_from(tasks, k * int8.TASK.size)
            entries = list(words[addr // 8 : addr // 8 + count])
            if not lut.is_upload(entries):
                continue
            want = _le_per_command(entries)
            got = lut.uploaded_le_table(*_split(entries))
            assert (got is None) == (want is None)
            if want is not None:
                assert got.dtype == np.float64 and got.tolist() == want
                seen += 1
    assert seen >= 8
    cfg, data = lut.LUT_ACCESS_CFG, lut.LUT_ACCESS_DATA
    le = [cfg | 0x20000 << 16] + [data | (0xFFFFFFFF - k) << 16 for k in range(lut.ENTRIES)]
    cases = [le, [data | 5 << 16] * 3 + le,  # data before any CFG: not counted
             le[:100] + [cfg | 0x30000 << 16, data | 7 << 16, cfg | 0x20000 << 16] + le[100:],
             le[:-1], [], le + le]  # fmt: skip
    for entries in cases:
        want = _le_per_command(entries)
        got = lut.uploaded_le_table(*_split(entries))
        assert (got is None) == (want is None) and (want is None or got.tolist() == want)


def test_table_lists_equal_a_per_element_reading() -> None:
    """Table.ints/floats/tables read a vector in one unpack: the values numpy reads one by
    one, and a vector past the end of the file is still refused."""
    m = (ARCH / "transformer_rk3576_i8.rknn").read_bytes()
    fb = memoryview(m)[fileformat.HEADER_SIZE:]
    graph = Table(fb, struct.unpack_from("<I", fb, 0)[0], "model").tables(2)[0]
    tensors = graph.tables(0)
    assert len(tensors) > 10
    for t in tensors:
        for slot in (3, 4, 11):
            start, count = t.vector(slot, 4)
            want = None if not start else [int(v) for v in np.frombuffer(fb, "<i4", count, start)]
            assert t.ints(slot) == want
        start, count = t.vector(10, 4)
        want = None if not start else [float(v) for v in np.frombuffer(fb, "<f4", count, start)]
        assert t.floats(10) == want
    bad = bytearray(m)
    start, _ = tensors[0].vector(4, 4)
    struct.pack_into("<I", bad, fileformat.HEADER_SIZE + start - 4, 1 << 28)
    fb = memoryview(bytes(bad))[fileformat.HEADER_SIZE:]
    graph = Table(fb, struct.unpack_from("<I", fb, 0)[0], "model").tables(2)[0]
    with pytest.raises(VendorFormatError, match="overruns"):
        graph.tables(0)[0].ints(4)


def test_the_generator_dict_is_parsed_only_when_asked_for(monkeypatch) -> None:
    """Nothing at load reads the toolkit's generator dict: a file whose dict is no literal
    loads, and the dict says so only when read."""
    data = bytearray((ARCH / "clip_rk3576_fp16.rknn").read_bytes())
    at = data.index(b"{'attrs'")
    calls: list[str] = []
    parse = literal.parse_dict
    monkeypatch.setattr(literal, "parse_dict", lambda text: calls.append(text) or parse(text))
    good = mini_format.read(memoryview(bytes(data)))
    assert not calls and good.generator["attrs"]["x"]["shape"] == [1, 3, 8, 8]
    data[at : at + 2] = b"(("  # no longer a dict literal; same length
    container.read(memoryview(bytes(data)))  # loads
    bad = mini_format.read(memoryview(bytes(data)))
    with pytest.raises(VendorFormatError, match="generator dict"):
        _ = bad.generator


@pytest.mark.parametrize("platform", ["rk3562", "rk3566", "rk3576", "rk3588", "rv1126b"])
def test_dropped_float16_roundings_change_no_output_bit(platform, monkeypatch) -> None:
    """A vendor transformer's program drops its roundings of rounded values (Reshape,
    Transpose... of stored float16 tensors): its outputs are those of the full graph."""
    from rknnrt.core.program import fast_graph
    from rknnrt.lite import RKNNLite

    stem = f"transformer_{platform}_fp16"
    with np.load(ARCH / f"{stem}.npz", allow_pickle=False) as data:
        x = np.ascontiguousarray(data["in0"][0])
    dropped: list[int] = []
    rewrite = fast_graph.roundings_of_rounded_values

    def infer() -> bytes:
        runtime = RKNNLite()
        assert runtime.load_rknn(str(ARCH / f"{stem}.rknn")) == 0
        assert runtime.init_runtime() == 0
        try:
            return b"".join(np.asarray(o).tobytes()
                            for o in runtime.inference([x], data_format="nchw"))  # fmt: skip
        finally:
            runtime.release()

    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    monkeypatch.setattr(fast_graph, "roundings_of_rounded_values",
                        lambda g: dropped.append(rewrite(g)) or dropped[-1])  # fmt: skip
    fast = infer()
    monkeypatch.setattr(fast_graph, "roundings_of_rounded_values", lambda g: 0)
    assert dropped and dropped[0] >= 5
    assert infer() == fast
