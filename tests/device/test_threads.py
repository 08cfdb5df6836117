"""Many threads, duplicated contexts, and one context shared by mistake (user needs A24)."""

from __future__ import annotations

import threading

import numpy as np

import rknnrt as rk
from rknnrt.core import registry

from .conftest import N_IMAGES, device_of, get_output, set_input

THREADS = 8
RUNS = 200


def test_eight_threads_of_duplicated_contexts_match_one_thread(make_ctx, default_model_bytes,
                                                               images, expected):  # fmt: skip
    """Acceptance: 8 threads x rknn_dup_context x 200 runs each equal the single-thread
    results, frame ids count per context, and the jobs spread over the three cores."""
    base = make_ctx(default_model_bytes)
    contexts = [base]
    for _ in range(THREADS - 1):
        dup = rk.rknn_context()
        assert rk.rknn_dup_context(base, dup) == 0
        contexts.append(dup)
    dev = device_of(base)
    before = [s.jobs for s in dev.stats]
    failures: list[str] = []
    start = threading.Barrier(THREADS)

    def work(t: int, ctx: rk.rknn_context) -> None:
        start.wait()
        try:
            for i in range(RUNS):
                k = (t + i) % N_IMAGES
                set_input(ctx, images[k])
                assert rk.rknn_run(ctx, None) == 0
                data, frame = get_output(ctx)
                if frame != i + 1 or not np.array_equal(data, expected[k]):
                    failures.append(f"thread {t} run {i}: frame {frame}, image {k}")
        except AssertionError as exc:  # a failed call: reported by the main thread
            failures.append(f"thread {t}: {exc}")

    threads = [threading.Thread(target=work, args=(t, c)) for t, c in enumerate(contexts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert failures == []
        jobs = [s.jobs - b for s, b in zip(dev.stats, before)]
        assert sum(jobs) == THREADS * RUNS
    finally:
        for ctx in contexts[1:]:
            assert rk.rknn_destroy(ctx) == 0


def test_two_threads_in_one_context_are_serialised(make_ctx, default_model_bytes, images,
                                                   hold_cores, rknn_log):  # fmt: skip
    """Issue 11 item 8: a second thread's rknn_run and rknn_wait on a context that is inside
    rknn_run on another thread wait for it and then succeed; frames count 1, 2."""
    ctx = make_ctx(default_model_bytes)
    assert rk.rknn_set_core_mask(ctx, rk.RKNN_NPU_CORE_0) == 0
    set_input(ctx, images[0])
    dev = device_of(ctx)
    hold = hold_cores(ctx, (0,))
    result: list[int] = []
    first = threading.Thread(target=lambda: result.append(rk.rknn_run(ctx, None)))
    first.start()
    assert dev.wait_until(lambda waiting, running: (ctx.value, 1) in waiting)
    # ctx is inside rknn_run on the other thread, waiting for core 0: free it a little later.
    threading.Timer(0.1, dev.release, (hold,)).start()
    assert rk.rknn_run(ctx, None) == 0  # waits for the first run, then runs frame 2
    assert rk.rknn_wait(ctx, None) == 0
    first.join()
    assert result == [0]
    assert rknn_log.take("E") == []
    assert get_output(ctx)[1] == 2
    assert registry.get(ctx.value).frame_id == 2
