"""Tests for the converter graph passes in rknnrt.toolkit.passes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.toolkit import passes
from rknnrt.toolkit.passes import fold_batchnorm, fold_constants, fold_scale_shift, remove_identity

FLOAT = TensorProto.FLOAT
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _model(nodes, inputs, outputs, inits=(), opset=17, ir_version=8) -> onnx.ModelProto:
    """Model from (name, shape) inputs/outputs (float32) and numpy initializers."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(v, k) for k, v in dict(inits).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version  # keep within what onnxruntime accepts
    return model


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def _check_same(before, after, feeds, rtol=1e-5, atol=1e-6) -> None:
    onnx.checker.check_model(after)
    for want, got in zip(_run(before, feeds), _run(after, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _rand(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# --- fold_constants ---------------------------------------------------------------------------


def test_fold_constants_folds_constant_chain():
    rng = np.random.default_rng(0)
    value = numpy_helper.from_array(_rand(rng, 4), "cv")
    nodes = [
        helper.make_node("Constant", [], ["c"], value=value),
        helper.make_node("Add", ["w", "c"], ["wc"]),
        helper.make_node("Mul", ["x", "wc"], ["y"]),
    ]
    before = _model(nodes, [("x", [2, 4])], [("y", [2, 4])], {"w": _rand(rng, 4)})
    after = fold_constants.run(before)
    assert _ops(after) == ["Mul"]
    assert [t.name for t in after.graph.initializer] == ["wc"]  # unused "w" was dropped
    assert _ops(before) == ["Constant", "Add", "Mul"]  # the input model is untouched
    _check_same(before, after, {"x": _rand(rng, 2, 4)})


def test_fold_constants_static_shape():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node(
            "ConstantOfShape", ["s"], ["z"], value=helper.make_tensor("v", FLOAT, [1], [2.0])
        ),
        helper.make_node("Add", ["x", "z"], ["y"]),
    ]
    before = _model(nodes, [("x", [2, 3])], [("y", [2, 3])])
    after = fold_constants.run(before)
    assert _ops(after) == ["Add"]
    _check_same(before, after, {"x": _rand(np.random.default_rng(1), 2, 3)})


def test_fold_constants_keeps_random_nodes():
    # low == high makes the draw deterministic, so outputs can still be compared.
    nodes = [
        helper.make_node("RandomUniform", [], ["r"], shape=[3], low=1.0, high=1.0),
        helper.make_node("Add", ["r", "c"], ["rc"]),
        helper.make_node("Mul", ["x", "rc"], ["y"]),
    ]
    before = _model(nodes, [("x", [3])], [("y", [3])], {"c": np.ones(3, np.float32)})
    after = fold_constants.run(before)
    assert _ops(after) == ["RandomUniform", "Add", "Mul"]
    _check_same(before, after, {"x": _rand(np.random.default_rng(2), 3)})


def test_fold_constants_old_ir_initializer_inputs():
    # Like onnx's "light" models: IR 3, every initializer also listed as a graph input.
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("ConstantOfShape", ["w_shape"], ["w"]),
        helper.make_node("Add", ["x", "w"], ["xw"]),
        helper.make_node("Mul", ["xw", "k"], ["y"]),
    ]
    inits = {"w_shape": np.array([4], np.int64), "k": _rand(rng, 4)}
    before = _model(nodes, [("x", [4])], [("y", [4])], inits, opset=9, ir_version=3)
    before.graph.input.extend(
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for k, v in inits.items()
    )
    after = fold_constants.run(before)
    assert _ops(after) == ["Add", "Mul"]
    assert [v.name for v in after.graph.input] == ["x"]
    assert sorted(t.name for t in after.graph.initializer) == ["k", "w"]
    assert [o.version for o in after.opset_import] == [9]
    _check_same(before, after, {"x": _rand(rng, 4)})


# --- remove_identity --------------------------------------------------------------------------


def test_remove_identity_renames_producer_of_graph_output():
    nodes = [
        helper.make_node("Identity", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Dropout", ["b"], ["y"]),
    ]
    before = _model(nodes, [("x", [2, 5])], [("y", [2, 5])])
    after = remove_identity.run(before)
    assert _ops(after) == ["Relu"]
    assert list(after.graph.node[0].input) == ["x"]
    assert [o.name for o in after.graph.output] == ["y"]
    _check_same(before, after, {"x": _rand(np.random.default_rng(4), 2, 5)})


def test_remove_identity_keeps_identity_from_graph_input_to_output():
    nodes = [
        helper.make_node("Identity", ["x"], ["y"]),
        helper.make_node("Identity", ["x"], ["t"]),
        helper.make_node("Neg", ["t"], ["z"]),
    ]
    before = _model(nodes, [("x", [3])], [("y", [3]), ("z", [3])])
    after = remove_identity.run(before)
    assert _ops(after) == ["Identity", "Neg"]
    assert [o.name for o in after.graph.output] == ["y", "z"]
    _check_same(before, after, {"x": _rand(np.random.default_rng(5), 3)})


def test_remove_identity_keeps_dropout_with_used_mask():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Dropout", ["a"], ["y", "mask"]),
        helper.make_node("Cast", ["mask"], ["m"], to=FLOAT),
    ]
    before = _model(nodes, [("x", [4])], [("y", [4]), ("m", [4])])
    after = remove_identity.run(before)
    assert _ops(after) == ["Relu", "Dropout", "Cast"]
    _check_same(before, after, {"x": _rand(np.random.default_rng(6), 4)})


def test_remove_identity_keeps_training_mode_dropout():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Dropout", ["a", "ratio", "train"], ["d"]),
        helper.make_node("Neg", ["d"], ["y"]),
    ]
    inits = {"ratio": np.array(0.0, np.float32), "train": np.array(True)}
    before = _model(nodes, [("x", [4])], [("y", [4])], inits)
    assert _ops(remove_identity.run(before)) == ["Relu", "Dropout", "Neg"]
    inits["train"] = np.array(False)
    assert _ops(remove_identity.run(_model(nodes, [("x", [4])], [("y", [4])], inits))) == [
        "Relu",
        "Neg",
    ]


# --- fold_batchnorm ---------------------------------------------------------------------------


def _conv_bn_model(rng, channels=6, group=1, bias=True, extra_use=False) -> onnx.ModelProto:
    w = _rand(rng, channels, channels // group, 3, 3)
    inits = {
        "W": w,
        "scale": _rand(rng, channels),
        "beta": _rand(rng, channels),
        "mean": _rand(rng, channels),
        "var": rng.uniform(0.5, 2.0, channels).astype(np.float32),
    }
    conv_in = ["x", "W"]
    if bias:
        inits["B"] = _rand(rng, channels)
        conv_in.append("B")
    nodes = [
        helper.make_node("Conv", conv_in, ["c"], group=group, pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["y"]),
    ]
    outputs = [("y", [1, channels, 5, 5])]
    if extra_use:  # the Conv result escapes, so it must stay unnormalized
        nodes.append(helper.make_node("Neg", ["c"], ["n"]))
        outputs.append(("n", [1, channels, 5, 5]))
    return _model(nodes, [("x", [1, channels, 5, 5])], outputs, inits)


@pytest.mark.parametrize(("group", "bias"), [(1, True), (1, False), (2, True), (6, False)])
def test_fold_batchnorm_into_conv(group, bias):
    rng = np.random.default_rng(7)
    before = _conv_bn_model(rng, group=group, bias=bias)
    after = fold_batchnorm.run(before)
    assert _ops(after) == ["Conv", "Relu"]
    assert list(after.graph.node[0].output) == ["bn"]
    assert {t.name for t in after.graph.initializer}.isdisjoint({"W", "B", "scale", "var"})
    _check_same(before, after, {"x": _rand(rng, 1, 6, 5, 5)})


def test_fold_batchnorm_leaves_shared_conv_output():
    rng = np.random.default_rng(8)
    before = _conv_bn_model(rng, extra_use=True)
    assert _ops(fold_batchnorm.run(before)) == _ops(before)


def test_fold_batchnorm_folds_in_float32_as_the_vendor():
    # W * (scale / sqrt(var + eps)) in float32: the folded weight's float32 rounding decides
    # its int8 rounding near a tie (docs/quantization.md)
    rng = np.random.default_rng(10)
    before = _conv_bn_model(rng, channels=32)
    inits = {t.name: numpy_helper.to_array(t) for t in before.graph.initializer}
    after = fold_batchnorm.run(before)
    folded = {t.name: numpy_helper.to_array(t) for t in after.graph.initializer}
    w, b = (folded[name] for name in after.graph.node[0].input[1:3])
    per_channel = (-1, 1, 1, 1)
    s = inits["scale"] / np.sqrt(inits["var"] + np.float32(1e-5))
    np.testing.assert_array_equal(w, inits["W"] * s.reshape(per_channel))
    np.testing.assert_array_equal(b, (inits["B"] - inits["mean"]) * s + inits["beta"])
    s64 = inits["scale"].astype(np.float64) / np.sqrt(inits["var"].astype(np.float64) + 1e-5)
    wide = (inits["W"].astype(np.float64) * s64.reshape(per_channel)).astype(np.float32)
    assert np.count_nonzero(w != wide) > 0  # folding in float64 rounds some weights otherwise


def test_fold_batchnorm_leaves_bn_without_conv():
    rng = np.random.default_rng(9)
    inits = {k: _rand(rng, 3) for k in ("scale", "beta", "mean")}
    inits["var"] = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("BatchNormalization", ["a", "scale", "beta", "mean", "var"], ["b"]),
        helper.make_node("Neg", ["b"], ["y"]),
    ]
    before = _model(nodes, [("x", [1, 3, 4])], [("y", [1, 3, 4])], inits)
    after = fold_batchnorm.run(before)
    assert _ops(after) == ["Relu", "BatchNormalization", "Neg"]
    _check_same(before, after, {"x": _rand(rng, 1, 3, 4)})


# --- pipeline ---------------------------------------------------------------------------------


def test_pipeline_order():
    assert passes.PIPELINE == (
        passes.untie_weights.run,  # shared weights copied per node first (toolkit2 tests)
        fold_constants.run,
        remove_identity.run,
        fold_batchnorm.run,
        fold_scale_shift.run,
        fold_constants.run,
    )


def test_run_all_keeps_names_captured_by_subgraphs():
    # If-branches read the folded "k2" and the Identity output "ia" from the outer scope.
    out = {"then": "t", "else": "e"}
    branches = {
        b: helper.make_graph(
            [helper.make_node(op, ["ia", "k2"], [out[b]])],
            b,
            [],
            [helper.make_tensor_value_info(out[b], FLOAT, [3])],
        )
        for b, op in (("then", "Add"), ("else", "Sub"))
    }
    nodes = [
        helper.make_node("Mul", ["k", "k"], ["k2"]),
        helper.make_node("Identity", ["x"], ["ia"]),
        helper.make_node(
            "If", ["cond"], ["y"], then_branch=branches["then"], else_branch=branches["else"]
        ),
        helper.make_node("Add", ["k", "k"], ["kk"]),  # folded, and itself a graph output
    ]
    before = _model(
        nodes, [("x", [3])], [("y", [3]), ("kk", [3])], {"k": _rand(np.random.default_rng(11), 3)}
    )
    before.graph.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    after = passes.run_all(before)
    assert _ops(after) == ["If"]
    assert [o.name for o in after.graph.output] == ["y", "kk"]
    for cond in (True, False):
        _check_same(
            before, after, {"x": _rand(np.random.default_rng(12), 3), "cond": np.array(cond)}
        )


def _real_input(model: onnx.ModelProto) -> onnx.ValueInfoProto:
    inits = {t.name for t in model.graph.initializer}
    (inp,) = [v for v in model.graph.input if v.name not in inits]
    return inp


def _randomize_weights(model: onnx.ModelProto, rng) -> onnx.ModelProto:
    """Swap the light model's all-zero ConstantOfShape weights for random Constants."""
    shapes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape":
            shape = shapes[node.input[0]]
            val = (_rand(rng, *shape) / np.sqrt(max(1, np.prod(shape[1:])))).astype(np.float32)
            if node.output[0].endswith(("_riv_0", "_var_0")):  # BN variances must be positive
                val = np.abs(val) + 0.5
            node = helper.make_node("Constant", [], node.output, value=numpy_helper.from_array(val))
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


@pytest.mark.parametrize(
    ("name", "randomize"),
    [
        ("light_squeezenet", False),
        pytest.param("light_resnet50", False, marks=pytest.mark.slow),
        pytest.param("light_resnet50", True, marks=pytest.mark.slow),
    ],  # fmt: skip
)
def test_run_all_light_models(name, randomize):
    path = LIGHT / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} not shipped with this onnx build")
    rng = np.random.default_rng(10)
    before = onnx.load(path)
    if randomize:  # the shipped weights are all zero, which would hide folding errors
        before = _randomize_weights(before, rng)
    after = passes.run_all(before)
    banned = {"ConstantOfShape", "BatchNormalization", "Dropout", "Constant"}
    assert banned.isdisjoint(_ops(after))
    assert [v.name for v in after.graph.input] == [_real_input(before).name]
    assert after.graph.value_info  # intermediate shapes were inferred
    inp = _real_input(before)
    x = _rand(rng, *[d.dim_value for d in inp.type.tensor_type.shape.dim])
    _check_same(before, after, {inp.name: x}, rtol=1e-4, atol=1e-5)
