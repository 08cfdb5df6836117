"""The NPU's on-chip SRAM pool per platform (UG 5.7; RK3588: 1 MB, 956 KB usable).

SRAM one context takes is not reused by others; SHARE_SRAM contexts share the region of the
first ENABLE_SRAM context instead of taking their own (documented as not yet implemented by
the vendor; rknnrt gives it that meaning).
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_used: dict[str, int] = {}


def reserve(platform: str, capacity: int, wanted: int) -> int:
    """Take up to `wanted` bytes of the platform's pool; returns what was taken."""
    with _lock:
        taken = max(0, min(wanted, capacity - _used.get(platform, 0)))
        _used[platform] = _used.get(platform, 0) + taken
        return taken


def release(platform: str, taken: int) -> None:
    with _lock:
        _used[platform] = max(0, _used.get(platform, 0) - taken)


def free(platform: str, capacity: int) -> int:
    with _lock:
        return capacity - _used.get(platform, 0)
