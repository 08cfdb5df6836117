"""The simulated NPU's cores, masks and priority queue (core/device.py; docs/device.md).

Ordering is made deterministic with held cores and queue observation, never with sleeps."""

from __future__ import annotations

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.core.device import Device, cores_for

from .conftest import device_of, get_output, run_ext, set_input


@pytest.mark.parametrize(
    ("mask", "cores", "expected"),
    [
        (rk.RKNN_NPU_CORE_AUTO, 3, ((0, 1, 2), 1)),
        (rk.RKNN_NPU_CORE_0, 3, ((0,), 1)),
        (rk.RKNN_NPU_CORE_1, 3, ((1,), 1)),
        (rk.RKNN_NPU_CORE_2, 3, ((2,), 1)),
        (rk.RKNN_NPU_CORE_0_1, 3, ((0, 1), 2)),
        (rk.RKNN_NPU_CORE_0_1_2, 3, ((0, 1, 2), 3)),
        (rk.RKNN_NPU_CORE_ALL, 3, ((0, 1, 2), 3)),
        (rk.RKNN_NPU_CORE_ALL, 2, ((0, 1), 2)),
        (rk.RKNN_NPU_CORE_AUTO, 1, ((0,), 1)),
    ],
)
def test_cores_for_mask(mask, cores, expected):
    assert cores_for(mask, cores) == expected


# ---- the queue on its own -------------------------------------------------------------------
def test_auto_takes_the_lowest_idle_core():
    dev = Device("test", 3)
    first = dev.acquire((0, 1, 2), 1, "LOW", "a")
    second = dev.acquire((0, 1, 2), 1, "LOW", "b")
    assert (first.cores, second.cores) == ((0,), (1,))
    dev.release(first)
    third = dev.acquire((0, 1, 2), 1, "LOW", "c")
    assert third.cores == (0,)
    assert [tag for tag, _ in dev.grants] == ["a", "b", "c"]


def test_waiting_jobs_start_by_priority_then_arrival():
    dev = Device("test", 1)
    hold = dev.hold([0])
    reqs = [dev.submit((0,), 1, prio, tag) for prio, tag in
            [("LOW", "low1"), ("MEDIUM", "med1"), ("HIGH", "high1"), ("LOW", "low2"),
             ("HIGH", "high2")]]  # fmt: skip
    assert all(r.state == "waiting" for r in reqs)
    assert dev.waiting() == ["high1", "high2", "med1", "low1", "low2"]
    dev.release(hold)
    order = []
    for _ in reqs:
        (running,) = [r for r in reqs if r.state == "granted"]
        order.append(running.tag)
        dev.release(running)
    assert order == ["high1", "high2", "med1", "low1", "low2"]


def test_a_waiting_multi_core_job_is_not_overtaken_on_its_cores():
    dev = Device("test", 3)
    busy = dev.hold([0])
    wide = dev.submit((0, 1, 2), 3, "HIGH", "wide")  # needs all three
    narrow = dev.submit((0, 1, 2), 1, "LOW", "narrow")  # cores 1 and 2 are idle, but reserved
    assert (wide.state, narrow.state) == ("waiting", "waiting")
    dev.release(busy)
    assert wide.state == "granted" and wide.cores == (0, 1, 2)
    assert narrow.state == "waiting"
    dev.release(wide)
    assert narrow.state == "granted"


def test_a_job_for_other_cores_runs_past_the_queue():
    dev = Device("test", 3)
    busy = dev.hold([0])
    on_zero = dev.submit((0,), 1, "HIGH", "zero")
    on_two = dev.submit((2,), 1, "LOW", "two")
    assert on_zero.state == "waiting" and on_two.cores == (2,)
    dev.release(busy)
    assert on_zero.cores == (0,)


def test_cancel_and_timeout():
    dev = Device("test", 1)
    busy = dev.hold([0])
    req = dev.submit((0,), 1, "HIGH", "late")
    assert dev.wait(req, timeout=0.001) is False
    assert dev.cancel(req) is True and req.state == "cancelled"
    assert dev.cancel(req) is False
    dev.release(busy)
    assert dev.waiting() == [] and dev.busy() == [None]
    assert dev.stats[0].jobs == 1  # the hold only


# ---- through the C API ----------------------------------------------------------------------
def test_high_priority_job_submitted_after_a_low_one_starts_first(
    make_ctx, default_model_bytes, images, expected, hold_cores
):
    """Acceptance: with the allowed core busy, PRIOR_HIGH (submitted second) starts first."""
    low = make_ctx(default_model_bytes, rk.RKNN_FLAG_PRIOR_LOW)
    high = make_ctx(default_model_bytes, rk.RKNN_FLAG_PRIOR_HIGH)
    for ctx, image in ((low, images[1]), (high, images[2])):
        assert rk.rknn_set_core_mask(ctx, rk.RKNN_NPU_CORE_0) == 0
        set_input(ctx, image)
    dev = device_of(low)
    hold = hold_cores(low, (0,))
    low_tag, high_tag = (low.value, 1), (high.value, 1)
    assert rk.rknn_run(low, run_ext(non_block=1)) == 0
    assert dev.wait_until(lambda waiting, running: low_tag in waiting)
    assert rk.rknn_run(high, run_ext(non_block=1)) == 0
    assert dev.wait_until(lambda waiting, running: waiting == [high_tag, low_tag])
    dev.release(hold)
    for ctx in (high, low):
        assert rk.rknn_wait(ctx, None) == 0
    started = [tag for tag, _ in dev.grants if tag in (low_tag, high_tag)]
    assert started == [high_tag, low_tag]
    np.testing.assert_array_equal(get_output(low)[0], expected[1])
    np.testing.assert_array_equal(get_output(high)[0], expected[2])


def test_medium_between_high_and_low(make_ctx, default_model_bytes, images, hold_cores):
    flags = {"LOW": rk.RKNN_FLAG_PRIOR_LOW, "MEDIUM": rk.RKNN_FLAG_PRIOR_MEDIUM,
             "HIGH": rk.RKNN_FLAG_PRIOR_HIGH}  # fmt: skip
    ctxs = {name: make_ctx(default_model_bytes, flag) for name, flag in flags.items()}
    dev = device_of(ctxs["LOW"])
    hold = hold_cores(ctxs["LOW"], (0, 1, 2))
    for count, name in enumerate(("LOW", "MEDIUM", "HIGH"), start=1):
        set_input(ctxs[name], images[0])
        assert rk.rknn_set_core_mask(ctxs[name], rk.RKNN_NPU_CORE_0_1_2) == 0
        assert rk.rknn_run(ctxs[name], run_ext(non_block=1)) == 0
        assert dev.wait_until(lambda waiting, running, n=count: len(waiting) == n)
    dev.release(hold)
    for ctx in ctxs.values():
        assert rk.rknn_wait(ctx, None) == 0
    tags = {(c.value, 1): name for name, c in ctxs.items()}
    assert [tags[t] for t, _ in dev.grants if t in tags] == ["HIGH", "MEDIUM", "LOW"]


@pytest.mark.parametrize(
    ("mask", "cores"),
    [(rk.RKNN_NPU_CORE_AUTO, (0,)), (rk.RKNN_NPU_CORE_1, (1,)), (rk.RKNN_NPU_CORE_2, (2,)),
     (rk.RKNN_NPU_CORE_0_1, (0, 1)), (rk.RKNN_NPU_CORE_0_1_2, (0, 1, 2)),
     (rk.RKNN_NPU_CORE_ALL, (0, 1, 2))],
)  # fmt: skip
def test_core_mask_chooses_the_cores(make_ctx, default_model_bytes, images, expected, mask,
                                     cores):  # fmt: skip
    ctx = make_ctx(default_model_bytes)
    assert rk.rknn_set_core_mask(ctx, mask) == 0
    set_input(ctx, images[3])
    assert rk.rknn_run(ctx, None) == 0
    assert registry.get(ctx.value).last_cores == cores
    assert device_of(ctx).grants[-1] == ((ctx.value, 1), cores)
    np.testing.assert_array_equal(get_output(ctx)[0], expected[3])


def test_multi_core_job_waits_for_all_its_cores(make_ctx, default_model_bytes, images,
                                                hold_cores, rknn_log):  # fmt: skip
    wide = make_ctx(default_model_bytes)
    auto = make_ctx(default_model_bytes)
    assert rk.rknn_set_core_mask(wide, rk.RKNN_NPU_CORE_0_1_2) == 0
    for ctx in (wide, auto):
        set_input(ctx, images[0])
    hold_cores(wide, (2,))
    assert rk.rknn_run(wide, run_ext(timeout_ms=1)) == rk.RKNN_ERR_TIMEOUT
    assert len(rknn_log.take("E")) == 1
    assert rk.rknn_run(auto, None) == 0  # cores 0 and 1 are idle for an AUTO job
    assert registry.get(auto.value).last_cores == (0,)


def test_rk3576_has_two_cores(make_ctx, convert, default_onnx, hold_cores):
    ctx = make_ctx(convert(default_onnx, target_platform="rk3576"))
    dev = device_of(ctx)
    assert (dev.name, dev.cores) == ("rk3576", 2)
    assert rk.rknn_set_core_mask(ctx, rk.RKNN_NPU_CORE_ALL) == 0
    assert registry.get(ctx.value).frames.cores == ((0, 1), 2)


def test_multi_batch_model_spreads_over_batch_core_num(make_ctx, default_model_bytes, images):
    """A model converted with rknn_batch_size > 1 takes batch_core_num cores per job."""
    ctx = make_ctx(default_model_bytes)
    core = registry.get(ctx.value)
    core.model.meta.rknn_batch_size = 3  # what the converter records for rknn_batch_size=3
    try:
        assert rk.rknn_set_batch_core_num(ctx, 2) == 0
        set_input(ctx, images[0])
        assert rk.rknn_run(ctx, None) == 0
        assert core.last_cores == (0, 1)
        assert rk.rknn_set_batch_core_num(ctx, 3) == 0
        assert rk.rknn_run(ctx, None) == 0
        assert core.last_cores == (0, 1, 2)
    finally:
        del core.model.meta.rknn_batch_size
