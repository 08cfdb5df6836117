"""core/program/layout_cache.py: a float16 program is laid out once; later inits read the
laid-out graph from the cache, with outputs bit-identical, and the cache is keyed, checked and
bounded."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rknnrt.core import switches
from rknnrt.core.program import fp16_layout, layout_cache
from rknnrt.lite import RKNNLite
from rknnrt.sessions import kernels
from rknnrt.toolkit import RKNN

from .models import residual_like


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    # the compiled kernels of the user cache linked in (built once per machine, not per test)
    (tmp_path / "cache").mkdir()
    os.symlink(kernels.library(switches.cache_root()).parent.parent, tmp_path / "cache" / "kernels")
    monkeypatch.setenv("RKNNRT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "64")
    return tmp_path / "cache" / "fp16_layout"


@pytest.fixture
def layouts(monkeypatch) -> list[bool]:
    """One entry per layout made (True: something was laid out)."""
    made: list[bool] = []
    original = fp16_layout.blocked_program
    monkeypatch.setattr(fp16_layout, "blocked_program",
                        lambda *a: made.append((r := original(*a)) is not None) or r)  # fmt: skip
    return made


def _model(tmp_path, seed: int = 2) -> str:
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float16")
    rknn.load_onnx(residual_like(seed))
    assert rknn.build(do_quantization=False) == 0
    path = str(tmp_path / f"residual_{seed}.rknn")
    assert rknn.export_rknn(path) == 0
    return path


def _infer(path: str) -> list[bytes]:
    rng = np.random.RandomState(3)
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        return [runtime.inference([(rng.rand(1, 3, 16, 16) * 4 - 1).astype(np.float32)],
                                  data_format="nchw")[0].tobytes() for _ in range(3)]  # fmt: skip
    finally:
        runtime.release()
        layout_cache.wait()  # the entry an init writes is there once it returns here


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"*{layout_cache.SUFFIX}")) if cache.exists() else []


def test_the_second_init_reads_the_layout_with_the_same_bits(tmp_path, cache, layouts,
                                                             monkeypatch) -> None:  # fmt: skip
    path = _model(tmp_path)
    first = _infer(path)
    assert len(layouts) == 1 and len(_entries(cache)) == 1
    if not layouts[0]:
        pytest.skip("onnxruntime has no blocked layout on this CPU (the entry says so)")
    second = _infer(path)
    assert len(layouts) == 1  # read from the cache, not laid out again
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED", "0")
    plain = _infer(path)
    assert first == second == plain and len(set(plain)) == 3


def test_another_model_or_version_is_another_key(tmp_path, cache, layouts,
                                                 monkeypatch) -> None:  # fmt: skip
    _infer(_model(tmp_path, seed=2))
    _infer(_model(tmp_path, seed=5))  # the same graph with other weights
    assert len(layouts) == 2 and len(_entries(cache)) == 2
    graph, names, values = b"graph", ["w"], [np.arange(4, dtype=np.float32)]
    base = layout_cache.key(graph, names, values)
    changed = values[0].copy()
    changed[3] = np.nextafter(changed[3], np.float32(9))
    assert layout_cache.key(graph, names, [changed]) != base
    assert layout_cache.key(b"graph2", names, values) != base
    assert layout_cache.key(graph, ["v"], values) != base
    assert layout_cache.key(graph, names, [values[0].view(np.int32)]) != base
    monkeypatch.setattr(layout_cache, "RKNNRT_VERSION", "99.0")
    layout_cache._fingerprint.cache_clear()
    try:
        assert layout_cache.key(graph, names, values) != base
    finally:
        monkeypatch.undo()
        layout_cache._fingerprint.cache_clear()
    assert layout_cache.key(graph, names, values) == base


def test_a_damaged_entry_is_removed_and_laid_out_again(tmp_path, cache, layouts) -> None:
    path = _model(tmp_path)
    expected = _infer(path)
    (entry,) = _entries(cache)
    raw = bytearray(entry.read_bytes())
    raw[-1] ^= 0x40  # a bit of the last constant (or of the graph, if nothing is laid out)
    entry.write_bytes(bytes(raw))
    assert _infer(path) == expected
    assert len(layouts) == 2  # laid out again
    assert _entries(cache) == [entry] and entry.read_bytes() != bytes(raw)  # rewritten
    entry.write_bytes(b"RKNNRTL1")  # truncated
    assert layout_cache.load(entry.name[: -len(layout_cache.SUFFIX)]) == (False, None)
    assert not entry.exists()


def test_nothing_to_lay_out_is_kept_too(cache) -> None:
    layout_cache.store("k" * 64, None)
    assert layout_cache.load("k" * 64) == (True, None)
    assert layout_cache.load("j" * 64) == (False, None)


def test_the_folder_stays_within_its_bound(cache) -> None:
    data = np.arange(300 << 10, dtype=np.uint8)  # 300 KiB of constants per entry
    blocked = fp16_layout.Blocked(b"\x08\x01", data)
    for k, name in enumerate("abcde"):
        layout_cache.store(name * 64, blocked)
        os.utime(cache / f"{name * 64}{layout_cache.SUFFIX}", (1000 + k, 1000 + k))
    assert len(_entries(cache)) == 5
    stale = cache / f".{'f' * 64}{layout_cache.SUFFIX}.x1.tmp"  # a write that never ended
    stale.write_bytes(b"partial")
    fresh = cache / f".{'g' * 64}{layout_cache.SUFFIX}.x2.tmp"  # one under way
    fresh.write_bytes(b"partial")
    os.utime(stale, (1000, 1000))
    found, back = layout_cache.load("b" * 64)  # used last: kept
    assert found and back.graph == blocked.graph and back.data.tobytes() == data.tobytes()
    layout_cache.prune(1 << 20)  # 1 MiB: three entries fit
    assert [p.name[0] for p in _entries(cache)] == ["b", "d", "e"]
    assert not stale.exists() and fresh.exists()


def test_a_zero_bound_or_an_entry_over_it_writes_nothing(tmp_path, cache, layouts,
                                                         monkeypatch) -> None:  # fmt: skip
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    path = _model(tmp_path)
    _infer(path)
    _infer(path)
    assert len(layouts) == 2 and not _entries(cache)
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "1")
    layout_cache.store("z" * 64, fp16_layout.Blocked(b"g", np.zeros(2 << 20, np.uint8)))
    assert not _entries(cache)


def test_the_cache_write_begins_after_the_program_session_is_built(
        tmp_path, cache, layouts, monkeypatch) -> None:  # fmt: skip
    """The first init's cache write (100 MB on ResNet-50 fp16) does not run while that init
    builds the program's session."""
    from rknnrt.core.program import whole

    events: list[str] = []
    opened, stored = whole.open_program, layout_cache.store_later
    monkeypatch.setattr(whole, "open_program",
                        lambda g, **s: events.append(f"open optimise={s.get('optimise')}")
                        or opened(g, **s))  # fmt: skip
    monkeypatch.setattr(layout_cache, "store_later",
                        lambda *a: events.append("store") or stored(*a))  # fmt: skip
    _infer(_model(tmp_path))
    if not layouts[0]:
        pytest.skip("onnxruntime has no blocked layout on this CPU")
    assert events == ["open optimise=True", "open optimise=False", "store"]
    assert len(_entries(cache)) == 1


def test_the_key_hashes_every_weight_byte_in_its_place(monkeypatch) -> None:
    """The weights are hashed in two halves on two threads: a byte changed in either half, or
    two weights exchanged, gives another key; the same weights give the same key."""
    import threading

    rng = np.random.default_rng(4)
    values = [rng.standard_normal(n).astype(np.float16) for n in (3, 5000, 7000, 2)]
    names = ["a", "b", "c", "d"]
    base = layout_cache.key(b"g", names, values)
    assert layout_cache.key(b"g", names, [v.copy() for v in values]) == base
    for k in range(4):
        changed = [v.copy() for v in values]
        changed[k].view(np.uint16)[-1] ^= 1
        assert layout_cache.key(b"g", names, changed) != base
    swapped = [values[0], values[2][:5000], np.concatenate([values[1], values[2][5000:]]),
               values[3]]  # the same bytes in the same order, cut elsewhere
    assert layout_cache.key(b"g", names, swapped) != base
    threads: set[str] = set()
    digest = layout_cache._bytes_digest
    monkeypatch.setattr(layout_cache, "_bytes_digest",
                        lambda arrays: threads.add(threading.current_thread().name)
                        or digest(arrays))  # fmt: skip
    assert layout_cache.key(b"g", names, values) == base
    assert threads and threading.current_thread().name not in threads  # off the caller
