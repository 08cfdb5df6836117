"""switches.override: an in-process switch change that restores, nests, and never writes
os.environ."""

from __future__ import annotations

import os
import threading

import pytest

from rknnrt.core import switches


def test_override_restores_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("RKNNRT_PERF_HOST", raising=False)
    monkeypatch.setenv("RKNNRT_NUM_THREADS", "2")
    with switches.override(switches.PERF_HOST, "1"), switches.override(switches.NUM_THREADS, 5):
        assert switches.perf_host() is True
        assert switches.num_threads() == 5
        assert "RKNNRT_PERF_HOST" not in os.environ  # the environment is not written
        assert os.environ["RKNNRT_NUM_THREADS"] == "2"
    assert switches.perf_host() is False
    assert switches.num_threads() == 2


def test_override_restores_after_an_exception(monkeypatch) -> None:
    monkeypatch.delenv("RKNNRT_NUM_THREADS", raising=False)
    with pytest.raises(ZeroDivisionError), switches.override(switches.NUM_THREADS, 3):
        assert switches.num_threads() == 3
        _ = 1 / 0
    assert switches.num_threads() is None


def test_overrides_nest_and_none_overrides_nothing(monkeypatch) -> None:
    monkeypatch.setenv("RKNNRT_CALL_WAIT_MS", "100")
    with switches.override(switches.CALL_WAIT_MS, 200):
        with switches.override(switches.CALL_WAIT_MS, 300):
            assert switches.call_wait_ms() == 300
            with switches.override(switches.CALL_WAIT_MS, None):
                assert switches.call_wait_ms() == 300
        assert switches.call_wait_ms() == 200
    assert switches.call_wait_ms() == 100


def test_overrides_left_out_of_order_by_threads(monkeypatch) -> None:
    """Thread A enters, thread B enters, A leaves first: B's value stays, then the environment's."""
    monkeypatch.delenv("RKNN_LOG_LEVEL", raising=False)
    a_in, b_in, a_out, b_may_leave = (threading.Event() for _ in range(4))
    seen: dict[str, int] = {}

    def a() -> None:
        with switches.override(switches.LOG_LEVEL, 3):
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b() -> None:
        a_in.wait(5)
        with switches.override(switches.LOG_LEVEL, 5):
            b_in.set()
            a_out.wait(5)
            seen["after a left"] = switches.log_level()
            b_may_leave.wait(5)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    a_out.wait(5)
    b_in.wait(5)
    seen["main, b active"] = switches.log_level()  # process-wide, as the variable would be
    b_may_leave.set()
    for t in threads:
        t.join(5)
    assert seen == {"after a left": 5, "main, b active": 5}
    assert switches.log_level() == 0


def test_reads_while_other_threads_override(monkeypatch) -> None:
    """Readers only ever see the environment's value or an active override's, never a torn
    state, while writers enter and leave overrides concurrently."""
    monkeypatch.setenv("RKNNRT_NUM_THREADS", "1")
    stop = threading.Event()
    started = [threading.Event(), threading.Event()]
    seen: set[int | None] = set()
    entered = [0, 0]

    def writer(k: int, value: int) -> None:
        while not stop.is_set():
            with switches.override(switches.NUM_THREADS, value):
                entered[k] += 1
            started[k].set()  # after its first override: the reader overlaps real ones

    def reader() -> None:
        for _ in range(20000):
            seen.add(switches.num_threads())

    writers = [threading.Thread(target=writer, args=(k, v)) for k, v in enumerate((7, 8))]
    for w in writers:
        w.start()
    for event in started:
        event.wait(5)
    reader()
    stop.set()
    for w in writers:
        w.join(5)
    # which values a reader meets depends on the scheduler; that it meets no other does not
    assert seen and seen <= {1, 7, 8}
    assert all(entered)
    assert switches.num_threads() == 1
    assert switches._overrides == ()
