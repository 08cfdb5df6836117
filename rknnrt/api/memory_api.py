"""The memory calls of rknn_api.h: rknn_create_mem*, rknn_destroy_mem, rknn_mem_sync.

Ownership: every `rknn_tensor_mem*` these return is owned by rknnrt and stays valid until
rknn_destroy_mem (or rknn_destroy of the context it was made on). Buffers rknnrt allocated
(ALLOC_INSIDE) are unmapped and their descriptors closed then; wrapped descriptors and
addresses (FROM_FD, FROM_PHYS) stay the caller's.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..core import memory as core_memory
from ..core import registry
from ..core.errors import CTX_INVALID, FAIL, PARAM_INVALID, RknnError
from ..core.memory import TABLE, Memory
from . import constants as c
from .marshal import bytes_at, c_api, c_api_pointer, context_handle, struct_at
from .structs import rknn_tensor_mem

__all__ = [
    "rknn_create_mem", "rknn_create_mem2", "rknn_create_mem_from_fd",
    "rknn_create_mem_from_phys", "rknn_destroy_mem", "rknn_mem_sync",
]  # fmt: skip

_structs: dict[int, rknn_tensor_mem] = {}  # struct address -> struct, kept alive here
# Addresses of recently destroyed structs (bounded: enough to catch a stale pointer soon after).
_freed: dict[int, tuple[int, int]] = {}  # struct address -> (virt_addr, fd) it described
_FREED_KEPT = 4096
_ALLOC_FLAGS = (c.RKNN_FLAG_MEMORY_CACHEABLE | c.RKNN_FLAG_MEMORY_NON_CACHEABLE
                | c.RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM | c.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)  # fmt: skip


def _owner(context: Any, allow_none: bool) -> int | None:
    handle = context_handle(context)
    if handle == 0 and allow_none:
        return None
    registry.get(handle)  # RKNN_ERR_CTX_INVALID unless a live context (model or matmul)
    return handle


def _publish(memory: Memory, flags: int, virt_addr: int | None = None) -> Any:
    mem = rknn_tensor_mem()
    buffer = memory.buffer
    if virt_addr:
        mem.virt_addr, mem.offset = virt_addr, memory.offset
    else:
        mem.virt_addr, mem.offset = buffer.address + memory.offset, 0
    mem.phys_addr = buffer.phys + memory.offset if buffer.phys else 0
    mem.fd, mem.size, mem.flags = buffer.fd, memory.size, flags
    key = ctypes.addressof(mem)
    _freed.pop(key, None)  # the allocator may reuse a freed struct's address
    _structs[key] = mem
    TABLE.add(key, memory)
    return ctypes.pointer(mem)


def lookup(mem: Any) -> Memory:
    """The live Memory behind an rknn_tensor_mem argument (pointer, byref or struct)."""
    return TABLE.get(ctypes.addressof(struct_at(mem, rknn_tensor_mem, "mem")))


def _free(key: int) -> None:
    TABLE.remove(key)
    if len(_freed) >= _FREED_KEPT:
        _freed.pop(next(iter(_freed)))
    mem = _structs.get(key)
    if mem is not None:
        _freed[key] = (mem.virt_addr or 0, mem.fd)
    _structs.pop(key, None)


def was_freed(mem: Any) -> bool:
    """Whether `mem` is an rknn_tensor_mem that rknn_destroy_mem already freed."""
    m = struct_at(mem, rknn_tensor_mem, "mem")
    key = ctypes.addressof(m)
    # the address alone may be a new struct of the caller's: the contents must match too
    return key not in _structs and _freed.get(key) == (m.virt_addr or 0, m.fd)


def release_owned(handle: int) -> int:
    """Free what was made on a context being destroyed; returns how many there were."""
    keys = TABLE.owned_by(handle)
    for key in keys:
        _free(key)
    return len(keys)


def owns_fd(fd: int) -> bool:
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


@c_api_pointer(rknn_tensor_mem)
def rknn_create_mem(context: Any, size: int) -> Any:
    """`size` bytes of cacheable runtime memory (an mmap of a memfd: `fd` is usable).
    Free with rknn_destroy_mem."""
    owner = _owner(context, allow_none=False)
    memory = core_memory.allocate(int(size), cacheable=True, owner=owner)
    return _publish(memory, c.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE)


@c_api_pointer(rknn_tensor_mem)
def rknn_create_mem2(context: Any, size: int, alloc_flags: int) -> Any:
    """Like rknn_create_mem with rknn_mem_alloc_flags; with RKNN_MEM_FLAG_ALLOC_NO_CONTEXT the
    context may be 0 and any context may destroy the memory."""
    alloc_flags = int(alloc_flags)
    if alloc_flags & ~_ALLOC_FLAGS:
        raise RknnError(PARAM_INVALID, f"unknown alloc_flags bits {alloc_flags & ~_ALLOC_FLAGS:#x}")
    no_context = bool(alloc_flags & c.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    owner = _owner(context, allow_none=no_context)
    cacheable = not alloc_flags & c.RKNN_FLAG_MEMORY_NON_CACHEABLE
    memory = core_memory.allocate(
        int(size), cacheable=cacheable, owner=None if no_context else owner
    )
    return _publish(memory, c.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE)


@c_api_pointer(rknn_tensor_mem)
def rknn_create_mem_from_fd(context: Any, fd: int, virt_addr: Any, size: int, offset: int) -> Any:
    """Wrap a descriptor (an rknn_create_mem buffer's, or any mmap-able one of the caller's):
    the data is at `offset` in it. The descriptor stays the caller's."""
    owner = _owner(context, allow_none=False)
    ctx = registry.get(owner)
    platform = getattr(ctx, "platform", None)
    if platform is not None and not platform.supports("rknn_create_mem_from_fd"):
        raise RknnError(FAIL, f"not supported on {platform.name}")
    memory = core_memory.from_fd(int(fd), int(size), int(offset), owner)
    virt = virt_addr.value if isinstance(virt_addr, ctypes.c_void_p) else virt_addr
    return _publish(memory, c.RKNN_TENSOR_MEMORY_FLAGS_FROM_FD, int(virt or 0) or None)


@c_api_pointer(rknn_tensor_mem)
def rknn_create_mem_from_phys(context: Any, phys_addr: int, virt_addr: Any, size: int) -> Any:
    """Wrap memory by physical address: addresses rknnrt handed out map back to their
    memory; any other needs `virt_addr`."""
    owner = _owner(context, allow_none=False)
    virt = virt_addr.value if isinstance(virt_addr, ctypes.c_void_p) else virt_addr
    view = bytes_at(int(virt), int(size), "virt_addr") if virt else None
    memory = core_memory.from_phys(int(phys_addr), int(size), view, owner)
    return _publish(memory, c.RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS, int(virt or 0) or None)


@c_api
def rknn_destroy_mem(context: Any, mem: Any) -> None:
    """Free the rknn_tensor_mem; its buffer too if rknnrt allocated it and nothing else
    (rknn_create_mem_from_fd windows) still uses it."""
    key = ctypes.addressof(struct_at(mem, rknn_tensor_mem, "mem"))
    memory = TABLE.get(key)
    handle = context_handle(context)
    if handle or memory.owner is not None:
        try:
            registry.get(handle)
        except RknnError:
            raise RknnError(
                CTX_INVALID,
                f"invalid context {handle:#x}; memory made with RKNN_MEM_FLAG_ALLOC_NO_CONTEXT "
                "may be freed with context 0",
            ) from None
    _free(key)


@c_api
def rknn_mem_sync(context: Any, mem: Any, mode: int) -> None:
    """Cache maintenance of cacheable memory: TO_DEVICE after CPU writes, FROM_DEVICE before
    CPU reads of NPU results, BIDIRECTIONAL for both."""
    handle = context_handle(context)
    if handle:
        registry.get(handle)
    memory = lookup(mem)
    mode = int(mode)
    if mode == c.RKNN_MEMORY_SYNC_TO_DEVICE:
        memory.sync_to_device()
    elif mode == c.RKNN_MEMORY_SYNC_FROM_DEVICE:
        memory.sync_from_device()
    elif mode == c.RKNN_MEMORY_SYNC_BIDIRECTIONAL:
        memory.sync_both()
    else:
        raise RknnError(PARAM_INVALID, f"invalid rknn_mem_sync_mode {mode}")
