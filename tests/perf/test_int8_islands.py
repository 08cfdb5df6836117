"""core/program/int8_islands.py: int8 convs whose output is not stored are accumulated in
integers (float32(acc) * xs * ws[c]), bit-identical to an int64 reference, whether computed
as one float conv or in input-channel parts summed in int32."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import int8_islands, whole

from .conftest import infer_lite, int8_network

H = 9
XS, XZ = 0.043, 131


@pytest.fixture(autouse=True)
def _float_convs(monkeypatch):
    """These tests are of the float convs on integers: the dense VNNI kernel, which takes them
    on a VNNI CPU, is off (tests/perf/test_qconv_kernel.py compares the two)."""
    monkeypatch.setenv(switches.INT8_CONV_KERNEL.name, "0")


def _model(configs: list[dict], seed: int = 0) -> onnx.ModelProto:
    """One uint8 input of 16 channels; per config an int8 QDQ conv (per-channel or one weight
    zero point, int32 bias on the xs * ws grid) whose float output goes through `tail` (a
    SiLU, a Sigmoid, an Add of the input, that Add then a Relu or a Clip, or nothing) before it
    is quantised. A config's "cin" below 16 convolves the input's first channels (a stem's
    depth); "y_int8" quantises it to int8."""
    rng = np.random.RandomState(seed)
    inits, nodes, outputs = [], [], []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    xs, xz = const("xs", np.array(XS, np.float32)), const("xz", np.array(XZ, np.uint8))
    nodes.append(helper.make_node("DequantizeLinear", ["x", xs, xz], ["xd"]))
    for k, cfg in enumerate(configs):
        cin, cout, group = cfg.get("cin", 16), cfg.get("cout", 8), cfg.get("group", 1)
        xd = "xd"
        if cin != 16:
            xd = f"xd{k}"
            nodes.append(helper.make_node("Slice", ["x", const(f"c0{k}", np.array([0])),
                                                    const(f"c1{k}", np.array([cin])),
                                                    const(f"ax{k}", np.array([1]))], [f"x{k}"]))
            nodes.append(helper.make_node("DequantizeLinear", [f"x{k}", xs, xz], [xd]))
        ks, stride = cfg.get("k", 3), cfg.get("s", 1)
        if group == "dw":
            group = cout = cin
        w = rng.randint(-128, 128, (cout, cin // group, ks, ks)).astype(np.int8)
        per_channel = cfg.get("per_channel", True)
        zp = rng.randint(-40, 40, cout).astype(np.int8)
        ws = (rng.rand(cout) * 0.02 + 0.001).astype(np.float32)
        if not per_channel:
            zp, ws = zp[:1].reshape(()), ws[:1].reshape(())
        bias = rng.randint(-3000, 3001, cout).astype(np.int32)
        bscale = (np.float32(XS) * np.broadcast_to(ws, (cout,))).astype(np.float32)
        if "bias_off_grid" in cfg:
            bscale = bscale * np.float32(1.5)
        nodes.append(helper.make_node("DequantizeLinear", [const(f"w{k}", w), const(f"ws{k}", ws),
                                                           const(f"wz{k}", zp)], [f"wd{k}"],
                                      **({"axis": 0} if per_channel else {})))  # fmt: skip
        nodes.append(helper.make_node("DequantizeLinear", [
            const(f"b{k}", bias), const(f"bs{k}", bscale),
            const(f"bz{k}", np.zeros(cout, np.int32))], [f"bd{k}"], axis=0))  # fmt: skip
        nodes.append(helper.make_node("Conv", [xd, f"wd{k}", f"bd{k}"], [f"c{k}"], group=group,
                                      kernel_shape=[ks, ks], strides=[stride] * 2,
                                      pads=[ks // 2] * 4))  # fmt: skip
        src, tail = f"c{k}", cfg.get("tail", "silu")
        if tail in ("silu", "sigmoid"):
            nodes.append(helper.make_node("Sigmoid", [src], [f"g{k}"]))
            src = f"g{k}"
            if tail == "silu":
                nodes.append(helper.make_node("Mul", [f"c{k}", f"g{k}"], [f"a{k}"]))
                src = f"a{k}"
        elif tail == "hardswish":
            nodes.append(helper.make_node("HardSwish", [src], [f"a{k}"]))
            src = f"a{k}"
        elif tail == "hardsigmoid_mul":  # HardSwish as its two ops, alpha and beta its own
            nodes.append(helper.make_node("HardSigmoid", [src], [f"g{k}"], alpha=0.21, beta=0.47))
            nodes.append(helper.make_node("Mul", [f"g{k}", src], [f"a{k}"]))
            src = f"a{k}"
        elif tail in ("add", "add_relu", "add_clip"):  # a residual: the conv's output + input
            nodes.append(helper.make_node("Add", ["xd", src], [f"a{k}"]))
            src = f"a{k}"
            if tail == "add_relu":
                nodes.append(helper.make_node("Relu", [src], [f"r{k}"]))
                src = f"r{k}"
            elif tail == "add_clip":
                bounds = [const(f"lo{k}", np.array(-1.5, np.float32)),
                          const(f"hi{k}", np.array(6.0, np.float32))]  # fmt: skip
                nodes.append(helper.make_node("Clip", [src, *bounds], [f"r{k}"]))
                src = f"r{k}"
        if tail not in ("quantize", "int8") and not cfg.get("fusable"):  # for the reference
            outputs.append(helper.make_tensor_value_info(f"c{k}", TensorProto.FLOAT, None))
        ys = const(f"ys{k}", np.array(cfg.get("ys", 0.05), np.float32))
        # an int8 output of a uint8 input: onnxruntime fuses nothing
        signed = tail == "int8" or cfg.get("y_int8", False)
        yz = const(f"yz{k}", np.array(3, np.int8) if signed else np.array(128, np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [src, ys, yz], [f"y{k}"]))
        outputs.append(helper.make_tensor_value_info(
            f"y{k}", TensorProto.INT8 if signed else TensorProto.UINT8, None))  # fmt: skip
    graph = helper.make_graph(nodes, "islands", [helper.make_tensor_value_info(
        "x", TensorProto.UINT8, [1, 16, H, H])], outputs, inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _reference(model: onnx.ModelProto, x: np.ndarray, k: int) -> np.ndarray:
    """Config k's conv output by its definition: acc = sum (x - xz)(w - wz[c]) + bias[c] in
    int64, then float32(acc) * float32(xs * ws[c])."""
    acc, m = _accumulator(model, x, k)
    return (acc.astype(np.float32) * m[:, None, None])[None]


def _accumulator(model: onnx.ModelProto, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Config k's int64 accumulator (C, H', W') and float32 xs * ws[c]."""
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    conv = next(n for n in model.graph.node if n.op_type == "Conv" and n.output[0] == f"c{k}")
    attrs = {a.name: (list(a.ints) if a.ints else a.i) for a in conv.attribute}
    w = consts[f"w{k}"].astype(np.int64)
    cout, per_group, ks, _ = w.shape
    wz = np.broadcast_to(consts[f"wz{k}"].astype(np.int64), (cout,))
    w = w - wz[:, None, None, None]
    s, pad, group = attrs["strides"][0], attrs["pads"][0], attrs.get("group", 1)
    xc = np.pad(x[0].astype(np.int64) - XZ, ((0, 0), (pad, pad), (pad, pad)))
    out = (xc.shape[1] - ks) // s + 1
    acc = np.repeat(consts[f"b{k}"].astype(np.int64)[:, None, None], out, 1).repeat(out, 2)
    out_per_group = cout // group
    for o in range(cout):
        first = (o // out_per_group) * per_group
        for i in range(ks):
            for j in range(ks):
                window = xc[first : first + per_group, i : i + s * out : s, j : j + s * out : s]
                acc[o] += np.tensordot(w[o, :, i, j], window, axes=1)
    m = (np.float32(XS) * np.broadcast_to(consts[f"ws{k}"], (cout,))).astype(np.float32)
    return acc, m


def _inputs() -> list[np.ndarray]:
    rng = np.random.RandomState(3)
    extremes = np.where(rng.rand(1, 16, H, H) < 0.5, 0, 255).astype(np.uint8)
    return [rng.randint(0, 256, (1, 16, H, H)).astype(np.uint8) for _ in range(2)] + [extremes]


CONFIGS = [
    {},
    {"k": 1, "tail": "sigmoid", "ys": 0.004},
    {"tail": "add", "cout": 16},
    {"s": 2, "k": 5},
    {"group": 4, "cout": 8},
    {"group": "dw", "k": 5},
    {"per_channel": False, "k": 1},
    {"tail": None, "ys": 0.5},  # a float output: never fused
]


def _rewritten(model: onnx.ModelProto, limit: float = float(2**24)) -> onnx.ModelProto:
    fast = onnx.ModelProto()
    fast.CopyFrom(model)
    assert int8_islands.islands_as_integers(fast.graph, {}, limit) == len(CONFIGS)
    assert not any(n.op_type == "Conv" and n.input[1].startswith("wd") for n in fast.graph.node)
    return fast


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    return whole.open_program(model.SerializeToString()).run(None, {"x": x})


def test_islands_equal_the_integer_definition() -> None:
    model = _model(CONFIGS)
    fast = _rewritten(model)
    for x in _inputs():
        plain, quick = _run(model, x), _run(fast, x)
        for k in range(len(CONFIGS)):
            conv, q = quick[2 * k], quick[2 * k + 1]
            assert np.ptp(q) > 50, CONFIGS[k]
            assert conv.tobytes() == _reference(model, x, k).tobytes(), CONFIGS[k]
            # the float path it replaces sums in another order: close, not always equal
            np.testing.assert_allclose(conv, plain[2 * k], rtol=1e-5, atol=1e-4)


def test_parts_summed_in_int32_equal_one_conv() -> None:
    """A limit small enough to split the dense convs into input-channel parts (the path a
    conv beyond 2^24 takes) gives the same bytes as the one-conv path and the reference."""
    model = _model([c for c in CONFIGS if c.get("group", 1) == 1])
    whole_convs, split = onnx.ModelProto(), onnx.ModelProto()
    whole_convs.CopyFrom(model)
    split.CopyFrom(model)
    count = len(model.graph.output) // 2
    assert int8_islands.islands_as_integers(whole_convs.graph, {}) == count
    assert int8_islands.islands_as_integers(split.graph, {}, limit=2.0**20) == count
    assert sum(n.op_type == "Slice" for n in split.graph.node) > count
    for x in _inputs():
        for a, b in zip(_run(whole_convs, x), _run(split, x)):
            assert a.tobytes() == b.tobytes()


def test_parts_bound_every_sum() -> None:
    rng = np.random.RandomState(0)
    w = rng.randint(-255, 256, (6, 40, 3, 3)).astype(np.int64)
    bias = rng.randint(-10**6, 10**6, 6).astype(np.int64)
    limit = 2.0**21
    ranges = int8_islands.parts(w, bias, 255, 1, limit)
    assert ranges is not None and len(ranges) > 1
    assert ranges[0][0] == 0 and ranges[-1][1] == 40
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    for k, (a, b) in enumerate(ranges):
        total = np.abs(w[:, a:b]).sum(axis=(1, 2, 3)) * 255 + (np.abs(bias) if k == 0 else 0)
        assert total.max() < limit
    assert int8_islands.parts(w, bias, 255, 1) == [(0, 40)]
    assert int8_islands.parts(w, bias, 255, 2, limit) is None  # grouped: not split


@pytest.mark.parametrize("config", [
    {"tail": "quantize"},  # Conv -> QuantizeLinear: onnxruntime's integer kernel already
    {"bias_off_grid": True},  # a bias not on the accumulator's grid
])  # fmt: skip
def test_convs_outside_the_rule_are_left(config) -> None:
    model = _model([config])
    assert int8_islands.islands_as_integers(model.graph, {}) == 0


def test_unfused_stored_outputs_are_requantised_as_integer_kernels_do() -> None:
    """Conv -> QuantizeLinear with a uint8 input and an int8 output (the program's int8 graph
    outputs) is not fused by onnxruntime: rewritten, it rounds float32(acc) *
    float32(xs * ws / ys) once, as QLinearConv does."""
    configs = [{"tail": "int8", "ys": 0.5}, {"tail": "int8", "k": 1, "ys": 0.3, "group": 4}]
    model = _model(configs)
    fast = onnx.ModelProto()
    fast.CopyFrom(model)
    assert int8_islands.islands_as_integers(fast.graph, {}) == 2
    assert not any(n.op_type == "Conv" and n.input[1].startswith("wd") for n in fast.graph.node)
    for x in _inputs():
        quick = _run(fast, x)
        for k, cfg in enumerate(configs):
            acc, m = _accumulator(model, x, k)
            m = (m / np.float32(cfg["ys"])).astype(np.float32)
            expect = np.clip(np.rint(acc.astype(np.float32) * m[:, None, None]) + 3, -128,
                             127).astype(np.int8)[None]  # fmt: skip
            assert np.ptp(quick[k].astype(np.int64)) > 50
            assert quick[k].tobytes() == expect.tobytes()


def _matrix_model(op: str, trans_b: int, tail: str, seed: int = 0) -> onnx.ModelProto:
    """x (uint8, 5 x 40) -> Gemm/MatMul with int8 per-column weights (Gemm: int32 bias) ->
    Sigmoid then QuantizeLinear (an island), or an int8 QuantizeLinear (stored, unfused)."""
    rng = np.random.RandomState(seed)
    n, k = 12, 40
    w = rng.randint(-128, 128, (n, k) if trans_b else (k, n)).astype(np.int8)
    ws = (rng.rand(n) * 0.02 + 0.001).astype(np.float32)
    wz = rng.randint(-40, 40, n).astype(np.int8)
    inits = [numpy_helper.from_array(v, name) for name, v in [
        ("xs", np.array(XS, np.float32)), ("xz", np.array(XZ, np.uint8)), ("w", w),
        ("ws", ws), ("wz", wz), ("b", rng.randint(-3000, 3001, n).astype(np.int32)),
        ("bs", (np.float32(XS) * ws).astype(np.float32)), ("bz", np.zeros(n, np.int32)),
        ("ys", np.array(0.004 if tail == "sigmoid" else 0.4, np.float32)),
        ("yz", np.array(0, np.uint8) if tail == "sigmoid" else np.array(-5, np.int8))]]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"],
                              axis=0 if trans_b else 1)]  # fmt: skip
    if op == "Gemm":
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0))
        nodes.append(helper.make_node("Gemm", ["xd", "wd", "bd"], ["c"], transB=trans_b))
    else:
        nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["c"]))
    src = "c"
    if tail == "sigmoid":
        nodes.append(helper.make_node("Sigmoid", ["c"], ["g"]))
        src = "g"
    nodes.append(helper.make_node("QuantizeLinear", [src, "ys", "yz"], ["y"]))
    out_type = TensorProto.UINT8 if tail == "sigmoid" else TensorProto.INT8
    graph = helper.make_graph(nodes, "matrix", [helper.make_tensor_value_info(
        "x", TensorProto.UINT8, [5, k])], [helper.make_tensor_value_info("y", out_type, None)],
        inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("op, trans_b", [("Gemm", 1), ("Gemm", 0), ("MatMul", 0)])
@pytest.mark.parametrize("tail", ["sigmoid", "int8"])
@pytest.mark.parametrize("limit", [2.0**24, 2.0**18])  # one product, or parts in int32
def test_matrix_products_follow_the_integer_definition(op, trans_b, tail, limit) -> None:
    model = _matrix_model(op, trans_b, tail)
    fast = onnx.ModelProto()
    fast.CopyFrom(model)
    assert int8_islands.islands_as_integers(fast.graph, {}, limit) == 1
    assert (sum(n.op_type == "Slice" for n in fast.graph.node) > 0) == (limit < 2**24)
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    w = consts["w"].astype(np.int64)
    w = (w if trans_b else w.T) - consts["wz"].astype(np.int64)[:, None]
    m = (np.float32(XS) * consts["ws"]).astype(np.float32)
    rng = np.random.RandomState(4)
    for x in [rng.randint(0, 256, (5, 40)).astype(np.uint8), np.full((5, 40), 255, np.uint8)]:
        acc = (x.astype(np.int64) - XZ) @ w.T
        if op == "Gemm":
            acc = acc + consts["b"]
        ys, yz = np.float32(consts["ys"]), int(consts["yz"])
        if tail == "sigmoid":
            real = (acc.astype(np.float32) * m).astype(np.float32)
            got = _run(fast, x)[0].astype(np.int64)
            plain = _run(model, x)[0].astype(np.int64)  # the float path: at most a step away
            expect = _run(_sigmoid_quantizer(ys, yz), real)[0].astype(np.int64)
            assert np.abs(plain - got).max() <= 1
        else:
            expect = np.clip(np.rint(acc.astype(np.float32) * (m / ys)) + yz, -128, 127)
            got = _run(fast, x)[0].astype(np.int64)
        assert np.ptp(got) > 20
        assert np.array_equal(got, expect)


def _sigmoid_quantizer(ys: np.float32, yz: int) -> onnx.ModelProto:
    """Sigmoid then QuantizeLinear on a float input: the tail of the island, alone."""
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["g"]),
         helper.make_node("QuantizeLinear", ["g", "ys", "yz"], ["y"])], "tail",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        [numpy_helper.from_array(np.array(ys, np.float32), "ys"),
         numpy_helper.from_array(np.array(yz, np.uint8), "yz")])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenetv3_small", "efficientnet_b0"])
def test_networks_give_the_same_bytes_with_parts_everywhere(name, tmp_path,
                                                             monkeypatch) -> None:  # fmt: skip
    """On a real architecture (SiLU/HardSwish/SE convs, the classifier's Gemm), the one-product
    path and the int32 sum of parts (a bound of 2^20 splits a third of them) agree bit for bit."""
    from tools.real_arch import catalog

    path, rng = int8_network(name, tmp_path)
    shape = catalog.input_shape(name, test=True)
    x = rng.rand(*shape).astype(np.float32) * 1.5 - 0.2

    def infer() -> list[np.ndarray]:
        return infer_lite(path, [x])[0]

    counts: list[int] = []
    original = int8_islands.islands_as_integers
    monkeypatch.setattr(int8_islands, "islands_as_integers",
                        lambda g, w, limit=2.0**24: counts.append(original(g, w, limit))
                        or counts[-1])  # fmt: skip
    one = infer()
    monkeypatch.setattr(int8_islands, "islands_as_integers",
                        lambda g, w, limit=2.0**24: counts.append(original(g, w, 2.0**20))
                        or counts[-1])  # fmt: skip
    split = infer()
    assert counts[0] > 10 and counts[1] == counts[0]  # all of them, many in parts
    for a, b in zip(one, split):
        assert np.ptp(a) > 0
        assert a.tobytes() == b.tobytes()
