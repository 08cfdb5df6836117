"""The memory calls of rknn_api.h: rknn_create_mem*, rknn_destroy_mem, rknn_mem_sync.

Ownership: every `rknn_tensor_mem*` these return is owned by rknnrt and stays valid until
rknn_destroy_mem (or rknn_destroy of the context it was made on). Buffers rknnrt allocated
(ALLOC_INSIDE) are unmapped and their descriptors closed then; wrapped descriptors and
addresses (FROM_FD, FROM_PHYS) stay the caller's.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..core import registry
from ..core.errors import FAIL, PARAM_INVALID, RknnError
from ..core.io import memory as core_memory
from ..core.io.memory import TABLE, Memory
from . import constants as c
from .marshal import bytes_at, c_api, c_api_pointer, context_handle, struct_at
from .structs import rknn_tensor_mem

SYNC_MODES = {
    c.RKNN_MEMORY_SYNC_TO_DEVICE: "to_device", c.RKNN_MEMORY_SYNC_FROM_DEVICE: "from_device",
    c.RKNN_MEMORY_SYNC_BIDIRECTIONAL: "both",
}  # fmt: skip
__all__ = [
    "rknn_create_mem", "rknn_create_mem2", "rknn_create_mem_from_fd",
    "rknn_create_mem_from_phys", "rknn_destroy_mem", "rknn_mem_sync",
]  # fmt: skip

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
    TABLE.add(ctypes.addressof(mem), memory, keep=mem, signature=(mem.virt_addr or 0, mem.fd))
    return ctypes.pointer(mem)


def lookup(mem: Any, handle: int = 0, call: str = "") -> Memory:
    """The live Memory behind an rknn_tensor_mem argument (pointer, byref or struct); with a
    context `handle`, memory another context made is refused."""
    key = ctypes.addressof(struct_at(mem, rknn_tensor_mem, "mem"))
    return TABLE.get_for(key, handle, call) if handle else TABLE.get(key)


def was_freed(mem: Any) -> bool:
    """Whether `mem` is an rknn_tensor_mem that rknn_destroy_mem already freed."""
    m = struct_at(mem, rknn_tensor_mem, "mem")
    return TABLE.was_freed(ctypes.addressof(m), (m.virt_addr or 0, m.fd))


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
    (rknn_create_mem_from_fd windows) still uses it. Only the context that made it (any, or
    0, for RKNN_MEM_FLAG_ALLOC_NO_CONTEXT memory) may."""
    key = ctypes.addressof(struct_at(mem, rknn_tensor_mem, "mem"))
    core_memory.destroy(key, context_handle(context))


@c_api
def rknn_mem_sync(context: Any, mem: Any, mode: int) -> None:
    """Cache maintenance of cacheable memory: TO_DEVICE after CPU writes, FROM_DEVICE before
    CPU reads of NPU results, BIDIRECTIONAL for both."""
    handle = context_handle(context)
    if handle:
        registry.get(handle)
    memory = lookup(mem, handle, "rknn_mem_sync")
    core_memory.sync(memory, SYNC_MODES.get(int(mode), ""), int(mode))
