"""A registered custom op whose op_type is a built-in op of the model runs in place of it
(rknpu2's rknn_custom_gpu_op_demo: `rknn_register_custom_ops` with op_type "ArgMax" for
pp_human_segv2_custom_argmax.rknn, whose ArgMax is the runtime's own CPU op; the vendor's
guide: op_type is the type field of the ONNX model's node). Tested on rknnrt's own model and
on the vendor toolkit's ArgMax file (tests/vendor/fixtures_arch, built as the demo's is: the
toolkit's reg_custom_op(ArgMax) changes nothing in the file)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import onnx
from cst_helpers import build, make_op, read_attr
from test_cst_placement import _argmax_model

import rknnrt as rk
from rknnrt.model.vendor_rknn import fileformat

ARCH = Path(__file__).parents[1] / "vendor" / "fixtures_arch"


def _floats(t: rk.rknn_custom_op_tensor) -> np.ndarray:
    p = ctypes.cast(t.mem.virt_addr + t.mem.offset, ctypes.POINTER(ctypes.c_float))
    return np.ctypeslib.as_array(p, (t.attr.n_elems,)).reshape(list(t.attr.dims[: t.attr.n_dims]))


def _int64s(t: rk.rknn_custom_op_tensor) -> np.ndarray:
    p = ctypes.cast(t.mem.virt_addr + t.mem.offset, ctypes.POINTER(ctypes.c_int64))
    return np.ctypeslib.as_array(p, (t.attr.n_elems,)).reshape(list(t.attr.dims[: t.attr.n_dims]))


class Recorder:
    """An ArgMax (or, with `pick=np.argmin`, an ArgMin in its place) as C callbacks, keeping
    what the runtime handed it."""

    def __init__(self, pick=np.argmax) -> None:  # type: ignore[no-untyped-def]
        self.pick, self.calls, self.seen = pick, 0, {}

    def compute(self, op_ctx, ins, n_in, outs, n_out) -> int:  # type: ignore[no-untyped-def]
        axis = int(read_attr(op_ctx, b"axis")[0])
        self.seen = {"axis": axis, "in_type": ins[0].attr.type, "out_type": outs[0].attr.type,
                     "in_dims": list(ins[0].attr.dims[: ins[0].attr.n_dims]),
                     "name": bytes(read_attr(op_ctx, b"name")).decode()}  # fmt: skip
        _int64s(outs[0])[...] = np.expand_dims(self.pick(_floats(ins[0]), axis=axis), axis)
        self.calls += 1
        return 0

    def register(self, ctx: rk.rknn_context, op_type: bytes = b"ArgMax") -> tuple[int, list]:
        op, keep = make_op(op_type, compute=self.compute)
        return rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1), keep


def _run(ctx: rk.rknn_context, x: np.ndarray) -> np.ndarray:
    inp = rk.rknn_input(index=0, buf=x.ctypes.data, size=x.nbytes, type=rk.RKNN_TENSOR_FLOAT32,
                        fmt=rk.RKNN_TENSOR_NCHW)  # fmt: skip
    assert rk.rknn_inputs_set(ctx, 1, ctypes.byref(inp)) == 0
    assert rk.rknn_run(ctx, None) == 0
    out = rk.rknn_output(want_float=1)
    assert rk.rknn_outputs_get(ctx, 1, ctypes.byref(out), None) == 0
    y = np.ctypeslib.as_array(ctypes.cast(out.buf, ctypes.POINTER(ctypes.c_float)),
                              (out.size // 4,)).copy()  # fmt: skip
    assert rk.rknn_outputs_release(ctx, 1, ctypes.byref(out)) == 0
    return y


def test_a_registered_argmax_runs_in_place_of_the_built_in(new_ctx, rknn_log) -> None:
    onnx_model = _argmax_model()
    model = build(onnx_model, ops=())
    x = np.random.default_rng(7).normal(size=(1, 3, 8, 8)).astype(np.float32)
    w = onnx.numpy_helper.to_array(onnx_model.graph.initializer[0])[:, :, 0, 0]
    conv = np.einsum("oc,nchw->nohw", w, x)
    builtin = _run(new_ctx(model), x)
    np.testing.assert_array_equal(builtin, conv.argmax(1).ravel().astype(np.float32))
    # the replacement is what runs: an ArgMin registered as "ArgMax" gives ArgMin's indices
    ctx = new_ctx(model)
    argmin = Recorder(np.argmin)
    status, keep = argmin.register(ctx)
    assert status == 0
    y = _run(ctx, x)
    assert argmin.calls == 1
    np.testing.assert_array_equal(y, conv.argmin(1).ravel().astype(np.float32))
    assert not np.array_equal(y, builtin)
    # as the vendor documents compute: float32 NCHW in, the ONNX model's int64 out, the
    # node's attributes (INT64 axis) and name
    assert argmin.seen == {"axis": 1, "in_type": rk.RKNN_TENSOR_FLOAT32,
                           "out_type": rk.RKNN_TENSOR_INT64, "in_dims": [1, 5, 8, 8],
                           "name": "argmax"}  # fmt: skip
    _run(ctx, x)
    assert argmin.calls == 2
    assert rknn_log.take("E") == []


def test_a_failed_replacement_leaves_the_built_in(new_ctx, rknn_log) -> None:
    """Registering twice is refused (the first replacement stays); an op type no node has is
    still refused as before."""
    model = build(_argmax_model(), ops=())
    x = np.random.default_rng(8).normal(size=(1, 3, 8, 8)).astype(np.float32)
    ctx = new_ctx(model)
    builtin = _run(ctx, x)
    status, keep = Recorder().register(ctx, b"cstArgMax")
    assert status == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("no custom ops")
    np.testing.assert_array_equal(_run(ctx, x), builtin)
    # after a run the context is closed for registration, built-in type or not
    status, keep = Recorder().register(ctx)
    assert status == rk.RKNN_ERR_FAIL
    rknn_log.one_error("before rknn_run")
    np.testing.assert_array_equal(_run(ctx, x), builtin)
    fresh = new_ctx(model)
    first = Recorder(np.argmin)
    assert first.register(fresh)[0] == 0
    status, keep = Recorder().register(fresh)
    assert status == rk.RKNN_ERR_PARAM_INVALID
    rknn_log.one_error("already registered")
    assert not np.array_equal(_run(fresh, x), builtin) and first.calls == 1


def test_the_vendor_files_argmax_is_replaced_by_the_registered_op(new_ctx) -> None:
    """The vendor toolkit's int8 ArgMax head (conv, Resize, ArgMax) for rk3588: with a CPU
    ArgMax registered (the demo's flow, its OpenCL kernel's job done on the CPU), the output
    equals the simulator's built-in ArgMax on every sample."""
    model = (ARCH / "argmax_rk3588_i8.rknn").read_bytes()
    with np.load(ARCH / "argmax_rk3588_i8.npz", allow_pickle=False) as data:
        ref = {k: data[k] for k in data.files}
    ctx = new_ctx(model)
    op = Recorder()
    status, keep = op.register(ctx)
    assert status == 0
    for s in range(ref["in0"].shape[0]):
        y = _run(ctx, np.ascontiguousarray(ref["in0"][s], np.float32))
        np.testing.assert_array_equal(y, ref["out0"][s].ravel().astype(np.float32))
    assert op.calls == ref["in0"].shape[0]
    assert op.seen["in_dims"] == [1, 4, 16, 16] and op.seen["axis"] == 1
    # the "name" attribute is the file's node name
    vendor = fileformat.parse(memoryview(model))
    assert op.seen["name"] == next(n.name for n in vendor.nodes if n.op_type == "ArgMax") != ""


def test_a_duplicated_context_registers_its_own_replacement(new_ctx, rknn_log) -> None:
    model = build(_argmax_model(), ops=())
    x = np.random.default_rng(9).normal(size=(1, 3, 8, 8)).astype(np.float32)
    ctx = new_ctx(model)
    first = Recorder(np.argmin)
    assert first.register(ctx)[0] == 0
    want = _run(ctx, x)
    inp = rk.rknn_input(index=0, buf=x.ctypes.data, size=x.nbytes,
                        type=rk.RKNN_TENSOR_FLOAT32, fmt=rk.RKNN_TENSOR_NCHW)  # fmt: skip
    dups = [rk.rknn_context(), rk.rknn_context()]
    for dup in dups:
        assert rk.rknn_dup_context(ctypes.byref(ctx), ctypes.byref(dup)) == 0
    try:
        assert rk.rknn_inputs_set(dups[0], 1, ctypes.byref(inp)) == 0
        assert rk.rknn_run(dups[0], None) == rk.RKNN_ERR_FAIL  # its ArgMax is not registered
        rknn_log.one_error("ArgMax", "rknn_register_custom_ops")
        second = Recorder(np.argmin)
        assert second.register(dups[1])[0] == 0
        np.testing.assert_array_equal(_run(dups[1], x), want)
        assert (first.calls, second.calls) == (1, 1)
    finally:
        for dup in dups:
            assert rk.rknn_destroy(dup) == 0
