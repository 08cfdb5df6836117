"""core/program/window_means.py and the kernel `rknnrt.kernels::WindowMean`: a vendor file's
AveragePool (strided Slices of its padded input summed row by row, divided by each position's
count: model/vendor_rknn/window_ops.py) in one pass, with the same bits."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import whole, window_means
from rknnrt.lite import RKNNLite
from tests.perf.conftest import assert_switch_and_missing_compiler_keep, kernel_session
from tests.vendor.test_vendor_arch import ARCH


def _pool_model(shape: list[int], k: tuple[int, int], s: tuple[int, int], pads: int,
                order: list | None = None, extra_reader: bool = False) -> onnx.ModelProto:
    """x -> Pad -> kh x kw strided Slices (row-major, or `order`) -> an Add chain -> Div by
    the counts of the unpadded values, as window_ops writes an AveragePool."""
    n, c, h, w = shape
    hp, wp = h + 2 * pads, w + 2 * pads
    out = [(hp - k[0]) // s[0] + 1, (wp - k[1]) // s[1] + 1]
    inits = [numpy_helper.from_array(np.array([0, 0, pads, pads] * 2, np.int64), "pads"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "axes"),
             numpy_helper.from_array(np.array(s, np.int64), "steps")]  # fmt: skip
    nodes = [helper.make_node("Pad", ["x", "pads"], ["xp"])]
    mask = np.pad(np.ones((h, w), np.float32), pads)
    counts = np.zeros(out, np.float32)
    total = None
    for i, j in order or [(i, j) for i in range(k[0]) for j in range(k[1])]:
        stop = [i + (out[0] - 1) * s[0] + 1, j + (out[1] - 1) * s[1] + 1]
        counts += mask[i : stop[0] : s[0], j : stop[1] : s[1]]
        inits += [numpy_helper.from_array(np.array([i, j], np.int64), f"b{i}_{j}"),
                  numpy_helper.from_array(np.array(stop, np.int64), f"e{i}_{j}")]  # fmt: skip
        nodes.append(helper.make_node("Slice", ["xp", f"b{i}_{j}", f"e{i}_{j}", "axes", "steps"],
                                      [f"s{i}_{j}"]))  # fmt: skip
        if total is None:
            total = f"s{i}_{j}"
        else:
            nodes.append(helper.make_node("Add", [total, f"s{i}_{j}"], [f"a{i}_{j}"]))
            total = f"a{i}_{j}"
    inits.append(numpy_helper.from_array(counts.reshape(1, 1, *out), "counts"))
    nodes.append(helper.make_node("Div", [total, "counts"], ["y"]))
    outputs = [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)]
    if extra_reader:  # the first partial sum is a graph output too
        outputs.append(helper.make_tensor_value_info(nodes[3].output[0], 1, None))
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", 1, shape)],
                              outputs, inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ops(graph: bytes) -> list[str]:
    return [n.op_type for n in onnx.load_model_from_string(graph).graph.node]


def _input(shape: list[int], seed: int) -> np.ndarray:
    x = (np.random.default_rng(seed).standard_normal(shape) * 50).astype(np.float32)
    x.flat[:7] = [np.inf, -np.inf, np.nan, -0.0, 0.0, 3e38, -3e38]  # infinities, a NaN, an overflow
    x[0, 0, -2:, -2:] = -0.0  # a window of negative zeros: its sum stays -0.0
    return x


@pytest.mark.parametrize("shape, k, s, pads", [
    ([1, 16, 8, 8], (2, 2), (2, 2), 0),  # DenseNet's transitions
    ([1, 24, 15, 15], (2, 2), (2, 2), 0),  # an odd size: the last row and column unread
    ([2, 5, 13, 11], (3, 3), (2, 2), 1),  # ShuffleNet's 3x3 stride 2, padded: counts 4, 6, 9
    ([1, 8, 9, 9], (3, 2), (1, 3), 1),  # unequal kernel and strides
    ([1, 3, 7, 7], (7, 7), (1, 1), 0),  # a global pool as a 7x7 window
])  # fmt: skip
def test_the_op_gives_the_slices_bits(library, shape, k, s, pads) -> None:
    model = _pool_model(shape, k, s, pads)
    fast, unused = window_means.rewrite(model.SerializeToString(), {})
    assert _ops(fast) == ["Pad", "WindowMean"] and not unused
    x = _input(shape, sum(shape))
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = kernel_session(library, onnx.load_model_from_string(fast)).run(None, {"x": x})[0]
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    assert np.isnan(got).any() and np.signbit(got[0, 0, -1, -1]) == np.signbit(want[0, 0, -1, -1])


def test_other_patterns_stay() -> None:
    """Slices out of row-major order, a partial sum read elsewhere, a count of another shape."""
    shape, k, s = [1, 4, 8, 8], (2, 2), (2, 2)
    for model in (_pool_model(shape, k, s, 0, order=[(0, 0), (1, 0), (0, 1), (1, 1)]),
                  _pool_model(shape, k, s, 0, extra_reader=True)):
        graph = model.SerializeToString()
        assert window_means.rewrite(graph, {})[0] is graph
    model = _pool_model(shape, k, s, 0)
    counts = next(t for t in model.graph.initializer if t.name == "counts")
    counts.CopyFrom(numpy_helper.from_array(np.full((1, 4, 4), 4, np.float32), "counts"))
    graph = model.SerializeToString()
    assert window_means.rewrite(graph, {})[0] is graph


def test_the_switch_and_a_missing_compiler_keep_the_nodes(monkeypatch, tmp_path, capsys) -> None:
    graph = _pool_model([1, 4, 8, 8], (2, 2), (2, 2), 0).SerializeToString()
    assert_switch_and_missing_compiler_keep(monkeypatch, tmp_path, capsys,
                                            switches.WINDOW_MEAN_KERNEL, window_means.rewrite,
                                            graph)  # fmt: skip


@pytest.mark.parametrize("stem", ["densenet_rk3588_fp16", "densenet_rk3576_i8"])
def test_a_vendor_densenets_pool_is_one_pass_with_the_same_outputs(stem, monkeypatch) -> None:
    """The fixture's 2x2 transition pool: one WindowMean in the program onnxruntime runs (its
    four Slices gone), the outputs the same bytes as with the switch off."""
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    seen: list[list[str]] = []
    real = whole.execution_graph

    def spy(graph, weights):
        out = real(graph, weights)
        seen.append(_ops(out[0]))
        return out

    monkeypatch.setattr(whole, "execution_graph", spy)
    with np.load(ARCH / f"{stem}.npz", allow_pickle=False) as data:
        x = np.ascontiguousarray(data["in0"][0])
    runs = []
    for on in ("1", "0"):
        monkeypatch.setenv(switches.WINDOW_MEAN_KERNEL.name, on)
        lite = RKNNLite()
        assert lite.load_rknn(str(ARCH / f"{stem}.rknn")) == 0 and lite.init_runtime() == 0
        runs.append(b"".join(np.asarray(o).tobytes()
                             for o in lite.inference([x], data_format="nchw")))  # fmt: skip
        lite.release()
    assert runs[0] == runs[1]
    assert seen[0].count("WindowMean") == 1 and "Slice" not in seen[0]
    assert seen[-1].count("WindowMean") == 0 and seen[-1].count("Slice") == 4
