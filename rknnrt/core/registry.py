"""Context handles: the integers an application holds as rknn_context or rknn_matmul_ctx.

Handles are never reused, so a call with a destroyed context is always detected. The table
holds model contexts and matmul contexts alike (memory calls accept either).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from .errors import CTX_INVALID, RknnError

_lock = threading.Lock()
_contexts: dict[int, Any] = {}
# Start well away from 0 (NULL) and from small integers an application might pass by mistake.
_next_handle = itertools.count(0x1000)


def add(ctx: Any) -> int:
    with _lock:
        handle = next(_next_handle)
        _contexts[handle] = ctx
        return handle


def get(handle: int) -> Any:
    ctx = _contexts.get(handle)
    if ctx is None:
        raise RknnError(CTX_INVALID, f"invalid context {handle:#x} (NULL, destroyed or never made)")
    return ctx


def remove(handle: int) -> Any:
    with _lock:
        ctx = _contexts.pop(handle, None)
    if ctx is None:
        raise RknnError(CTX_INVALID, f"invalid context {handle:#x} (NULL, destroyed or never made)")
    return ctx


def count() -> int:
    return len(_contexts)
