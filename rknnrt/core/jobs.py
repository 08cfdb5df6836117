"""Runs that outlive their rknn_run call: the Job (one frame in flight), the context's worker
thread that executes it, and fences (descriptors that say "ready").

A context has at most one Job in flight: every later call that touches its buffers waits for it
first (Frames.settle in core/context/frames.py), so a frame never sees another frame's data.
docs/device.md has the rules this serves (non-blocking runs, rknn_wait, timeouts, fences, async
mode).
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable

from .errors import PARAM_INVALID, TIMEOUT, RknnError

_POLL_SLICE_MS = 50  # how often a fence wait looks whether its job was withdrawn


class Job:
    """One frame run off the caller's thread: waits for its input fence, then for cores, runs,
    and signals `done` (and its output fence). `cancel()` withdraws it before it starts."""

    def __init__(self, frame: int) -> None:
        self.frame = frame
        self.done = threading.Event()
        self.error: RknnError | None = None
        self.started = False  # it got its cores and ran (or is running)
        self.cancelled = False
        self.request: object | None = None  # the device.Request while waiting for cores
        self.lock = threading.Lock()

    def wait(self, timeout_ms: int = 0) -> bool:
        """Block until done; `timeout_ms` > 0 bounds the wait (False when it ran out)."""
        return self.done.wait(timeout_ms / 1000 if timeout_ms > 0 else None)

    def begin(self) -> bool:
        """Called by the worker once the job has its cores: False if it was withdrawn."""
        with self.lock:
            if self.cancelled:
                return False
            self.started = True
            return True

    def cancel(self, withdraw: Callable[[object], bool]) -> bool:
        """Withdraw the job if it has not started (`withdraw` takes its device request off the
        queue). True when it will never run."""
        with self.lock:
            if self.started or self.done.is_set():
                return False
            self.cancelled = True
            request = self.request
        if request is not None:
            withdraw(request)  # granted meanwhile: the worker sees `cancelled` and lets go
        return True


class Worker:
    """One daemon thread per context that runs its jobs in submission order."""

    def __init__(self, name: str) -> None:
        self._cond = threading.Condition()
        self._todo: deque[Callable[[], None]] = deque()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[], None]) -> None:
        with self._cond:
            self._todo.append(work)
            self._cond.notify()

    def stop(self) -> None:
        """Finish what was submitted, then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._todo or self._stopping)
                if not self._todo:
                    return
                work = self._todo.popleft()
            work()


# -- fences -----------------------------------------------------------------------------------
def check_fence(fd: int) -> None:
    """A fence the application passes must be an open descriptor."""
    try:
        os.fstat(fd)
    except (OSError, OverflowError, ValueError):
        raise RknnError(
            PARAM_INVALID,
            f"extend->fence_fd = {fd} is not an open descriptor; pass the fence to wait for "
            "(an eventfd, sync_file or any pollable descriptor), or -1 for none",
        ) from None


def wait_fence(fd: int, timeout_ms: int = 0, job: Job | None = None) -> None:
    """Block until `fd` is readable (signalled). `timeout_ms` > 0 bounds the wait
    (RKNN_ERR_TIMEOUT); a withdrawn `job` stops waiting. The descriptor is not read or closed:
    it stays the application's."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
    while True:
        wait = _POLL_SLICE_MS
        if deadline is not None:
            wait = max(0, min(wait, int((deadline - time.monotonic()) * 1000) + 1))
        events = poller.poll(wait)
        if events:
            if events[0][1] & (select.POLLNVAL | select.POLLERR):
                raise RknnError(PARAM_INVALID, f"input fence fd {fd} became invalid")
            return
        if job is not None and job.cancelled:
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise RknnError(
                TIMEOUT, f"the input fence (fd {fd}) was not signalled within {timeout_ms} ms"
            )


class OutFence:
    """A descriptor handed to the application that becomes readable when a job ends: an
    eventfd (Linux), or the read end of a pipe elsewhere. The application owns `fd` and closes
    it; the runtime signals through its own duplicate, so a closed (and reused) number is
    never written to."""

    def __init__(self) -> None:
        if hasattr(os, "eventfd"):
            self.fd = os.eventfd(0, os.EFD_CLOEXEC)
            self._signal_fd = os.dup(self.fd)
        else:  # pragma: no cover - non-Linux
            self.fd, self._signal_fd = os.pipe()

    def signal(self) -> None:
        """Make the fence readable (once) and let go of the runtime's end."""
        if self._signal_fd < 0:
            return
        try:
            if hasattr(os, "eventfd"):
                os.eventfd_write(self._signal_fd, 1)
            else:  # pragma: no cover - non-Linux
                os.write(self._signal_fd, b"\1")
        finally:
            os.close(self._signal_fd)
            self._signal_fd = -1
