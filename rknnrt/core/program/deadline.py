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
import time
from typing import Any

from .. import switches
from ..errors import TIMEOUT, RknnError
from ..lazy_imports import ort

_EXIT_WAIT_S = 10.0  # at exit, how long cancelled runs get to reach their next operator
_lock = threading.Lock()
_in_flight: dict[int, list[Any]] = {}  # id -> [RunOptions, deadline (monotonic), expired]
_changed = threading.Condition(_lock)  # a run began or ended: the watchdog looks again
_state: dict[str, Any] = {"exiting": False, "watchdog": None, "target": None}
_local = threading.local()


def _watch() -> None:
    """One daemon thread for every deadline (no thread per run): sleeps until the soonest
    deadline, marks the runs past theirs and asks onnxruntime to stop them."""
    with _lock:
        while True:
            now = time.monotonic()
            soonest = None
            for entry in _in_flight.values():
                if entry[2]:
                    continue
                if entry[1] <= now:
                    entry[2] = True
                    entry[0].terminate = True
                elif soonest is None or entry[1] < soonest:
                    soonest = entry[1]
            _state["target"] = soonest
            _changed.wait(None if soonest is None else soonest - now)


def _options() -> Any:
    """This thread's RunOptions (one per thread, reused: a run's entry leaves _in_flight, under
    the lock, before the next run of the thread resets `terminate`). The explicit gpu_graph_id
    of 0 (the default) spares onnxruntime's Python wrapper a failed config lookup, which costs
    ~0.4 ms per run when the key is missing (measured with onnxruntime 1.32)."""
    options = getattr(_local, "options", None)
    if options is None:
        options = _local.options = ort.RunOptions()
        options.add_run_config_entry("gpu_graph_id", "0")
    options.terminate = False
    return options


def run(session: Any, io: Any) -> None:
    """session.run_with_iobinding(io) under the run deadline."""
    options = _options()
    key = id(options)
    timeout_ms = switches.run_timeout_ms()
    entry = [options, time.monotonic() + timeout_ms / 1000, False]
    with _lock:
        if _state["exiting"]:
            raise RknnError(TIMEOUT, "the process is exiting: the run was not started")
        _in_flight[key] = entry
        if _state["watchdog"] is None:
            _state["watchdog"] = threading.Thread(target=_watch, name="rknnrt-deadline",
                                                  daemon=True)  # fmt: skip
            _state["watchdog"].start()
        elif _state["target"] is None or entry[1] < _state["target"]:
            _changed.notify_all()  # only an earlier deadline needs the watchdog awake
    try:
        session.run_with_iobinding(io, options)
    except Exception:
        if entry[2]:
            raise RknnError(
                TIMEOUT,
                f"the run took longer than {timeout_ms} ms and was cancelled "
                f"({switches.RUN_TIMEOUT_MS.name})",
            ) from None
        if options.terminate:
            raise RknnError(TIMEOUT, "the run was cancelled: the process is exiting") from None
        raise
    finally:
        with _lock:
            _in_flight.pop(key, None)
            if _state["exiting"]:
                _changed.notify_all()


def _cancel_at_exit() -> None:
    """Cancel the runs in flight and wait for them to return (daemon threads in rknn_run)."""
    with _lock:
        _state["exiting"] = True
        for entry in _in_flight.values():
            entry[0].terminate = True
        _changed.wait_for(lambda: not _in_flight, timeout=_EXIT_WAIT_S)


atexit.register(_cancel_at_exit)
