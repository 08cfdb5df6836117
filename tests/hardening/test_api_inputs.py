"""Issue 27 items 8-9 and the bytes path: RKNNLite refuses an input whose size differs from the
model's (rknn_inputs_set keeps the board's behaviour), inference(inputs=None) is an E line and
None, and rknn_init takes a bytes path (a common ctypes idiom) like a str one."""

from __future__ import annotations

import ctypes

import numpy as np

import rknnrt as rk
from rknnrt.lite import RKNNLite


def _lite(blob: bytes) -> RKNNLite:
    lite = RKNNLite()
    assert lite.load_rknn(blob) == 0 and lite.init_runtime() == 0
    return lite


def _errors(capfd) -> list[str]:
    return [line for line in capfd.readouterr().err.splitlines() if line.startswith("E RKNN")]


def test_lite_refuses_an_input_of_the_wrong_size(three_models, capfd) -> None:
    lite = _lite(three_models["float32"])
    try:
        x = np.random.RandomState(0).rand(1, 64, 64, 3).astype(np.float32)
        good = lite.inference([x])
        assert good is not None
        capfd.readouterr()
        big = np.resize(x, (4, 64, 64, 12))  # 16x the values, its first ones those of x
        assert lite.inference([big]) is None
        errors = _errors(capfd)
        assert len(errors) == 1 and "196608 values" in errors[0] and "12288" in errors[0]
        assert lite.inference([x[:, :32]]) is None  # too few
        assert len(_errors(capfd)) == 1
        np.testing.assert_array_equal(lite.inference([x])[0], good[0])
    finally:
        lite.release()


def test_lite_inference_without_inputs(three_models, capfd) -> None:
    lite = _lite(three_models["float16"])
    try:
        capfd.readouterr()
        assert lite.inference(inputs=None) is None
        errors = _errors(capfd)
        assert len(errors) == 1 and "inputs is None" in errors[0]
    finally:
        lite.release()


def test_rknn_inputs_set_with_a_larger_size_keeps_the_board_behaviour(three_models) -> None:
    """The C API takes a buffer larger than the tensor (the board reads what it needs)."""
    blob = three_models["float32"]
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == 0
    try:
        x = np.zeros((2, 64, 64, 3), np.float32)
        inputs = (rk.rknn_input * 1)()
        inputs[0].buf, inputs[0].size, inputs[0].fmt = x.ctypes.data, x.nbytes, rk.RKNN_TENSOR_NHWC
        inputs[0].type = rk.RKNN_TENSOR_FLOAT32
        assert rk.rknn_inputs_set(ctx, 1, inputs) == 0 and rk.rknn_run(ctx, None) == 0
    finally:
        rk.rknn_destroy(ctx)


def test_rknn_init_takes_a_bytes_path(three_models, tmp_path) -> None:
    path = tmp_path / "model.rknn"
    path.write_bytes(three_models["int8"])
    for model in (str(path).encode(), str(path).encode() + b"\0junk",
                  ctypes.c_char_p(str(path).encode())):  # fmt: skip
        ctx = rk.rknn_context()
        assert rk.rknn_init(ctypes.byref(ctx), model, 0, 0, None) == rk.RKNN_SUCC
        assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), b"", 0, 0, None) == rk.RKNN_ERR_PARAM_INVALID
    assert rk.rknn_init(ctypes.byref(ctx), b"/nonexistent.rknn", 0, 0, None) == rk.RKNN_ERR_FAIL
