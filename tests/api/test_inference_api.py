"""rknnrt_inference, RKNNLite.inference's one call: the outputs, the run state, the statuses and
the one E line of rknn_inputs_set + rknn_run + rknn_outputs_get + rknn_outputs_release."""

from __future__ import annotations

import ctypes
import re
import threading
from pathlib import Path

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.toolkit.samples import default_input
from tests.conftest import init_context
from tests.helpers import get_output, query_attr, set_input, set_run_get

MINI = Path(__file__).parents[1] / "vendor" / "fixtures_mini"


def _text(lines: list[str]) -> list[str]:
    return [re.sub(r"\[[0-9:.]+\] ", "", line) for line in lines]


def _float_nchw(seed: int) -> np.ndarray:
    image = default_input(seed)  # NHWC uint8
    return np.ascontiguousarray(image.transpose(0, 3, 1, 2), np.float32)


@pytest.mark.parametrize("kind", ["uint8 NHWC", "float32 NCHW"])
def test_the_outputs_are_the_four_calls_bits(ctx, kind) -> None:
    if kind == "uint8 NHWC":
        x, type_, fmt = default_input(3), rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC
    else:
        x, type_, fmt = _float_nchw(3), rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
    want = set_run_get(ctx, x, type_, fmt)
    status, outputs = rk.rknnrt_inference(ctx, [x], [type_], [fmt], 1)
    assert status == rk.RKNN_SUCC and len(outputs) == 1
    assert outputs[0].dtype == np.float32
    assert outputs[0].tobytes() == want.tobytes()


def test_the_run_state_is_that_of_rknn_run_and_nothing_stays_held(ctx, rknn_log) -> None:
    """After the call: frame 1's results for rknn_outputs_get, the run's duration for
    PERF_RUN, and every buffer released (a release now is a W line: nothing was held)."""
    x = default_input(4)
    status, outputs = rk.rknnrt_inference(ctx, [x], [rk.RKNN_TENSOR_UINT8],
                                          [rk.RKNN_TENSOR_NHWC], 1)  # fmt: skip
    assert status == rk.RKNN_SUCC
    again, frame = get_output(ctx)
    assert frame == 1 and again.tobytes() == outputs[0].tobytes()
    perf = rk.rknn_perf_run()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_PERF_RUN, ctypes.byref(perf),
                         ctypes.sizeof(perf)) == rk.RKNN_SUCC  # fmt: skip
    assert perf.run_duration > 0
    outs = (rk.rknn_output * 1)()
    outs[0].buf = outputs[0].ctypes.data
    rknn_log.clear()
    assert rk.rknn_outputs_release(ctx, 1, outs) == rk.RKNN_SUCC
    assert any("were not held" in line for line in rknn_log.take("W"))


def test_the_outputs_are_the_callers_copies(ctx) -> None:
    x = default_input(5)
    args = ([x], [rk.RKNN_TENSOR_UINT8], [rk.RKNN_TENSOR_NHWC], 1)
    _, first = rk.rknnrt_inference(ctx, *args)
    keep = first[0].copy()
    first[0][...] = 7.0
    _, second = rk.rknnrt_inference(ctx, *args)
    assert second[0].tobytes() == keep.tobytes()
    assert not np.shares_memory(first[0], second[0])


def _c_path_line(capi, model: bytes, rknn_log, call) -> tuple[int, list[str]]:
    """The status and E lines of the same mistake made through the C calls on a new context."""
    other = init_context(capi, model)
    try:
        rknn_log.clear()
        status = call(other)
        return status, _text(rknn_log.take("E"))
    finally:
        rk.rknn_destroy(other)


@pytest.mark.parametrize("mistake", ["type", "size", "format"])
def test_a_bad_input_is_rknn_inputs_sets_status_and_line(ctx, capi, default_model_bytes,
                                                         rknn_log, mistake) -> None:  # fmt: skip
    x = default_input(6)
    type_, fmt = rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC
    if mistake == "type":
        type_ = 99
    elif mistake == "size":
        x = x.reshape(-1)[:100].copy()
    else:
        fmt = 77

    def c_calls(context) -> int:
        inp = rk.rknn_input(index=0, buf=x.ctypes.data, size=x.nbytes, type=type_, fmt=fmt)
        return rk.rknn_inputs_set(context, 1, inp)

    want_status, want_lines = _c_path_line(capi, default_model_bytes, rknn_log, c_calls)
    assert want_status == rk.RKNN_ERR_PARAM_INVALID and len(want_lines) == 1
    status, outputs = rk.rknnrt_inference(ctx, [x], [type_], [fmt], 1)
    assert (status, outputs) == (want_status, None)
    assert _text(rknn_log.take("E")) == want_lines


def test_a_destroyed_context_and_a_bad_output_count(ctx, rknn_log) -> None:
    x = default_input(7)
    args = ([x], [rk.RKNN_TENSOR_UINT8], [rk.RKNN_TENSOR_NHWC])
    status, _ = rk.rknnrt_inference(ctx, *args, 0)
    assert status == rk.RKNN_ERR_PARAM_INVALID
    assert _text(rknn_log.take("E")) == ["E RKNN: rknn_outputs_get: n_outputs 0 must be > 0"]
    status, _ = rk.rknnrt_inference(ctx, [], [], [], 1)
    assert status == rk.RKNN_ERR_PARAM_INVALID
    assert _text(rknn_log.take("E")) == ["E RKNN: rknn_inputs_set: n_inputs 0 must be > 0"]
    assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC
    status, outputs = rk.rknnrt_inference(ctx, *args, 1)
    assert (status, outputs) == (rk.RKNN_ERR_CTX_INVALID, None)
    (line,) = rknn_log.take("E")
    assert line.count("E RKNN:") == 1 and "rknn_inputs_set" in line


def test_more_outputs_than_the_model_has_is_rknn_outputs_gets_status_and_line(
        ctx, rknn_log) -> None:  # fmt: skip
    """Asked for two outputs of a one-output model: the call fails as rknn_outputs_get does,
    after the run (frame 1 done), and nothing is left handed out."""
    x = default_input(8)
    status, outputs = rk.rknnrt_inference(ctx, [x], [rk.RKNN_TENSOR_UINT8],
                                          [rk.RKNN_TENSOR_NHWC], 2)  # fmt: skip
    assert (status, outputs) == (rk.RKNN_ERR_PARAM_INVALID, None)
    assert _text(rknn_log.take("E")) == ["E RKNN: rknn_outputs_get: n_outputs 2 > model's 1"]
    again, frame = get_output(ctx)  # the run's own results, still there
    assert frame == 1 and again.dtype == np.float32 and again.size > 0


def test_the_mini_runtime_refuses_it_as_it_refuses_rknn_inputs_set(capi, rknn_log) -> None:
    """rv1106's runtime has no general API: the first step's refusal, word for word."""
    model = (MINI / "asym_rv1106_i8.rknn").read_bytes()
    ctx = init_context(capi, model)
    try:
        attr = query_attr(ctx, rk.RKNN_QUERY_INPUT_ATTR)
        x = np.zeros(attr.n_elems, np.int8)
        rknn_log.clear()
        inp = rk.rknn_input(index=0, buf=x.ctypes.data, size=x.nbytes, type=rk.RKNN_TENSOR_INT8,
                            fmt=rk.RKNN_TENSOR_NHWC)  # fmt: skip
        want = rk.rknn_inputs_set(ctx, 1, inp)
        want_lines = _text(rknn_log.take("E"))
        status, outputs = rk.rknnrt_inference(ctx, [x], [rk.RKNN_TENSOR_INT8],
                                              [rk.RKNN_TENSOR_NHWC], 1)  # fmt: skip
        assert (status, outputs) == (want, None) and want == rk.RKNN_ERR_FAIL
        assert _text(rknn_log.take("E")) == want_lines
        assert "not supported on rv1106" in want_lines[0]
    finally:
        rk.rknn_destroy(ctx)


def test_another_threads_calls_wait_for_the_whole_call(ctx) -> None:
    """One guard entry for the four steps: a thread's rknn_inputs_set between another's set
    and run cannot change what that run reads (each thread gets its own input's outputs)."""
    inputs = [default_input(10 + i) for i in range(2)]
    want = [set_run_get(ctx, x, rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC) for x in inputs]
    mismatches: list[int] = []

    def worker(k: int) -> None:
        for _ in range(20):
            status, out = rk.rknnrt_inference(ctx, [inputs[k]], [rk.RKNN_TENSOR_UINT8],
                                              [rk.RKNN_TENSOR_NHWC], 1)  # fmt: skip
            if status != rk.RKNN_SUCC or out[0].tobytes() != want[k].tobytes():
                mismatches.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mismatches == []
    set_input(ctx, inputs[0])  # the context is still usable through the C calls
    assert rk.rknn_run(ctx, None) == rk.RKNN_SUCC
