"""core/program/byte_tables.py and the kernels `rknnrt.kernels::ByteTable_<x><y>`: an int8
program's activation between two quantisations as one table pass, bit-identical to
onnxruntime's nodes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import byte_tables, whole
from rknnrt.sessions import factory
from tests.perf.conftest import (
    assert_switch_and_missing_compiler_keep,
    every_byte,
    int8_network,
    one_input_model,
    outputs_on_and_off,
    programs_opened,
)

_U8, _S8 = TensorProto.UINT8, TensorProto.INT8
_NP = {_U8: np.uint8, _S8: np.int8}
# (activation nodes between "d" and "a", extra constants): MobileNetV3's gate, a standalone
# SiLU-free Sigmoid, HardSwish, LeakyRelu, a Clip with constant bounds, and two in a row
_CHAINS = {
    "hardsigmoid": ([helper.make_node("HardSigmoid", ["d"], ["a"], alpha=1 / 6, beta=0.5)], []),
    "sigmoid": ([helper.make_node("Sigmoid", ["d"], ["a"])], []),
    "hardswish": ([helper.make_node("HardSwish", ["d"], ["a"])], []),
    "leakyrelu": ([helper.make_node("LeakyRelu", ["d"], ["a"], alpha=0.1)], []),
    "clip": ([helper.make_node("Clip", ["d", "lo", "hi"], ["a"])],
             [(np.array(-0.5, np.float32), "lo"), (np.array(1.25, np.float32), "hi")]),
    "relu_tanh": ([helper.make_node("Relu", ["d"], ["r"]), helper.make_node("Tanh", ["r"], ["a"])],
                  []),
}  # fmt: skip
# a GELU as transformers export it (x * (erf(x / sqrt 2) + 1) * 0.5): arithmetic steps, x read
# twice inside the chain
_GELU = ([helper.make_node("Div", ["d", "root2"], ["e1"]),
          helper.make_node("Erf", ["e1"], ["e2"]),
          helper.make_node("Add", ["e2", "one"], ["e3"]),
          helper.make_node("Mul", ["d", "e3"], ["e4"]),
          helper.make_node("Mul", ["e4", "half"], ["a"])],
         [(np.array(1.4142135, np.float32), "root2"), (np.array(1.0, np.float32), "one"),
          (np.array([0.5], np.float32), "half")])  # fmt: skip
_CHAINS["gelu"] = _GELU


def _chain_graph(name: str, x_type: int, y_type: int, dims: list[int], x_scale: float = 0.05,
                 read_inside: bool = False) -> bytes:  # fmt: skip
    """x -> DequantizeLinear -> the activations -> QuantizeLinear -> y (and the dequantised
    tensor as a second output with `read_inside`)."""
    steps, consts = _CHAINS[name]
    xz = 100 if x_type == _U8 else -20
    yz = 128 if y_type == _U8 else 0
    inits = [numpy_helper.from_array(v, n) for v, n in (
        (np.array(x_scale, np.float32), "xs"), (np.array(xz, _NP[x_type]), "xz"),
        (np.array(0.009, np.float32), "ys"), (np.array(yz, _NP[y_type]), "yz"), *consts)]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["d"]), *steps,
             helper.make_node("QuantizeLinear", ["a", "ys", "yz"], ["y"])]  # fmt: skip
    outputs = [helper.make_tensor_value_info("y", y_type, dims)]
    if read_inside:
        outputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, dims))
    return one_input_model(nodes, x_type, dims, outputs, inits)


@pytest.mark.parametrize("name", list(_CHAINS))
@pytest.mark.parametrize("x_type, y_type", [(_U8, _U8), (_S8, _S8), (_U8, _S8)])
@pytest.mark.parametrize("dims", [[1, 24, 5, 7], [3, 300]])
def test_the_table_gives_the_nodes_bytes(library, name, x_type, y_type, dims) -> None:
    """Every byte through each chain, 4-D (between the NHWC Transposes) and 2-D (plain)."""
    graph = _chain_graph(name, x_type, y_type, dims)
    rewritten, unused = byte_tables.rewrite(graph, {})
    assert not unused
    ops = [n.op_type for n in onnx.load_model_from_string(rewritten).graph.node]
    op = f"ByteTable_{'u8' if x_type == _U8 else 's8'}{'u8' if y_type == _U8 else 's8'}"
    # (an arithmetic chain stays in its tensor's layout: a transformer's, not the NHWC kernels')
    assert ops == (["Transpose", op, "Transpose"] if len(dims) == 4 and name != "gelu" else [op])
    x = every_byte(_NP[x_type], dims)
    want = ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = whole.open_program(rewritten).run(None, {"x": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()
    assert len(np.unique(want)) > 8


@pytest.mark.parametrize("length", [64 * 37 + 5, 63, 1])
def test_the_64_lane_lookup_gives_the_table_reads_bytes(library, length) -> None:
    """AVX-512 VBMI's two-table permutes (where the CPU has them) against the table reads, on
    every byte at every offset of a vector and a tail shorter than one."""
    graph = _chain_graph("hardswish", _U8, _U8, [length])
    rewritten = byte_tables.rewrite(graph, {})[0]
    every = np.arange(256, dtype=np.uint8)
    x = np.concatenate([np.roll(every, j) for j in range(-(-length // 256) + 64)])[:length]
    got = {}
    for level in (1, 0):
        library[1].rknnrt_bytemap_max_level(level)
        try:
            got[level] = whole.open_program(rewritten).run(None, {"x": x})[0]
        finally:
            library[1].rknnrt_bytemap_max_level(1)
    want = ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got[1].tobytes() == got[0].tobytes() == want.tobytes()
    assert len(np.unique(want)) > (8 if length > 256 else 0)


def test_chains_outside_its_conditions_stay(library) -> None:
    """The dequantised tensor read elsewhere, an op not on the list, a Clip bound that is no
    constant, a zero scale: onnxruntime's nodes run."""
    graphs = [_chain_graph("sigmoid", _U8, _U8, [1, 8, 3, 3], read_inside=True),
              _chain_graph("sigmoid", _U8, _U8, [1, 8, 3, 3], x_scale=0.0)]
    model = onnx.load_model_from_string(_chain_graph("sigmoid", _U8, _U8, [1, 8, 3, 3]))
    model.graph.node[1].op_type = "Softmax"  # not element-wise
    graphs.append(model.SerializeToString())
    model = onnx.load_model_from_string(_chain_graph("clip", _U8, _U8, [1, 8, 3, 3]))
    model.graph.initializer.pop()  # "hi" becomes a graph input
    model.graph.input.append(helper.make_tensor_value_info("hi", TensorProto.FLOAT, []))
    graphs.append(model.SerializeToString())
    model = onnx.load_model_from_string(_chain_graph("gelu", _U8, _U8, [2, 8]))
    half = next(t for t in model.graph.initializer if t.name == "half")
    half.CopyFrom(numpy_helper.from_array(np.full(8, 0.5, np.float32), "half"))  # per channel
    graphs.append(model.SerializeToString())
    model = onnx.load_model_from_string(_chain_graph("gelu", _U8, _U8, [2, 8]))
    model.graph.output.append(helper.make_tensor_value_info("e3", TensorProto.FLOAT, [2, 8]))
    graphs.append(model.SerializeToString())  # a step's value read outside the chain
    graphs.append(_chain_graph("gelu", _U8, _U8, []))  # a [1] constant would grow a scalar
    for graph in graphs:
        assert byte_tables.rewrite(graph, {})[0] is graph


def test_a_table_that_depends_on_position_is_not_used(library, monkeypatch) -> None:
    """Where onnxruntime gives a byte another value elsewhere in a longer tensor (a kernel's
    vector body and tail disagreeing), the nodes stay: the check sees one byte moved."""
    real = factory.create

    class Moved:
        def __init__(self, session) -> None:
            self.session = session

        def run(self, names, feeds):
            results = self.session.run(names, feeds)
            results[0][256 + 1 + 77] ^= 1  # the second copy of the bytes, byte 77
            return results

    monkeypatch.setattr(byte_tables.factory, "create", lambda *a, **k: Moved(real(*a, **k)))
    monkeypatch.setattr(byte_tables, "_made", {})
    graph = _chain_graph("hardsigmoid", _U8, _U8, [1, 8, 3, 3])
    assert byte_tables.rewrite(graph, {})[0] is graph


def test_the_tables_of_a_graph_are_made_once_per_process(library, monkeypatch) -> None:
    made: list[int] = []
    real = factory.create
    monkeypatch.setattr(byte_tables.factory, "create",
                        lambda *a, **k: made.append(1) or real(*a, **k))  # fmt: skip
    monkeypatch.setattr(byte_tables, "_made", {})
    graph = _chain_graph("hardswish", _U8, _U8, [1, 8, 3, 3])
    first = byte_tables.rewrite(graph, {})[0]
    assert byte_tables.rewrite(graph, {})[0] == first and first is not graph
    assert made == [1]


def test_the_switch_and_a_missing_compiler_keep_the_nodes(monkeypatch, tmp_path, capsys) -> None:
    graph = _chain_graph("hardsigmoid", _U8, _U8, [1, 8, 3, 3])
    assert_switch_and_missing_compiler_keep(monkeypatch, tmp_path, capsys,
                                            switches.INT8_BYTE_MAP_KERNEL, byte_tables.rewrite,
                                            graph)  # fmt: skip


def test_an_int8_networks_gates_are_table_passes(library, tmp_path, monkeypatch) -> None:
    """MobileNetV3-small int8: each squeeze-and-excitation gate's DequantizeLinear ->
    HardSigmoid -> QuantizeLinear is one ByteTable, and the outputs are the nodes' bytes."""
    path, rng = int8_network("mobilenetv3_small", tmp_path)
    seen = programs_opened(monkeypatch)
    inputs = [rng.rand(1, 3, 64, 64).astype(np.float32) for _ in range(2)]
    outs = outputs_on_and_off(monkeypatch, switches.INT8_BYTE_MAP_KERNEL, path, inputs)
    on_ops, off_ops = seen
    assert on_ops.count("ByteTable_u8u8") == off_ops.count("HardSigmoid") == 9
    assert "HardSigmoid" not in on_ops
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs["1"], outs["0"]))


@pytest.mark.slow
def test_an_int8_transformers_gelus_are_table_passes(library, tmp_path, monkeypatch) -> None:
    """DeiT-tiny int8 (test size): each block's GELU (DequantizeLinear -> Div -> Erf -> Add ->
    Mul -> Mul -> QuantizeLinear) is one ByteTable, and the outputs are the nodes' bytes."""
    path, rng = int8_network("deit_tiny", tmp_path)
    seen = programs_opened(monkeypatch)
    shape = [1, 3, 64, 64]
    inputs = [rng.rand(*shape).astype(np.float32) for _ in range(2)]
    outs = outputs_on_and_off(monkeypatch, switches.INT8_BYTE_MAP_KERNEL, path, inputs)
    on_ops, off_ops = seen
    assert off_ops.count("Erf") >= 2 and "Erf" not in on_ops
    assert on_ops.count("ByteTable_u8u8") >= off_ops.count("Erf")
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs["1"], outs["0"]))


@pytest.mark.parametrize("dims", [[], [5]])
def test_a_scalar_and_a_vector_through_the_table(library, dims) -> None:
    """A rank-0 and a rank-1 tensor (the plain form takes any rank; the NHWC ByteMap only 4)."""
    graph = _chain_graph("hardswish", _U8, _U8, dims)
    rewritten = byte_tables.rewrite(graph, {})[0]
    assert [n.op_type for n in onnx.load_model_from_string(rewritten).graph.node] == \
        ["ByteTable_u8u8"]  # fmt: skip
    for value in (0, 77, 200, 255):
        x = np.full(dims, value, np.uint8)
        want = ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]  # fmt: skip
        got = whole.open_program(rewritten).run(None, {"x": x})[0]
        assert got.shape == tuple(dims) and got.tobytes() == want.tobytes()
