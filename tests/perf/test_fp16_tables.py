"""core/program/fp16_tables.py and HalfTable (sessions/kernels/f16ops.c): an element-wise chain
of a float16 program as one table pass. Each admitted op gives an element the same bits at any
position of a tensor (the premise of the table), the op looks up round16(x)'s bits on all three
paths, chains are found where they are functions of one float16 value and nowhere else, and
programs give the same bytes with and without the tables."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rknnrt.core import switches
from rknnrt.core.program import fp16_round, fp16_tables
from rknnrt.lite import RKNNLite
from rknnrt.sessions import kernels
from tools.real_arch import catalog

from .conftest import kernel_session
from .test_fp16_layout import _fp16_build

_F = TensorProto.FLOAT
EVERY_HALF = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)


def _model(nodes: list, inits: list | None = None, outputs: tuple[str, ...] = ("y",)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", _F, None)],
                              [helper.make_tensor_value_info(o, _F, None) for o in outputs],
                              inits or [])  # fmt: skip
    return helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid(kernels.DOMAIN, 1),
        helper.make_opsetid("com.microsoft", 1)])  # fmt: skip


def _round(src: str, out: str) -> onnx.NodeProto:
    return helper.make_node(fp16_round.OP, [src], [out], domain=kernels.DOMAIN)


def _scalar(name: str, value: float) -> onnx.TensorProto:
    return helper.make_tensor(name, _F, [], [value])


# one node of each admitted op (its constants scalars), reading x and writing "o"
_OPS = {
    "Abs": ([helper.make_node("Abs", ["x"], ["o"])], []),
    "Add": ([helper.make_node("Add", ["x", "c"], ["o"])], [_scalar("c", 1.0)]),
    "Clip": ([helper.make_node("Clip", ["x", "lo", "hi"], ["o"])],
             [_scalar("lo", 0.0), _scalar("hi", 6.0)]),
    "Div": ([helper.make_node("Div", ["x", "c"], ["o"])], [_scalar("c", 1.4140625)]),
    "Erf": ([helper.make_node("Erf", ["x"], ["o"])], []),
    "Exp": ([helper.make_node("Exp", ["x"], ["o"])], []),
    "HardSigmoid": ([helper.make_node("HardSigmoid", ["x"], ["o"], alpha=1 / 6, beta=0.5)], []),
    "HardSwish": ([helper.make_node("HardSwish", ["x"], ["o"])], []),
    "LeakyRelu": ([helper.make_node("LeakyRelu", ["x"], ["o"], alpha=0.1)], []),
    "Mul": ([helper.make_node("Mul", ["x", "x"], ["o"])], []),
    "Neg": ([helper.make_node("Neg", ["x"], ["o"])], []),
    "Relu": ([helper.make_node("Relu", ["x"], ["o"])], []),
    "Sigmoid": ([helper.make_node("Sigmoid", ["x"], ["o"])], []),
    "Sub": ([helper.make_node("Sub", ["c", "x"], ["o"])], [_scalar("c", 0.5)]),
    "Tanh": ([helper.make_node("Tanh", ["x"], ["o"])], []),
    "QuickGelu": ([helper.make_node("QuickGelu", ["x"], ["o"], domain="com.microsoft",
                                    alpha=1.0)], []),
}  # fmt: skip


def test_every_admitted_op_is_listed_here() -> None:
    assert set(_OPS) == fp16_tables.ELEMENTWISE | fp16_tables.FUSED_ELEMENTWISE


@pytest.mark.parametrize("op", sorted(_OPS))
def test_each_op_gives_an_element_the_same_bits_at_any_position(library, op) -> None:
    """op -> RoundFloat16 on every float16 value, then on tensors of other lengths (every
    tail of a 16-lane vector, and longer ones over two threads): each element equals the table
    entry of its value, NaNs included."""
    nodes, inits = _OPS[op]
    model = _model([*nodes, _round("o", "y")], inits)
    table = kernel_session(library, model).run(None, {"x": EVERY_HALF.astype(np.float32)})[0]
    rng = np.random.RandomState(1)
    for threads, lengths in ((1, [*range(1, 40), 4099]), (2, [151_213, 300_007])):
        session = kernel_session(library, model, threads)
        for n in lengths:
            bits = rng.randint(0, 65536, n).astype(np.uint16)
            got = session.run(None, {"x": bits.view(np.float16).astype(np.float32)})[0]
            assert got.view(np.uint32).tobytes() == table[bits].view(np.uint32).tobytes(), \
                (op, threads, n)  # fmt: skip


def _table_model(reader: bool = False) -> onnx.ModelProto:
    """x, t -> HalfTable -> y (-> Relu -> z with `reader`)."""
    nodes = [helper.make_node(fp16_tables.OP, ["x", "t"], ["y"], domain=kernels.DOMAIN)]
    if reader:
        nodes.append(helper.make_node("Relu", ["y"], ["z"]))
    inputs = [helper.make_tensor_value_info(name, _F, None) for name in ("x", "t")]
    output = helper.make_tensor_value_info("z" if reader else "y", _F, None)
    graph = helper.make_graph(nodes, "t", inputs, [output])
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(kernels.DOMAIN, 1)]
    )


def _f16c_bits(x: np.ndarray) -> np.ndarray:
    """The float16 bits VCVTPS2PH gives float32 `x` (numpy's, but a NaN quieted and its
    payload's top bits kept)."""
    with np.errstate(over="ignore"):  # beyond 65520: an infinity, as VCVTPS2PH gives
        bits = x.astype(np.float16).view(np.uint16).copy()
    raw = x.view(np.uint32)
    nan = np.isnan(x)
    bits[nan] = ((raw[nan] >> 16) & 0x8000) | 0x7E00 | ((raw[nan] >> 13) & 0x3FF)
    return bits


@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512", "avx2", "scalar"])
def test_the_op_looks_up_the_rounded_values_bits(library, level) -> None:
    rng = np.random.RandomState(2)
    x = np.concatenate(
        [
            rng.randint(0, 2**32, 200_003, dtype=np.uint64).astype(np.uint32).view(np.float32),
            EVERY_HALF.astype(np.float32),
            np.float32([65519.0, 65520.0, -65536.0, 1e-8, -3e-8, 2.9802322e-08]),
        ]
    )
    table = rng.rand(65536).astype(np.float32)
    library[1].rknnrt_f16table_max_level(level)
    try:
        for threads in (1, 2):
            got = kernel_session(library, _table_model(), threads).run(
                None, {"x": x.reshape(1, -1, 1), "t": table})[0]  # fmt: skip
            assert got.shape == (1, x.size, 1)
            assert got.ravel().tobytes() == table[_f16c_bits(x)].tobytes()
    finally:
        library[1].rknnrt_f16table_max_level(2)


def test_a_table_of_another_size_leaves_the_output_unset(library) -> None:
    """The node reading it fails; a table of the right size runs."""
    session = kernel_session(library, _table_model(reader=True))
    x = np.ones(8, np.float32)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="Missing Input: y"):
        session.run(None, {"x": x, "t": np.ones(100, np.float32)})
    table = np.arange(65536, dtype=np.float32)
    assert session.run(None, {"x": x, "t": table})[0].tolist() == [float(0x3C00)] * 8


def _gelu(extra_reader: bool = False, channel_constant: bool = False):
    """x -> Relu -> round -> GELU's five ops, each rounded -> y (the head rounding read by
    another node too when `extra_reader`; the divisor per channel when `channel_constant`)."""
    div = (helper.make_tensor("c", _F, [1, 2, 1], [1.4140625, 2.0]) if channel_constant
           else _scalar("c", 1.4140625))  # fmt: skip
    nodes = [helper.make_node("Relu", ["x"], ["r"]), _round("r", "h"),
             helper.make_node("Div", ["h", "c"], ["d"]), _round("d", "dr"),
             helper.make_node("Erf", ["dr"], ["e"]), _round("e", "er"),
             helper.make_node("Add", ["er", "one"], ["a"]), _round("a", "ar"),
             helper.make_node("Mul", ["h", "ar"], ["m"]), _round("m", "mr"),
             helper.make_node("Mul", ["mr", "half"], ["m2"]), _round("m2", "y")]  # fmt: skip
    outputs = ("y",)
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["h"], ["z"]))
        outputs = ("y", "z")
    return _model(nodes, [div, _scalar("one", 1.0), _scalar("half", 0.5)], outputs)


def _ops(model) -> list[str]:
    return [n.op_type for n in model.graph.node]


@pytest.mark.parametrize("extra_reader", [False, True], ids=["fused", "kept"])
def test_a_gelu_is_one_table_pass_with_the_nodes_values(library, extra_reader) -> None:
    model = _gelu(extra_reader)
    x = (np.random.RandomState(3).randn(3, 5, 4099) * 3).astype(np.float32)
    x.ravel()[:4] = [np.nan, np.inf, -np.inf, 70000.0]
    want = kernel_session(library, model).run(None, {"x": x})
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    assert fp16_tables.rewrite(rewritten) == 1
    if extra_reader:  # the head rounding has another reader: it stays
        assert _ops(rewritten) == ["Relu", fp16_round.OP, fp16_tables.OP, "Neg"]
    else:  # its rounding is the table pass's
        assert _ops(rewritten) == ["Relu", fp16_tables.OP]
    got = kernel_session(library, rewritten, threads=2).run(None, {"x": x})
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]


def test_what_is_not_a_function_of_one_float16_value_stays(library) -> None:
    per_channel = _gelu(channel_constant=True)  # the Div by a per-channel constant stays, and
    x = np.random.RandomState(5).randn(1, 2, 999).astype(np.float32)  # the Mul reading h
    want = kernel_session(library, per_channel).run(None, {"x": x})[0]
    assert fp16_tables.rewrite(per_channel) == 2  # Erf to Add's rounding; the last Mul
    assert _ops(per_channel) == ["Relu", fp16_round.OP, "Div", fp16_tables.OP, "Mul",
                                 fp16_tables.OP]  # fmt: skip
    assert kernel_session(library, per_channel).run(None, {"x": x})[0].tobytes() == \
        want.tobytes()  # fmt: skip
    unrounded = _model([helper.make_node("Sigmoid", ["x"], ["s"]), _round("s", "y")])
    assert fp16_tables.rewrite(unrounded) == 0  # x is no rounded tensor
    read_inside = _model([_round("x", "h"), helper.make_node("Sigmoid", ["h"], ["s"]),
                          _round("s", "sr"), helper.make_node("Tanh", ["sr"], ["t"]),
                          _round("t", "y")], outputs=("y", "sr"))  # fmt: skip
    assert fp16_tables.rewrite(read_inside) == 1  # up to the tensor read outside, not past it
    assert _ops(read_inside) == [fp16_tables.OP, "Tanh", fp16_round.OP]
    roundings_only = _model([_round("x", "h"), _round("h", "y")])
    assert fp16_tables.rewrite(roundings_only) == 0
    other_input = _model([_round("x", "h"), helper.make_node("Mul", ["h", "w"], ["m"]),
                          _round("m", "y")])  # fmt: skip
    other_input.graph.input.append(helper.make_tensor_value_info("w", _F, [1]))
    assert fp16_tables.rewrite(other_input) == 0  # a graph input is no constant


def test_a_helper_session_refused_keeps_the_chains(monkeypatch) -> None:
    model = _gelu()
    before = model.SerializeToString()

    def refuse(*args, **kwargs):
        raise RuntimeError("refused")

    monkeypatch.setattr(fp16_tables.factory, "create", refuse)
    assert fp16_tables.rewrite(model) == 0
    assert model.SerializeToString() == before


def test_chains_of_one_function_share_one_table() -> None:
    """Three HardSwish chains apart (an Identity, no element-wise op, between them)."""
    nodes, tails = [], []
    for k in range(3):
        nodes += [helper.make_node("Identity", ["x" if k == 0 else f"y{k - 1}"], [f"r{k}"]),
                  _round(f"r{k}", f"h{k}"), helper.make_node("HardSwish", [f"h{k}"], [f"s{k}"]),
                  _round(f"s{k}", f"y{k}")]  # fmt: skip
        tails.append(f"y{k}")
    model = _model(nodes, outputs=("y2",))
    assert fp16_tables.rewrite(model) == 3
    tables = [t.name for t in model.graph.initializer]
    assert tables == ["rknnrt_fp16_table_0"]
    assert [n.input[1] for n in model.graph.node if n.op_type == fp16_tables.OP] == tables * 3


@pytest.mark.slow
def test_a_networks_gelus_are_tables_and_its_outputs_the_same_bytes(
    library, tmp_path, monkeypatch
) -> None:
    """DeiT-tiny fp16 (test size): each block's GELU is one HalfTable node, and the outputs
    are those of the program without tables (RKNNRT_FP16_TABLES=0)."""
    network = catalog.build("deit_tiny", test=True)
    gelus = sum(n.op_type == "Erf" for n in network.graph.node)
    path = _fp16_build(network, tmp_path)[0]
    replaced: list[int] = []
    original = fp16_tables.rewrite
    monkeypatch.setattr(fp16_tables, "rewrite", lambda m: replaced.append(original(m)) or
                        replaced[-1])  # fmt: skip
    x = np.random.RandomState(4).rand(*catalog.input_shape("deit_tiny", test=True))
    outs = {}
    for on in ("1", "0"):
        with switches.override(switches.FP16_TABLES, on):
            lite = RKNNLite()
            assert lite.load_rknn(path) == 0 and lite.init_runtime() == 0
        outs[on] = [o.tobytes() for o in lite.inference([x.astype(np.float32)], "nchw")]
        lite.release()
    assert gelus >= 2 and replaced == [gelus]  # (switched off: not called)
    assert outs["1"] == outs["0"]
