"""Runtime memory: real allocations (an mmap of a memfd, so `fd` and `virt_addr` are usable by
the application), views of the application's own descriptors, and the cache-coherency model.

A Buffer is one physical allocation. Cacheable buffers have two views, as on a board: the CPU
view (the mapping the application reads and writes at `virt_addr`) and the device view (what
the NPU reads and writes). CPU writes reach the device on a TO_DEVICE sync or the runtime's own
flush before a run; device writes reach the CPU on a FROM_DEVICE sync or the runtime's own
invalidate after the run. Non-cacheable buffers, and every buffer when RKNNRT_CACHE_MODEL=0,
have one view.

A Memory is what an `rknn_tensor_mem` describes: a window (offset, size) of a Buffer.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from .. import log, registry, switches
from ..errors import CTX_INVALID, MALLOC_FAIL, PARAM_INVALID, RknnError

PAGE = mmap.PAGESIZE
# Fake physical addresses handed out by rknnrt: far from 0, never reused, 1 MiB apart at least.
_PHYS_BASE = 0x1_0000_0000
_PHYS_ALIGN = 1 << 20
_phys_lock = threading.Lock()
_phys_next = [_PHYS_BASE]


def _take_phys(size: int) -> int:
    with _phys_lock:
        phys = _phys_next[0]
        _phys_next[0] += -(-max(size, 1) // _PHYS_ALIGN) * _PHYS_ALIGN + _PHYS_ALIGN
        return phys


def cache_model_enabled() -> bool:
    """RKNNRT_CACHE_MODEL=0 turns the two-view model off (one view everywhere, faster)."""
    return switches.cache_model()


class Buffer:
    """One physical allocation: ours (a memfd we map) or the application's descriptor."""

    def __init__(self, size: int, *, cacheable: bool, fd: int | None = None,
                 fd_offset: int = 0, sram: bool = False) -> None:  # fmt: skip
        self.size = size
        self.sram = sram
        self.owned = fd is None
        try:
            if fd is None:
                fd = os.memfd_create("rknnrt", os.MFD_CLOEXEC)
                os.ftruncate(fd, max(size, 1))
            # Map whole pages; fd_offset must be page aligned for mmap, the rest is a window.
            page_offset = fd_offset - fd_offset % PAGE
            self._map = mmap.mmap(fd, max(size + fd_offset - page_offset, 1),
                                  offset=page_offset)  # fmt: skip
        except (OSError, ValueError) as exc:
            if self.owned and fd is not None:
                os.close(fd)
            code = MALLOC_FAIL if self.owned else PARAM_INVALID
            raise RknnError(code, f"cannot map {size} bytes: {exc}") from None
        self.fd = fd
        # The descriptor lives as long as the buffer: closed by free() or when unreferenced.
        self._close_fd = weakref.finalize(self, os.close, fd) if self.owned else None
        base = np.frombuffer(self._map, np.uint8)
        self.cpu = base[fd_offset - page_offset : fd_offset - page_offset + size]
        self.address = self.cpu.__array_interface__["data"][0]
        self.device = self.cpu.copy() if cacheable and cache_model_enabled() else self.cpu
        self.phys = _take_phys(size) if self.owned else 0
        self.freed = False

    @classmethod
    def wrap(cls, cpu: np.ndarray, fd: int = -1) -> Buffer:
        """The application's own memory (a uint8 view at its address): one view, never freed."""
        buf = cls.__new__(cls)
        buf.size, buf.sram, buf.owned, buf.fd = cpu.size, False, False, fd
        buf._map = buf._close_fd = None
        buf.cpu = buf.device = cpu
        buf.address = cpu.__array_interface__["data"][0]
        buf.phys, buf.freed = 0, False
        return buf

    @property
    def two_views(self) -> bool:
        return self.device is not self.cpu

    def fill(self, data: memoryview) -> None:
        """Copy `data` to the start of the buffer (both views). Into our own memfd it is
        written through the descriptor: the kernel fills the pages in one pass, where a copy
        through the fresh mapping faults page by page (50 MB of weights: ~40 -> ~25 ms)."""
        data = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        if len(data) > self.size:
            raise ValueError(f"{len(data)} bytes do not fit a {self.size}-byte buffer")
        if self.owned and not self.two_views:
            done = 0
            while done < len(data):
                done += os.pwrite(self.fd, data[done:], done)
            return
        np.copyto(self.cpu[: len(data)], np.frombuffer(data, np.uint8))
        if self.two_views:
            np.copyto(self.device[: len(data)], np.frombuffer(data, np.uint8))

    def free(self) -> None:
        """Unmap and close now (rknn_destroy_mem); views still held elsewhere keep the pages
        mapped until they go, so a late reader never faults."""
        if self.freed:
            return
        self.freed = True
        del self.cpu, self.device  # drop our exports of the mapping before closing it
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # someone still holds a view: the GC unmaps it later
                pass
        if self._close_fd is not None:
            self._close_fd()


@dataclass
class Memory:
    """rknnrt's side of one rknn_tensor_mem: `size` bytes at `offset` in `buffer`."""

    buffer: Buffer
    offset: int
    size: int
    kind: str  # "alloc", "fd" or "phys": who made it and who frees the buffer
    owner: int | None  # the context handle that created it, or None (ALLOC_NO_CONTEXT)
    # Coherency bookkeeping: the device wrote and nobody synced to the CPU since.
    device_dirty: bool = False
    label: str = ""
    destroyed: bool = False

    @property
    def cpu(self) -> np.ndarray:
        return self.buffer.cpu[self.offset : self.offset + self.size]

    @property
    def device(self) -> np.ndarray:
        return self.buffer.device[self.offset : self.offset + self.size]

    def describe(self) -> str:
        return self.label or f"memory fd {self.buffer.fd} at {self.buffer.address + self.offset:#x}"

    def sync_to_device(self) -> None:
        if self.buffer.two_views:
            np.copyto(self.device, self.cpu)

    def sync_from_device(self) -> None:
        if self.buffer.two_views:
            np.copyto(self.cpu, self.device)
        self.device_dirty = False

    def sync_both(self) -> None:
        """BIDIRECTIONAL (clean and invalidate): NPU results reach the CPU where the NPU wrote
        since the last sync; otherwise the CPU's writes reach the device."""
        if self.device_dirty:
            self.sync_from_device()
        else:
            self.sync_to_device()

    def cpu_differs(self) -> bool:
        """CPU writes the device has not seen (only possible with two views)."""
        return self.buffer.two_views and not np.array_equal(self.cpu, self.device)


class MemoryTable:
    """Every live Memory, by the address of its rknn_tensor_mem, and every Buffer we own.

    The table also keeps the API layer's struct of each entry alive (`keep`), and remembers
    the (virt_addr, fd) of recently freed entries so a stale pointer is recognised soon after.
    """

    FREED_KEPT = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mems: dict[int, Memory] = {}
        self._keep: dict[int, tuple[object, tuple[int, int]]] = {}
        self._freed: dict[int, tuple[int, int]] = {}  # key -> (virt_addr, fd) it described
        self._buffers_by_fd: dict[int, Buffer] = {}
        self._refs: dict[int, int] = {}  # id(buffer) -> number of Memory windows on it

    def add(self, key: int, memory: Memory, keep: object = None,
            signature: tuple[int, int] = (0, -1)) -> None:  # fmt: skip
        """`keep`: the API layer's struct, kept alive; `signature`: its (virt_addr, fd)."""
        with self._lock:
            self._freed.pop(key, None)  # the allocator may reuse a freed struct's address
            self._mems[key] = memory
            self._keep[key] = (keep, signature)
            buf = memory.buffer
            self._refs[id(buf)] = self._refs.get(id(buf), 0) + 1
            if buf.owned:
                self._buffers_by_fd[buf.fd] = buf

    def get(self, key: int, what: str = "mem") -> Memory:
        memory = self._mems.get(key)
        if memory is None:
            raise RknnError(
                PARAM_INVALID, f"{what} is not a live rknn_tensor_mem (destroyed or never made)"
            )
        return memory

    def get_for(self, key: int, handle: int, call: str) -> Memory:
        """The memory at `key` for a call on context `handle`: refused when another context
        made it (issue 11 item 10; ALLOC_NO_CONTEXT memory belongs to none)."""
        memory = self.get(key)
        if memory.owner is not None and handle and memory.owner != handle:
            raise RknnError(
                PARAM_INVALID,
                f"{call}: mem was made on context {memory.owner:#x}, not on {handle:#x}; use "
                "memory of this context (or made with RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)",
            )
        return memory

    def remove(self, key: int) -> Memory:
        """Free the entry; its signature is remembered for was_freed."""
        with self._lock:
            memory = self._mems.pop(key, None)
            if memory is None:
                raise RknnError(
                    PARAM_INVALID, "mem is not a live rknn_tensor_mem (destroyed twice?)"
                )
            _, signature = self._keep.pop(key, (None, (0, -1)))
            if len(self._freed) >= self.FREED_KEPT:
                self._freed.pop(next(iter(self._freed)))
            self._freed[key] = signature
            memory.destroyed = True
            buf = memory.buffer
            self._refs[id(buf)] -= 1
            if self._refs[id(buf)] == 0:
                del self._refs[id(buf)]
                if buf.owned:
                    self._buffers_by_fd.pop(buf.fd, None)
                buf.free()
        return memory

    def was_freed(self, key: int, signature: tuple[int, int]) -> bool:
        """Whether the struct at `key` describing `signature` was freed already (an address
        alone may be a new struct of the caller's: its contents must match too)."""
        return key not in self._mems and self._freed.get(key) == signature

    def release_owned(self, handle: int) -> int:
        """Free what was made on a context being destroyed; returns how many there were."""
        keys = self.owned_by(handle)
        for key in keys:
            self.remove(key)
        return len(keys)

    def owned_buffer_for_fd(self, fd: int) -> Buffer | None:
        return self._buffers_by_fd.get(fd)

    def buffer_for_phys(self, phys: int) -> tuple[Buffer, int] | None:
        with self._lock:
            buffers = list(self._buffers_by_fd.values())
        for buf in buffers:
            if buf.phys <= phys < buf.phys + buf.size:
                return buf, phys - buf.phys
        return None

    def owned_by(self, handle: int) -> list[int]:
        with self._lock:
            return [key for key, m in self._mems.items() if m.owner == handle]

    def count(self) -> int:
        return len(self._mems)


TABLE = MemoryTable()


def owned_fd(fd: int) -> bool:
    """Whether `fd` is the descriptor of a buffer rknn_create_mem made."""
    return TABLE.owned_buffer_for_fd(fd) is not None


def model_view(fd: int, offset: int, size: int) -> memoryview:
    """The model bytes inside an rknn_create_mem buffer, for MODEL_BUFFER_ZERO_COPY."""
    buffer = TABLE.owned_buffer_for_fd(fd)
    if buffer is None or offset < 0 or size <= 0 or offset + size > buffer.size:
        raise RknnError(
            PARAM_INVALID,
            f"extend: model_buffer_fd {fd} with offset {offset} and size {size} is not inside "
            "memory made by rknn_create_mem/rknn_create_mem2",
        )
    # A view of the mapping itself: destroying the memory then cannot unmap pages the
    # context still reads its weights from (the mapping outlives the view, not the fd).
    return memoryview(buffer.cpu[offset : offset + size])


def warn_stale_input(memory: Memory, what: str) -> None:
    log.warning(
        f"{what} ({memory.describe()}) has CPU writes the NPU has not seen: the context was made "
        "with RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE, so call rknn_mem_sync(mem, "
        "RKNN_MEMORY_SYNC_TO_DEVICE) after writing; this run used the old data"
    )


def warn_stale_output(memory: Memory, what: str) -> None:
    log.warning(
        f"{what} ({memory.describe()}) holds NPU results the CPU has not seen: the context was "
        "made with RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE, so call rknn_mem_sync(mem, "
        "RKNN_MEMORY_SYNC_FROM_DEVICE) before reading"
    )


def allocate(size: int, *, cacheable: bool, owner: int | None) -> Memory:
    """rknn_create_mem / rknn_create_mem2: new memory the runtime owns."""
    if size <= 0 or size > 1 << 40:
        raise RknnError(PARAM_INVALID, f"invalid size {size}")
    return Memory(Buffer(size, cacheable=cacheable), 0, size, "alloc", owner)


def from_fd(fd: int, size: int, offset: int, owner: int | None) -> Memory:
    """rknn_create_mem_from_fd: a window of memory rknnrt made, or of the caller's descriptor."""
    if size <= 0 or offset < 0:
        raise RknnError(PARAM_INVALID, f"invalid size {size} or offset {offset}")
    ours = TABLE.owned_buffer_for_fd(fd)
    if ours is not None:
        if offset + size > ours.size:
            raise RknnError(
                PARAM_INVALID,
                f"offset {offset} + size {size} exceed the {ours.size}-byte buffer of fd {fd}",
            )
        return Memory(ours, offset, size, "fd", owner)
    try:
        file_size = os.fstat(fd).st_size
    except OSError as exc:
        raise RknnError(PARAM_INVALID, f"fd {fd} is not an open descriptor: {exc}") from None
    if file_size and offset + size > file_size:
        raise RknnError(
            PARAM_INVALID, f"offset {offset} + size {size} exceed the {file_size}-byte fd {fd}"
        )
    # The caller's descriptor, written by the CPU or another device: one view.
    return Memory(Buffer(size, cacheable=False, fd=fd, fd_offset=offset), 0, size, "fd", owner)


def from_phys(phys: int, size: int, virt: np.ndarray | None, owner: int | None) -> Memory:
    """rknn_create_mem_from_phys: physical addresses rknnrt handed out map back to their
    memory; any other address needs the caller's virt_addr."""
    if size <= 0:
        raise RknnError(PARAM_INVALID, f"invalid size {size}")
    found = TABLE.buffer_for_phys(phys)
    if found is not None:
        buffer, offset = found
        if offset + size > buffer.size:
            raise RknnError(
                PARAM_INVALID, f"phys {phys:#x} + size {size} run past the end of its buffer"
            )
        return Memory(buffer, offset, size, "phys", owner)
    if virt is None:
        raise RknnError(
            PARAM_INVALID,
            f"unknown physical address {phys:#x} and no virt_addr: rknnrt maps only the "
            "physical addresses it handed out (rknn_tensor_mem.phys_addr)",
        )
    return Memory(Buffer.wrap(virt), 0, size, "phys", owner)


def destroy(key: int, handle: int) -> None:
    """rknn_destroy_mem: `handle` must be the context that made the memory (any live one, or
    0, for ALLOC_NO_CONTEXT memory)."""
    memory = TABLE.get(key)
    if handle or memory.owner is not None:
        try:
            registry.get(handle)
        except RknnError:
            raise RknnError(
                CTX_INVALID,
                f"invalid context {handle:#x}; memory made with RKNN_MEM_FLAG_ALLOC_NO_CONTEXT "
                "may be freed with context 0",
            ) from None
        TABLE.get_for(key, handle, "rknn_destroy_mem")
    TABLE.remove(key)


def sync(memory: Memory, mode: str, code: int) -> None:
    """rknn_mem_sync: "to_device", "from_device" or "both"."""
    if mode == "to_device":
        memory.sync_to_device()
    elif mode == "from_device":
        memory.sync_from_device()
    elif mode == "both":
        memory.sync_both()
    else:
        raise RknnError(PARAM_INVALID, f"invalid rknn_mem_sync_mode {code}")
