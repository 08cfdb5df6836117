"""core/program/int8_depthwise.py: depthwise int8 convs with per-channel weight zero points leave
onnxruntime's slow QLinearConv path with bit-identical outputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core.program import int8_depthwise, whole
from tools.real_arch import catalog

from .conftest import infer_lite, int8_network

C, H = 24, 9


def _qdq_model(configs: list[dict], seed: int = 0) -> onnx.ModelProto:
    """One uint8 input; per config a depthwise QDQ conv (per-channel weight zero points, int32
    bias) whose quantised output is a graph output, optionally through an activation."""
    rng = np.random.RandomState(seed)
    inits, nodes, outputs = [], [], []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    xs, xz = const("xs", np.array(0.043, np.float32)), const("xz", np.array(131, np.uint8))
    nodes.append(helper.make_node("DequantizeLinear", ["x", xs, xz], ["xd"]))
    for k, cfg in enumerate(configs):
        ks, stride, dil = cfg.get("k", 3), cfg.get("s", 1), cfg.get("d", 1)
        w = rng.randint(-128, 128, (C, 1, ks, ks)).astype(np.int8)
        zp = cfg.get("zp", rng.randint(-40, 40, C)).astype(np.int8)
        ws = (rng.rand(C) * 0.02 + 0.001).astype(np.float32)
        bias = rng.randint(-cfg.get("bias", 3000), cfg.get("bias", 3000) + 1, C).astype(np.int32)
        if "bias_all" in cfg:
            bias[:] = cfg["bias_all"]
        nodes.append(helper.make_node("DequantizeLinear", [const(f"w{k}", w), const(f"ws{k}", ws),
                                                           const(f"wz{k}", zp)], [f"wd{k}"],
                                      axis=0))  # fmt: skip
        nodes.append(helper.make_node("DequantizeLinear", [
            const(f"b{k}", bias), const(f"bs{k}", (ws * np.float32(0.043)).astype(np.float32)),
            const(f"bz{k}", np.zeros(C, np.int32))], [f"bd{k}"], axis=0))  # fmt: skip
        pad = dil * (ks - 1) // 2
        nodes.append(helper.make_node("Conv", ["xd", f"wd{k}", f"bd{k}"], [f"c{k}"], group=C,
                                      kernel_shape=[ks, ks], strides=[stride] * 2,
                                      dilations=[dil] * 2, pads=[pad] * 4))  # fmt: skip
        src = f"c{k}"
        ys = const(f"ys{k}", np.array(cfg.get("ys", 0.09), np.float32))
        yz = const(f"yz{k}", np.array(cfg.get("yz", 120), np.uint8))
        act = cfg.get("act")
        if act == "relu":
            nodes.append(helper.make_node("Relu", [src], [f"a{k}"]))
            src = f"a{k}"
        elif act is not None:  # ("clip", low, high)
            lo, hi = const(f"lo{k}", np.array(act[1], np.float32)), \
                const(f"hi{k}", np.array(act[2], np.float32))  # fmt: skip
            nodes.append(helper.make_node("Clip", [src, lo, hi], [f"a{k}"]))
            src = f"a{k}"
        nodes.append(helper.make_node("QuantizeLinear", [src, ys, yz], [f"y{k}"]))
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.UINT8, None))
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info(
        "x", TensorProto.UINT8, [1, C, H, H])], outputs, inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    """The outputs with the runtime's own session policy (exact int8 kernels where this
    CPU's fast ones saturate: sessions/int8_kernels.py)."""
    session = whole.open_program(model.SerializeToString())
    return session.run(None, {"x": x})


def _exact(model: onnx.ModelProto, x: np.ndarray, k: int) -> np.ndarray:
    """Config k's output computed in int64 with numpy: sum (x - xz)(w - wz[c]) + bias, then
    round_half_even(float32(acc) * float32(xs * ws[c] / ys)) + yz, saturated."""
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    conv = next(n for n in model.graph.node if n.op_type == "Conv" and n.output[0] == f"c{k}")
    attrs = {a.name: list(a.ints) for a in conv.attribute if a.ints}
    (ks, _), (s, _), (d, _), pad = attrs["kernel_shape"], attrs["strides"], \
        attrs["dilations"], attrs["pads"][0]  # fmt: skip
    w = consts[f"w{k}"].astype(np.int64) - consts[f"wz{k}"].astype(np.int64)[:, None, None, None]
    xc = np.pad(x[0].astype(np.int64) - int(consts["xz"]), ((0, 0), (pad, pad), (pad, pad)))
    out = (xc.shape[1] - d * (ks - 1) - 1) // s + 1
    acc = np.repeat(consts[f"b{k}"].astype(np.int64)[:, None, None], out, 1).repeat(out, 2)
    for i in range(ks):
        for j in range(ks):
            window = xc[:, i * d : i * d + s * out : s, j * d : j * d + s * out : s]
            acc += window * w[:, 0, i, j][:, None, None]
    m = (np.float32(consts["xs"]) * consts[f"ws{k}"]) / np.float32(consts[f"ys{k}"])
    y = np.rint(acc.astype(np.float32) * m[:, None, None]) + int(consts[f"yz{k}"])
    return np.clip(y, 0, 255).astype(np.uint8)[None]


def _inputs() -> list[np.ndarray]:
    rng = np.random.RandomState(3)
    extremes = np.where(rng.rand(1, C, H, H) < 0.5, 0, 255).astype(np.uint8)
    return [rng.randint(0, 256, (1, C, H, H)).astype(np.uint8) for _ in range(3)] + [extremes]


CONFIGS = [
    {},
    {"s": 2},
    {"k": 5},
    {"d": 2},
    {"ys": 0.01, "yz": 250},  # saturating both ways
    {"act": "relu", "yz": 0},  # onnxruntime drops the Relu: zero point 0
    {"act": ("clip", 0.0, 6.0), "yz": 0, "ys": 6.0 / 255},  # a ReLU6 it drops
    {"bias": 2**22},  # large biases, still exact
]


def test_rewritten_convs_give_identical_outputs() -> None:
    model = _qdq_model(CONFIGS)
    fast = onnx.ModelProto()
    fast.CopyFrom(model)
    assert int8_depthwise.depthwise_as_float(fast.graph, {}) == len(CONFIGS)
    assert not any(n.op_type == "Conv" and n.input[1].startswith("wd") for n in fast.graph.node)
    for x in _inputs():
        plain, quick = _run(model, x), _run(fast, x)
        for k, (a, b) in enumerate(zip(plain, quick)):
            assert np.ptp(a) > 50, CONFIGS[k]  # values that vary, so equality means something
            assert a.tobytes() == b.tobytes(), CONFIGS[k]
            assert b.tobytes() == _exact(model, x, k).tobytes(), CONFIGS[k]


@pytest.mark.parametrize("config", [
    {"zp": np.full(C, 3)},  # one zero point: onnxruntime's kernel is fast already
    {"act": "relu", "yz": 5},  # a Relu onnxruntime keeps (float path)
    {"act": ("clip", 0.0, 6.0), "yz": 0, "ys": 0.05},  # a Clip it keeps: range beyond 6
    {"bias_all": 2**24 - 1000},  # the float32 sum could round: not exact
])  # fmt: skip
def test_convs_outside_the_rule_are_left(config) -> None:
    model = _qdq_model([config])
    assert int8_depthwise.depthwise_as_float(model.graph, {}) == 0


def test_external_weights_are_read_and_reported_unused() -> None:
    model = _qdq_model([{}])
    weights = {}
    for tensor in list(model.graph.initializer):
        if tensor.name in ("w0", "wz0", "b0"):
            weights[tensor.name] = numpy_helper.to_array(tensor)
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            tensor.external_data.add(key="location", value="weights")
    graph, unused = int8_depthwise.rewrite(model.SerializeToString(), weights)
    assert unused == {"w0", "wz0", "b0"}
    assert not any(t.name in unused for t in onnx.load_model_from_string(graph).graph.initializer)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenetv2", "mobilenetv3_small", "shufflenetv2"])
def test_networks_run_identically_with_and_without(name, tmp_path, monkeypatch) -> None:
    shape = catalog.input_shape(name, test=True)
    path, rng = int8_network(name, tmp_path)
    inputs = [rng.rand(*shape).astype(np.float32) * 1.5 - 0.2 for _ in range(2)]
    counts: list[int] = []
    original = int8_depthwise.depthwise_as_float
    monkeypatch.setattr(int8_depthwise, "depthwise_as_float",
                        lambda g, w: counts.append(original(g, w)) or counts[-1])  # fmt: skip
    fast = infer_lite(path, inputs)
    assert counts and counts[0] > 0
    monkeypatch.setenv("RKNNRT_INT8_DEPTHWISE", "0")
    plain = infer_lite(path, inputs)
    for f, p in zip(fast, plain):
        for a, b in zip(f, p):
            assert np.ptp(a) > 0
            assert a.tobytes() == b.tobytes()
