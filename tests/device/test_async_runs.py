"""Asynchronous mode, non-blocking runs, rknn_wait and timeouts (facts §5.7; docs/device.md).

A "long job" is a core held by the test, or a run the test blocks on an event: no sleeps."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry

from .conftest import device_of, get_output, run_ext, set_input


@pytest.fixture
def ctx(make_ctx, default_model_bytes):
    return make_ctx(default_model_bytes)


def test_async_mode_returns_the_previous_frame(make_ctx, default_model_bytes, images, expected):
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_ASYNC_MASK)
    for n, image in enumerate(images, start=1):  # frame n carries images[n - 1]
        set_input(ctx, image)
        ext = run_ext()
        assert rk.rknn_run(ctx, ext) == 0
        assert ext.frame_id == n
        data, frame = get_output(ctx)
        assert frame == n - 1
        if n == 1:  # no previous frame yet: frame id 0, zeros (docs/device.md)
            assert not data.any()
        else:
            np.testing.assert_array_equal(data, expected[n - 2])
    # rknn_wait drains the pipeline: the last frame becomes the result.
    ext = run_ext()
    assert rk.rknn_wait(ctx, ext) == 0 and ext.frame_id == len(images)
    data, frame = get_output(ctx)
    assert frame == len(images)
    np.testing.assert_array_equal(data, expected[-1])


def test_async_outputs_get_before_any_run_fails(make_ctx, default_model_bytes, rknn_log):
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_ASYNC_MASK)
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert rk.rknn_outputs_get(ctx, 1, outs, None) == rk.RKNN_ERR_OUTPUT_INVALID
    assert len(rknn_log.take("E")) == 1


def test_async_results_stay_valid_until_released(make_ctx, default_model_bytes, images, expected):
    """The buffer of frame n-1 is not overwritten by later frames while the caller holds it."""
    ctx = make_ctx(default_model_bytes, rk.RKNN_FLAG_ASYNC_MASK)
    set_input(ctx, images[0])
    assert rk.rknn_run(ctx, None) == 0
    set_input(ctx, images[1])
    assert rk.rknn_run(ctx, None) == 0
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert rk.rknn_outputs_get(ctx, 1, outs, None) == 0  # frame 1, held
    for image in images[2:5]:
        set_input(ctx, image)
        assert rk.rknn_run(ctx, None) == 0
    assert rk.rknn_wait(ctx, None) == 0
    held = np.ctypeslib.as_array((ctypes.c_float * 10).from_address(outs[0].buf))
    np.testing.assert_array_equal(held, expected[0])
    assert rk.rknn_outputs_release(ctx, 1, outs) == 0


def test_non_blocking_run_and_wait_match_a_blocking_run(ctx, images, expected):
    for k, image in enumerate(images[:4]):
        set_input(ctx, image)
        ext = run_ext(non_block=1)
        assert rk.rknn_run(ctx, ext) == 0
        assert ext.frame_id == k + 1
        done = run_ext()
        assert rk.rknn_wait(ctx, done) == 0
        assert done.frame_id == k + 1
        data, frame = get_output(ctx)
        assert frame == k + 1
        np.testing.assert_array_equal(data, expected[k])


def test_non_blocking_run_returns_before_the_job_starts(ctx, images, expected, hold_cores):
    set_input(ctx, images[5])
    dev = device_of(ctx)
    hold = hold_cores(ctx, (0, 1, 2))
    ext = run_ext(non_block=1)
    assert rk.rknn_run(ctx, ext) == 0  # returns although every core is busy
    assert dev.wait_until(lambda waiting, running: (ctx.value, 1) in waiting)
    assert rk.rknn_wait(ctx, run_ext(timeout_ms=1)) == rk.RKNN_ERR_TIMEOUT  # still queued
    dev.release(hold)
    # rknn_outputs_get blocks until the frame is done (facts §4.1)
    data, frame = get_output(ctx)
    assert frame == 1
    np.testing.assert_array_equal(data, expected[5])
    assert rk.rknn_wait(ctx, None) == 0  # nothing in flight: returns at once


def test_wait_without_a_run(ctx):
    ext = run_ext()
    assert rk.rknn_wait(ctx, ext) == 0 and ext.frame_id == 0
    assert rk.rknn_wait(ctx, None) == 0


def test_inputs_set_waits_for_the_frame_in_flight(ctx, images, expected):
    set_input(ctx, images[0])
    assert rk.rknn_run(ctx, run_ext(non_block=1)) == 0
    set_input(ctx, images[1])  # must not change frame 1's input under it
    data, frame = get_output(ctx)
    assert frame == 1
    np.testing.assert_array_equal(data, expected[0])


def test_one_ms_timeout_on_a_long_job_then_the_next_run_succeeds(
    ctx, images, expected, hold_cores, rknn_log
):
    """Acceptance: -2 (RKNN_ERR_TIMEOUT) with one log line; the context stays usable."""
    set_input(ctx, images[2])
    hold = hold_cores(ctx, (0, 1, 2))
    ext = run_ext(timeout_ms=1)
    assert rk.rknn_run(ctx, ext) == rk.RKNN_ERR_TIMEOUT == -2
    (line,) = rknn_log.take("E")
    assert "rknn_run" in line and "withdrawn" in line
    device_of(ctx).release(hold)
    ext = run_ext()
    assert rk.rknn_run(ctx, ext) == 0
    assert ext.frame_id == 1  # the withdrawn frame never ran
    data, frame = get_output(ctx)
    assert frame == 1
    np.testing.assert_array_equal(data, expected[2])


def test_timeout_of_a_started_job_finishes_in_the_background(ctx, images, expected, rknn_log,
                                                             monkeypatch):  # fmt: skip
    set_input(ctx, images[3])
    core = registry.get(ctx.value)
    binding = core.shapes.binding
    started, go_on = threading.Event(), threading.Event()
    real_run = binding.run

    def slow_run() -> None:
        started.set()
        assert go_on.wait(30)
        real_run()

    monkeypatch.setattr(binding, "run", slow_run)
    # long enough for the worker to start the job on a loaded machine (with 1 ms it was
    # sometimes still queued, and withdrawn instead), short of the job's own end
    assert rk.rknn_run(ctx, run_ext(timeout_ms=500)) == rk.RKNN_ERR_TIMEOUT
    assert started.is_set()
    (line,) = rknn_log.take("E")
    assert "background" in line
    go_on.set()
    monkeypatch.setattr(binding, "run", real_run)
    data, frame = get_output(ctx)  # waits for it: frame 1 did complete
    assert frame == 1
    np.testing.assert_array_equal(data, expected[3])
    ext = run_ext(timeout_ms=10_000)
    assert rk.rknn_run(ctx, ext) == 0 and ext.frame_id == 2


def test_failed_non_blocking_run_is_reported_by_wait(ctx, images, rknn_log, monkeypatch):
    set_input(ctx, images[0])
    binding = registry.get(ctx.value).shapes.binding

    def broken() -> None:
        raise RuntimeError("the NPU hung")

    monkeypatch.setattr(binding, "run", broken)
    assert rk.rknn_run(ctx, run_ext(non_block=1)) == 0
    assert rk.rknn_wait(ctx, None) == rk.RKNN_ERR_FAIL
    (line,) = rknn_log.take("E")
    assert "rknn_wait" in line and "the NPU hung" in line
    monkeypatch.undo()
    assert rk.rknn_run(ctx, None) == 0


def test_destroy_withdraws_a_queued_job(capi, default_model_bytes, images, hold_cores):
    ctx = rk.rknn_context()
    model = default_model_bytes
    assert rk.rknn_init(ctx, model, len(model), 0, None) == 0
    set_input(ctx, images[0])
    dev = device_of(ctx)
    hold_cores(ctx, (0, 1, 2))
    assert rk.rknn_run(ctx, run_ext(non_block=1)) == 0
    assert dev.wait_until(lambda waiting, running: (ctx.value, 1) in waiting)
    assert capi(rk.rknn_destroy, ctx) == 0  # no hang: the job had not started
    assert (ctx.value, 1) not in dev.waiting()
    assert all(tag != (ctx.value, 1) for tag, _ in dev.grants)
