"""core/program/channel_muls.py and the kernels `rknnrt.kernels::ChannelMul_<t>`: an int8
program's per-channel multiply (a squeeze-and-excitation gate) in one pass, bit-identical to
onnxruntime's QLinearMul that it replaces."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import channel_muls, whole
from rknnrt.sessions import kernels
from tests.perf.conftest import (
    assert_switch_and_missing_compiler_keep,
    int8_network,
    kernel_session,
    outputs_on_and_off,
    programs_opened,
)

_U8, _S8 = TensorProto.UINT8, TensorProto.INT8
_NP = {_U8: np.uint8, _S8: np.int8}
# (xs, xz, gs, gz, ys, yz) as uint8 zero points (int8: less 128): many output levels, few,
# saturation at both ends, unit scales
_PARAMS = [(0.02, 128, 0.004, 0, 0.017, 120), (0.1, 3, 0.05, 250, 0.003, 7),
           (0.013, 77, 0.0071, 33, 0.9, 200), (1.0, 0, 1.0, 0, 1.0, 0)]  # fmt: skip


def _zero_points(t: int, params: tuple) -> tuple:
    xs, xz, gs, gz, ys, yz = params
    shift = 128 if t == _S8 else 0
    return xs, xz - shift, gs, gz - shift, ys, yz - shift


def _qlinear_mul(t: int, params: tuple, x_dims: list[int], g_dims: list[int]):
    """onnxruntime's QLinearMul of x and g (what the program ran before the rewrite)."""
    xs, xz, gs, gz, ys, yz = params
    inits = [numpy_helper.from_array(np.array(v, d), n) for v, d, n in (
        (xs, np.float32, "xs"), (xz, _NP[t], "xz"), (gs, np.float32, "gs"),
        (gz, _NP[t], "gz"), (ys, np.float32, "ys"), (yz, _NP[t], "yz"))]  # fmt: skip
    node = helper.make_node("QLinearMul", ["x", "xs", "xz", "g", "gs", "gz", "ys", "yz"], ["y"],
                            domain="com.microsoft")  # fmt: skip
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", t, x_dims),
                              helper.make_tensor_value_info("g", t, g_dims)],
                              [helper.make_tensor_value_info("y", t, None)], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)])


def _channel_mul(t: int, params: tuple, x_dims: list[int], g_dims: list[int]):
    """The op alone, its parameters as the rewrite computes them."""
    xs, xz, gs, gz, ys, yz = params
    p = np.array([channel_muls.ratio(xs, gs, ys), xz, gz, yz], np.float32)
    node = helper.make_node(f"ChannelMul_{'u8' if t == _U8 else 's8'}", ["x", "g", "p"], ["y"],
                            domain=kernels.DOMAIN)  # fmt: skip
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", t, x_dims),
                              helper.make_tensor_value_info("g", t, g_dims)],
                              [helper.make_tensor_value_info("y", t, None)],
                              [numpy_helper.from_array(p, "p")])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(kernels.DOMAIN, 1)])


@pytest.mark.parametrize("t", [_U8, _S8])
@pytest.mark.parametrize("params", _PARAMS)
@pytest.mark.parametrize("level", [2, 1, 0])
def test_the_op_is_qlinear_mul_on_every_byte_pair(library, t, params, level) -> None:
    """All 65536 (x, g) pairs: x[p, c] = p, g[c] = c over 256 pixels of 256 channels, on the
    AVX-512, AVX2 and scalar paths."""
    params = _zero_points(t, params)
    x = np.arange(256, dtype=np.uint8)[:, None].repeat(256, 1)[None].view(_NP[t])
    g = np.arange(256, dtype=np.uint8).view(_NP[t]).reshape(1, 1, 256)
    want = ort.InferenceSession(_qlinear_mul(t, params, [1, 256, 256], [1, 1, 256])
                                .SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, {"x": x, "g": g})[0]  # fmt: skip
    library[1].rknnrt_chanmul_max_level(level)
    got = kernel_session(library, _channel_mul(t, params, [1, 256, 256], [1, 256])
                         ).run(None, {"x": x, "g": g.reshape(1, 256)})[0]  # fmt: skip
    library[1].rknnrt_chanmul_max_level(2)
    assert got.dtype == _NP[t] and got.tobytes() == want.tobytes()
    assert len(np.unique(want)) > 6


@pytest.mark.parametrize("dims, g_images", [([2, 5, 7, 24], 2), ([2, 5, 7, 24], 1),
                                            ([1, 3, 11, 3], 1), ([1, 9, 9, 40], 1),
                                            ([3, 4, 4, 16], 3)])  # fmt: skip
def test_the_op_broadcasts_per_image_and_per_channel(library, dims, g_images) -> None:
    """Images with a gate each or one shared, channel counts whose period is not 16 (3, 24,
    40) and streams that end between two vectors, on two threads."""
    rng = np.random.default_rng(3)
    params = _zero_points(_U8, _PARAMS[0])
    x = rng.integers(0, 256, dims).astype(np.uint8)
    g = rng.integers(0, 256, [g_images, 1, 1, dims[-1]]).astype(np.uint8)
    want = ort.InferenceSession(_qlinear_mul(_U8, params, dims, list(g.shape))
                                .SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, {"x": x, "g": g})[0]  # fmt: skip
    session = kernel_session(library, _channel_mul(_U8, params, dims, [g_images, dims[-1]]), 2)
    got = session.run(None, {"x": x, "g": g.reshape(g_images, dims[-1])})[0]
    assert got.tobytes() == want.tobytes()


def _gated(t: int, params: tuple, x_dims: list[int], g_dims: list[int], gate_first: bool = False,
           g_type: int | None = None, read_product: bool = False, conv_after: bool = False,
           nhwc_input: bool = False) -> bytes:  # fmt: skip
    """x, g -> DequantizeLinear each -> Mul -> QuantizeLinear -> y (an int8 program's gate),
    with the options the rewrite must respect; `conv_after`: y read by a QDQ 1x1 conv (a
    QLinearConv to onnxruntime), `nhwc_input`: x arrives NHWC through a Transpose."""
    xs, xz, gs, gz, ys, yz = params
    g_type = g_type or t
    inits = [numpy_helper.from_array(np.array(v, d), n) for v, d, n in (
        (xs, np.float32, "xs"), (xz, _NP[t], "xz"), (gs, np.float32, "gs"),
        (gz, _NP[g_type], "gz"), (ys, np.float32, "ys"), (yz, _NP[t], "yz"))]  # fmt: skip
    nodes = []
    x_name = "x"
    if nhwc_input:
        nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]))
        x_name = "xt"
    operands = ["gd", "xd"] if gate_first else ["xd", "gd"]
    nodes += [helper.make_node("DequantizeLinear", [x_name, "xs", "xz"], ["xd"]),
              helper.make_node("DequantizeLinear", ["g", "gs", "gz"], ["gd"]),
              helper.make_node("Mul", operands, ["m"]),
              helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", t, None)]
    if read_product:
        outputs.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, None))
    if conv_after:
        c = x_dims[1]
        w = np.random.default_rng(0).integers(-60, 60, [8, c, 1, 1]).astype(np.int8)
        inits += [numpy_helper.from_array(w, "w"), numpy_helper.from_array(
            np.array(0.01, np.float32), "ws"), numpy_helper.from_array(np.array(0, np.int8), "wz"),
            numpy_helper.from_array(np.array(0.05, np.float32), "cs")]  # fmt: skip
        nodes += [helper.make_node("DequantizeLinear", ["y", "ys", "yz"], ["yd"]),
                  helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
                  helper.make_node("Conv", ["yd", "wd"], ["cf"], kernel_shape=[1, 1]),
                  helper.make_node("QuantizeLinear", ["cf", "cs", "yz"], ["cq"])]
        outputs = [helper.make_tensor_value_info("cq", t, None)]
    x_shape = [x_dims[i] for i in (0, 2, 3, 1)] if nhwc_input else x_dims
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", t, x_shape),
                              helper.make_tensor_value_info("g", g_type, g_dims)],
                              outputs, inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("t", [_U8, _S8])
@pytest.mark.parametrize("x_dims, g_dims, gate_first", [
    ([1, 24, 7, 9], [1, 24, 1, 1], False), ([1, 24, 7, 9], [1, 24, 1, 1], True),
    ([2, 16, 5, 5], [2, 16, 1, 1], False), ([2, 16, 5, 5], [1, 16, 1, 1], False),
    ([1, 3, 6, 6], [1, 3, 1, 1], False)])  # fmt: skip
def test_the_rewrite_gives_the_nodes_bytes(library, t, x_dims, g_dims, gate_first) -> None:
    params = _zero_points(t, _PARAMS[0])
    graph = _gated(t, params, x_dims, g_dims, gate_first)
    rewritten, unused = channel_muls.rewrite(graph, {})
    assert not unused
    ops = [n.op_type for n in onnx.load_model_from_string(rewritten).graph.node]
    assert ops == ["Transpose", "Transpose", f"ChannelMul_{'u8' if t == _U8 else 's8'}",
                   "Transpose"]  # fmt: skip
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, x_dims).astype(np.uint8).view(_NP[t])
    g = rng.integers(0, 256, g_dims).astype(np.uint8).view(_NP[t])
    want = ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "g": g})[0]  # fmt: skip
    got = whole.open_program(rewritten).run(None, {"x": x, "g": g})[0]
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    assert len(np.unique(want)) > 20


def test_multiplies_outside_its_conditions_stay(library) -> None:
    """The product read elsewhere, a gate of another type, a gate with a value per element, no
    more than one element per channel, a zero scale, a ratio whose products overflow int32:
    onnxruntime's nodes run."""
    params = _zero_points(_U8, _PARAMS[0])
    for graph in (
        _gated(_U8, params, [1, 8, 4, 4], [1, 8, 1, 1], read_product=True),
        _gated(_U8, params, [1, 8, 4, 4], [1, 8, 1, 1], g_type=_S8),
        _gated(_U8, params, [1, 8, 4, 4], [1, 8, 4, 4]),
        _gated(_U8, params, [1, 8, 1, 1], [1, 8, 1, 1]),
        _gated(_U8, params, [1, 8, 4, 4], [1, 1, 4, 4]),
        _gated(_U8, (0.0, 128, 0.004, 0, 0.017, 120), [1, 8, 4, 4], [1, 8, 1, 1]),
        _gated(_U8, (3.0, 128, 2e4, 0, 1e-3, 120), [1, 8, 4, 4], [1, 8, 1, 1]),
    ):
        assert channel_muls.rewrite(graph, {})[0] is graph


def test_the_rewritten_transposes_cancel_in_onnxruntime(library, tmp_path) -> None:
    """x arriving NHWC and the product read by a QDQ conv: after onnxruntime's layout pass the
    kernel sits where its own QLinearMul sat, the conv in NHWC reading it directly (without the
    recorded shapes the conv stayed in NCHW behind one more Transpose)."""
    params = _zero_points(_U8, _PARAMS[0])
    graph = _gated(_U8, params, [1, 16, 6, 6], [1, 16, 1, 1], conv_after=True, nhwc_input=True)
    ops = {}
    for name, g in (("nodes", graph), ("kernel", channel_muls.rewrite(graph, {})[0])):
        path = str(tmp_path / f"{name}.onnx")
        whole.open_program(g, optimized_model_path=path)
        ops[name] = [n.op_type for n in onnx.load(path).graph.node]
    # (the Transposes: the graph input gate's, and back to the NCHW graph output)
    assert ops["nodes"] == ["Transpose", "QLinearMul", "QLinearConv", "Transpose"]
    assert ops["kernel"] == ["Transpose", "ChannelMul_u8", "QLinearConv", "Transpose"]


def test_the_switch_and_a_missing_compiler_keep_the_nodes(monkeypatch, tmp_path, capsys) -> None:
    graph = _gated(_U8, _zero_points(_U8, _PARAMS[0]), [1, 8, 4, 4], [1, 8, 1, 1])
    assert_switch_and_missing_compiler_keep(monkeypatch, tmp_path, capsys,
                                            switches.INT8_CHANNEL_MUL_KERNEL,
                                            channel_muls.rewrite, graph)  # fmt: skip


def test_an_int8_networks_gates_run_on_the_kernel(library, tmp_path, monkeypatch) -> None:
    """MobileNetV3-small int8: every squeeze-and-excitation multiply on the kernel, and the
    outputs the same bytes as with onnxruntime's QLinearMul."""
    path, rng = int8_network("mobilenetv3_small", tmp_path)
    seen = programs_opened(monkeypatch)
    inputs = [rng.rand(1, 3, 64, 64).astype(np.float32) for _ in range(2)]
    outs = outputs_on_and_off(monkeypatch, switches.INT8_CHANNEL_MUL_KERNEL, path, inputs)
    on_ops, off_ops = seen
    assert on_ops.count("ChannelMul_u8") == off_ops.count("Mul") == 9
    assert "Mul" not in on_ops and "ChannelMul_u8" not in off_ops
    assert all(a.tobytes() == b.tobytes() for a, b in zip(outs["1"], outs["0"]))
