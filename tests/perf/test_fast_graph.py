"""core/program/fast_graph.py: the runtime's channel-shuffle rewrite is exact and actually used."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from rknnrt.core.program import fast_graph
from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN

from .models import shufflenet_like

SIZE = 8


def _build(model: onnx.ModelProto, dtype: str, tmp_path) -> tuple[str, onnx.ModelProto]:
    rng = np.random.RandomState(1)
    calib = [[rng.rand(1, 3, SIZE, SIZE).astype(np.float32)] for _ in range(4)]
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float32" if dtype == "float32" else
                "float16")  # fmt: skip
    rknn.load_onnx(model)
    assert rknn.build(do_quantization=dtype == "int8", dataset=calib) == 0
    path = str(tmp_path / f"{dtype}.rknn")
    assert rknn.export_rknn(path) == 0
    return path, rknn._built.program


def _infer(path: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        return [runtime.inference([x], data_format="nchw")[0] for x in inputs]
    finally:
        runtime.release()


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32"])
def test_shuffles_run_as_gathers_with_identical_outputs(dtype, tmp_path, monkeypatch) -> None:
    path, program = _build(shufflenet_like(size=SIZE), dtype, tmp_path)
    rng = np.random.RandomState(7)
    inputs = [rng.rand(1, 3, SIZE, SIZE).astype(np.float32) * 2 for _ in range(4)]
    replaced: list[int] = []
    original = fast_graph.channel_shuffles_as_gathers
    monkeypatch.setattr(fast_graph, "channel_shuffles_as_gathers",
                        lambda graph: replaced.append(original(graph)) or replaced[-1])  # fmt: skip
    fast = _infer(path, inputs)
    assert replaced == [2]  # both shuffles, in the program the runtime runs
    monkeypatch.setattr(fast_graph, "rewrite", lambda graph: graph)
    plain = _infer(path, inputs)
    spread = [float(np.ptp(f)) for f in fast]
    assert min(spread) > 0.1  # outputs that vary, so equality means something
    for f, p in zip(fast, plain):
        assert f.tobytes() == p.tobytes()
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(program)
    assert fast_graph.channel_shuffles_as_gathers(rewritten.graph) == 2
    ops = [n.op_type for n in rewritten.graph.node]
    assert "Transpose" not in ops and ops.count("Gather") == 2


def _session_outputs(model: onnx.ModelProto, feed: dict) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.add_session_config_entry("session.x64quantprecision", "1")
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, feed)  # fmt: skip


def test_gather_permutes_channels_as_the_shuffle_does() -> None:
    model = shufflenet_like(size=SIZE)
    x = np.random.RandomState(3).rand(1, 3, SIZE, SIZE).astype(np.float32)
    expected = _session_outputs(model, {"x": x})
    assert fast_graph.channel_shuffles_as_gathers(model.graph) == 2
    assert np.array_equal(_session_outputs(model, {"x": x})[0], expected[0])


def _requantise(graph, tensor: str, scale: float, tag: str) -> None:
    """Insert QuantizeLinear -> DequantizeLinear (uint8, zero point 128) after `tensor`."""
    index = next(i for i, n in enumerate(graph.node) if tensor in n.output)
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == tensor:
                node.input[k] = f"{tag}_dq"
    graph.initializer.extend([numpy_helper.from_array(np.array(scale, np.float32), f"{tag}_s"),
                              numpy_helper.from_array(np.array(128, np.uint8), f"{tag}_z")])
    pair = [onnx.helper.make_node("QuantizeLinear", [tensor, f"{tag}_s", f"{tag}_z"], [f"{tag}_q"]),
            onnx.helper.make_node("DequantizeLinear", [f"{tag}_q", f"{tag}_s", f"{tag}_z"],
                                  [f"{tag}_dq"])]  # fmt: skip
    for node in reversed(pair):
        graph.node.insert(index + 1, node)


@pytest.mark.parametrize("after_scale, rewritten", [(0.05, 2), (0.07, 1), (None, 1)])
def test_requantisation_inside_a_shuffle(after_scale, rewritten) -> None:
    """A pair on the grid the values already lie on (0.05, that of the shuffle's input) is
    dropped with the shuffle; one on another grid (0.07), or on values that lie on no grid,
    rounds them: that shuffle stays."""
    model = shufflenet_like(size=SIZE)
    graph = model.graph
    first = next(n for n in graph.node if n.op_type == "Reshape")
    transpose = next(n for n in graph.node if n.op_type == "Transpose")
    if after_scale is not None:
        _requantise(graph, first.input[0], 0.05, "before")
    _requantise(graph, transpose.output[0], after_scale or 0.05, "after")
    x = np.random.RandomState(3).rand(1, 3, SIZE, SIZE).astype(np.float32)
    expected = _session_outputs(model, {"x": x})
    assert fast_graph.channel_shuffles_as_gathers(graph) == rewritten
    assert np.array_equal(_session_outputs(model, {"x": x})[0], expected[0])


def test_a_shuffle_whose_inner_tensor_is_read_elsewhere_is_kept(tmp_path) -> None:
    model = shufflenet_like(size=SIZE)
    transpose = next(n for n in model.graph.node if n.op_type == "Transpose")
    model.graph.output.append(onnx.helper.make_tensor_value_info(transpose.output[0], 1, None))
    assert fast_graph.channel_shuffles_as_gathers(model.graph) == 1
    other = onnx.ModelProto()
    other.CopyFrom(shufflenet_like(size=SIZE))
    for node in other.graph.node:
        if node.op_type == "Transpose":
            node.attribute[0].ints[:] = [0, 1, 2, 4, 3]  # not a channel shuffle
    assert fast_graph.channel_shuffles_as_gathers(other.graph) == 0


def test_rewrite_leaves_graphs_without_shuffles_untouched() -> None:
    graph = b"\x08\x07" + b"no transposes here"
    assert fast_graph.rewrite(graph) is graph


def _pool_model(q_scale: float, signed: bool = False) -> onnx.ModelProto:
    """x (uint8 or int8) -> DequantizeLinear -> MaxPool (5x5, pads 2; 3x3 stride 2, ceil) ->
    QuantizeLinear at `q_scale`, the dequantised map also read by a Concat (YOLO's SPPF)."""
    h = onnx.helper
    elem = onnx.TensorProto.INT8 if signed else onnx.TensorProto.UINT8
    zp = np.array(-7, np.int8) if signed else np.array(105, np.uint8)
    inits = [numpy_helper.from_array(np.array(0.0125, np.float32), "s"),
             numpy_helper.from_array(zp, "z"),
             numpy_helper.from_array(np.array(q_scale, np.float32), "qs")]  # fmt: skip
    nodes = [h.make_node("DequantizeLinear", ["x", "s", "z"], ["xd"]),
             h.make_node("MaxPool", ["xd"], ["p1"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             h.make_node("QuantizeLinear", ["p1", "qs", "z"], ["q1"]),
             h.make_node("MaxPool", ["xd"], ["p2"], kernel_shape=[3, 3], strides=[2, 2],
                         ceil_mode=1),
             h.make_node("QuantizeLinear", ["p2", "qs", "z"], ["q2"]),
             h.make_node("Concat", ["xd", "xd"], ["both"], axis=1)]  # fmt: skip
    outputs = [h.make_tensor_value_info(n, t, None) for n, t in
               [("q1", elem), ("q2", elem), ("both", onnx.TensorProto.FLOAT)]]  # fmt: skip
    graph = h.make_graph(nodes, "pools", [h.make_tensor_value_info("x", elem, [1, 6, 11, 11])],
                         outputs, inits)  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


@pytest.mark.parametrize("signed", [False, True])
def test_max_pools_on_the_grid_read_the_integers(signed) -> None:
    model = _pool_model(0.0125, signed)
    fast = onnx.ModelProto()
    fast.CopyFrom(model)
    assert fast_graph.pools_on_the_grid(fast.graph) == 2
    assert [n.input[0] for n in fast.graph.node if n.op_type == "MaxPool"] == ["x", "x"]
    rng = np.random.RandomState(0)
    dtype = np.int8 if signed else np.uint8
    info = np.iinfo(dtype)
    for x in [rng.randint(info.min, info.max + 1, (1, 6, 11, 11)).astype(dtype),
              np.full((1, 6, 11, 11), info.min, dtype)]:  # fmt: skip
        plain = _session_outputs(model, {"x": x})
        quick = _session_outputs(fast, {"x": x})
        assert np.ptp(plain[0].astype(np.int64)) > 0 or x.min() == x.max()
        for a, b in zip(plain, quick):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_a_max_pool_requantised_to_another_grid_is_kept() -> None:
    model = _pool_model(0.02)
    assert fast_graph.pools_on_the_grid(model.graph) == 0


def _rounding_model() -> onnx.ModelProto:
    """x (float32) -> Relu -> a rounding pair (kept: Relu computes) -> Reshape -> Transpose
    -> a pair (dropped) -> Concat with a rounded Neg (pair kept) and with itself -> a pair
    (dropped: Concat of rounded values) -> another pair right after (dropped) -> Sigmoid;
    an fp16 graph input y cast up, reshaped and rounded (dropped); a pair on a graph output's
    value (kept)."""
    h = onnx.helper
    f, f16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16

    def pair(src: str, name: str) -> list:
        return [h.make_node("Cast", [src], [f"{name}_h"], to=f16),
                h.make_node("Cast", [f"{name}_h"], [name], to=f)]

    inits = [numpy_helper.from_array(np.array([1, 4, 2, 3], np.int64), "shape")]
    nodes = [h.make_node("Relu", ["x"], ["a"]), *pair("a", "a_r"),
             h.make_node("Reshape", ["a_r", "shape"], ["b"]),
             h.make_node("Transpose", ["b"], ["c"], perm=[0, 1, 3, 2]), *pair("c", "c_r"),
             h.make_node("Neg", ["c_r"], ["n"]), *pair("n", "n_r"),
             h.make_node("Concat", ["c_r", "n_r", "c_r"], ["d"], axis=1), *pair("d", "d_r"),
             *pair("d_r", "d_rr"), h.make_node("Sigmoid", ["d_rr"], ["s"]), *pair("s", "out"),
             h.make_node("Cast", ["y"], ["y_f"], to=f),
             h.make_node("Reshape", ["y_f", "shape"], ["y_s"]), *pair("y_s", "y_r"),
             h.make_node("Add", ["y_r", "b"], ["sum"])]  # fmt: skip
    graph = h.make_graph(nodes, "roundings",
                         [h.make_tensor_value_info("x", f, [1, 4, 3, 2]),
                          h.make_tensor_value_info("y", f16, [1, 4, 3, 2])],
                         [h.make_tensor_value_info("out", f, None),
                          h.make_tensor_value_info("sum", f, None)], inits)  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


def test_roundings_of_float16_values_are_dropped_with_identical_outputs() -> None:
    model = _rounding_model()
    fast = onnx.load_model_from_string(fast_graph.rewrite(model.SerializeToString()))
    casts = [n.output[0] for n in fast.graph.node if n.op_type == "Cast"]
    # kept: the roundings after Relu, Neg and Sigmoid (a graph output) and y's own Cast
    assert sorted(casts) == sorted(["a_r_h", "a_r", "n_r_h", "n_r", "out_h", "out", "y_f"])
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((1, 4, 3, 2)) * 3e4).astype(np.float32)  # beyond float16's range
    x.flat[:4] = [np.inf, -np.inf, np.nan, -0.0]
    y = rng.standard_normal((1, 4, 3, 2)).astype(np.float16)
    y.flat[:2] = [np.nan, np.inf]
    runs = []
    for graph in (model, fast):
        session = ort.InferenceSession(graph.SerializeToString(),
                                       providers=["CPUExecutionProvider"])  # fmt: skip
        runs.append([o.tobytes() for o in session.run(None, {"x": x, "y": y})])
    assert runs[0] == runs[1]


def test_a_float16_ops_output_moved_back_is_not_rounded_again() -> None:
    """A LayerNorm computed in float16 (as a vendor exNorm), cast up and transposed back: its
    rounding is dropped; the same on the LayerNorm's float32 form stays (it computes)."""
    h = onnx.helper
    f, f16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    inits = [numpy_helper.from_array(np.ones(4, np.float16), "g16"),
             numpy_helper.from_array(np.zeros(4, np.float16), "b16"),
             numpy_helper.from_array(np.ones(4, np.float32), "g"),
             numpy_helper.from_array(np.zeros(4, np.float32), "b")]  # fmt: skip
    nodes = [h.make_node("Cast", ["x"], ["x_h"], to=f16),
             h.make_node("LayerNormalization", ["x_h", "g16", "b16"], ["ln_h"], axis=-1),
             h.make_node("Cast", ["ln_h"], ["ln_f"], to=f),
             h.make_node("Transpose", ["ln_f"], ["t"], perm=[0, 2, 1]),
             h.make_node("Cast", ["t"], ["t_h"], to=f16),
             h.make_node("Cast", ["t_h"], ["t_r"], to=f),
             h.make_node("LayerNormalization", ["x", "g", "b"], ["ln32"], axis=-1),
             h.make_node("Cast", ["ln32"], ["l_h"], to=f16),
             h.make_node("Cast", ["l_h"], ["l_r"], to=f),
             h.make_node("Relu", ["t_r"], ["y"]), h.make_node("Relu", ["l_r"], ["z"])]  # fmt: skip
    graph = h.make_graph(nodes, "ln16", [h.make_tensor_value_info("x", f, [1, 3, 4])],
                         [h.make_tensor_value_info("y", f, None),
                          h.make_tensor_value_info("z", f, None)], inits)  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    fast = onnx.load_model_from_string(fast_graph.rewrite(model.SerializeToString()))
    casts = {n.output[0] for n in fast.graph.node if n.op_type == "Cast"}
    assert casts == {"x_h", "ln_f", "l_h", "l_r"}
    x = np.random.default_rng(2).standard_normal((1, 3, 4)).astype(np.float32) * 50
    runs = []
    for g in (model, fast):
        session = ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"])
        runs.append([o.tobytes() for o in session.run(None, {"x": x})])
    assert runs[0] == runs[1]
