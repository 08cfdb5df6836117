"""Vendor-style log lines (`E RKNN: [hh:mm:ss.mmm] ...`) honouring RKNN_LOG_LEVEL.

Levels follow the vendor's RKNN_LOG_LEVEL (read on every call, so it may change at run time):
errors and warnings always print; 1 adds timing lines, 3 information lines (versions at init),
4 the per-layer performance table, 5 debug lines. Unset or malformed means 0.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from . import switches

# Each severity prints when RKNN_LOG_LEVEL >= its number.
ERROR, WARNING, TIMING, INFO, PERF, DEBUG = 0, 0, 1, 3, 4, 5
DEFAULT_LEVEL = 0


def level() -> int:
    """The active level; a malformed RKNN_LOG_LEVEL falls back to the default."""
    return switches.log_level()


_local = threading.local()


@contextmanager
def muted() -> Iterator[None]:
    """Silence this thread's lines: for a probe whose failure is an answer (RKNNLite asking
    whether a model has dynamic shapes), without touching the process-wide RKNN_LOG_LEVEL."""
    saved = getattr(_local, "muted", False)
    _local.muted = True
    try:
        yield
    finally:
        _local.muted = saved


def emit(severity: int, prefix: str, message: str) -> None:
    """Write one `<prefix> RKNN:` line to stderr when RKNN_LOG_LEVEL enables `severity`."""
    if severity > level() or getattr(_local, "muted", False):
        return
    now = time.time()
    stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
    sys.stderr.write(f"{prefix} RKNN: [{stamp}] {message}\n")


def error(message: str) -> None:
    emit(ERROR, "E", message)


def warning(message: str) -> None:
    emit(WARNING, "W", message)


def info(message: str) -> None:
    emit(INFO, "I", message)


def timing(message: str) -> None:
    emit(TIMING, "I", message)
