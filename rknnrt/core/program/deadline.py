"""Every onnxruntime run of a model program, under a deadline and known to the process.

A run longer than RKNNRT_RUN_TIMEOUT_MS is cancelled through RunOptions.terminate (onnxruntime
checks it between operators) and reported as RKNN_ERR_TIMEOUT: the last line of defence after
the init-time rules (model/op_rules.py) that keep control flow and unbounded tensors out.

The runs in flight are also what interpreter exit waits for: a Python process whose daemon
thread is inside rknn_run would otherwise tear onnxruntime down under the running session and
abort (SIGABRT). At exit, every run in flight is cancelled and waited for (bounded).
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from .. import switches
from ..errors import TIMEOUT, RknnError
from ..lazy_imports import ort

_EXIT_WAIT_S = 10.0  # at exit, how long cancelled runs get to reach their next operator
_lock = threading.Lock()
_in_flight: dict[int, Any] = {}  # id -> RunOptions of a run in progress
_idle = threading.Condition(_lock)
_exiting = False


def run(session: Any, io: Any) -> None:
    """session.run_with_iobinding(io) under the run deadline."""
    options = ort.RunOptions()
    key = id(options)
    with _lock:
        if _exiting:
            raise RknnError(TIMEOUT, "the process is exiting: the run was not started")
        _in_flight[key] = options
    timeout_ms = switches.run_timeout_ms()
    expired = threading.Event()

    def _expire() -> None:
        expired.set()
        options.terminate = True

    timer = threading.Timer(timeout_ms / 1000, _expire)
    timer.daemon = True
    timer.start()
    try:
        session.run_with_iobinding(io, options)
    except Exception:
        if expired.is_set():
            raise RknnError(
                TIMEOUT,
                f"the run took longer than {timeout_ms} ms and was cancelled "
                f"({switches.RUN_TIMEOUT_MS.name})",
            ) from None
        if options.terminate:
            raise RknnError(TIMEOUT, "the run was cancelled: the process is exiting") from None
        raise
    finally:
        timer.cancel()
        with _lock:
            _in_flight.pop(key, None)
            _idle.notify_all()


def _cancel_at_exit() -> None:
    """Cancel the runs in flight and wait for them to return (daemon threads in rknn_run)."""
    global _exiting
    with _lock:
        _exiting = True
        for options in _in_flight.values():
            options.terminate = True
        _idle.wait_for(lambda: not _in_flight, timeout=_EXIT_WAIT_S)


atexit.register(_cancel_at_exit)
