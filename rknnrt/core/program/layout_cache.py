"""Laid-out float16 programs kept between processes, so that rknn_init lays a model out once.

Laying out a float16 program (core/program/fp16_layout.py) takes one fully optimised
onnxruntime session more than running it: on ResNet-50 fp16 that session is about as long as
onnxruntime's own session creation on the original model, and the session that then runs the
laid-out graph comes on top (rknn_init 2.0-2.4x onnxruntime's, profiled). The laid-out graph and
its constants depend only on the program's graph, its weights, onnxruntime's version, this
CPU's instruction set and the layout code, so they are kept in the user's cache folder
(`switches.cache_root()/fp16_layout`), one file per program:

- keyed by SHA-256 over all of those (the graph's and every weight's bytes, names, types and
  shapes; rknnrt's version and the layout modules' source; onnxruntime's version; the CPU's
  architecture and flags; whether fp16_blocked_ops runs here): any change of the model or of
  rknnrt gives another key;
- written all or nothing (model/files.write_atomic) on a thread of its own (rknn_init does not
  wait for the disk), never pickled: a fixed header, the graph
  (ONNX bytes, parsed by onnxruntime as any model graph is) and the raw constants; a CRC-32 of
  both is checked at every read (a damaged file is removed and the program laid out again);
- bounded: after each write the oldest files (by last use) go until the folder holds at most
  RKNNRT_LAYOUT_CACHE_MB (0 turns the cache off);
- "nothing to lay out" is kept too (an entry without graph), so such a model is not laid out
  again at each rknn_init either.

Any failure to read or write the cache leaves rknn_init to lay the program out as before.
"""

from __future__ import annotations

import functools
import hashlib
import mmap
import os
import platform
import struct
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ...model import files
from .. import switches
from ..version import RKNNRT_VERSION
from . import fp16_blocked_ops, fp16_layout

MAGIC = b"RKNNRTL1"
_HEAD = struct.Struct("<8sQQI4x")  # magic, graph bytes, data bytes, CRC-32 of graph + data
_ALIGN = 64  # the constants start on a 64-byte boundary of the file
SUFFIX = ".layout"


def folder() -> Path:
    return switches.cache_root() / "fp16_layout"


def _cpu() -> str:
    """The CPU's architecture and feature flags (onnxruntime picks its kernels and block size
    by them)."""
    try:
        with files.open_regular("/proc/cpuinfo", "r", encoding="utf-8", errors="replace") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return f"{platform.machine()}|{platform.processor()}|{flags.strip()}"


@functools.lru_cache(maxsize=1)
def _fingerprint() -> bytes:
    """What every key of this process shares: versions, the layout code, the CPU."""
    from ..lazy_imports import ort

    digest = hashlib.sha256()
    for part in (RKNNRT_VERSION, ort.__version__, _cpu()):
        digest.update(part.encode() + b"\0")
    for module in (fp16_layout.__file__, fp16_blocked_ops.__file__, __file__):
        digest.update(Path(module).read_bytes())
    return digest.digest()


def key(graph: bytes, names: list[str], values: list[np.ndarray]) -> str:
    """The cache key of a program: its graph and weights under this process's fingerprint.
    The weights' bytes are hashed in two halves on two threads (hashlib lets the interpreter
    go while it hashes): SHA-256 of ResNet-50 fp16's 50 MB took ~30 ms of a first init."""
    digest = hashlib.sha256(_fingerprint())
    # the pools' and gates' layout (fp16_blocked_ops) depends on this process's kernels too
    digest.update(b"blocked-ops\1" if fp16_blocked_ops.enabled() else b"blocked-ops\0")
    digest.update(len(graph).to_bytes(8, "little") + graph)
    arrays = [np.ascontiguousarray(value) for value in values]
    for name, array in zip(names, arrays):
        digest.update(f"\0{name}\0{array.dtype.str}\0{array.shape}\0".encode())
    sizes = np.cumsum([a.nbytes for a in arrays]) if arrays else np.zeros(1, np.int64)
    cut = int(np.searchsorted(sizes, sizes[-1] / 2))  # the halves' boundary, in weights
    halves = [arrays[:cut], arrays[cut:]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for half in pool.map(_bytes_digest, halves):
            digest.update(half)
    return digest.hexdigest()


def _bytes_digest(arrays: list[np.ndarray]) -> bytes:
    """SHA-256 of the arrays' bytes, one after the other (their sizes are in the key)."""
    digest = hashlib.sha256()
    for array in arrays:
        if array.size:
            digest.update(array.view(np.uint8).reshape(-1).data)
    return digest.digest()


def _path(cache_key: str) -> Path:
    return folder() / f"{cache_key}{SUFFIX}"


def _crc(graph: bytes | memoryview, data: np.ndarray) -> int:
    return zlib.crc32(data, zlib.crc32(graph)) if data.size else zlib.crc32(graph)


def load(cache_key: str) -> tuple[bool, fp16_layout.Blocked | None]:
    """(found, the laid-out program or None where nothing is laid out). The constants are a
    read-only mapping of the file (a file replaced or removed later keeps the mapped one)."""
    path = _path(cache_key)
    try:
        with files.open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size < _HEAD.size:
                raise ValueError("short header")
            whole = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
        magic, graph_size, data_size, crc = _HEAD.unpack(whole[: _HEAD.size].tobytes())
        start = -(-(_HEAD.size + graph_size) // _ALIGN) * _ALIGN
        if magic != MAGIC or (start + data_size if data_size else _HEAD.size + graph_size) != size:
            raise ValueError("not a laid-out program of this size")
        graph = bytes(whole[_HEAD.size : _HEAD.size + graph_size])
        data = whole[start : start + data_size] if data_size else np.zeros(0, np.uint8)
        if _crc(graph, data) != crc:
            raise ValueError("checksum mismatch")
        os.utime(path)  # last use, for the eviction order
    except FileNotFoundError:
        return False, None
    except (OSError, ValueError):
        _remove(path)  # damaged or foreign: lay the program out again
        return False, None
    return True, (fp16_layout.Blocked(graph, data) if graph_size else None)


_writers: list[threading.Thread] = []
_writers_lock = threading.Lock()
STALE_SECONDS = 3600  # a temporary file this old was left by a process that ended mid-write


def store_later(cache_key: str, blocked: fp16_layout.Blocked | None) -> None:
    """`store` on a thread of its own: rknn_init does not wait for the write (100 MB of
    constants took 1-2 s to reach this machine's disk). A process that ends first leaves
    at most a temporary file, which a later prune removes."""
    writer = threading.Thread(target=store, args=(cache_key, blocked), daemon=True,
                              name="rknnrt-layout-cache")  # fmt: skip
    with _writers_lock:
        _writers[:] = [w for w in _writers if w.is_alive()] + [writer]
    writer.start()


def wait() -> None:
    """Until every write begun by store_later has ended."""
    with _writers_lock:
        writers = list(_writers)
    for writer in writers:
        writer.join()


def store(cache_key: str, blocked: fp16_layout.Blocked | None) -> None:
    """Keep `blocked` (None: nothing to lay out) under `cache_key`, then bound the folder."""
    limit = switches.layout_cache_bytes()
    graph = blocked.graph if blocked is not None else b""
    data = blocked.data if blocked is not None else np.zeros(0, np.uint8)
    start = -(-(_HEAD.size + len(graph)) // _ALIGN) * _ALIGN
    total = (start + data.size) if data.size else _HEAD.size + len(graph)
    if total > limit:
        return
    head = _HEAD.pack(MAGIC, len(graph), data.size, _crc(graph, data))
    pad = b"\0" * (start - _HEAD.size - len(graph)) if data.size else b""
    try:
        folder().mkdir(parents=True, exist_ok=True)
        files.write_atomic(_path(cache_key), [head, graph, pad, memoryview(data)])
        prune(limit)
    except OSError:
        pass  # a read-only or full cache folder: the next rknn_init lays out again


def prune(limit: int) -> None:
    """Remove the least recently used entries until the folder holds at most `limit` bytes."""
    entries = []
    now = time.time()
    for path in folder().glob(f".*{SUFFIX}.*.tmp"):
        try:
            if now - path.stat().st_mtime > STALE_SECONDS:
                _remove(path)
        except OSError:
            continue
    for path in folder().glob(f"*{SUFFIX}"):
        try:
            info = path.stat()
        except OSError:
            continue
        entries.append((info.st_mtime, info.st_size, path))
    entries.sort()
    total = sum(size for _, size, _ in entries)
    for _, size, path in entries:
        if total <= limit:
            break
        _remove(path)
        total -= size


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
