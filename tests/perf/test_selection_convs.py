"""1x1 float convs whose weights only select channels run as Gathers (core/program/
selection_convs.py): the same bits for finite inputs, on synthetic graphs and on the vendor's
ShuffleNet units (tests/vendor/fixtures_heads/shuffle_*)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rknnrt.core import switches
from rknnrt.core.program import selection_convs, whole
from rknnrt.lite import RKNNLite

HEADS = Path(__file__).parents[1] / "vendor" / "fixtures_heads"


def _selection(rows: int, cols: int, picks: list[int | None]) -> np.ndarray:
    w = np.zeros((rows, cols, 1, 1), np.float32)
    for r, c in enumerate(picks):
        if c is not None:
            w[r, c] = 1
    return w


def _model(w: np.ndarray, bias: np.ndarray | None = None, fp16: bool = False,
           **attrs: object) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:  # fmt: skip
    """x -> Conv(w) -> Relu; `fp16`: the weight a float16 weights-section tensor through a Cast
    (as the vendor reader writes it)."""
    weights: dict[str, np.ndarray] = {}
    nodes, inits = [], []
    if fp16:
        stored = TensorProto(name="w16", data_type=TensorProto.FLOAT16, dims=w.shape,
                             data_location=TensorProto.EXTERNAL)  # fmt: skip
        stored.external_data.add(key="location", value="@weights")
        inits.append(stored)
        weights["w16"] = w.astype(np.float16)
        nodes.append(helper.make_node("Cast", ["w16"], ["w"], to=TensorProto.FLOAT))
    else:
        inits.append(onnx.numpy_helper.from_array(w, "w"))
    conv_in = ["x", "w"]
    if bias is not None:
        inits.append(onnx.numpy_helper.from_array(bias, "b"))
        conv_in.append("b")
    nodes += [helper.make_node("Conv", conv_in, ["c"], kernel_shape=list(w.shape[2:]), **attrs),
              helper.make_node("Relu", ["c"], ["y"])]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, w.shape[1], 5, 4])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), weights


def _run(model: onnx.ModelProto, weights: dict[str, np.ndarray], x: np.ndarray) -> list:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:  # the weights inline, for a plain session
        if t.name in weights:
            t.CopyFrom(onnx.numpy_helper.from_array(weights[t.name], t.name))
    return ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _inputs(channels: int) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((1, channels, 5, 4)).astype(np.float32)
    x[0, :, 0, 0] = -0.0  # a -0 comes out +0 from the conv's sum
    x[0, :, 0, 1] = 0.0
    x[0, 0, 1] = -0.0
    return x


@pytest.mark.parametrize("picks, bias, fp16", [
    ([2, 0, 5, 1, 1, 3], None, False),  # every row selects one channel (a shuffle)
    ([None, 4, None, 0, 2, None, 5], np.zeros(7, np.float32), False),  # halves of a Concat
    ([3, None, 1, 0], None, True),  # float16 weights through a Cast (vendor files)
])  # fmt: skip
def test_selection_convs_give_the_convs_bits(picks, bias, fp16) -> None:
    w = _selection(len(picks), 6, picks)
    model, weights = _model(w, bias, fp16)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    assert selection_convs.selections_as_gathers(rewritten.graph, weights) == 1
    ops = [n.op_type for n in rewritten.graph.node]
    assert "Conv" not in ops and ops.count("Gather") == 1
    assert ("Mul" in ops) == (None in picks)
    x = _inputs(6)
    for a, b in zip(_run(model, weights, x), _run(rewritten, weights, x)):
        assert a.tobytes() == b.tobytes()
    assert np.signbit(_run(rewritten, weights, x)[0][0, :, 0, 0]).sum() == 0


@pytest.mark.parametrize("w, bias, attrs", [
    (_selection(3, 4, [0, 1, 2]) * 2, None, {}),  # a weight of 2
    (_selection(3, 4, [0, 1, 2]) + _selection(3, 4, [1, 2, 3]), None, {}),  # two 1s a row
    (_selection(3, 4, [None, None, None]), None, {}),  # selects nothing
    (_selection(3, 4, [0, 1, 2]), np.array([0, 0.5, 0], np.float32), {}),  # a bias
    (_selection(3, 4, [0, 1, 2]), None, {"strides": [2, 2]}),
    (_selection(3, 4, [0, 1, 2]), None, {"pads": [1, 0, 1, 0]}),
    (np.tile(_selection(3, 4, [0, 1, 2]), (1, 1, 3, 3)) / 9, None, {"pads": [1, 1, 1, 1]}),
])  # fmt: skip
def test_other_convs_are_left_alone(w, bias, attrs) -> None:
    model, weights = _model(w.astype(np.float32), bias, **attrs)
    graph = model.SerializeToString()
    assert selection_convs.rewrite(graph, weights) == (graph, set())


def test_the_replaced_weights_are_reported_unused() -> None:
    model, weights = _model(_selection(4, 6, [3, None, 1, 0]), fp16=True)
    graph, unused = selection_convs.rewrite(model.SerializeToString(), weights)
    assert unused == {"w16"} and b"Gather" in graph


def _outputs(stem: str) -> bytes:
    with np.load(HEADS / f"{stem}.npz", allow_pickle=False) as data:
        x = data["in0"][0]
    lite = RKNNLite()
    assert lite.load_rknn(str(HEADS / f"{stem}.rknn")) == 0 and lite.init_runtime() == 0
    out = np.asarray(lite.inference([x], data_format=["nchw"])[0]).tobytes()
    lite.release()
    return out


@pytest.mark.parametrize("platform", ["rk3588", "rk3576", "rk3566", "rk3562", "rv1126b"])
def test_vendor_shufflenet_units_run_gathers_with_the_same_bits(platform, monkeypatch) -> None:
    stem = f"shuffle_{platform}_fp16"
    assert stem in json.loads((HEADS / "reported.json").read_text())
    graphs = []
    real = whole.execution_graph

    def recording(graph, weights):
        out = real(graph, weights)
        graphs.append(out[0])
        return out

    monkeypatch.setattr(whole, "execution_graph", recording)
    fast = _outputs(stem)
    assert [n.op_type for n in onnx.load_model_from_string(graphs[-1]).graph.node
            ].count("Gather") == 4  # fmt: skip
    with switches.override(switches.SELECTION_CONVS, "0"):
        slow = _outputs(stem)
    assert b"Gather" not in graphs[-1]
    assert fast == slow
