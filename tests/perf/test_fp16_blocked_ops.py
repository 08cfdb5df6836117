"""core/program/fp16_blocked_ops.py and sessions/kernels/blocked.c: a float16 program's global
average pools and squeeze-and-excitation multiplies run in onnxruntime's blocked layout with the
bits of the plain nodes they replace (the pool's sums in the plain kernel's order, where
onnxruntime's own blocked pool sums otherwise), and programs give the same outputs with them,
without them and without the blocked layout."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rknnrt.core.program import dw_kernel, fp16_blocked_ops, fp16_layout, layout_cache, whole
from rknnrt.sessions import kernels, nchwc

from .models import Builder, pooled_like, residual_like
from .test_fp16_layout import _fp16_build, _infer, _inputs
from .test_fp16_round import _bits, _in_place_runs

NCHWC = "com.microsoft.nchwc"


@pytest.fixture(scope="module")
def block() -> int:
    found = nchwc.block()
    if not found:
        pytest.skip("onnxruntime has no blocked (NCHWc) layout on this CPU: the ops never run")
    return found


def _session(library, nodes: list, inputs: list[tuple[str, list[int]]], outputs: list[str],
             threads: int = 1):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid(NCHWC, 1),
        helper.make_opsetid(kernels.DOMAIN, 1)])  # fmt: skip
    options = ort.SessionOptions()  # unoptimised: the layout pass would block the plain nodes
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = threads
    options.register_custom_ops_library(str(library[0]))
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])  # fmt: skip


def _run_at(library, level: int, session, feed: dict) -> np.ndarray:
    """The session's first output with the library's roundings at `level` (2 AVX-512, 1 F16C,
    0 scalar)."""
    library[1].rknnrt_f16round_max_level(level)
    try:
        return session.run(None, feed)[0]
    finally:
        library[1].rknnrt_f16round_max_level(2)


def _reorder_in(name: str, out: str):
    return helper.make_node("ReorderInput", [name], [out], domain=NCHWC, channels_last=0)


def _reorder_out(name: str, out: str, channels: int):
    return helper.make_node("ReorderOutput", [name], [out], domain=NCHWC, channels_last=0,
                            channels=channels)  # fmt: skip


def _values(shape: list[int], seed: int) -> np.ndarray:
    """Normal values of mixed magnitudes (float32 sums then depend on their order), with a few
    infinities, a NaN and negative zeros in the first channels."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(np.float32)
    x.reshape(-1)[:3] = [np.inf, -0.0, np.nan]
    x.reshape(shape[0], shape[1], -1)[:, 1, 0] = -np.inf
    return x


POOL_SHAPES = [[1, 96, 56, 56], [2, 20, 7, 7], [1, 16, 1, 1], [1, 8, 1, 3], [1, 24, 3, 5],
               [1, 576, 7, 7], [1, 32, 2, 3]]  # fmt: skip


@pytest.mark.parametrize("shape", POOL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_blocked_pool_gives_the_plain_pools_bits(library, block, shape) -> None:
    c = shape[1]
    x = _values(shape, sum(shape))
    session = _session(library, [
        _reorder_in("x", "xb"),
        helper.make_node("GlobalAveragePool", ["x"], ["plain"]),
        helper.make_node(fp16_blocked_ops.MEAN_OP, ["xb"], ["mb"], domain=kernels.DOMAIN,
                         block=block),
        _reorder_out("mb", "ours", c),
        helper.make_node("GlobalAveragePool", ["xb"], ["ob"], domain=NCHWC),
        _reorder_out("ob", "theirs", c),
        helper.make_node(fp16_blocked_ops.MEAN_OP, ["xb"], ["rb"], domain=kernels.DOMAIN,
                         block=block, round=1),
        _reorder_out("rb", "rounded", c),
        helper.make_node("Cast", ["plain"], ["half"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["half"], ["pair"], to=TensorProto.FLOAT)],
        [("x", shape)], ["plain", "ours", "theirs", "rounded", "pair"])  # fmt: skip
    plain, ours, theirs, rounded, pair = session.run(None, {"x": x})
    assert ours.shape == rounded.shape == (shape[0], c, 1, 1)
    assert ours.tobytes() == plain.tobytes()
    kept = ~np.isnan(pair)  # (onnxruntime's Cast may write another NaN)
    assert np.isnan(rounded[~kept]).all() and rounded[kept].tobytes() == pair[kept].tobytes()
    assert ((rounded != ours) & kept).any()  # the rounding changed finite means
    assert np.isnan(ours).sum() == 1 and np.isinf(ours).sum() >= 1
    if shape == [1, 96, 56, 56]:  # onnxruntime's blocked pool: another order, other bits
        assert (theirs != plain).sum() > 10


MUL_CASES = {  # (a's shape, b's shape)
    "gate_second": ([1, 96, 14, 14], [1, 96, 1, 1]),
    "gate_first": ([2, 40, 1, 1], [2, 40, 7, 7]),
    "gate_per_batch_broadcast": ([3, 24, 5, 3], [1, 24, 1, 1]),
    "elementwise": ([1, 20, 6, 6], [1, 20, 6, 6]),
    "row_broadcast": ([1, 16, 4, 5], [1, 16, 4, 1]),
}


@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512", "f16c", "scalar"])
@pytest.mark.parametrize("case", list(MUL_CASES))
def test_the_blocked_multiply_gives_the_nodes_bits(library, block, case, level) -> None:
    """Against ReorderOutput x2 -> Mul -> Cast pair -> ReorderInput; products beyond the float16
    range round to infinity, the padded channels are ReorderInput's zeros."""
    a_shape, b_shape = MUL_CASES[case]
    c = a_shape[1]
    a, b = _values(a_shape, 1), _values(b_shape, 2)
    a.reshape(-1)[5] = 300.0
    b.reshape(-1)[5] = 300.0  # 90000: beyond 65504
    reference = _session(library, [
        _reorder_out("a", "ap", c), _reorder_out("b", "bp", c),
        helper.make_node("Mul", ["ap", "bp"], ["m"]),
        helper.make_node("Cast", ["m"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["h"], ["r"], to=TensorProto.FLOAT),
        _reorder_in("r", "y")], [("a", None), ("b", None)], ["y"])  # fmt: skip
    ours = _session(library, [helper.make_node(
        fp16_blocked_ops.MUL_OP, ["a", "b"], ["y"], domain=kernels.DOMAIN, block=block,
        channels=c)], [("a", None), ("b", None)], ["y"])  # fmt: skip
    blocked = _session(library, [_reorder_in("a", "ab"), _reorder_in("b", "bb")],
                       [("a", a_shape), ("b", b_shape)], ["ab", "bb"])  # fmt: skip
    ab, bb = blocked.run(None, {"a": a, "b": b})
    want = reference.run(None, {"a": ab, "b": bb})[0]
    got = _run_at(library, level, ours, {"a": ab, "b": bb})
    nan = np.isnan(want)
    assert got.shape == want.shape and np.isnan(got[nan]).all() and nan.sum() >= 1
    assert got[~nan].tobytes() == want[~nan].tobytes()
    assert np.isinf(got[~nan]).sum() >= 2
    assert (got != np.float32(np.float16(got))).sum() == nan.sum()  # every value a float16


def test_the_ops_give_the_same_bits_on_more_threads(library, block) -> None:
    """Planes in chunks over onnxruntime's threads (9 chunks here): each writes its own."""
    shape, c = [2, 96, 28, 28], 96
    x, g = _values(shape, 3), _values([2, c, 1, 1], 4)
    nodes = [_reorder_in("x", "xb"), _reorder_in("g", "gb"),
             helper.make_node(fp16_blocked_ops.MEAN_OP, ["xb"], ["m"], domain=kernels.DOMAIN,
                              block=block),
             helper.make_node(fp16_blocked_ops.MUL_OP, ["xb", "gb"], ["y"],
                              domain=kernels.DOMAIN, block=block, channels=c),
             _reorder_out("y", "yp", c)]  # fmt: skip
    runs = [_session(library, nodes, [("x", shape), ("g", [2, c, 1, 1])], ["m", "yp"],
                     threads=t).run(None, {"x": x, "g": g}) for t in (1, 2)]  # fmt: skip
    assert [a.tobytes() for a in runs[0]] == [a.tobytes() for a in runs[1]]
    with np.errstate(invalid="ignore", over="ignore"):  # the infinities and NaN of _values
        want = np.float16(x * g).astype(np.float32)  # numpy's product and float16 rounding
    nan = np.isnan(want)
    assert runs[1][1][~nan].tobytes() == want[~nan].tobytes()


def se_like(seed: int = 8, size: int = 16) -> onnx.ModelProto:
    """Two squeeze-and-excitation blocks (a pool, 1x1 convs, HardSigmoid / Sigmoid gates, the
    Mul both ways round), 48 channels: not a multiple of 32."""
    b = Builder(seed)
    x = b.node("Relu", [b.conv("x", 3, 48, 3)])
    gate = b.node("HardSigmoid", [b.conv(b.node("Relu", [b.conv(b.node(
        "GlobalAveragePool", [x]), 48, 16)]), 16, 48)])  # fmt: skip
    y = b.node("Relu", [b.conv(b.node("Mul", [x, gate]), 48, 48, 3)])
    gate = b.node("Sigmoid", [b.conv(b.node("GlobalAveragePool", [y]), 48, 48)])
    return b.model(b.conv(b.node("Mul", [gate, y]), 48, 8), [1, 3, size, size])


def _laid_out_ops(program: onnx.ModelProto) -> list[str]:
    laid_out = fp16_layout.blocked_program(program.SerializeToString(), whole.open_program, None)
    assert laid_out is not None
    return [n.op_type for n in onnx.load_model_from_string(laid_out.graph).graph.node]


def test_a_residual_programs_add_and_relu_run_rounded_with_the_same_bytes(
        block, tmp_path, monkeypatch) -> None:  # fmt: skip
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    path, program = _fp16_build(residual_like(), tmp_path)
    ops = _laid_out_ops(program)
    assert ops.count(fp16_blocked_ops.ADD_RELU_OP) == 1 and "Add" not in ops
    with_ops = _infer(path, _inputs(16))
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED_OPS", "0")
    assert fp16_blocked_ops.ADD_RELU_OP not in _laid_out_ops(program)
    without = _infer(path, _inputs(16))
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED", "0")
    assert with_ops == without == _infer(path, _inputs(16))


@pytest.mark.parametrize("model", [se_like(), pooled_like()], ids=["se", "pooled"])
def test_programs_run_their_pools_and_gates_blocked_with_the_same_bytes(
        model, block, tmp_path, monkeypatch) -> None:  # fmt: skip
    monkeypatch.setenv("RKNNRT_LAYOUT_CACHE_MB", "0")
    path, program = _fp16_build(model, tmp_path)
    ops = _laid_out_ops(program)
    pools = [n for n in program.graph.node if n.op_type == "GlobalAveragePool"]
    assert ops.count(fp16_blocked_ops.MEAN_OP) == len(pools) and "GlobalAveragePool" not in ops
    assert ops.count(fp16_blocked_ops.MUL_OP) == len(pools) and "Mul" not in ops
    laid_out = fp16_layout.blocked_program(program.SerializeToString(), whole.open_program, None)
    means = [n for n in onnx.load_model_from_string(laid_out.graph).graph.node
             if n.op_type == fp16_blocked_ops.MEAN_OP]  # fmt: skip
    # each pool's rounding in its own pass (the program stores the pooled values)
    assert [a.i for n in means for a in n.attribute if a.name == "round"] == [1] * len(pools)
    size = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    with_ops = _infer(path, _inputs(size))
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED_OPS", "0")
    off_ops = _laid_out_ops(program)
    assert fp16_blocked_ops.MEAN_OP not in off_ops and "GlobalAveragePool" in off_ops
    without = _infer(path, _inputs(size))
    monkeypatch.setenv("RKNNRT_FP16_BLOCKED", "0")
    plain = _infer(path, _inputs(size))
    assert with_ops == without == plain
    assert len(set(plain)) == len(plain)


def test_without_the_library_the_pools_stay_plain_and_the_cache_key_differs(
        block, monkeypatch) -> None:  # fmt: skip
    program = se_like()
    graph = program.SerializeToString()
    on = layout_cache.key(graph, [], [])
    assert fp16_blocked_ops.enabled()
    monkeypatch.setattr(dw_kernel, "library_ready", lambda: False)
    assert not fp16_blocked_ops.enabled()
    assert layout_cache.key(graph, [], []) != on
    model = onnx.load_model_from_string(graph)
    pairs = fp16_layout.movable_pairs(model.graph, fp16_blocked_ops.enabled())
    readers = {name: n.op_type for n in model.graph.node for name in n.input}
    assert all(readers.get(second.output[0]) != "GlobalAveragePool" for _, second in pairs)


def test_the_probe_finds_the_block_reorder_input_pads_to(block) -> None:
    model = helper.make_model(helper.make_graph(
        [_reorder_in("x", "y")], "g", [helper.make_tensor_value_info("x", 1, [1, 20, 1, 1])],
        [helper.make_tensor_value_info("y", 1, None)]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(NCHWC, 1)])  # fmt: skip
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.ones((1, 20, 1, 1), np.float32)})
    assert block in (4, 8, 16) and y.shape[1] == -(-20 // block) * block
    assert y.reshape(-1)[20:].tolist() == [0.0] * (y.shape[1] - 20)


def _rounded_sum_against_nodes(library, level: int, op: str, relu: bool, a: np.ndarray,
                               b: np.ndarray) -> np.ndarray:
    """`op` on a, b against Add [-> Relu] -> Cast pair: the same bits but NaN payloads (NaNs
    where the nodes give one), more than 100 NaNs and infinities among them. Returns the
    nodes' values."""
    between = [helper.make_node("Relu", ["s"], ["r"])] if relu else []
    reference = _session(library, [
        helper.make_node("Add", ["a", "b"], ["s"]), *between,
        helper.make_node("Cast", ["r" if relu else "s"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)],
        [("a", None), ("b", None)], ["y"])  # fmt: skip
    ours = _session(library, [helper.make_node(op, ["a", "b"], ["y"], domain=kernels.DOMAIN)],
                    [("a", None), ("b", None)], ["y"])  # fmt: skip
    want = reference.run(None, {"a": a, "b": b})[0]
    got = _run_at(library, level, ours, {"a": a, "b": b})
    nan = np.isnan(want)
    assert nan.sum() > 100 and np.isnan(got[nan]).all()
    assert got[~nan].tobytes() == want[~nan].tobytes()
    assert np.isinf(got).sum() > 100
    return want


@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512", "f16c", "scalar"])
def test_the_rounded_add_gives_the_nodes_bits(library, level) -> None:
    """Against Add -> Cast pair on float32 bit patterns (every float16 value's neighbourhood,
    the range's ends) added to a shuffled copy; a tail shorter than a vector."""
    a = _bits()[: 2**18 + 3]
    _rounded_sum_against_nodes(library, level, fp16_blocked_ops.ADD_OP, False, a,
                               np.random.RandomState(1).permutation(a))  # fmt: skip


@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512", "f16c", "scalar"])
def test_the_rounded_relu_add_gives_the_nodes_bits(library, level) -> None:
    """AddReluRoundFloat16 against Add -> Relu -> Cast pair on the same bit patterns, signed
    zeros and NaNs among them."""
    a = _bits()[: 2**18 + 5]
    b = np.random.RandomState(2).permutation(a)
    b[:64] = np.float32(-0.0)
    a[:32] = np.float32(-0.0)  # -0 + -0: the one sum whose Relu keeps a -0
    want = _rounded_sum_against_nodes(library, level, fp16_blocked_ops.ADD_RELU_OP, True, a, b)
    kept = want[~np.isnan(want)]
    assert (kept == 0).sum() > 1000 and (kept < 0).sum() == 0


def test_the_rounded_add_refuses_other_shapes(library) -> None:
    """Shapes it does not broadcast leave its output unset: the node reading it fails."""
    ours = _session(library, [helper.make_node(fp16_blocked_ops.ADD_OP, ["a", "b"], ["y"],
                                               domain=kernels.DOMAIN),
                              helper.make_node("Relu", ["y"], ["z"])],
                    [("a", None), ("b", None)], ["z"])  # fmt: skip
    fail = ort.capi.onnxruntime_pybind11_state.Fail
    with pytest.raises(fail, match="Missing Input: y"):
        ours.run(None, {"a": np.ones((1, 4, 2, 2), np.float32),
                        "b": np.ones((1, 4, 1, 1), np.float32)})  # fmt: skip


def test_only_adds_of_blocked_tensors_take_the_rounded_add() -> None:
    """An Add of two blocked tensors (a conv's output and a rounding of one) is fused with its
    pair; one reading a Reshape (onnxruntime's unproven-shape form) or a plain tensor is not,
    nor one whose sum a second node reads."""
    h = helper
    convs = [h.make_node("Conv", ["x", "w"], [f"c{i}"], domain=NCHWC) for i in range(2)]
    nodes = [*convs,
             h.make_node("Cast", ["c0"], ["c0h"], to=TensorProto.FLOAT16),
             h.make_node("Cast", ["c0h"], ["c0r"], to=TensorProto.FLOAT),
             h.make_node("Reshape", ["c1", "shape"], ["r"]),
             _reorder_out("c1", "plain", 16)]  # fmt: skip
    cases = (("fused", ("c0r", "c1"), False), ("reshaped", ("c0r", "r"), False),
             ("plain", ("plain", "plain"), False), ("read", ("c0r", "c1"), True))
    for name, (a, b), extra in cases:
        nodes += [h.make_node("Add", [a, b], [f"{name}_s"]),
                  h.make_node("Cast", [f"{name}_s"], [f"{name}_h"], to=TensorProto.FLOAT16),
                  h.make_node("Cast", [f"{name}_h"], [f"{name}_y"], to=TensorProto.FLOAT)]
        if extra:
            nodes.append(h.make_node("Relu", [f"{name}_s"], [f"{name}_relu"]))
    outs = ["fused_y", "reshaped_y", "plain_y", "read_y", "read_relu"]
    model = h.make_model(h.make_graph(
        nodes, "g", [h.make_tensor_value_info(n, 1, None) for n in ("x", "w", "shape")],
        [h.make_tensor_value_info(o, 1, None) for o in outs]))  # fmt: skip
    assert fp16_blocked_ops.rewrite(model) == 1
    added = [n for n in model.graph.node if n.op_type == fp16_blocked_ops.ADD_OP]
    assert [(list(n.input), list(n.output)) for n in added] == [(["c0r", "c1"], ["fused_y"])]
    assert [n.op_type for n in model.graph.node].count("Add") == 3


def _add_between(later: tuple[str, ...]) -> onnx.ModelProto:
    """a = Relu(x), b = Sigmoid(x), s = AddRoundFloat16(a, b), y = Relu(s) (+ each of `later`,
    read after the sum)."""
    h = helper
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Sigmoid", ["x"], ["b"]),
             h.make_node(fp16_blocked_ops.ADD_OP, ["a", "b"], ["s"], domain=kernels.DOMAIN),
             h.make_node("Relu", ["s"], ["y0"])]  # fmt: skip
    for i, name in enumerate(later):
        nodes.append(h.make_node("Add", [f"y{i}", name], [f"y{i + 1}"]))
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", 1, [2, 999])],
                         [h.make_tensor_value_info(f"y{len(later)}", 1, None)])  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17),
                                              h.make_opsetid(kernels.DOMAIN, 1)])  # fmt: skip


@pytest.mark.skipif(tuple(map(int, ort.get_version_string().split(".")[:2])) < (1, 18),
                    reason="onnxruntime before 1.18 has no in-place custom ops: fresh outputs")
def test_the_rounded_add_takes_a_buffer_nothing_reads_later(library) -> None:
    x = (np.random.RandomState(5).rand(2, 999) * 8 - 4).astype(np.float32)
    a, b = np.maximum(x, 0), (1 / (1 + np.exp(-x))).astype(np.float32)
    runs = []
    for later in ((), ("a",), ("a", "b")):
        before = _in_place_runs(library)
        y = _session(library, _add_between(later).graph.node, [("x", [2, 999])],
                     [f"y{len(later)}"]).run(None, {"x": x})[0]  # fmt: skip
        runs.append(_in_place_runs(library) - before)
        s = np.maximum(np.float16(a + b).astype(np.float32), 0)
        assert np.abs(y - s - sum({"a": a, "b": b}[n] for n in later)).max() < 1e-5
    assert runs == [1, 1, 0]  # b's buffer, then b's with a read later, then a fresh one
