"""Helpers shared by the test groups (tests/conftest.py exposes them as fixtures too): query an
attribute, set an input, the set-run-get sequence, count open descriptors, one log line."""

from __future__ import annotations

import ctypes
import os

import numpy as np

import rknnrt as rk


def query_attr(ctx, cmd: int, index: int = 0) -> rk.rknn_tensor_attr:
    """rknn_query of a tensor attribute (asserts success)."""
    a = rk.rknn_tensor_attr(index=index)
    assert rk.rknn_query(ctx, cmd, ctypes.byref(a), ctypes.sizeof(a)) == 0
    return a


def set_input(ctx, data: np.ndarray, type_: int = rk.RKNN_TENSOR_UINT8,
              fmt: int = rk.RKNN_TENSOR_NHWC, index: int = 0) -> None:  # fmt: skip
    """rknn_inputs_set of one input (uint8 NHWC by default: an image)."""
    inp = rk.rknn_input(index=index, buf=data.ctypes.data, size=data.nbytes, type=type_,
                        fmt=fmt)  # fmt: skip
    assert rk.rknn_inputs_set(ctx, 1, inp) == rk.RKNN_SUCC


def get_output(ctx, want_float: int = 1, dtype=np.float32) -> tuple[np.ndarray, int]:
    """(output 0 as a copy, frame id) through rknn_outputs_get; the buffer is released."""
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = want_float
    ext = rk.rknn_output_extend()
    assert rk.rknn_outputs_get(ctx, 1, outs, ext) == rk.RKNN_SUCC
    data = np.frombuffer(ctypes.string_at(outs[0].buf, outs[0].size), dtype).copy()
    assert rk.rknn_outputs_release(ctx, 1, outs) == rk.RKNN_SUCC
    return data, int(ext.frame_id)


def set_run_get(ctx, data: np.ndarray, type_: int = rk.RKNN_TENSOR_UINT8,
                fmt: int = rk.RKNN_TENSOR_NHWC) -> np.ndarray:  # fmt: skip
    """The general API's whole sequence for a one-input model: float32 output 0."""
    set_input(ctx, data, type_, fmt)
    assert rk.rknn_run(ctx, None) == rk.RKNN_SUCC
    return get_output(ctx)[0]


def open_fds() -> int:
    """Descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))
