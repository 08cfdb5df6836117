"""Issue 11 items 8-9 under forced fast thread switching: read-only calls and duplication wait
for a busy context instead of failing, and rknn_destroy during runs always destroys."""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Iterator

import pytest

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.core.errors import RknnError

from .conftest import set_input

THREADS = 8
CALLS_PER_THREAD = 130  # 8 x 130 = 1,040 concurrent dup/query calls
DESTROY_ROUNDS = 100


@pytest.fixture
def fast_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_dup_and_query_wait_while_the_base_runs(make_ctx, default_model_bytes, images,
                                                fast_switching, rknn_log):  # fmt: skip
    base = make_ctx(default_model_bytes)
    set_input(base, images[0])
    stop = threading.Event()
    failures: list[str] = []
    runs = [0]

    def runner() -> None:
        while not stop.is_set():
            rc = rk.rknn_run(base, None)
            if rc != 0:
                failures.append(f"rknn_run: {rc}")
            runs[0] += 1

    def caller(t: int) -> None:
        for i in range(CALLS_PER_THREAD):
            if i % 2:
                num = rk.rknn_input_output_num()
                rc = rk.rknn_query(base, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num),
                                   ctypes.sizeof(num))  # fmt: skip
                if rc != 0 or (num.n_input, num.n_output) != (1, 1):
                    failures.append(f"thread {t} query {i}: {rc}")
            else:
                dup = rk.rknn_context()
                rc = rk.rknn_dup_context(base, dup)
                if rc != 0:
                    failures.append(f"thread {t} dup {i}: {rc}")
                elif rk.rknn_destroy(dup) != 0:
                    failures.append(f"thread {t} destroy of dup {i}")

    run_thread = threading.Thread(target=runner)
    run_thread.start()
    callers = [threading.Thread(target=caller, args=(t,)) for t in range(THREADS)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join()
    stop.set()
    run_thread.join()
    assert failures == []
    assert runs[0] > 0
    assert rknn_log.take("E") == []


def test_destroy_while_running_always_destroys(make_ctx, default_model_bytes, images,
                                               fast_switching, rknn_log):  # fmt: skip
    base = make_ctx(default_model_bytes)
    set_input(base, images[1])
    outcomes: list[str] = []
    for _ in range(DESTROY_ROUNDS):
        ctx = rk.rknn_context()
        assert rk.rknn_dup_context(base, ctx) == 0
        set_input(ctx, images[2])
        started = threading.Event()
        codes: list[int] = []

        def runner(ctx: rk.rknn_context = ctx, codes: list[int] = codes,
                   started: threading.Event = started) -> None:  # fmt: skip
            for _ in range(100_000):  # bounded: a destroy that fails must not hang the test
                rc = rk.rknn_run(ctx, None)
                codes.append(rc)
                started.set()
                if rc != 0:
                    return

        thread = threading.Thread(target=runner)
        thread.start()
        started.wait()
        rc = rk.rknn_destroy(ctx)
        thread.join()
        with pytest.raises(RknnError):
            registry.get(ctx.value)
        outcomes.append(f"destroy {rc}, runner ended with {codes[-1]}")
        # the runner's calls succeeded until the context was gone, then CTX_INVALID
        assert codes[-1] == rk.RKNN_ERR_CTX_INVALID and set(codes[:-1]) <= {0}
    assert outcomes == ["destroy 0, runner ended with -7"] * DESTROY_ROUNDS
    assert rk.RKNN_ERR_CTX_INVALID == -7
    assert [line for line in rknn_log.take("E") if "CTX_INVALID" not in line and
            "has been destroyed" not in line and "invalid context" not in line] == []  # fmt: skip


def test_waiting_for_a_busy_context_is_bounded(make_ctx, default_model_bytes, rknn_log,
                                               monkeypatch):  # fmt: skip
    """rknn_wait's and rknn_run's own timeout_ms bound the wait for another thread's call;
    other calls wait at most RKNNRT_CALL_WAIT_MS. The context is unchanged afterwards."""
    ctx = make_ctx(default_model_bytes)
    inner = registry.get(ctx.value)
    inner.enter("rknn_run")  # another thread is inside a call
    try:
        ext = rk.rknn_run_extend(timeout_ms=30)
        assert rk.rknn_wait(ctx, ext) == rk.RKNN_ERR_TIMEOUT
        assert "did not end within 30 ms" in rknn_log.one_error("rknn_wait")
        ext = rk.rknn_run_extend(timeout_ms=30, fence_fd=-1)
        assert rk.rknn_run(ctx, ext) == rk.RKNN_ERR_TIMEOUT
        assert "did not end within 30 ms" in rknn_log.one_error("rknn_run")
        monkeypatch.setenv("RKNNRT_CALL_WAIT_MS", "40")
        num = rk.rknn_input_output_num()
        rc = rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num), ctypes.sizeof(num))
        assert rc == rk.RKNN_ERR_TIMEOUT
        assert "did not end within 40 ms" in rknn_log.one_error("rknn_query")
    finally:
        inner.leave()
    num = rk.rknn_input_output_num()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num), ctypes.sizeof(num)) == 0
