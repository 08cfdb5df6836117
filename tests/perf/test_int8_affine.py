"""core/program/int8_affine.py and the kernel `rknnrt.kernels::ChannelAffineU8`: a per-channel
affine map of a uint8 tensor (a vendor file's standalone int8 BatchNormalization) in one pass,
bit-identical to onnxruntime's DequantizeLinear, Mul, Add, Relu, QuantizeLinear."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import int8_affine, whole
from tests.perf.conftest import (
    assert_switch_and_missing_compiler_keep,
    outputs_on_and_off,
    programs_opened,
)

HEADS = Path(__file__).parents[1] / "vendor" / "fixtures_heads"


def _chain(channels: int, relu: bool, seed: int, shape_tail=(5, 7), x_scale=0.05, x_zp=128,
           y_scale=0.04, y_zp=3, a_rank=4) -> bytes:  # fmt: skip
    """DequantizeLinear -> Mul(a) -> Add(b) [-> Relu] -> QuantizeLinear on uint8 [2, C, ...]."""
    rng = np.random.default_rng(seed)
    shape = [1, channels] + [1] * (a_rank - 2)
    a = (rng.standard_normal(shape) * 3).astype(np.float32)
    b = (rng.standard_normal(shape) * 2).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for v, n in (
        (np.array(x_scale, np.float32), "xs"), (np.array(x_zp, np.uint8), "xz"),
        (np.array(y_scale, np.float32), "ys"), (np.array(y_zp, np.uint8), "yz"),
        (a, "a"), (b, "b"))]  # fmt: skip
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["d"]),
             helper.make_node("Mul", ["d", "a"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["r" if relu else "s"])]  # fmt: skip
    if relu:
        nodes.append(helper.make_node("Relu", ["r"], ["s"]))
    nodes.append(helper.make_node("QuantizeLinear", ["s", "ys", "yz"], ["y"]))
    dims = [2, channels, *shape_tail]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                         dims)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, dims)],
                              inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _run(graph: bytes, x: np.ndarray) -> np.ndarray:
    return whole.open_program(graph, optimise=False).run(None, {"x": x})[0]


def _inputs(channels: int, shape_tail=(5, 7)) -> np.ndarray:
    """Every uint8 value in every channel (and more), in a fixed order."""
    count = 2 * channels * int(np.prod(shape_tail))
    return (np.arange(count) * 37 % 256).astype(np.uint8).reshape(2, channels, *shape_tail)


@pytest.mark.parametrize("level", [0, 1])  # the scalar path and AVX2 (where the CPU has it)
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("scales, kind", [((0.05, 128, 0.04, 3), "spread"),
                                          ((0.3, 0, 0.01, 250), "saturating"),
                                          ((1e-3, 17, 0.5, 128), "narrow")])  # fmt: skip
def test_the_kernel_gives_the_chains_bytes(library, level, relu, scales, kind) -> None:
    """Values over the whole grid, saturating at both ends (0.3 * 255 * |a| over 0.01), and
    within a few steps of the zero point."""
    graph = _chain(19, relu, 7, (4, 9), *scales)
    x = _inputs(19, (4, 9))
    rewritten, unused = int8_affine.rewrite(graph, {})
    assert not unused
    ops = [n.op_type for n in onnx.load_model_from_string(rewritten).graph.node]
    assert ops == ["ChannelAffineU8"]
    want = ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    library[1].rknnrt_affine_max_level(level)
    try:
        got = _run(rewritten, x)
    finally:
        library[1].rknnrt_affine_max_level(1)
    assert got.dtype == np.uint8 and got.tobytes() == want.tobytes()
    levels = np.unique(want)
    if kind == "spread":
        assert len(levels) > 50
    elif kind == "saturating":
        assert levels[-1] == 255 and (levels[0] == 0 or relu)
    else:
        assert 1 < len(levels) < 20


def test_chains_outside_its_conditions_stay(library) -> None:
    """A rank the constants do not share (their channels would not be axis 1), a non-finite
    constant, an int8 zero point: onnxruntime's chain runs."""
    assert int8_affine.rewrite(_chain(6, True, 1, (3,), a_rank=4), {})[0] == \
        _chain(6, True, 1, (3,), a_rank=4)  # fmt: skip
    model = onnx.load_model_from_string(_chain(6, True, 1))
    a = next(t for t in model.graph.initializer if t.name == "a")
    a.CopyFrom(numpy_helper.from_array(np.full((1, 6, 1, 1), np.inf, np.float32), "a"))
    graph = model.SerializeToString()
    assert int8_affine.rewrite(graph, {})[0] is graph
    model = onnx.load_model_from_string(_chain(6, False, 1))
    zp = next(t for t in model.graph.initializer if t.name == "yz")
    zp.CopyFrom(numpy_helper.from_array(np.array(3, np.int8), "yz"))
    graph = model.SerializeToString()
    assert int8_affine.rewrite(graph, {})[0] is graph


def test_the_switch_and_a_missing_compiler_keep_the_chain(monkeypatch, tmp_path, capsys) -> None:
    graph = _chain(4, True, 2)
    assert_switch_and_missing_compiler_keep(monkeypatch, tmp_path, capsys,
                                            switches.INT8_AFFINE_KERNEL, int8_affine.rewrite,
                                            graph)  # fmt: skip


@pytest.mark.parametrize("platform", ["rk3588", "rk3576"])
def test_vendor_batch_norms_run_on_the_kernel_with_the_same_outputs(
        library, platform, monkeypatch) -> None:  # fmt: skip
    """fixtures_heads' bnzp: two standalone int8 BatchNormalization + Relu (zero points -128
    and -3) run as ChannelAffineU8, the outputs byte for byte those of the chain."""
    data = np.load(HEADS / f"bnzp_{platform}_i8.npz")
    seen = programs_opened(monkeypatch)
    outs = outputs_on_and_off(monkeypatch, switches.INT8_AFFINE_KERNEL,
                              str(HEADS / f"bnzp_{platform}_i8.rknn"), list(data["in0"]))
    assert any(ops.count("ChannelAffineU8") == 2 for ops in seen)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs["1"], outs["0"]))
