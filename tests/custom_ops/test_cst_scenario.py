"""The vendor's documented custom-op scenario (facts §5.12): a Sigmoid-like cstSigmoid with an
attribute, converted with RKNN.reg_custom_op and registered with rknn_register_custom_ops;
results against a numpy reference, in float32, float16 and int8 models."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import pytest
from cst_helpers import build, make_op, run, sigmoid, sigmoid_compute
from cst_models import reference

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.model import container
from rknnrt.model.custom_ops import CUSTOM_DOMAIN


def test_float32_model_equals_numpy_reference(sigmoid_onnx, sigmoid_model, new_ctx, x):
    ctx = new_ctx(sigmoid_model)
    op, keep = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    for _ in range(2):  # compute runs at every rknn_run
        status, y = run(ctx, x)
        assert status == 0
        np.testing.assert_allclose(y, reference(sigmoid_onnx, x, sigmoid), atol=1e-5)


def test_the_model_stores_a_custom_node_with_its_attribute(sigmoid_model):
    graph = onnx.load_model_from_string(
        bytes(container.read(memoryview(sigmoid_model)).graph)
    ).graph
    (node,) = [n for n in graph.node if n.domain == CUSTOM_DOMAIN]
    assert (node.op_type, node.name) == ("cstSigmoid", "my_sigmoid")
    assert [(a.name, a.f) for a in node.attribute] == [("scale", 2.0)]


def test_an_array_of_ops_registers_by_list_and_by_ctypes_array(sigmoid_model, new_ctx, x):
    a, b = new_ctx(sigmoid_model), new_ctx(sigmoid_model)
    op, keep = make_op(compute=sigmoid_compute)
    assert rk.rknn_register_custom_ops(a, [op], 1) == 0
    assert rk.rknn_register_custom_ops(b, (rk.rknn_custom_op * 1)(op), 1) == 0
    np.testing.assert_array_equal(run(a, x)[1], run(b, x)[1])


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_npu_segments_on_both_sides_keep_their_storage_type(sigmoid_onnx, new_ctx, x, dtype):
    """Conv (NPU) -> cstSigmoid (CPU) -> Conv (NPU): the tensors crossing to and from the CPU
    op are stored as the NPU stores them (int8 / float16), the op itself sees float32."""
    model = build(sigmoid_onnx, dtype="float16", quantize=dtype == "int8")
    graph = onnx.load_model_from_string(bytes(container.read(memoryview(model)).graph)).graph
    (node,) = [n for n in graph.node if n.domain == CUSTOM_DOMAIN]
    producer = {o: n for n in graph.node for o in n.output}
    consumer = {i: n for n in graph.node for i in n.input}
    to_float = {"int8": "DequantizeLinear", "float16": "Cast"}[dtype]
    from_float = {"int8": "QuantizeLinear", "float16": "Cast"}[dtype]
    assert producer[node.input[0]].op_type == to_float
    assert consumer[node.output[0]].op_type == from_float
    seen: list[int] = []

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        seen.append(ins[0].attr.type)
        return sigmoid_compute(op_ctx, ins, n_in, outs, n_out)

    ctx = new_ctx(model)
    op, keep = make_op(compute=compute)
    assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
    status, y = run(ctx, x)
    assert status == 0 and seen == [rk.RKNN_TENSOR_FLOAT32]
    program = registry.get(ctx.value).weights.program  # what crosses between NPU and CPU is stored
    (cpu,) = [s for s in program.steps if s.device == "CPU"]
    stored = {"int8": onnx.TensorProto.INT8, "float16": onnx.TensorProto.FLOAT16}[dtype]
    assert {program.types[n] for n in cpu.inputs + cpu.outputs} == {stored}
    expected = reference(sigmoid_onnx, x, sigmoid)
    tolerance = {"float16": 5e-3, "int8": 0.1}[dtype] * np.abs(expected).max()
    np.testing.assert_allclose(y, expected, atol=tolerance)
