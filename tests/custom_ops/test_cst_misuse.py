"""Misuse gives the vendor's status code and exactly one `E RKNN:` line, and the context stays
usable (or fails cleanly); the converter names an unregistered op and its node."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import pytest
from cst_helpers import CstSigmoid, build, make_op, run, sigmoid, sigmoid_compute
from cst_models import conv_custom_conv, reference

import rknnrt as rk
from rknnrt.model import container
from rknnrt.toolkit import RKNN


def _registered(model: bytes, new_ctx, **callbacks):  # type: ignore[no-untyped-def]
    ctx = new_ctx(model)
    op, keep = make_op(**callbacks)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    return ctx, keep


def test_registering_twice_is_refused(sigmoid_model, new_ctx, x, rknn_log):
    ctx, keep = _registered(sigmoid_model, new_ctx, compute=sigmoid_compute)
    op, keep2 = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_PARAM_INVALID
    (line,) = rknn_log.take("E")
    assert "already registered" in line
    assert run(ctx, x)[0] == 0  # the first registration still holds


@pytest.mark.parametrize("op_type", [b"cstMissing", b"Sigmoid"])
def test_an_op_the_model_lacks_is_refused(sigmoid_model, new_ctx, rknn_log, op_type):
    ctx = new_ctx(sigmoid_model)
    op, keep = make_op(op_type, compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_PARAM_INVALID
    (line,) = rknn_log.take("E")
    assert op_type.decode() in line and "cstSigmoid" in line
    good, keep = make_op(compute=sigmoid_compute)  # the context is still open for registration
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(good), 1) == 0


def test_a_model_without_custom_ops_refuses_registration(default_model_bytes, new_ctx, rknn_log):
    ctx = new_ctx(default_model_bytes)
    op, keep = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_PARAM_INVALID
    assert len(rknn_log.take("E")) == 1


def test_compute_native_or_no_compute_is_refused(sigmoid_model, new_ctx, rknn_log):
    ctx = new_ctx(sigmoid_model)
    for callbacks in ({"compute": sigmoid_compute, "compute_native": sigmoid_compute}, {}):
        op, keep = make_op(**callbacks)
        assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_PARAM_INVALID
        (line,) = rknn_log.take("E")
        assert "compute_native must be NULL" in line


def test_run_before_registration_fails_and_closes_registration(sigmoid_model, new_ctx, x, rknn_log):
    ctx = new_ctx(sigmoid_model)
    assert run(ctx, x)[0] == rk.RKNN_ERR_FAIL
    (line,) = rknn_log.take("E")
    assert "not registered" in line and "rknn_register_custom_ops" in line
    op, keep = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_FAIL
    assert "before rknn_run" in rknn_log.take("E")[0]


@pytest.mark.parametrize("fault", ["raises", "returns -5", "init fails"])
def test_a_failing_callback_fails_the_call_and_the_context_recovers(
    sigmoid_onnx, sigmoid_model, new_ctx, x, rknn_log, fault
):
    broken = [True]

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        if broken[0] and fault == "raises":
            raise ZeroDivisionError("boom")
        if broken[0] and fault == "returns -5":
            return -5
        return sigmoid_compute(op_ctx, ins, n_in, outs, n_out)

    def init(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        return -3 if broken[0] and fault == "init fails" else 0

    ctx = new_ctx(sigmoid_model)
    op, keep = make_op(init=init, compute=compute)
    if fault == "init fails":
        assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_FAIL
        (line,) = rknn_log.take("E")
        assert "init returned -3" in line
        broken[0] = False
        assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    else:
        assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
        assert run(ctx, x)[0] == rk.RKNN_ERR_FAIL
        lines = rknn_log.take("E")
        expected = "ZeroDivisionError: boom" if fault == "raises" else "returned -5"
        (line,) = lines  # one line: the node and what the callback did
        assert expected in line and "my_sigmoid" in line
        broken[0] = False
    status, y = run(ctx, x)
    assert status == 0
    np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)


def test_a_write_past_the_output_is_caught(sigmoid_onnx, sigmoid_model, new_ctx, x, rknn_log):
    overrun = [True]

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        status = sigmoid_compute(op_ctx, ins, n_in, outs, n_out)
        if overrun[0]:
            o = outs[0]
            ctypes.memset(o.mem.virt_addr + o.attr.size, 0, 16)  # 16 bytes too far
        return status

    ctx, keep = _registered(sigmoid_model, new_ctx, compute=compute)
    assert run(ctx, x)[0] == rk.RKNN_ERR_FAIL
    (line,) = rknn_log.take("E")
    assert "wrote past the end of output 'b'" in line
    overrun[0] = False
    status, y = run(ctx, x)
    assert status == 0
    np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)


def test_null_arguments_and_bad_counts(sigmoid_model, new_ctx, rknn_log):
    ctx = new_ctx(sigmoid_model)
    assert rk.rknn_register_custom_ops(ctx, None, 1) == rk.RKNN_ERR_PARAM_INVALID
    op, keep = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 0) == rk.RKNN_ERR_PARAM_INVALID
    assert rk.rknn_register_custom_ops(0, ctypes.byref(op), 1) == rk.RKNN_ERR_CTX_INVALID
    assert len(rknn_log.take("E")) == 3
    attr = rk.rknn_custom_op_attr()
    rk.rknn_custom_op_get_op_attr(None, b"scale", ctypes.byref(attr))  # ignored, as in C
    assert attr.n_elems == 0


def test_the_converter_names_an_unregistered_op_and_its_node():
    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    assert rknn.load_onnx(conv_custom_conv()) == 0
    assert rknn.build(do_quantization=False) == -1
    assert "cstSigmoid" in rknn.last_error and "my_sigmoid" in rknn.last_error


def test_reg_custom_op_refuses_a_standard_op_type_or_a_class_without_compute():
    class Standard(CstSigmoid):
        op_type = "Sigmoid"

    class NoCompute:
        op_type = "cstX"

        def shape_infer(self, node, shapes, dtypes):  # type: ignore[no-untyped-def]
            return shapes, dtypes

    rknn = RKNN()
    assert rknn.reg_custom_op(Standard()) == -1 and "standard ONNX op" in rknn.last_error
    assert rknn.reg_custom_op(NoCompute()) == -1 and "compute" in rknn.last_error


def test_a_compute_that_breaks_during_calibration_is_named():
    class Broken(CstSigmoid):
        def compute(self, node, inputs):  # type: ignore[no-untyped-def]
            return [inputs[0][:, :2]]  # not the shape shape_infer promised

    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    assert rknn.reg_custom_op(Broken()) == 0
    assert rknn.load_onnx(conv_custom_conv(scale=2.0)) == 0
    samples = [np.zeros((1, 3, 8, 8), np.float32)]
    assert rknn.build(do_quantization=True, dataset=samples) == -1
    assert "cstSigmoid at node 'my_sigmoid': compute failed during calibration" in rknn.last_error


def test_a_failed_registration_destroys_the_ops_it_initialised(new_ctx, rknn_log):
    """Two custom nodes; the second one's init fails: the first one's destroy pairs its init."""
    onnx_model = conv_custom_conv(scale=2.0)
    graph = onnx_model.graph
    first = graph.node[1]
    second = onnx.helper.make_node(first.op_type, ["b"], ["b2"], name="my_sigmoid_2",
                                   domain=first.domain, scale=2.0)  # fmt: skip
    graph.node.insert(2, second)
    graph.node[3].input[0] = "b2"
    ctx = new_ctx(build(onnx_model))
    calls: list[str] = []

    def init(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        calls.append("init")
        return -3 if len(calls) == 2 else 0

    def destroy(op_ctx):  # type: ignore[no-untyped-def]
        calls.append("destroy")
        return 0

    op, keep = make_op(init=init, compute=sigmoid_compute, destroy=destroy)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == rk.RKNN_ERR_FAIL
    assert "my_sigmoid_2" in rknn_log.take("E")[0]
    assert calls == ["init", "init", "destroy"]  # nothing the first init allocated leaks


def test_a_segmented_model_keeps_the_weights_rule(tmp_path, monkeypatch, rknn_log):
    """A graph constant in '@weights' that the metadata does not list is refused for a model
    with custom ops too: onnxruntime would otherwise read a file named '@weights' from the
    working directory (issue 11 item 1)."""
    model = build(conv_custom_conv(scale=2.0))
    sections = container.read(memoryview(model))
    proto = onnx.load_model_from_string(bytes(sections.graph))
    tensor = next(t for t in proto.graph.initializer if t.external_data)
    old, tensor.name = tensor.name, "stranger"
    for node in proto.graph.node:
        node.input[:] = ["stranger" if i == old else i for i in node.input]
    blob = container.write(bytes(sections.metadata), proto.SerializeToString(),
                           bytes(sections.weights))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "@weights").write_bytes(bytes(sections.weights))  # what a stranger would plant
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == rk.RKNN_ERR_MODEL_INVALID
    (line,) = rknn_log.take("E")
    assert "not a weight of the metadata" in line
