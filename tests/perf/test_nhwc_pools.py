"""An int8 global average pool between rknnrt's NHWC kernels, channels-last
(core/program/nhwc_pools.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core.program import nhwc_pools, whole

from .conftest import int8_network

_U8, _S8 = TensorProto.UINT8, TensorProto.INT8
# (channels, height, width, x scale, x zero point, y scale, y zero point)
CASES = [(96, 7, 7, 0.05, 3, 0.02, 128), (576, 7, 7, 0.1, 0, 0.013, 5),
         (16, 56, 56, 0.03, 130, 0.031, 2), (24, 13, 17, 0.011, 77, 0.0037, 200),
         (8, 1, 1, 0.1, 0, 0.1, 0)]  # fmt: skip


def _params(t: int, xs: float, xz: int, ys: float, yz: int) -> list:
    zero = np.uint8 if t == _U8 else np.int8
    shift = 0 if t == _U8 else 128
    return [numpy_helper.from_array(np.array(xs, np.float32), "xs"),
            numpy_helper.from_array(np.array(xz - shift, zero), "xz"),
            numpy_helper.from_array(np.array(ys, np.float32), "ys"),
            numpy_helper.from_array(np.array(yz - shift, zero), "yz")]  # fmt: skip


def _pool_graph(t: int, case: tuple, reader: str = "transpose", y_type: int | None = None,
                from_nhwc: bool = True) -> bytes:  # fmt: skip
    """x (NHWC when `from_nhwc`, as a kernel writes it) -> [Transpose to NCHW] ->
    DequantizeLinear -> GlobalAveragePool -> QuantizeLinear -> a Transpose back to NHWC
    (`reader` "transpose"), or the pool also read by an Identity ("twice")."""
    c, h, w, xs, xz, ys, yz = case
    inits = _params(t, xs, xz, ys, yz)
    if y_type is not None and y_type != t:  # the QuantizeLinear to the other 8-bit type
        inits[3] = numpy_helper.from_array(np.array(yz, np.uint8 if y_type == _U8 else np.int8),
                                           "yz")  # fmt: skip
    nodes = [helper.make_node("Transpose", ["x"], ["xn"], perm=[0, 3, 1, 2])] if from_nhwc else []
    nodes += [helper.make_node("DequantizeLinear", ["xn" if from_nhwc else "x", "xs", "xz"],
                               ["d"]),
              helper.make_node("GlobalAveragePool", ["d"], ["g"]),
              helper.make_node("QuantizeLinear", ["g", "ys", "yz"], ["q"]),
              helper.make_node("Transpose", ["q"], ["y"], perm=[0, 2, 3, 1])]  # fmt: skip
    outputs = [helper.make_tensor_value_info("y", y_type or t, None)]
    if reader == "twice":
        nodes.append(helper.make_node("Identity", ["g"], ["g2"]))
        outputs.append(helper.make_tensor_value_info("g2", TensorProto.FLOAT, None))
    dims = [2, h, w, c] if from_nhwc else [2, c, h, w]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", t, dims)],
                              outputs, inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _inputs(t: int, dims: list[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lo, hi = (0, 256) if t == _U8 else (-128, 128)
    dtype = np.uint8 if t == _U8 else np.int8
    spread = rng.integers(lo, hi, dims).astype(dtype)
    narrow = rng.integers(lo + 120, lo + 136, dims).astype(dtype)  # means near .5 steps
    return [spread, narrow, np.full(dims, hi - 1, dtype), np.full(dims, lo, dtype)]


@pytest.mark.parametrize("t", [_U8, _S8], ids=["u8", "s8"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}")
def test_the_channels_last_pool_gives_the_three_nodes_bytes(t, case) -> None:
    """onnxruntime's QLinearGlobalAveragePool as it fuses the three nodes (NCHW: what the
    program ran) and the rewrite's channels-last op agree on every output byte. (The three
    nodes unoptimised are float32 steps of their own, one step apart on some inputs: all-zero
    bytes of 96x7x7.)"""
    graph = _pool_graph(t, case)
    rewritten = nhwc_pools.rewrite(graph, {})[0]
    ops = [(n.op_type, n.domain) for n in onnx.load_model_from_string(rewritten).graph.node]
    assert ops == [("QLinearGlobalAveragePool", "com.microsoft"), ("Transpose", ""),
                   ("Transpose", "")]  # fmt: skip
    sessions = []
    for g, level in ((graph, ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
                     (rewritten, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)):  # fmt: skip
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        sessions.append(ort.InferenceSession(g, options, providers=["CPUExecutionProvider"]))
    c, h, w = case[:3]
    for x in _inputs(t, [2, h, w, c], seed=c):
        got = [s.run(None, {"x": x})[0] for s in sessions]
        assert got[0].shape == (2, 1, 1, c)
        assert got[0].tobytes() == got[1].tobytes()
    assert len(np.unique(got[0])) == 1  # (the last input: one value everywhere)


def test_pools_outside_its_conditions_stay() -> None:
    case = CASES[1]
    for graph in (_pool_graph(_U8, case, from_nhwc=False),  # not a kernel's NHWC output
                  _pool_graph(_U8, case, reader="twice"),  # the float mean read twice
                  _pool_graph(_U8, case, y_type=_S8)):  # fmt: skip  (onnxruntime's op: one type)
        assert nhwc_pools.rewrite(graph, {})[0] is graph


def test_the_transposes_cancel_around_the_pool(tmp_path) -> None:
    """After onnxruntime's optimiser only the pool is left: the kernel-side Transposes cancel
    (in the three nodes' graph onnxruntime keeps both)."""
    graph = _pool_graph(_U8, CASES[0])
    ops = {}
    for name, g in (("nodes", graph), ("rewritten", nhwc_pools.rewrite(graph, {})[0])):
        path = str(tmp_path / f"{name}.onnx")
        whole.open_program(g, optimized_model_path=path)
        ops[name] = [n.op_type for n in onnx.load(path).graph.node]
    assert ops["nodes"] == ["Transpose", "QLinearGlobalAveragePool", "Transpose"]
    assert ops["rewritten"] == ["QLinearGlobalAveragePool"]


@pytest.mark.slow
def test_an_int8_networks_pool_reads_the_kernels_nhwc_output(library, tmp_path,
                                                             monkeypatch) -> None:  # fmt: skip
    """MobileNetV2 int8 with every conv on the kernels (the dense one on its scalar path where
    the CPU has no VNNI, and every depth on it): no QLinearConv is left, so onnxruntime's own
    NHWC pass does not run; the global pool reads the last conv's NHWC output, and the one
    Transpose left is the pool's [N, 1, 1, C] result before the Flatten (without the rewrite:
    the 1280-channel conv output before the pool)."""
    from rknnrt.core.program import qconv_kernel
    from rknnrt.lite import RKNNLite

    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_qconv_vnni"), True)
    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_cpu_amx_int8"), False)
    path, rng = int8_network("mobilenetv2", tmp_path)
    optimised: list[str] = []
    real = whole.open_program

    def recording(graph, *args, **kwargs):
        kwargs["optimized_model_path"] = str(tmp_path / f"opt{len(optimised)}.onnx")
        optimised.append(kwargs["optimized_model_path"])
        return real(graph, *args, **kwargs)

    monkeypatch.setattr(whole, "open_program", recording)
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    out = runtime.inference([rng.rand(1, 3, 64, 64).astype(np.float32)], data_format="nchw")
    runtime.release()
    assert np.isfinite(out[0]).all() and np.ptp(out[0]) > 0
    nodes = onnx.load(optimised[-1], load_external_data=False).graph.node
    ops = [n.op_type for n in nodes]
    assert "QLinearConv" not in ops and ops.count("QLinearGlobalAveragePool") == 1, ops
    transposes = [n for n in nodes if n.op_type == "Transpose"]
    pool = nodes[ops.index("QLinearGlobalAveragePool")]
    assert len(transposes) == 1 and transposes[0].input[0] == pool.output[0], ops
