"""The vendor's int8 rules, one by one (docs/quantization.md gives each rule's measurement)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from rknnrt.sessions import factory, policies
from rknnrt.toolkit.passes import split_concat_conv
from rknnrt.toolkit.quantize import quantize_model, stored_tensors
from rknnrt.toolkit.quantize.rules import calibration_bounds, quantize_weight, weight_qparams

QUIET = {"progress": lambda d, t: None}


def test_weights_are_asymmetric_per_channel() -> None:
    w = np.zeros((2, 1, 1, 3))
    w[0, 0, 0] = [-0.5, 0.0, 2.0]
    w[1, 0, 0] = [-1.0, 0.25, 0.5]
    scale, zp = weight_qparams(w, 0, per_channel=True)
    np.testing.assert_allclose(scale, [2.5 / 255, 1.5 / 255], rtol=1e-6)
    # zp = -128 - round(min / scale)
    assert zp.tolist() == [-128 + round(0.5 / (2.5 / 255)), -128 + round(1.0 / (1.5 / 255))]
    scale, zp = weight_qparams(w, 0, per_channel=True, symmetric=True)  # the former option
    np.testing.assert_allclose(scale, [2.0 / 127, 1.0 / 127], rtol=1e-6)
    assert zp.tolist() == [0, 0]


def _concat_conv_model(producer: str) -> onnx.ModelProto:
    rng = np.random.RandomState(0)
    act = [helper.make_node(producer, ["a0"], ["a"]), helper.make_node(producer, ["b0"], ["b"])]
    if producer == "MaxPool":
        for node in act:
            node.attribute.extend([helper.make_attribute("kernel_shape", [1, 1])])
    nodes = [
        helper.make_node("Conv", ["x", "wa"], ["a0"], kernel_shape=[1, 1], name="ca"),
        helper.make_node("Conv", ["x", "wb"], ["b0"], kernel_shape=[1, 1], name="cb"),
        *act,
        helper.make_node("Concat", ["a", "b"], ["cat"], axis=1, name="cat"),
        helper.make_node("Conv", ["cat", "w", "bias"], ["y"], kernel_shape=[3, 3], pads=[1] * 4,
                         name="head"),
    ]  # fmt: skip
    shapes = {"wa": (4, 3, 1, 1), "wb": (6, 3, 1, 1), "w": (5, 10, 3, 3), "bias": (5,)}
    inits = [numpy_helper.from_array(rng.randn(*s).astype(np.float32), n)
             for n, s in shapes.items()]  # fmt: skip
    graph = helper.make_graph(
        nodes, "cc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 8, 8])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_weights_divide_in_float32_as_the_vendor_simulator() -> None:
    # Weights one float32 rounding from a .5 tie: w / s in float32 is exactly -125.5 and
    # -124.5 (rounded half to even: -126, -124), in float64 just past it (-125, -125).
    s = np.float32(0.0018366154)
    # (float32 values held in float64, as the converter reads them)
    w = np.array([-0.23049523, -0.22865862], np.float32).astype(np.float64).reshape(2, 1, 1, 1)
    q = quantize_weight(w, np.array([s, s], np.float32), np.zeros(2, np.int8), 0)
    assert q.ravel().tolist() == [-126, -124]
    # a zero point adds after the rounding
    q = quantize_weight(w, np.array([s, s], np.float32), np.array([3, -1], np.int8), 0)
    assert q.ravel().tolist() == [-123, -125]


def test_concat_feeding_a_conv_is_split_into_partial_convs() -> None:
    model = _concat_conv_model("Relu")
    split = split_concat_conv.run(model)
    ops = [n.op_type for n in split.graph.node]
    assert "Concat" not in ops and ops.count("Conv") == 4 and ops.count("Add") == 1
    parts = [n for n in split.graph.node if n.name.startswith("head_part")]
    assert [p.output[0] for p in parts] == ["a_conv", "b_conv"]
    assert len(parts[0].input) == 2 and parts[1].input[2] == "bias"  # bias on the last part
    x = np.random.RandomState(1).rand(1, 3, 8, 8).astype(np.float32)
    np.testing.assert_allclose(_run(split, x), _run(model, x), rtol=1e-4, atol=1e-4)
    # quantisation keeps the second part and the result, no Concat tensor; the first part is
    # added inside the Add (the vendor's simulator leaves r6_conv unrounded, rounds r8_conv)
    q = quantize_model(model, [[x]], **QUIET)
    assert {"b_conv", "y"} <= q.tensor_qparams.keys()
    assert "cat" not in q.tensor_qparams and "a_conv" not in q.tensor_qparams
    q_whole = quantize_model(model, [[x]], split_concat_convs=False, **QUIET)
    assert "cat" in q_whole.tensor_qparams and "a_conv" not in q_whole.tensor_qparams
    # a float16 layer keeps its conv whole
    q_hybrid = quantize_model(model, [[x]], float_layers=["head"], **QUIET)
    assert "cat" in q_hybrid.tensor_qparams


def test_concat_of_maxpool_outputs_is_not_split() -> None:
    split = split_concat_conv.run(_concat_conv_model("MaxPool"))
    assert "Concat" in [n.op_type for n in split.graph.node]


def _graph(nodes, inputs, outputs, inits=()):
    def info(name: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4, 4, 4])

    return helper.make_graph(nodes, "g", [info(n) for n in inputs], [info(n) for n in outputs],
                             list(inits))  # fmt: skip


def test_stored_tensor_set() -> None:
    w = numpy_helper.from_array(np.ones((4, 4, 1, 1), np.float32), "w")
    conv = lambda i, o: helper.make_node("Conv", [i, "w"], [o], kernel_shape=[1, 1])  # noqa: E731
    nodes = [
        conv("x", "c1"), helper.make_node("Relu", ["c1"], ["r1"]),  # fused: c1 not stored
        conv("r1", "c2"), helper.make_node("HardSwish", ["c2"], ["h2"]),  # fused too
        conv("h2", "c3"), helper.make_node("Sigmoid", ["c3"], ["s3"]),
        helper.make_node("Mul", ["c3", "s3"], ["m3"]),  # SiLU: neither c3 nor s3 stored
        conv("m3", "c4"), helper.make_node("Add", ["m3", "c4"], ["a4"]),  # Conv+Add: no c4
        conv("x", "c5"), conv("a4", "c6"),
        helper.make_node("Add", ["c5", "c6"], ["a6"]),  # the FIRST conv input fuses: c6 stays
    ]  # fmt: skip
    stored = stored_tensors(_graph(nodes, ["x"], ["a6"], [w]))
    assert stored == ["x", "r1", "h2", "m3", "a4", "c6", "a6"]


def test_sigmoid_inputs_are_bounded() -> None:
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["y"])]  # fmt: skip
    graph = _graph(nodes, ["x"], ["y", "s"])
    assert calibration_bounds(graph) == {"r": (-7.0, 7.0)}  # x is also read by Relu
    model = helper.make_model(_graph([helper.make_node("Sigmoid", ["x"], ["y"])], ["x"], ["y"]),
                              opset_imports=[helper.make_opsetid("", 13)])  # fmt: skip
    x = np.linspace(-20, 20, 64, dtype=np.float32).reshape(1, 4, 4, 4)
    q = quantize_model(model, [[x]], **QUIET)
    scale, zp = q.tensor_qparams["x"]  # a graph input read only by Sigmoid
    assert abs(scale - 14 / 255) < 1e-7 and zp == 0


def test_concat_before_relu_and_average_pools() -> None:
    """ShuffleNet's unit: Concat(conv branch, AveragePool branch) -> Relu. The Concat takes
    the Relu's parameters, the conv branch its own range clipped at 0, the (non-global)
    AveragePool its input's; a global (1x1-output) AveragePool its own."""
    rng = np.random.RandomState(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Concat", ["c", "p"], ["cat"], axis=1),
        helper.make_node("Relu", ["cat"], ["r"]),
        helper.make_node("AveragePool", ["r"], ["g"], kernel_shape=[8, 8]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "shuffle_unit",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(rng.randn(4, 4, 3, 3).astype(np.float32), "w")],
    )  # fmt: skip
    model = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))  # fmt: skip
    x = (rng.rand(1, 4, 8, 8) * 4 - 1).astype(np.float32)
    q = quantize_model(model, [[x]], **QUIET).tensor_qparams
    assert q["cat"] == q["r"]
    conv_max = float(_run_tensor(model, "c", x).max())
    assert abs(q["c"][0] - conv_max / 255) < 1e-7 and q["c"][1] == -128
    assert q["p"] == q["x"]  # AveragePool keeps its input's
    assert q["g"] != q["r"]  # a global one does not


def _run_tensor(model: onnx.ModelProto, name: str, x: np.ndarray) -> np.ndarray:
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.extend([helper.make_empty_tensor_value_info(name)])
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([name], {"x": x})[0]


def test_activations_fuse_into_convs_but_only_relu_into_adds() -> None:
    """two_io: Add -> Sigmoid keeps the Add's output (the vendor's `mixed-rs` is rounded);
    Add -> Relu does not (ResNet-50's r14); Gemm + Add adds inside the Gemm (`logits_mm`)."""
    w = numpy_helper.from_array(np.ones((4, 4, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["c", "x"], ["a"]),  # c adds inside the conv
             helper.make_node("Sigmoid", ["a"], ["s"]),  # a stays stored
             helper.make_node("Add", ["s", "x"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]  # b is fused
    assert stored_tensors(_graph(nodes, ["x"], ["y"], [w])) == ["x", "a", "s", "y"]
    fc = numpy_helper.from_array(np.ones((4, 4), np.float32), "fc")
    gemm = [helper.make_node("Gemm", ["x", "fc"], ["g"]),
            helper.make_node("Add", ["g", "x"], ["y"])]
    assert stored_tensors(_graph(gemm, ["x"], ["y"], [fc])) == ["x", "y"]


def test_opset9_sum_becomes_an_add() -> None:
    w = numpy_helper.from_array(np.random.RandomState(2).randn(4, 4, 1, 1).astype(np.float32),
                                "w")  # fmt: skip
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], kernel_shape=[1, 1]),
             helper.make_node("Conv", ["x", "w"], ["c2"], kernel_shape=[1, 1]),
             helper.make_node("Sum", ["c1", "c2"], ["s"], name="res"),
             helper.make_node("Relu", ["s"], ["y"])]  # fmt: skip
    model = onnx.shape_inference.infer_shapes(helper.make_model(
        _graph(nodes, ["x"], ["y"], [w]), opset_imports=[helper.make_opsetid("", 13)]))  # fmt: skip
    x = np.random.RandomState(3).rand(1, 4, 4, 4).astype(np.float32)
    q = quantize_model(model, [[x]], **QUIET)
    ops = {n.op_type for n in q.program.graph.node}
    assert "Sum" not in ops and "Add" in ops
    # an Add like any other: the first conv input is added inside the conv (ResNet-50's r11
    # in Sum(r11, r13) is unrounded in the vendor's simulator, r13 is rounded)
    assert "c2" in q.tensor_qparams and "c1" not in q.tensor_qparams
    session = factory.create(q.program, policies.ANALYSIS)  # exact on any CPU
    scale, zp = q.io_qparams["x"]
    (out,) = session.run(None, {"x": np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)})
    oscale, ozp = q.io_qparams["y"]
    want = np.maximum(_run(model, x), 0)
    np.testing.assert_allclose((out.astype(np.float32) - ozp) * oscale, want, atol=3 * oscale)


def test_wide_convs_are_tiled_along_input_channels() -> None:
    """C_in x kh x kw = 520 x 3 x 3 = 4680 > 4096: two tiles, bias on the first; 256 x 3 x 3
    stays whole (ResNet-50's stage-5 vs stage-4 convs)."""
    rng = np.random.RandomState(4)

    def model_with(cin: int) -> onnx.ModelProto:
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3],
                                  pads=[1] * 4, name="wide")]  # fmt: skip
        graph = helper.make_graph(
            nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, 4, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])],
            [numpy_helper.from_array((rng.randn(8, cin, 3, 3) * 0.05).astype(np.float32), "w"),
             numpy_helper.from_array(rng.randn(8).astype(np.float32), "b")],
        )  # fmt: skip
        return onnx.shape_inference.infer_shapes(
            helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))  # fmt: skip

    wide = model_with(520)
    tiled = split_concat_conv.split_wide_convs(wide)
    assert [n.op_type for n in tiled.graph.node] == ["Split", "Conv", "Conv", "Add"]
    first, second = tiled.graph.node[1], tiled.graph.node[2]
    assert first.output[0] == "y_tile0_conv" and first.input[2] == "b" and len(second.input) == 2
    x = rng.rand(1, 520, 4, 4).astype(np.float32)
    np.testing.assert_allclose(_run(tiled, x), _run(wide, x), rtol=1e-4, atol=1e-4)
    q = quantize_model(wide, [[x]], **QUIET).tensor_qparams
    assert {"x_split", "x_split_o1", "y_tile1_conv", "y"} <= q.keys()
    assert "y_tile0_conv" not in q  # added inside the Add (ResNet-50's r144_tile0_conv)
    narrow = model_with(256)
    assert len(split_concat_conv.split_wide_convs(narrow).graph.node) == 1


def test_wide_convs_reading_one_tensor_share_its_split() -> None:
    """YOLOv5su's head: two wide 3x3 convs read the same tensor. A Split each gave both the
    same output names and the int8 build failed ("Duplicate definition of name
    (/model.23/cv3/act/Mul_output_0_split)"); now one Split feeds both convs' tiles."""
    rng = np.random.RandomState(5)
    nodes = [helper.make_node("Conv", ["x", f"w{k}", f"b{k}"], [f"y{k}"], kernel_shape=[3, 3],
                              pads=[1] * 4, name=f"head{k}") for k in range(2)]  # fmt: skip
    inits = [numpy_helper.from_array((rng.randn(8, 520, 3, 3) * 0.05).astype(np.float32), f"w{k}")
             for k in range(2)] + [numpy_helper.from_array(rng.randn(8).astype(np.float32),
                                                           f"b{k}") for k in range(2)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 520, 4, 4])],
        [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, [1, 8, 4, 4]) for k in range(2)],
        inits,
    )  # fmt: skip
    model = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))  # fmt: skip
    tiled = split_concat_conv.split_wide_convs(model)
    assert [n.op_type for n in tiled.graph.node] == ["Split", "Conv", "Conv", "Add", "Conv",
                                                     "Conv", "Add"]  # fmt: skip
    onnx.checker.check_model(tiled, full_check=True)
    x = rng.rand(1, 520, 4, 4).astype(np.float32)
    for got, want in zip(_run_all(tiled, x), _run_all(model, x)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    q = quantize_model(model, [[x]], **QUIET)
    assert {"x_split", "x_split_o1", "y0_tile1_conv", "y1_tile1_conv"} <= q.tensor_qparams.keys()


def _run_all(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})
