"""FENCE_IN_OUTSIDE and FENCE_OUT_OUTSIDE with real eventfds (docs/device.md)."""

from __future__ import annotations

import os
import select
import threading

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry

from .conftest import device_of, get_output, run_ext, set_input

pytestmark = pytest.mark.skipif(not hasattr(os, "eventfd"), reason="eventfd is Linux-only")

FENCE_IN = rk.RKNN_FLAG_FENCE_IN_OUTSIDE
FENCE_OUT = rk.RKNN_FLAG_FENCE_OUT_OUTSIDE


def readable(fd: int, timeout_s: float = 0.0) -> bool:
    return bool(select.select([fd], [], [], timeout_s)[0])


@pytest.fixture
def eventfd():
    fds: list[int] = []

    def make() -> int:
        fds.append(os.eventfd(0, os.EFD_CLOEXEC))
        return fds[-1]

    yield make
    for fd in fds:
        os.close(fd)


def test_run_waits_for_the_input_fence(make_ctx, default_model_bytes, images, expected, eventfd):
    ctx = make_ctx(default_model_bytes, FENCE_IN)
    set_input(ctx, images[0])
    fence = eventfd()
    assert rk.rknn_run(ctx, run_ext(non_block=1, fence_fd=fence)) == 0
    # Not signalled: the frame waits (it has not even asked for a core).
    assert rk.rknn_wait(ctx, run_ext(timeout_ms=20)) == rk.RKNN_ERR_TIMEOUT
    assert registry.get(ctx.value).frames.job.started is False
    os.eventfd_write(fence, 1)
    assert rk.rknn_wait(ctx, None) == 0
    data, frame = get_output(ctx)
    assert frame == 1
    np.testing.assert_array_equal(data, expected[0])
    assert os.eventfd_read(fence) == 1  # the runtime neither read nor closed the fence


def test_blocking_run_with_an_input_fence(make_ctx, default_model_bytes, images, expected,
                                          eventfd, rknn_log):  # fmt: skip
    ctx = make_ctx(default_model_bytes, FENCE_IN)
    set_input(ctx, images[1])
    fence = eventfd()
    assert rk.rknn_run(ctx, run_ext(fence_fd=fence, timeout_ms=5)) == rk.RKNN_ERR_TIMEOUT
    assert "withdrawn" in rknn_log.take("E")[0]
    signal = threading.Timer(0.02, os.eventfd_write, (fence, 1))
    signal.start()
    ext = run_ext(fence_fd=fence)
    assert rk.rknn_run(ctx, ext) == 0  # returns once the other thread signals
    signal.join()
    assert ext.frame_id == 1
    np.testing.assert_array_equal(get_output(ctx)[0], expected[1])
    # -1: no fence this time
    assert rk.rknn_run(ctx, run_ext(fence_fd=-1)) == 0


def test_any_pollable_descriptor_is_a_fence(make_ctx, default_model_bytes, images, expected):
    ctx = make_ctx(default_model_bytes, FENCE_IN)
    set_input(ctx, images[2])
    read_end, write_end = os.pipe()
    try:
        assert rk.rknn_run(ctx, run_ext(non_block=1, fence_fd=read_end)) == 0
        os.write(write_end, b"x")
        assert rk.rknn_wait(ctx, None) == 0
        np.testing.assert_array_equal(get_output(ctx)[0], expected[2])
    finally:
        os.close(read_end)
        os.close(write_end)


def test_output_fence_becomes_readable_when_the_job_ends(make_ctx, default_model_bytes, images,
                                                         expected, hold_cores):  # fmt: skip
    ctx = make_ctx(default_model_bytes, FENCE_OUT)
    set_input(ctx, images[3])
    hold = hold_cores(ctx, (0, 1, 2))
    ext = run_ext()
    assert rk.rknn_run(ctx, ext) == 0  # returns at once with the fence
    fence = ext.fence_fd
    try:
        assert fence >= 0 and ext.frame_id == 1
        assert not readable(fence)  # the job cannot start: every core is held
        device_of(ctx).release(hold)
        assert readable(fence, 10.0)
        assert os.eventfd_read(fence) == 1
        data, frame = get_output(ctx)
        assert frame == 1
        np.testing.assert_array_equal(data, expected[3])
    finally:
        os.close(fence)


def test_fences_chain_two_contexts(make_ctx, default_model_bytes, images, expected):
    """Context A's output fence is context B's input fence (both directions in one pipeline)."""
    a = make_ctx(default_model_bytes, FENCE_OUT)
    b = make_ctx(default_model_bytes, FENCE_IN | FENCE_OUT)
    set_input(a, images[4])
    set_input(b, images[5])
    ext_a = run_ext()
    assert rk.rknn_run(a, ext_a) == 0
    ext_b = run_ext(fence_fd=ext_a.fence_fd)
    assert rk.rknn_run(b, ext_b) == 0
    try:
        assert readable(ext_b.fence_fd, 10.0)
        assert readable(ext_a.fence_fd)  # B ran after A's fence
        np.testing.assert_array_equal(get_output(a)[0], expected[4])
        np.testing.assert_array_equal(get_output(b)[0], expected[5])
    finally:
        os.close(ext_a.fence_fd)
        os.close(ext_b.fence_fd)


def test_fence_misuse(make_ctx, default_model_bytes, images, rknn_log):
    ctx = make_ctx(default_model_bytes, FENCE_IN)
    set_input(ctx, images[0])
    assert rk.rknn_run(ctx, None) == rk.RKNN_ERR_PARAM_INVALID
    assert "rknn_run_extend" in rknn_log.take("E")[0]
    closed = os.eventfd(0)
    os.close(closed)
    assert rk.rknn_run(ctx, run_ext(fence_fd=closed)) == rk.RKNN_ERR_PARAM_INVALID
    assert "not an open descriptor" in rknn_log.take("E")[0]
    out = make_ctx(default_model_bytes, FENCE_OUT)
    set_input(out, images[0])
    assert rk.rknn_run(out, None) == rk.RKNN_ERR_PARAM_INVALID
    assert len(rknn_log.take("E")) == 1


def test_output_fences_do_not_leak(make_ctx, default_model_bytes, images):
    ctx = make_ctx(default_model_bytes, FENCE_OUT)
    set_input(ctx, images[0])
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        ext = run_ext()
        assert rk.rknn_run(ctx, ext) == 0
        assert rk.rknn_wait(ctx, None) == 0
        assert readable(ext.fence_fd)
        os.close(ext.fence_fd)  # the application owns the fence
    assert len(os.listdir("/proc/self/fd")) <= before
