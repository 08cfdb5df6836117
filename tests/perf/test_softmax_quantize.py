"""core/program/softmax_quantize.py and the kernels `rknnrt.kernels::QuantizeFloat_<t>`: an
int8 program's DequantizeLinear -> Softmax -> QuantizeLinear gives its nodes' bytes, not those of
onnxruntime's QLinearSoftmax fusion."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import softmax_quantize, whole
from rknnrt.sessions import kernels
from tests.perf.conftest import (
    assert_switch_and_missing_compiler_keep,
    kernel_session,
    one_input_model,
    programs_opened,
)
from tests.vendor.test_vendor_arch import ARCH

_U8, _S8 = TensorProto.UINT8, TensorProto.INT8
_NP = {_U8: np.uint8, _S8: np.int8}


def _quantize_model(t: int, scale: float, zp: int, op: bool) -> onnx.ModelProto:
    """x (float32 [n]) -> QuantizeLinear, or the kernel's op with the same parameters."""
    if op:
        node = helper.make_node(f"QuantizeFloat_{'u8' if t == _U8 else 's8'}", ["x", "p"], ["y"],
                                domain=kernels.DOMAIN)  # fmt: skip
        inits = [numpy_helper.from_array(np.array([scale, zp], np.float32), "p")]
    else:
        node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
        inits = [numpy_helper.from_array(np.array(scale, np.float32), "s"),
                 numpy_helper.from_array(np.array(zp, _NP[t]), "z")]  # fmt: skip
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [None])],
                              [helper.make_tensor_value_info("y", t, None)], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(kernels.DOMAIN, 1)])


@pytest.mark.parametrize("t, zp", [(_U8, 0), (_U8, 131), (_S8, -128), (_S8, 5)])
@pytest.mark.parametrize("level", [2, 1, 0])
def test_the_op_is_quantize_linear(library, t, zp, level) -> None:
    """Values on the grid, on its half steps (ties to even), beyond both ends, infinities and
    NaN (the type's minimum, as onnxruntime's), on the AVX-512, AVX2 and scalar paths, in a
    length that leaves a tail."""
    rng = np.random.default_rng(level)
    scale = 0.0037048357
    steps = rng.integers(-300, 300, 4001)
    x = np.concatenate([rng.uniform(0, 1, 4001), steps * np.float32(scale),
                        (steps + 0.5) * np.float32(scale),
                        [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30]]).astype(np.float32)
    want = ort.InferenceSession(_quantize_model(t, scale, zp, op=False).SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    library[1].rknnrt_inputcast_max_level(level)
    try:
        got = kernel_session(library, _quantize_model(t, scale, zp, op=True)).run(None, {"x": x})[0]
    finally:
        library[1].rknnrt_inputcast_max_level(2)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def _softmax_graph(t: int, read_twice: bool = False, y_scale: float = 0.0037048357) -> bytes:
    """x -> DequantizeLinear -> Softmax(last axis) -> QuantizeLinear -> y (a DeiT attention's
    probabilities: 197 keys)."""
    zp = 0 if t == _U8 else -128
    inits = [numpy_helper.from_array(v, n) for v, n in (
        (np.array(0.08, np.float32), "xs"), (np.array(zp + 100, _NP[t]), "xz"),
        (np.array(y_scale, np.float32), "ys"), (np.array(zp, _NP[t]), "yz"))]  # fmt: skip
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["d"]),
             helper.make_node("Softmax", ["d"], ["s"], axis=-1),
             helper.make_node("QuantizeLinear", ["s", "ys", "yz"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", t, None)]
    if read_twice:
        outputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, None))
    return one_input_model(nodes, t, [1, 3, 197, 197], outputs, inits)


def _run(graph: bytes, x: np.ndarray, optimise: bool) -> np.ndarray:
    options = ort.SessionOptions()
    if not optimise:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]  # fmt: skip


@pytest.mark.parametrize("t", [_U8, _S8])
def test_the_program_gives_the_nodes_bytes_not_the_fusions(library, t) -> None:
    graph = _softmax_graph(t)
    rewritten, unused = softmax_quantize.rewrite(graph, {})
    assert not unused
    ops = [n.op_type for n in onnx.load_model_from_string(rewritten).graph.node]
    assert ops == ["DequantizeLinear", "Softmax", f"QuantizeFloat_{'u8' if t == _U8 else 's8'}"]
    x = np.random.default_rng(0).integers(0, 256, (1, 3, 197, 197)).astype(np.uint8).view(_NP[t])
    nodes = _run(graph, x, optimise=False)
    got = whole.open_program(rewritten).run(None, {"x": x})[0]
    assert got.tobytes() == nodes.tobytes()
    # what the program ran before: onnxruntime's QLinearSoftmax, floor(1 / 0.0037) = 269
    fused = _run(graph, x, optimise=True).astype(np.int32)
    off = np.abs(fused - nodes.astype(np.int32))
    assert off.max() == 1 and 100 < np.count_nonzero(off) < 2000


def test_softmaxes_outside_its_conditions_stay(library) -> None:
    for graph in (_softmax_graph(_U8, read_twice=True), _softmax_graph(_U8, y_scale=0.0)):
        assert softmax_quantize.rewrite(graph, {})[0] is graph


def test_the_switch_and_a_missing_compiler_keep_the_nodes(monkeypatch, tmp_path, capsys) -> None:
    assert_switch_and_missing_compiler_keep(monkeypatch, tmp_path, capsys,
                                            switches.INT8_EXACT_SOFTMAX, softmax_quantize.rewrite,
                                            _softmax_graph(_U8))  # fmt: skip


def test_a_vendor_transformers_softmax_runs_so(library, monkeypatch) -> None:
    """The vendor transformer fixture's attention Softmax (tests/vendor/test_vendor_layers.py
    checks its values against the simulator's, layer by layer)."""
    import rknnrt as rk

    seen = programs_opened(monkeypatch)
    blob = (ARCH / "transformer_rk3588_i8.rknn").read_bytes()
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, blob, len(blob), 0, None) == rk.RKNN_SUCC
    rk.rknn_destroy(ctx)
    assert sum(ops.count("QuantizeFloat_u8") + ops.count("QuantizeFloat_s8") for ops in seen) == 1
