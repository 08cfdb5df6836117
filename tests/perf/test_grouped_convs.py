"""core/program/grouped_convs.py: a vendor file's grouped convolution, written as a Split, one
conv per group and a Concat, runs as one grouped conv with the same outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import grouped_convs, whole
from rknnrt.lite import RKNNLite

HEADS = Path(__file__).parents[1] / "vendor" / "fixtures_heads"


@pytest.mark.parametrize("platform", ["rk3588", "rk3566", "rk3576", "rk3562", "rv1126b"])
def test_vendor_group_convs_run_as_one_with_the_same_outputs(platform, monkeypatch) -> None:
    """fixtures_heads' grouped (float16): its two grouped convs, which the compiler writes as
    Splits, per-part convs and Concats, become two grouped Convs and no Split is left; every
    output byte is the same as the per-part convs'."""
    seen: list[list] = []
    real = whole.open_program

    def spy(graph, *args, **kwargs):
        seen.append(list(onnx.load_model_from_string(bytes(graph)).graph.node))
        return real(graph, *args, **kwargs)

    monkeypatch.setattr(whole, "open_program", spy)
    data = np.load(HEADS / f"grouped_{platform}_fp16.npz")
    outs = {}
    for on in ("1", "0"):
        monkeypatch.setenv(switches.GROUPED_CONVS.name, on)
        seen.clear()
        lite = RKNNLite()
        assert lite.load_rknn(str(HEADS / f"grouped_{platform}_fp16.rknn")) == 0
        assert lite.init_runtime() == 0
        outs[on] = [np.asarray(lite.inference([x], data_format=["nchw"])[0]) for x in data["in0"]]
        lite.release()
        groups = sorted(next((a.i for a in n.attribute if a.name == "group"), 1)
                        for nodes in seen for n in nodes if n.op_type == "Conv")  # fmt: skip
        splits = sum(n.op_type == "Split" for nodes in seen for n in nodes)
        if on == "1":
            assert sum(g > 1 for g in groups) >= 2 and splits == 0, (groups, splits)
        else:  # (each session opened for the program holds them)
            assert max(groups) == 1 and splits >= 2
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs["1"], outs["0"]))


def _chain(pads: list[list[int]], order: list[int]) -> bytes:
    """Split(x, 2 x 4 channels) -> Conv_k -> Concat(order): the pattern, or not."""
    rng = np.random.default_rng(0)
    inits, nodes, outs = [numpy_helper.from_array(np.array([4, 4], np.int64), "sizes")], [], []
    nodes.append(helper.make_node("Split", ["x", "sizes"], ["s0", "s1"], axis=1))
    for k in range(2):
        inits.append(numpy_helper.from_array(rng.standard_normal((3, 4, 3, 3)).astype(np.float32),
                                             f"w{k}"))  # fmt: skip
        nodes.append(helper.make_node("Conv", [f"s{k}", f"w{k}"], [f"c{k}"], kernel_shape=[3, 3],
                                      pads=pads[k]))  # fmt: skip
        outs.append(f"c{k}")
    nodes.append(helper.make_node("Concat", [outs[k] for k in order], ["y"], axis=1))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [1, 8, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def test_a_plain_chain_becomes_one_grouped_conv_with_the_same_values() -> None:
    graph = _chain([[1, 1, 1, 1]] * 2, [0, 1])
    rewritten, unused = grouped_convs.rewrite(graph, {})
    nodes = onnx.load_model_from_string(rewritten).graph.node
    assert not unused and [n.op_type for n in nodes] == ["Conv"]
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype(np.float32)
    got = whole.open_program(rewritten, optimise=False).run(None, {"x": x})[0]
    want = whole.open_program(graph, optimise=False).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pads, order", [([[1, 1, 1, 1], [0, 0, 0, 0]], [0, 1]),
                                         ([[1, 1, 1, 1]] * 2, [1, 0])])  # fmt: skip
def test_chains_the_grouped_conv_would_not_reproduce_stay(pads, order) -> None:
    """Parts with other pads, or joined in another order than the Split's."""
    graph = _chain(pads, order)
    assert grouped_convs.rewrite(graph, {})[0] is graph
