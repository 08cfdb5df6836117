"""The converter's float path: options, errors that name the fix, and what it records."""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rknnrt as rk
from rknnrt.model import container
from rknnrt.model.meta import ModelMeta
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.samples import default_model


def _meta(blob: bytes) -> ModelMeta:
    sections = container.read(memoryview(blob))
    return ModelMeta.from_json(sections.metadata, len(sections.weights))


def _build(model: onnx.ModelProto, **config: object) -> tuple[RKNN, int]:
    config.setdefault("float_dtype", "float32")
    rknn = RKNN()
    assert rknn.config(**config) == 0, rknn.last_error
    assert rknn.load_onnx(model) == 0, rknn.last_error
    return rknn, rknn.build(do_quantization=False)


def _two_io_model() -> onnx.ModelProto:
    """x[?,4] -> Relu -> Identity -> a ; x + y -> Dropout -> b (dynamic batch)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Identity", ["r"], ["a"], name="id"),
        helper.make_node("Add", ["x", "y"], ["s"], name="add"),
        helper.make_node("Dropout", ["s"], ["b"], name="drop"),
    ]
    graph = helper.make_graph(
        nodes, "two",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_unsupported_op_names_op_and_node(capsys: pytest.CaptureFixture[str]) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="ok"),
         helper.make_node("Hardmax", ["r"], ["y"], name="my_hardmax")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )  # fmt: skip
    rknn, ret = _build(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert ret == -1
    assert "unsupported operator Hardmax at node 'my_hardmax'" in rknn.last_error
    assert "E build: unsupported operator Hardmax" in capsys.readouterr().err


def test_dynamic_input_needs_a_size() -> None:
    rknn = RKNN()
    assert rknn.load_onnx(_two_io_model()) == -1
    assert "input 'x' has a dynamic or unknown shape" in rknn.last_error
    # both ways out are named, as the vendor's message names them
    assert "input_size_list=" in rknn.last_error and "config(dynamic_input=" in rknn.last_error
    assert rknn.load_onnx(_two_io_model(), inputs=["x", "y"], input_size_list=[[1, 4]]) == -1
    assert "1 shapes for 2 inputs" in rknn.last_error


def test_two_inputs_two_outputs_identity_and_dropout_removed() -> None:
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    assert rknn.load_onnx(_two_io_model(), inputs=["x", "y"],
                          input_size_list=[[1, 4], [1, 4]]) == 0  # fmt: skip
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    blob = rknn.model_bytes()
    meta = _meta(blob)
    assert [(t.name, t.shape, t.layout) for t in meta.inputs] == [
        ("x", [1, 4], "UNDEFINED"), ("y", [1, 4], "UNDEFINED")]  # fmt: skip
    assert [(t.name, t.shape) for t in meta.outputs] == [("a", [1, 4]), ("b", [1, 4])]
    graph = onnx.load_model_from_string(bytes(container.read(memoryview(blob)).graph))
    assert [n.op_type for n in graph.graph.node] == ["Relu", "Add"]


def test_outputs_cut_the_graph() -> None:
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    assert rknn.load_onnx(default_model(), outputs=["res2"]) == 0
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    meta = _meta(rknn.model_bytes())
    assert [(t.name, t.shape) for t in meta.outputs] == [("res2", [1, 16, 32, 32])]
    assert RKNN().load_onnx(default_model(), outputs=["nope"]) == -1


@pytest.mark.parametrize(
    ("config", "pattern"),
    [
        ({"target_platform": "rk9999"}, "target_platform 'rk9999' is not one of"),
        ({"float_dtype": "bfloat16"}, "float_dtype 'bfloat16' is not supported"),
        ({"quantized_dtype": "w4a16"}, "The quantized_dtype = 'w4a16' not support in 'rk3588'"),
        ({"quantized_dtype": "w8a9"}, "Invalid quantized_dtype 'w8a9'"),
        ({"quantized_algorithm": "kl"}, "quantized_algorithm 'kl' is not supported"),
        ({"std_values": [[1, 0, 1]]}, "std_values contains 0"),
    ],
)
def test_config_errors(config: dict, pattern: str) -> None:
    rknn = RKNN()
    assert rknn.config(**config) == -1
    assert pytest.importorskip("re").search(pattern, rknn.last_error)


@pytest.mark.parametrize(
    ("config", "pattern"),
    [
        ({"mean_values": [[0, 0]]}, "mean_values\\[0\\] has 2 values"),
        ({"target_platform": "rv1106"}, "rv1106 runs only quantised models"),
    ],
)
def test_build_errors(config: dict, pattern: str) -> None:
    rknn, ret = _build(default_model(), **config)
    assert ret == -1
    assert pytest.importorskip("re").search(pattern, rknn.last_error)


def test_metadata_records_what_a_board_reports(tmp_path) -> None:
    rknn, ret = _build(default_model(), target_platform="RK3588S", custom_string="RGB",
                       mean_values=[[1, 2, 3]], std_values=[[4, 5, 6]])  # fmt: skip
    assert ret == 0
    path = tmp_path / "m.rknnrt"
    assert rknn.export_rknn(path) == 0
    blob = path.read_bytes()
    assert blob == rknn.model_bytes()
    meta = _meta(blob)
    assert meta.target_platform == "rk3588" and meta.custom_string == "RGB"
    assert meta.inputs[0].mean == [1, 2, 3] and meta.inputs[0].std == [4, 5, 6]
    assert meta.float_dtype == "float32" and meta.framework == "onnx"
    # BatchNormalization folded into the convs: 5 convs + fc, weights and biases.
    assert len(meta.weights) == 12
    graph = onnx.load_model_from_string(bytes(container.read(memoryview(blob)).graph))
    assert "BatchNormalization" not in {n.op_type for n in graph.graph.node}
    assert all(t.data_location == TensorProto.EXTERNAL for t in graph.graph.initializer)


def test_memory_plan_of_the_default_model() -> None:
    """Pinned sizes (TFLM-style): a change in the planner or the passes shows here."""
    rknn, ret = _build(default_model())
    assert ret == 0
    plan = _meta(rknn.model_bytes()).memory
    # fp32 weights: conv1 16*3*9+16, dw2 16*9+16, pw2 16*16+16, branch_a 16*16+16,
    # branch_b 16*16*9+16, fc 10*32+10 = 3852 floats, each tensor 64-byte aligned.
    assert plan.weight_size == 15232
    sizes = {t.name: t.size for t in plan.tensors}
    assert sizes["conv1.relu"] == 16 * 32 * 32 * 4 and sizes["pool2"] == 16 * 16 * 16 * 4
    naive = sum(sizes.values())
    assert plan.internal_size < naive
    # conv1.relu and dw2.relu/pw2 are live together around the residual add: 3 x 64 KiB.
    assert plan.internal_size == 3 * 16 * 32 * 32 * 4
    by_name = {t.name: t for t in plan.tensors}
    a, b = by_name["conv1.relu"], by_name["pw2"]
    assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset


def test_weights_are_real_and_used() -> None:
    """Changing a weight in the file changes the result: the runtime reads the weights section."""
    rknn, _ = _build(default_model())
    blob = bytearray(rknn.model_bytes())
    sections = container.read(memoryview(bytes(blob)))
    meta = _meta(bytes(blob))
    fc_b = next(w for w in meta.weights if w.name == "fc.b")
    weights_off = len(blob) - len(sections.weights)
    x = np.random.RandomState(1).rand(1, 64, 64, 3).astype(np.float32)

    def run(model: bytes) -> np.ndarray:
        ctx = rk.rknn_context()
        assert rk.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
        inputs = (rk.rknn_input * 1)()
        inputs[0].buf, inputs[0].size, inputs[0].fmt = x.ctypes.data, x.nbytes, rk.RKNN_TENSOR_NHWC
        assert rk.rknn_inputs_set(ctx, 1, inputs) == 0 and rk.rknn_run(ctx, None) == 0
        outputs = (rk.rknn_output * 1)()
        outputs[0].want_float = 1
        assert rk.rknn_outputs_get(ctx, 1, outputs, None) == 0
        y = np.frombuffer((ctypes.c_char * 40).from_address(outputs[0].buf), np.float32).copy()
        rk.rknn_destroy(ctx)
        return y

    before = run(bytes(blob))
    bias = np.frombuffer(blob, np.float32, 10, weights_off + fc_b.offset).copy()
    bias[3] += 5.0
    blob[weights_off + fc_b.offset : weights_off + fc_b.offset + 40] = bias.tobytes()
    # a deliberate edit: the weights CRC-32 in the header must be written again
    after = run(container.write(sections.metadata, sections.graph, blob[weights_off:]))
    assert np.argmax(after) == 3 and not np.allclose(before, after)
    reference = ort.InferenceSession(default_model().SerializeToString())
    expected = reference.run(None, {"images": x.transpose(0, 3, 1, 2).copy()})[0][0]
    np.testing.assert_allclose(before, expected, rtol=1e-4, atol=1e-6)
    assert numpy_helper  # keep the import used for readers extending these tests


def test_unexpected_errors_still_return_minus_one(monkeypatch, capsys) -> None:
    from rknnrt.toolkit import lower

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(lower, "lower", broken)
    rknn = RKNN()
    assert rknn.load_onnx(default_model()) == 0
    assert rknn.build(do_quantization=False) == -1
    assert rknn.last_error == "internal error: ZeroDivisionError: boom"
    assert "E build: internal error: ZeroDivisionError: boom" in capsys.readouterr().err
