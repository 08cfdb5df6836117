"""Context lifecycle: no leaks over many init/destroy cycles, output buffers owned by the context
until rknn_outputs_release, and no data shared between contexts (design §7, facts §4.1)."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.toolkit.samples import default_input
from tests.helpers import open_fds

RTOL, ATOL = 1e-4, 1e-5


def set_input(capi, context, image: np.ndarray) -> None:
    inp = rk.rknn_input()
    inp.index = 0
    inp.buf = image.ctypes.data
    inp.size = image.nbytes
    inp.type = rk.RKNN_TENSOR_UINT8
    inp.fmt = rk.RKNN_TENSOR_NHWC
    assert capi(rk.rknn_inputs_set, context, 1, inp) == 0


def get_outputs(capi, context) -> ctypes.Array:
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert capi(rk.rknn_outputs_get, context, 1, outs, None) == 0
    assert outs[0].buf and outs[0].size == 40
    return outs


def read(address: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_char * 40).from_address(address), np.float32).reshape(1, 10)


def churn() -> None:
    """Collect garbage and reuse freed small blocks, so a freed buffer would be overwritten."""
    gc.collect()
    junk = [np.full(10, -1.0, np.float32) for _ in range(2000)]
    junk += [bytearray(b"\xee" * 40) for _ in range(2000)]
    del junk
    gc.collect()


@pytest.mark.slow
def test_init_destroy_cycles_do_not_leak(capi, default_model_bytes):
    model = default_model_bytes
    # Warm up once: onnxruntime may open files lazily on first use.
    handle = rk.rknn_context()
    assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
    assert capi(rk.rknn_destroy, handle) == 0
    gc.collect()
    contexts, fds = registry.count(), open_fds()
    seen = set()
    for _ in range(200):
        handle = rk.rknn_context()
        assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
        assert registry.count() == contexts + 1
        seen.add(handle.value)
        assert capi(rk.rknn_destroy, handle) == 0
    gc.collect()
    assert len(seen) == 200  # handles are never reused
    assert registry.count() == contexts
    assert open_fds() == fds


def test_used_contexts_do_not_leak(capi, default_model_bytes):
    """Cycles that also run and leave outputs unreleased (rknn_destroy frees them)."""
    model = default_model_bytes
    image = default_input()
    gc.collect()
    contexts, fds = registry.count(), open_fds()
    for _ in range(20):
        handle = rk.rknn_context()
        assert capi(rk.rknn_init, handle, model, len(model), 0, None) == 0
        dup = rk.rknn_context()
        assert capi(rk.rknn_dup_context, handle, dup) == 0
        for context in (handle, dup):
            set_input(capi, context, image)
            assert capi(rk.rknn_run, context, None) == 0
            get_outputs(capi, context)  # never released
        assert capi(rk.rknn_destroy, handle) == 0
        assert capi(rk.rknn_destroy, dup) == 0
    gc.collect()
    assert registry.count() == contexts
    assert open_fds() == fds


def test_output_buffer_valid_until_release(capi, ctx, reference):
    first, second = default_input(seed=1), default_input(seed=2)
    set_input(capi, ctx, first)
    assert capi(rk.rknn_run, ctx, None) == 0
    outs = get_outputs(capi, ctx)
    address = outs[0].buf
    expected = reference(first)
    np.testing.assert_allclose(read(address), expected, rtol=RTOL, atol=ATOL)
    snapshot = read(address).copy()

    churn()
    np.testing.assert_array_equal(read(address), snapshot)

    # Another inference on the same context does not touch the unreleased buffer.
    set_input(capi, ctx, second)
    assert capi(rk.rknn_run, ctx, None) == 0
    later = get_outputs(capi, ctx)
    np.testing.assert_allclose(read(later[0].buf), reference(second), rtol=RTOL, atol=ATOL)
    assert capi(rk.rknn_outputs_release, ctx, 1, later) == 0
    for _ in range(3):
        assert capi(rk.rknn_run, ctx, None) == 0
    churn()
    np.testing.assert_array_equal(read(address), snapshot)

    assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0


def test_second_outputs_get_survives_release_of_the_first(capi, ctx, reference):
    image = default_input(seed=3)
    set_input(capi, ctx, image)
    assert capi(rk.rknn_run, ctx, None) == 0
    first = get_outputs(capi, ctx)
    second = get_outputs(capi, ctx)
    snapshot = read(second[0].buf).copy()
    np.testing.assert_allclose(snapshot, reference(image), rtol=RTOL, atol=ATOL)

    assert capi(rk.rknn_outputs_release, ctx, 1, first) == 0
    # `second` is still unreleased: its buffer must survive further runs and garbage collection.
    for seed in range(4, 10):
        set_input(capi, ctx, default_input(seed=seed))
        assert capi(rk.rknn_run, ctx, None) == 0
        out = get_outputs(capi, ctx)
        assert capi(rk.rknn_outputs_release, ctx, 1, out) == 0
    churn()
    np.testing.assert_array_equal(read(second[0].buf), snapshot)
    assert capi(rk.rknn_outputs_release, ctx, 1, second) == 0


def test_preallocated_output_is_never_freed_by_release(capi, ctx, reference):
    image = default_input(seed=5)
    set_input(capi, ctx, image)
    assert capi(rk.rknn_run, ctx, None) == 0
    buf = np.zeros(10, np.float32)
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    outs[0].is_prealloc = 1
    outs[0].buf = buf.ctypes.data
    outs[0].size = buf.nbytes
    assert capi(rk.rknn_outputs_get, ctx, 1, outs, None) == 0
    assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0
    assert capi(rk.rknn_destroy, ctx) == 0
    churn()
    np.testing.assert_allclose(buf.reshape(1, 10), reference(image), rtol=RTOL, atol=ATOL)


def test_contexts_do_not_see_each_others_inputs(capi, make_ctx, default_model_bytes, reference):
    a, b = make_ctx(default_model_bytes), make_ctx(default_model_bytes)
    image_a, image_b = default_input(seed=10), default_input(seed=11)
    set_input(capi, a, image_a)
    set_input(capi, b, image_b)
    assert capi(rk.rknn_run, a, None) == 0
    assert capi(rk.rknn_run, b, None) == 0
    out_a, out_b = get_outputs(capi, a), get_outputs(capi, b)
    result_a, result_b = read(out_a[0].buf).copy(), read(out_b[0].buf).copy()
    assert not np.allclose(result_a, result_b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(result_a, reference(image_a), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(result_b, reference(image_b), rtol=RTOL, atol=ATOL)
    assert capi(rk.rknn_outputs_release, a, 1, out_a) == 0
    assert capi(rk.rknn_outputs_release, b, 1, out_b) == 0

    # Changing B's input again and running B leaves A's next result as it was.
    set_input(capi, b, default_input(seed=12))
    assert capi(rk.rknn_run, b, None) == 0
    assert capi(rk.rknn_run, a, None) == 0
    again = get_outputs(capi, a)
    np.testing.assert_array_equal(read(again[0].buf), result_a)
    assert capi(rk.rknn_outputs_release, a, 1, again) == 0


def test_input_buffer_is_copied_at_inputs_set(capi, ctx, reference):
    """rknn_inputs_set copies: changing the caller's buffer afterwards does not change a run."""
    image = default_input(seed=13)
    set_input(capi, ctx, image)
    expected = reference(image.copy())
    image[...] = 0
    assert capi(rk.rknn_run, ctx, None) == 0
    outs = get_outputs(capi, ctx)
    np.testing.assert_allclose(read(outs[0].buf), expected, rtol=RTOL, atol=ATOL)
    assert capi(rk.rknn_outputs_release, ctx, 1, outs) == 0


def test_destroy_with_dup_keeps_the_other_alive(capi, make_ctx, default_model_bytes, reference):
    a = make_ctx(default_model_bytes)
    b = rk.rknn_context()
    assert capi(rk.rknn_dup_context, a, b) == 0
    image = default_input(seed=14)
    set_input(capi, b, image)
    assert capi(rk.rknn_destroy, a) == 0
    churn()
    assert capi(rk.rknn_run, b, None) == 0
    outs = get_outputs(capi, b)
    np.testing.assert_allclose(read(outs[0].buf), reference(image), rtol=RTOL, atol=ATOL)
    assert capi(rk.rknn_outputs_release, b, 1, outs) == 0
    assert capi(rk.rknn_destroy, b) == 0


def test_destroy_waits_for_a_call_inside(capi, make_ctx, default_model_bytes, rknn_log):
    """Issue 11 item 9: rknn_destroy waits for another thread's call, logs one W line, then
    destroys; the waiting call's context is gone afterwards."""
    import threading
    import time

    from rknnrt.core import registry

    context = make_ctx(default_model_bytes)
    inner = registry.get(context.value)
    inner.enter("rknn_run")  # another thread is inside a call on this context
    threading.Timer(0.2, inner.leave).start()
    start = time.monotonic()
    assert capi(rk.rknn_destroy, context) == rk.RKNN_SUCC
    assert time.monotonic() - start >= 0.15
    (line,) = rknn_log.take("W")
    assert "rknn_destroy: waited" in line and "another thread's call" in line
    assert inner.destroyed
    assert capi(rk.rknn_run, context, None) == rk.RKNN_ERR_CTX_INVALID


def test_destroy_wait_is_bounded(capi, make_ctx, default_model_bytes, rknn_log, monkeypatch):
    """A call that never ends: rknn_destroy gives RKNN_ERR_TIMEOUT after RKNNRT_CALL_WAIT_MS
    and the context stays alive and usable (never FAIL for a busy context)."""
    from rknnrt.core import registry

    monkeypatch.setenv("RKNNRT_CALL_WAIT_MS", "100")
    context = make_ctx(default_model_bytes)
    inner = registry.get(context.value)
    inner.enter("rknn_run")
    try:
        assert capi(rk.rknn_destroy, context) == rk.RKNN_ERR_TIMEOUT
        (line,) = rknn_log.take("E")
        assert "did not end within 100 ms" in line
        assert registry.get(context.value) is inner
    finally:
        inner.leave()
    assert capi(rk.rknn_destroy, context) == rk.RKNN_SUCC


def test_perf_detail_buffer_outlives_the_query(capi, make_ctx, default_model_bytes):
    """perf_data belongs to the runtime, also when info is passed as a raw address."""
    context = make_ctx(default_model_bytes, rk.RKNN_FLAG_COLLECT_PERF_MASK)
    set_input(capi, context, default_input(seed=7))
    assert capi(rk.rknn_run, context, None) == 0
    detail = rk.rknn_perf_detail()
    size = ctypes.sizeof(detail)
    assert capi(rk.rknn_query, context, rk.RKNN_QUERY_PERF_DETAIL, ctypes.addressof(detail),
                size) == 0  # fmt: skip
    gc.collect()
    text = ctypes.string_at(detail.perf_data, detail.data_len).decode()
    assert "Network Layer Information Table" in text
