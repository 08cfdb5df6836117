"""Custom operators from C: the bridge that calls C callbacks with real tensors, and the two
exported functions of rknn_custom_op.h (which fail cleanly until rknnrt implements custom
operators)."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.api.custom_op_api import custom_op_tensor as tensor_of
from rknnrt.capi.callbacks import CustomOpCallbacks

from .conftest import C_DIR


@pytest.fixture(scope="module")
def plugin(sdk, tmp_path_factory):
    """librkcst_add.so, linked against the SDK's librknnrt.so (loaded into this process)."""
    rt = ctypes.CDLL(str(sdk / "lib/librknnrt.so"), mode=ctypes.RTLD_GLOBAL)
    target = tmp_path_factory.mktemp("plugin") / "librkcst_add.so"
    done = subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-std=c99",
            "-Wall",
            "-Werror",
            "-I",
            str(sdk / "include"),
            str(C_DIR / "custom_op_plugin.c"),
            "-o",
            str(target),
            "-L",
            str(sdk / "lib"),
            "-lrknnrt",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lib = ctypes.CDLL(str(target))
    lib.get_rknn_custom_op.restype = ctypes.POINTER(rk.rknn_custom_op)
    return rt, lib


def test_c_callbacks_run_on_real_tensors(plugin, capfd):
    _, lib = plugin
    op = lib.get_rknn_custom_op()
    (callbacks,) = CustomOpCallbacks.from_address(ctypes.addressof(op.contents))
    assert (callbacks.op_type, callbacks.target) == ("cstAdd", rk.RKNN_TARGET_TYPE_CPU)
    assert callbacks.prepare is None and callbacks.compute_native is None
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    out = np.zeros_like(a)
    inputs, outputs = [tensor_of(a, "a"), tensor_of(b, "b")], [tensor_of(out, "out")]
    assert inputs[0].attr.fmt == rk.RKNN_TENSOR_NCHW and inputs[0].attr.n_elems == 60
    op_ctx = rk.rknn_custom_op_context()
    op_ctx.target = rk.RKNN_TARGET_TYPE_CPU
    assert callbacks.init(op_ctx, inputs, outputs) == 0
    assert op_ctx.priv_data  # the op's own state, kept in the context we passed
    for _ in range(2):
        assert callbacks.compute(op_ctx, inputs, outputs) == 0
    np.testing.assert_array_equal(out, a + b)  # written in place: no copies either way
    assert ctypes.c_int.from_address(op_ctx.priv_data).value == 2
    # the callback asked librknnrt.so for its "alpha" attribute: this op context has none
    err = capfd.readouterr().err
    assert "E RKNN:" not in err  # no such attribute outside a registered op: n_elems 0, no line
    wrong = [tensor_of(a, "a"), tensor_of(np.zeros((1, 3, 4, 5), np.int64), "b")]
    assert callbacks.compute(op_ctx, wrong, outputs) == -1  # the C status comes back
    assert callbacks.destroy(op_ctx) == 0 and not op_ctx.priv_data


def test_register_custom_ops_fails_cleanly_until_implemented(plugin, default_model_bytes, capfd):
    rt, lib = plugin
    model = default_model_bytes
    ctx = rk.rknn_context()
    assert rt.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
    op = lib.get_rknn_custom_op()
    rt.rknn_register_custom_ops.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint32]
    ret = rt.rknn_register_custom_ops(ctx.value, ctypes.addressof(op.contents), 1)
    errors = [e for e in capfd.readouterr().err.splitlines() if e.startswith("E RKNN:")]
    if hasattr(rk, "rknn_register_custom_ops"):  # forwarded once the Python API has it
        assert ret == rk.rknn_register_custom_ops(ctx.value, ctypes.addressof(op.contents), 1)
    else:
        assert ret == rk.RKNN_ERR_FAIL
        assert len(errors) == 1 and "custom operators are not implemented" in errors[0]
    assert rk.rknn_destroy(ctx) == 0  # the same interpreter: the Python API sees the context


def test_a_python_exception_never_returns_success(plugin, capfd):
    """Whatever goes wrong in Python behind a C call comes back as RKNN_ERR_FAIL / NULL with
    one E RKNN: line (the library is loaded in this process, so its bindings can be swapped)."""
    import _rknnrt_capi

    from rknnrt.capi import bridge
    from rknnrt.capi.signatures import functions

    rt, _ = plugin
    by_name = {f.name: f for f in functions()}

    def broken(*_args):
        raise ZeroDivisionError("deliberate")

    rt.rknn_create_mem.restype = ctypes.c_void_p
    try:
        for name in ("rknn_query", "rknn_create_mem"):
            bridge.bind_one(_rknnrt_capi.ffi, by_name[name], broken)
        info = rk.rknn_input_output_num()
        assert rt.rknn_query(ctypes.c_uint64(1), 0, ctypes.byref(info), 8) == rk.RKNN_ERR_FAIL
        assert rt.rknn_create_mem(ctypes.c_uint64(1), 64) is None  # NULL
    finally:
        bridge.bind(_rknnrt_capi.ffi, _rknnrt_capi.lib)
    errors = [e for e in capfd.readouterr().err.splitlines() if e.startswith("E RKNN:")]
    assert len(errors) == 2, errors
    assert "rknn_query: internal error: ZeroDivisionError: deliberate" in errors[0]
    assert "rknn_create_mem: internal error" in errors[1]
    assert rt.rknn_query(ctypes.c_uint64(1), 0, ctypes.byref(info), 8) == rk.RKNN_ERR_CTX_INVALID
