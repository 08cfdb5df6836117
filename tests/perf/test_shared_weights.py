"""Quantised graphs whose weights, scales or zero points are shared open under the exact int8
kernels (sessions/shared_weights.py) and compute what they computed before."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.sessions import factory, policies, shared_weights

# Powers of two and small integers: every sum is exact in float32, so the only rounding is
# QuantizeLinear's (half to even), which numpy's reference below applies too. Weights beyond
# [-64, 63] are what the exact kernels rewrite (to 7 bits), under the constant's own name.
X_SCALE, W_SCALE, Y_SCALE = 2.0**-3, 2.0**-4, 2.0**-2
RNG = np.random.default_rng(7)
WEIGHTS = RNG.integers(-120, 120, (4, 3, 3, 3)).astype(np.int8)
OTHER = RNG.integers(-120, 120, (4, 3, 3, 3)).astype(np.int8)


def _const(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(value, name)


def _graph(variant: str) -> onnx.ModelProto:
    """x -> Q/DQ -> two Convs -> Q/DQ each. `variant`: one_dq (one weight DequantizeLinear
    feeds both Convs), two_dq (two DequantizeLinears read one weight), shared_scale (two
    weights, one scale and zero-point constant)."""
    scale = {"ws": W_SCALE, "xs": X_SCALE, "ys": Y_SCALE}
    inits = [_const("Wq", WEIGHTS), _const("wz", np.array(0, np.int8)),
             _const("xz", np.array(0, np.int8))]  # fmt: skip
    inits += [_const(name, np.array(value, np.float32)) for name, value in scale.items()]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["Wq", "ws", "wz"], ["Wd"])]  # fmt: skip
    second = "Wd"
    if variant in ("two_dq", "shared_scale"):
        weight = "Wq"
        if variant == "shared_scale":
            inits.append(_const("Wq2", OTHER))
            weight = "Wq2"
        nodes.append(helper.make_node("DequantizeLinear", [weight, "ws", "wz"], ["Wd2"]))
        second = "Wd2"
    for k, w in ((1, "Wd"), (2, second)):
        q, c, y = f"q{k}", f"c{k}", f"y{k}"
        nodes += [helper.make_node("Conv", ["xd", w], [c], pads=[1, 1, 1, 1]),
                  helper.make_node("QuantizeLinear", [c, "ys", "xz"], [q]),
                  helper.make_node("DequantizeLinear", [q, "ys", "xz"], [y])]  # fmt: skip
    outputs = [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, [1, 4, 6, 6])
               for k in (1, 2)]  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])
    graph = helper.make_graph(nodes, variant, [x], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


def _reference(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    xd = np.clip(np.round(x / X_SCALE), -128, 127) * X_SCALE
    padded = np.pad(xd[0], ((0, 0), (1, 1), (1, 1)))
    wd = weights.astype(np.float64) * W_SCALE
    out = np.zeros((4, 6, 6))
    for i in range(6):
        for j in range(6):
            out[:, i, j] = np.einsum("ochw,chw->o", wd, padded[:, i : i + 3, j : j + 3])
    return (np.clip(np.round(out / Y_SCALE), -128, 127) * Y_SCALE)[None].astype(np.float32)


@pytest.mark.parametrize("variant", ["one_dq", "two_dq", "shared_scale"])
def test_shared_constants_open_and_compute_the_same(variant: str) -> None:
    x = (RNG.integers(-16, 16, (1, 3, 6, 6)) * X_SCALE).astype(np.float32)
    session = factory.create(_graph(variant), policies.PROGRAM)
    y1, y2 = session.run(["y1", "y2"], {"x": x})
    np.testing.assert_array_equal(y1, _reference(x, WEIGHTS))
    second = OTHER if variant == "shared_scale" else WEIGHTS
    np.testing.assert_array_equal(y2, _reference(x, second))


def _weight_dequantizers(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0][0] == "W"]


@pytest.mark.parametrize("variant", ["one_dq", "two_dq", "shared_scale"])
def test_every_weight_dequantizer_owns_its_constants_and_has_one_consumer(variant: str) -> None:
    model = _graph(variant)
    assert shared_weights.is_shared(model)
    assert shared_weights.untie(model, None) is None
    assert not shared_weights.is_shared(model)
    dequantizers = _weight_dequantizers(model)
    assert len(dequantizers) == 2
    constants = [name for n in dequantizers for name in n.input]
    assert len(set(constants)) == len(constants) == 6
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in dequantizers:
        assert sum(node.output[0] in n.input for n in model.graph.node) == 1
        assert values[node.input[1]] == np.float32(W_SCALE) and values[node.input[2]] == 0
    onnx.checker.check_model(model)  # still topologically ordered


def test_external_weights_are_bound_twice_not_copied() -> None:
    model = _graph("one_dq")
    weight = next(t for t in model.graph.initializer if t.name == "Wq")
    model.graph.initializer.remove(weight)
    model.graph.input.append(helper.make_tensor_value_info("Wq", TensorProto.INT8, [4, 3, 3, 3]))
    marker = object()
    assert shared_weights.is_shared(model, ["Wq"])
    names, values = shared_weights.untie(model, (["Wq"], [marker]))
    assert names[0] == "Wq" and len(names) == 2 and values == [marker, marker]
    assert {n.input[0] for n in _weight_dequantizers(model)} == set(names)


def test_a_graph_without_sharing_is_left_alone() -> None:
    model = _graph("shared_scale")
    first = next(n for n in model.graph.node if n.output == ["Wd2"])
    for name, value in (("ws2", np.array(W_SCALE, np.float32)), ("wz2", np.array(0, np.int8))):
        model.graph.initializer.append(_const(name, value))
    first.input[1], first.input[2] = "ws2", "wz2"
    before = model.SerializeToString()
    assert not shared_weights.is_shared(model)
    shared_weights.untie(model, None)
    assert model.SerializeToString() == before
