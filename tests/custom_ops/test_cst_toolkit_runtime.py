"""The toolkit's simulator runs the registered class's compute for custom nodes (the vendor's
documented flow: reg_custom_op, load_onnx, build, init_runtime, inference), and the runtime
takes plain Python ops (rknn_custom_op_from_python, or toolkit2-style objects in a list)."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest
from cst_helpers import CstSigmoid, calibration, run, sigmoid
from cst_models import reference
from onnx import TensorProto, helper

import rknnrt as rk
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.custom_ops import get_node_attr


def _converted(onnx_model, ops, quantize: bool) -> RKNN:  # type: ignore[no-untyped-def]
    rknn = RKNN()
    assert rknn.config(target_platform="rk3588") == 0
    for op in ops:
        assert rknn.reg_custom_op(op) == 0, rknn.last_error
    assert rknn.load_onnx(onnx_model) == 0, rknn.last_error
    dataset = calibration() if quantize else None
    assert rknn.build(do_quantization=quantize, dataset=dataset) == 0, rknn.last_error
    return rknn


@pytest.mark.parametrize("quantize", [False, True], ids=["float", "int8"])
def test_init_runtime_and_inference_run_the_registered_compute(sigmoid_onnx, x, quantize):
    seen: list[tuple] = []

    class Spy(CstSigmoid):
        def compute(self, node, inputs):  # type: ignore[no-untyped-def]
            seen.append((inputs[0].dtype, inputs[0].shape, get_node_attr(node, "scale")))
            return super().compute(node, inputs)

    rknn = _converted(sigmoid_onnx, [Spy()], quantize)
    calibration_calls = len(seen)
    try:
        assert rknn.init_runtime() == 0, rknn.last_error
        y = rknn.inference(inputs=[x], data_format="nchw")
        assert y is not None, rknn.last_error
        expected = reference(sigmoid_onnx, x, sigmoid)
        tolerance = (0.1 if quantize else 5e-3) * np.abs(expected).max()  # int8 / float16 model
        np.testing.assert_allclose(y[0], expected, atol=tolerance)
        # The runtime called compute once, with the float32 NCHW tensor and the stored node.
        assert seen[calibration_calls:] == [(np.dtype(np.float32), (1, 4, 8, 8), 2.0)]
        report = rknn.eval_perf(is_print=False)  # the profiling context registers too
        assert report is not None and "cstSigmoid" in report
    finally:
        rknn.release()


def _dual_residual():  # type: ignore[no-untyped-def]
    """Two model inputs straight into a two-output custom op (the vendor's dual-residual shape)."""
    node = helper.make_node("cstDualResidual", ["a", "b"], ["p", "q"], name="dual",
                            domain="cst.ops", alpha=0.5)  # fmt: skip
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, 10, 10]) for n in "abpq"]
    graph = helper.make_graph([node], "dual", vi[:2], vi[2:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                   helper.make_opsetid("cst.ops", 1)])  # fmt: skip


class CstDualResidual:
    op_type = "cstDualResidual"

    def shape_infer(self, node, in_shapes, in_dtypes):  # type: ignore[no-untyped-def]
        return in_shapes.copy(), in_dtypes.copy()

    def compute(self, node, inputs):  # type: ignore[no-untyped-def]
        a, b = inputs
        alpha = get_node_attr(node, "alpha")
        return [a * alpha - b, b * alpha - a]


def test_a_custom_op_on_model_inputs_with_two_outputs():
    """The custom op reads the model's inputs directly: it gets them as float32 (a float16
    model stores its inputs as float16), and no empty NPU segment is left behind."""
    rng = np.random.default_rng(3)
    a, b = (rng.normal(size=(1, 3, 10, 10)).astype(np.float32) for _ in range(2))
    rknn = _converted(_dual_residual(), [CstDualResidual()], quantize=False)
    try:
        assert rknn.init_runtime() == 0, rknn.last_error
        p, q = rknn.inference(inputs=[a, b], data_format="nchw")
        np.testing.assert_allclose(p, a * 0.5 - b, atol=2e-3)
        np.testing.assert_allclose(q, b * 0.5 - a, atol=2e-3)
    finally:
        rknn.release()


def test_init_runtime_names_a_custom_op_that_was_not_registered(sigmoid_model, capfd, tmp_path):
    (tmp_path / "cst.rknn").write_bytes(sigmoid_model)
    rknn = RKNN()
    assert rknn.load_rknn(str(tmp_path / "cst.rknn")) == 0
    assert rknn.init_runtime() == -1
    assert "cstSigmoid" in rknn.last_error and "reg_custom_op" in rknn.last_error
    assert [line for line in capfd.readouterr().err.splitlines() if line.startswith("E ")] \
        == [f"E init_runtime: {rknn.last_error}"]  # fmt: skip
    assert rknn.reg_custom_op(CstSigmoid) == 0  # the docs pass the class itself
    assert rknn.init_runtime() == 0, rknn.last_error
    assert rknn.inference(inputs=[np.zeros((1, 8, 8, 3), np.float32)]) is not None
    rknn.release()


@pytest.mark.parametrize("how", ["byref", "array", "list"])
def test_a_python_op_registers_as_a_struct_an_array_or_an_object(
    sigmoid_onnx, sigmoid_model, new_ctx, x, how
):
    ctx = new_ctx(sigmoid_model)
    if how == "byref":
        struct = rk.rknn_custom_op_from_python(CstSigmoid())
        assert struct.op_type == b"cstSigmoid" and struct.target == rk.RKNN_TARGET_TYPE_CPU
        status = rk.rknn_register_custom_ops(ctx, ctypes.byref(struct), 1)
        del struct
    elif how == "array":
        status = rk.rknn_register_custom_ops(
            ctx, (rk.rknn_custom_op * 1)(rk.rknn_custom_op_from_python(CstSigmoid())), 1
        )
    else:
        status = rk.rknn_register_custom_ops(ctx, [CstSigmoid()], 1)
    assert status == 0
    gc.collect()  # the context keeps the callback alive: the caller dropped everything
    for _ in range(2):
        code, y = run(ctx, x)
        assert code == 0
        np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)


def test_a_python_op_with_a_wrong_result_fails_the_run_once(sigmoid_model, new_ctx, x, capfd):
    class Flaky(CstSigmoid):
        broken = True

        def compute(self, node, inputs):  # type: ignore[no-untyped-def]
            if self.broken:
                return [np.zeros(5, np.float32)]
            assert not inputs[0].flags.writeable  # the runtime's buffer, read-only
            return super().compute(node, inputs)

    op = Flaky()
    ctx = new_ctx(sigmoid_model)
    assert rk.rknn_register_custom_ops(ctx, [op], 1) == 0
    capfd.readouterr()
    assert run(ctx, x)[0] == rk.RKNN_ERR_FAIL
    errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("E ")]
    assert len(errors) == 1 and "ValueError" in errors[0] and "output 0" in errors[0]
    op.broken = False
    code, y = run(ctx, x)
    assert code == 0 and np.isfinite(y).all()


def test_rknn_custom_op_from_python_refuses_what_is_not_an_op():
    with pytest.raises(TypeError):
        rk.rknn_custom_op_from_python(object())
