"""Issue 11 items 7 and 10: rknn_init arguments are bounded before anything is read, and
memory objects belong to the context that made them."""

from __future__ import annotations

import os

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core.context import model as core_model
from tests.helpers import query_attr, set_input


def init(model, size: int, extend=None) -> int:
    ctx = rk.rknn_context()
    rc = rk.rknn_init(ctx, model, size, 0, extend)
    if rc == 0:
        assert rk.rknn_destroy(ctx) == 0
    return rc


def test_negative_size_and_offsets(default_model_bytes, tmp_path, rknn_log) -> None:
    path = tmp_path / "m.rknn"
    path.write_bytes(default_model_bytes)
    assert init(default_model_bytes, -5) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("size -5 must be >= 0")
    ext = rk.rknn_init_extend(real_model_offset=-1)
    assert init(str(path), 0, ext) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("real_model_offset -1", "must be >= 0")
    # real_model_size is a uint32_t: -1 arrives as 4294967295, past the end of the file
    ext = rk.rknn_init_extend(real_model_size=-1)
    assert init(str(path), 0, ext) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("real_model_size 4294967295 exceed the model file size")


def test_model_size_past_the_end_of_the_file(default_model_bytes, tmp_path, rknn_log) -> None:
    path = tmp_path / "m.rknn"
    path.write_bytes(b"x" * 100 + default_model_bytes)
    total = len(default_model_bytes) + 100
    ext = rk.rknn_init_extend(real_model_offset=100, real_model_size=len(default_model_bytes) + 1)
    assert init(str(path), 0, ext) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error(f"exceed the model file size {total}")
    ext = rk.rknn_init_extend(real_model_offset=total + 1)
    assert init(str(path), 0, ext) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.clear()
    # the same window in bounds loads
    ext = rk.rknn_init_extend(real_model_offset=100, real_model_size=len(default_model_bytes))
    assert init(str(path), 0, ext) == 0


@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_devices_fifos_and_folders_are_refused(kind, tmp_path, rknn_log) -> None:
    if kind == "device":
        path = "/dev/zero"
    elif kind == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)  # opening it for reading would block without O_NONBLOCK
    else:
        path = str(tmp_path)
    assert init(path, 0) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("is not a regular file")


def test_a_huge_file_is_refused_unread(tmp_path, rknn_log) -> None:
    """A sparse file just over the limit: refused from its size, never read (reading 2 GiB
    here would take seconds and the memory of the test run)."""
    path = tmp_path / "huge.rknn"
    with open(path, "wb") as f:
        f.truncate(core_model.MAX_MODEL_BYTES + 1)
    assert init(str(path), 0) == rk.RKNN_ERR_MODEL_INVALID
    rknn_log.one_error("more than any model", "not read")


# -- item 10 ----------------------------------------------------------------------------------
def test_memory_of_another_context_is_refused(make_ctx, default_model_bytes, rknn_log) -> None:
    a, b = make_ctx(default_model_bytes), make_ctx(default_model_bytes)
    mem_b = rk.rknn_create_mem(b, 64 * 64 * 3 * 4)
    free = rk.rknn_create_mem2(None, 64 * 64 * 3 * 4, rk.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
    attr = query_attr(a, rk.RKNN_QUERY_INPUT_ATTR)
    rknn_log.clear()
    assert rk.rknn_set_io_mem(a, mem_b, attr) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("rknn_set_io_mem", f"made on context {b.value:#x}, not on {a.value:#x}")
    assert rk.rknn_mem_sync(a, mem_b, rk.RKNN_MEMORY_SYNC_TO_DEVICE) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("rknn_mem_sync", "made on context")
    assert rk.rknn_destroy_mem(a, mem_b) == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("rknn_destroy_mem", "made on context")
    # its own context may; memory of no context works with any
    assert rk.rknn_mem_sync(b, mem_b, rk.RKNN_MEMORY_SYNC_TO_DEVICE) == 0
    assert rk.rknn_set_io_mem(a, free, attr) == 0
    assert rk.rknn_mem_sync(a, free, rk.RKNN_MEMORY_SYNC_TO_DEVICE) == 0
    assert rk.rknn_destroy_mem(b, mem_b) == 0
    assert rk.rknn_destroy_mem(b, free) == 0
    assert rknn_log.take("E") == []


def test_release_twice_or_before_get_warns(make_ctx, default_model_bytes, rknn_log) -> None:
    ctx = make_ctx(default_model_bytes)
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    assert rk.rknn_outputs_release(ctx, 1, outs) == 0  # before any rknn_outputs_get
    (line,) = rknn_log.take("W")
    assert "rknn_outputs_release: 1 of 1 outputs were not held" in line
    set_input(ctx, np.zeros((1, 64, 64, 3), np.uint8))
    assert rk.rknn_run(ctx, None) == 0
    assert rk.rknn_outputs_get(ctx, 1, outs, None) == 0
    assert rk.rknn_outputs_release(ctx, 1, outs) == 0
    assert rknn_log.take("W") == []  # the normal release says nothing
    assert rk.rknn_outputs_release(ctx, 1, outs) == 0  # twice: status unchanged, one line
    (line,) = rknn_log.take("W")
    assert "released twice, or before rknn_outputs_get" in line
    assert rknn_log.take("E") == []


def test_fallback_to_gpu_flag_logs_the_cpu_fallback(default_model_bytes, rknn_log) -> None:
    """EXECUTE_FALLBACK_PRIOR_DEVICE_GPU is honoured, not ignored: no GPU, so one W line says
    operators would fall back to the CPU; the model runs on the NPU as without the flag."""
    ctx = rk.rknn_context()
    flag = rk.RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU
    assert rk.rknn_init(ctx, default_model_bytes, len(default_model_bytes), flag, None) == 0
    (line,) = rknn_log.take("W")
    assert "EXECUTE_FALLBACK_PRIOR_DEVICE_GPU" in line and "fall back to the CPU" in line
    set_input(ctx, np.zeros((1, 64, 64, 3), np.uint8))
    assert rk.rknn_run(ctx, None) == 0
    assert rk.rknn_destroy(ctx) == 0
