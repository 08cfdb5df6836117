"""The call guard of a context (model or matmul): one API call at a time, later callers wait.

A board's runtime serialises calls on one context, so a second thread waits for the lock
instead of failing (issue 11 items 8-9): bounded by the call's own timeout_ms when it has one
(> 0, as rknn_wait), else by RKNNRT_CALL_WAIT_MS (core/switches.py); running out gives
RKNN_ERR_TIMEOUT with one line. A context is OPEN until `close` (rknn_destroy), which waits for
the call inside like any other caller and then keeps the lock until the teardown is done;
every caller that was waiting then finds the context CLOSED (RKNN_ERR_CTX_INVALID).

The uncontended path is one non-blocking acquire: it is on every rknn_run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from . import log, switches
from .errors import CTX_INVALID, TIMEOUT, RknnError

T = TypeVar("T")
OPEN, CLOSED = "open", "closed"


class CallGuard:
    """The lock and state of one context. `what` names the context kind in messages."""

    __slots__ = ("_lock", "_state", "what")

    def __init__(self, what: str = "context") -> None:
        self._lock = threading.Lock()
        self._state = OPEN
        self.what = what

    @property
    def closed(self) -> bool:
        return self._state == CLOSED

    def _refuse_closed(self, call: str) -> RknnError:
        return RknnError(CTX_INVALID, f"{call}: {self.what} has been destroyed")

    def enter(self, call: str, timeout_ms: int = 0) -> float:
        """Start `call`: wait for the call in progress (bounded), refuse a closed context.
        Returns the seconds spent waiting (0.0 uncontended). Pair with leave()."""
        if self._state == CLOSED:
            raise self._refuse_closed(call)
        waited = 0.0
        if not self._lock.acquire(blocking=False):
            limit_ms = timeout_ms if timeout_ms > 0 else switches.call_wait_ms()
            start = time.monotonic()
            if not self._lock.acquire(timeout=limit_ms / 1000):
                raise RknnError(
                    TIMEOUT,
                    f"{call}: another thread's call on this {self.what} did not end within "
                    f"{limit_ms} ms (RKNNRT_CALL_WAIT_MS, or the call's timeout_ms)",
                )
            waited = time.monotonic() - start
        if self._state == CLOSED:  # destroyed while this call waited
            self._lock.release()
            raise self._refuse_closed(call)
        return waited

    def leave(self) -> None:
        self._lock.release()

    def run(self, call: str, method: Callable[..., T], *args: Any) -> T:
        """`method(*args)` inside enter(call) / leave()."""
        if self._lock.acquire(blocking=False):  # enter() inlined when uncontended: a hot path
            if self._state == CLOSED:
                self._lock.release()
                raise self._refuse_closed(call)
        else:
            self.enter(call)
        try:
            return method(*args)
        finally:
            self._lock.release()

    def close(self, call: str, teardown: Callable[[], None]) -> None:
        """Wait for the call in progress (bounded; one W line if it had to wait), mark the
        context CLOSED and run `teardown` before anyone else gets in."""
        waited = self.enter(call)
        try:
            self._state = CLOSED
            teardown()
        finally:
            self._lock.release()
        if waited > 0.0:
            log.warning(
                f"{call}: waited {waited * 1000:.0f} ms for another thread's call on this "
                f"{self.what} to end before destroying it"
            )
