"""The documented lifecycle (init at registration, prepare + compute per run, destroy at
rknn_destroy), attributes of every type, skip-compute fallback, GPU target, per context."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from cst_helpers import build, floats_at, make_op, read_attr, run, sigmoid, sigmoid_compute
from cst_models import conv_custom_conv, reference

import rknnrt as rk


def test_init_prepare_compute_destroy_in_order(sigmoid_model, x):
    calls: list[str] = []

    def init(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        calls.append("init")
        op_ctx.contents.priv_data = 1234  # the op's own, kept for it
        return 0

    def prepare(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        calls.append(f"prepare {op_ctx.contents.priv_data}")
        return 0

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        calls.append("compute")
        return sigmoid_compute(op_ctx, ins, n_in, outs, n_out)

    def destroy(op_ctx):  # type: ignore[no-untyped-def]
        calls.append(f"destroy {op_ctx.contents.priv_data}")
        return 0

    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), sigmoid_model, len(sigmoid_model), 0, None) == 0
    op, keep = make_op(init=init, prepare=prepare, compute=compute, destroy=destroy)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    assert calls == ["init"]
    run(ctx, x)
    run(ctx, x)
    assert rk.rknn_destroy(ctx) == 0
    assert calls == ["init", "prepare 1234", "compute", "prepare 1234", "compute", "destroy 1234"]


def test_tensors_are_float32_nchw_with_names_and_offsets(sigmoid_model, new_ctx, x):
    seen = {}

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        t, o = ins[0], outs[0]
        seen.update(
            n=(n_in, n_out),
            fmt=t.attr.fmt,
            type=o.attr.type,
            name=t.attr.name,
            dims=list(t.attr.dims[: t.attr.n_dims]),
            size=o.attr.size,
            target=op_ctx.contents.target,
            node=bytes(read_attr(op_ctx, b"name")),
        )
        return sigmoid_compute(op_ctx, ins, n_in, outs, n_out)

    ctx = new_ctx(sigmoid_model)
    op, keep = make_op(compute=compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    assert run(ctx, x)[0] == 0
    assert seen == {
        "n": (1, 1),
        "fmt": rk.RKNN_TENSOR_NCHW,
        "type": rk.RKNN_TENSOR_FLOAT32,
        "name": b"a",
        "dims": [1, 4, 8, 8],
        "size": 4 * 64 * 4,
        "target": rk.RKNN_TARGET_TYPE_CPU,
        "node": b"my_sigmoid",
    }


ATTRS = {
    "i64": np.int64(-7),
    "i64s": np.array([1, -2, 3], np.int64),
    "f32": np.float32(0.25),
    "f32s": np.array([1.5, -2.5], np.float32),
    "i32": np.array([9], np.int32),
    "i32s": np.array([4, 5, 6], np.int32),
    "flag": np.array([True], np.bool_),
    "flags": np.array([True, False, True], np.bool_),
    "text": "hello",
}


def test_attributes_of_every_type_round_trip(new_ctx, x):
    """Typed attributes in the ONNX model -> the rknnrt model -> rknn_custom_op_get_op_attr."""
    from rknnrt.model.custom_ops import make_attribute

    onnx_model = conv_custom_conv("cstEcho")
    node = onnx_model.graph.node[1]
    node.attribute.extend(make_attribute(k, v) for k, v in ATTRS.items())

    class CstEcho:
        op_type = "cstEcho"

        def shape_infer(self, node, shapes, dtypes):  # type: ignore[no-untyped-def]
            return shapes, dtypes

        def compute(self, node, inputs):  # type: ignore[no-untyped-def]
            return [inputs[0]]

    model = build(onnx_model, ops=[CstEcho()])
    got: dict[str, np.ndarray | None] = {}

    def init(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        for name in [*ATTRS, "missing"]:
            got[name] = read_attr(op_ctx, name.encode())
        attr = rk.rknn_custom_op_attr()
        rk.rknn_custom_op_get_op_attr(op_ctx, b"text", ctypes.byref(attr))
        got["text_type"] = attr.dtype
        return 0

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        floats_at(outs[0])[:] = floats_at(ins[0])
        return 0

    ctx = new_ctx(model)
    op, keep = make_op(b"cstEcho", init=init, compute=compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    for name, value in ATTRS.items():
        if name == "text":
            assert bytes(got[name]) == b"hello" and got["text_type"] == rk.RKNN_TENSOR_UINT8
            continue
        expected = np.atleast_1d(np.asarray(value))
        assert got[name].dtype == expected.dtype, name
        np.testing.assert_array_equal(got[name], expected)
    assert got["missing"] is None


def test_skip_compute_uses_the_builtin_implementation(new_ctx, x):
    """init returns RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE: rknnrt's own Sigmoid runs instead."""
    onnx_model = conv_custom_conv()  # no scale: the built-in Sigmoid is the same op
    model = build(onnx_model)
    computed = []
    op, keep = make_op(
        init=lambda *a: rk.RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE,
        compute=lambda *a: computed.append(1) or 0,
    )
    ctx = new_ctx(model)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    status, y = run(ctx, x)
    assert status == 0 and computed == []
    np.testing.assert_allclose(y, reference(onnx_model, x, lambda a: sigmoid(a, 1.0)), atol=1e-5)


def test_skip_compute_without_a_builtin_fails_registration(new_ctx, rknn_log):
    class CstNovel:
        op_type = "cstNovel"

        def shape_infer(self, node, shapes, dtypes):  # type: ignore[no-untyped-def]
            return shapes, dtypes

        def compute(self, node, inputs):  # type: ignore[no-untyped-def]
            return [inputs[0]]

    ctx = new_ctx(build(conv_custom_conv("cstNovel"), ops=[CstNovel()]))
    op, keep = make_op(b"cstNovel", init=lambda *a: -14, compute=lambda *a: 0)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_FAIL
    (line,) = rknn_log.take("E")
    assert "cstNovel" in line and "no built-in implementation" in line


def test_gpu_target_runs_on_the_cpu_with_one_warning(
    sigmoid_onnx, sigmoid_model, new_ctx, x, rknn_log
):
    ctx = new_ctx(sigmoid_model)
    op, keep = make_op(target=rk.RKNN_TARGET_TYPE_GPU, compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    (line,) = rknn_log.take("W")
    assert "no GPU" in line and "CPU" in line
    status, y = run(ctx, x)
    np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)


@pytest.mark.parametrize("dup", [False, True])
def test_registration_is_per_context(sigmoid_model, new_ctx, x, dup):
    a = new_ctx(sigmoid_model)
    b = rk.rknn_context()
    if dup:
        assert rk.rknn_dup_context(ctypes.byref(a), ctypes.byref(b)) == 0
    else:
        b = new_ctx(sigmoid_model)
    op, keep = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(a, ctypes.byref(op), 1) == 0
    assert run(a, x)[0] == 0
    assert run(b, x)[0] == rk.RKNN_ERR_FAIL  # b registered nothing
    if dup:
        assert rk.rknn_destroy(b) == 0


def test_python_callbacks_outlive_the_callers_objects(sigmoid_onnx, sigmoid_model, new_ctx, x):
    """The context keeps the ctypes callbacks of the structures it was given."""
    import gc

    ctx = new_ctx(sigmoid_model)
    op, keep = make_op(compute=lambda *args: sigmoid_compute(*args))
    assert rk.rknn_register_custom_ops(ctx, [op], 1) == 0
    del op, keep
    gc.collect()
    status, y = run(ctx, x)
    assert status == 0
    np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)
