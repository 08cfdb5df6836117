"""int8 accuracy on the real-architecture set (tools/real_arch), and the LayerNorm fusion."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.passes.fuse_layernorm import fuse_split_layernorms
from tools.real_arch import catalog, dense

# int8 cosine vs onnxruntime float32 at the test size (4 uniform[0,1) calibration samples,
# seed 0, `normal`/`channel`, rk3588), measured 2026-12-01 in brackets; floors keep a margin
# for rounding ties that depend on the CPU's float kernels. The vendor's own int8 on the same
# graphs, calibration and input (data/real_arch_vendor.json, where recorded): rknnrt must be
# no worse than it minus 0.002 (issue 25).
VENDOR = json.loads((Path(__file__).parent / "data" / "real_arch_vendor.json").read_text())
FLOORS = {
    "mobilenetv2": 0.990,  # (0.99237; the vendor 0.99236)
    "mobilenetv3_small": 0.9990,  # (0.99984; the vendor 0.99985)
    "efficientnet_b0": 0.9990,  # (0.99986; the vendor 0.99985)
    "shufflenetv2": 0.9975,  # (0.99896; the vendor 0.99893)
    "resnet18": 0.9990,  # (0.99983)
    "regnetx_400mf": 0.9990,  # (0.99986)
    "squeezenet": 0.9990,  # (0.99988)
    "densenet121": 0.9985,  # (0.99969)
    "yolov5s": 0.9985,  # (0.99943)
    "yolov8n": 0.9990,  # (0.99986; the vendor 0.99986; class scores 0 on both sides)
    "yolo11n": 0.9990,  # (0.99986)
    "deeplabv3_mobilenetv2": 0.985,  # (0.98876)
    "deit_tiny": 0.990,  # (0.99380)
    "deit_tiny_split_ln": 0.990,  # (0.99380; the vendor 0.99235; 0.783 with the LayerNorm
    # pieces quantised one by one)
    "ocr_recogniser": 0.9999,  # (0.9999999)
}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FLOORS))
def test_int8_cosine_floor(name, tmp_path) -> None:
    model = catalog.build(name, test=True)
    shape = catalog.input_shape(name, test=True)
    rng = np.random.RandomState(0)
    calib = [[rng.rand(*shape).astype(np.float32)] for _ in range(4)]
    x = rng.rand(*shape).astype(np.float32)
    reference = ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    ).run(None, {"images": x})
    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=True, dataset=calib) == 0
    path = str(tmp_path / "m.rknn")
    assert rknn.export_rknn(path) == 0
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        outputs = runtime.inference([x], data_format="nchw")
    finally:
        runtime.release()
    for got, want in zip(outputs, reference):
        assert np.std(want) > 0
        assert _cosine(got, want) >= FLOORS[name]
        if name in VENDOR["int8_cosine"]:
            assert _cosine(got, want) >= VENDOR["int8_cosine"][name] - 0.002


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_split_layernorms_become_one_op() -> None:
    model = dense.deit_tiny(32, depth=2, split_layernorm=True)
    fused = fuse_split_layernorms(model)
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("LayerNormalization") == 5 and "ReduceMean" not in ops and "Sqrt" not in ops
    assert max(o.version for o in fused.opset_import if o.domain in ("", "ai.onnx")) == 17
    x = np.random.RandomState(2).rand(1, 3, 32, 32).astype(np.float32)
    np.testing.assert_allclose(_run(fused, x), _run(model, x), rtol=1e-5, atol=1e-5)


def _ln_pieces(square: str, shared: bool = False) -> onnx.ModelProto:
    """x -> split LayerNorm (the square as Pow or Mul, no beta) -> y; `shared`: the centred
    values are also a graph output (read by something else: not fusable)."""

    def const(name: str, value) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
             helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["q"]) if square == "pow" else
             helper.make_node("Mul", ["d", "d"], ["q"]),
             helper.make_node("ReduceMean", ["q"], ["v"], axes=[-1]),
             helper.make_node("Add", ["v", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]),
             helper.make_node("Mul", ["n", "g"], ["y"])]  # fmt: skip
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 8])]
    if shared:
        outputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, [2, 5, 8]))
    graph = helper.make_graph(
        nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8])], outputs,
        [const("two", 2.0), const("eps", 1e-5),
         const("g", np.linspace(0.5, 1.5, 8))])  # fmt: skip
    return onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))  # fmt: skip


@pytest.mark.parametrize("square", ["pow", "mul"])
def test_layernorm_forms(square) -> None:
    model = _ln_pieces(square)
    fused = fuse_split_layernorms(model)
    assert [n.op_type for n in fused.graph.node] == ["LayerNormalization"]
    x = np.random.RandomState(3).randn(2, 5, 8).astype(np.float32) * 3 + 1
    np.testing.assert_allclose(_run(fused, x), _run(model, x), rtol=1e-5, atol=1e-5)
    shared = _ln_pieces(square, shared=True)
    assert fuse_split_layernorms(shared) is shared  # its centred values are read elsewhere


def test_gelu_pieces_are_one_stored_activation() -> None:
    """x -> Div(sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5): only x and the result are
    stored (int8), as for one GELU op; a Div whose Erf chain does not close on x stays."""
    from rknnrt.toolkit.quantize import stored_tensors

    def const(name: str, value: float) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(value, np.float32), name)

    def graph(closing_input: str) -> onnx.GraphProto:
        nodes = [
            helper.make_node("Relu", ["inp"], ["x"]),
            helper.make_node("Div", ["x", "r2"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"]),
            helper.make_node("Mul", [closing_input, "a"], ["m"]),
            helper.make_node("Mul", ["m", "half"], ["y"]),
        ]
        info = helper.make_tensor_value_info
        return helper.make_graph(
            nodes, "gelu", [info("inp", TensorProto.FLOAT, [1, 4])],
            [info("y", TensorProto.FLOAT, [1, 4])],
            [const("r2", 2**0.5), const("one", 1.0), const("half", 0.5)],
        )  # fmt: skip

    assert stored_tensors(graph("x")) == ["inp", "x", "y"]
    assert stored_tensors(graph("inp")) == ["inp", "x", "d", "e", "a", "m", "y"]
