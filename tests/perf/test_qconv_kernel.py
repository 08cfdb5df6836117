"""sessions/kernels' dense int8 conv (qconv.c, core/program/qconv_kernel.py): its values are the
int64 definition's, bit for bit, on both paths (VNNI and scalar), over threads, in place of
int8_islands' float convs on integers (convs, Gemms, MatMuls) and on a whole network; it runs
only where the CPU has VNNI and the switch is on."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from rknnrt.core import switches
from rknnrt.core.program import int8_islands, qconv_kernel, whole
from rknnrt.sessions import kernels

from .conftest import infer_lite, int8_network, kernel_session
from .test_int8_islands import CONFIGS, XS, XZ, H, _inputs, _matrix_model, _model
from .test_int8_islands import _reference as _island_reference

TYPES = {"u8": (TensorProto.UINT8, 0, 255), "s8": (TensorProto.INT8, -128, 127),
         "f": (TensorProto.FLOAT, None, None)}  # fmt: skip


def _reference(x, centred, bias, m, xz, yz, kernel, stride, pads, dilation, y):
    """NHWC int64: acc = sum (x - xz)(w - wz) + bias (x = xz outside the image), then
    float32(acc) * m, rounded half to even, + yz and saturated for an int8 y."""
    n, h, w, _ = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    xp = np.zeros((n, h + pads[0] + pads[2], w + pads[1] + pads[3], x.shape[3]), np.int64)
    xp[:, pads[0] : pads[0] + h, pads[1] : pads[1] + w] = x.astype(np.int64) - xz
    oh = (xp.shape[1] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[2] - dw * (kw - 1) - 1) // sw + 1
    acc = np.zeros((n, oh, ow, centred.shape[0]), np.int64) + bias
    for i in range(kh):
        for j in range(kw):
            window = xp[:, i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                        j * dw : j * dw + sw * (ow - 1) + 1 : sw]  # fmt: skip
            acc += window @ centred[:, :, i, j].T
    assert np.abs(acc).max() < 2**31
    real = acc.astype(np.float32) * m
    if y == "f":
        return real, acc
    lo, hi = TYPES[y][1:]
    return np.clip(np.rint(np.clip(real, lo - yz, hi - yz)) + yz, lo, hi), acc


# (C, OC, H, W, kernel, stride, pads t/l/b/r, dilation, y type)
CASES = [
    (32, 24, 9, 9, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), "u8"),  # rows read in place
    (30, 70, 7, 11, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), "s8"),  # C % 4 = 2: gathered, OC tail
    (3, 16, 17, 15, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), "u8"),  # a stem's K = 27
    (16, 100, 10, 13, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), "f"),  # dilation, float y
    (64, 65, 8, 8, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "u8"),  # K = 576, 5 channel blocks
    (8, 5, 5, 3, (1, 1), (2, 1), (0, 0, 0, 0), (1, 1), "s8"),  # strided 1x1, fewer than 6 rows
    (12, 40, 9, 8, (3, 5), (2, 1), (1, 0, 1, 2), (1, 2), "f"),  # asymmetric everything
    (3, 24, 23, 21, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), "u8"),  # 21-byte window rows
    (3, 16, 20, 20, (6, 6), (2, 2), (2, 2, 2, 2), (1, 1), "s8"),  # a YOLOv5 stem's 18
    (16, 20, 9, 10, (3, 4), (1, 1), (1, 1, 1, 2), (1, 1), "u8"),  # 64: four 16-byte copies
]


def _arrays(case, seed: int, symmetric: bool = False):
    """(x, centred, bias, m, xz, yz); `symmetric`: weight zero points 0 and weights within int8
    (the kernel's weights need no zero point then and it skips the row sums)."""
    c, oc, h, w, (kh, kw), *_, y = case
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (2, h, w, c)).astype(np.uint8)
    x[0, 0] = 0  # extremes: sums at both ends
    x[1, -1] = 255
    weights = rng.integers(-127 if symmetric else -128, 128, (oc, c, kh, kw))
    wz = np.zeros(oc, np.int64) if symmetric else rng.integers(-128, 128, oc)
    centred = weights - wz[:, None, None, None]  # w - wz spans [-255, 255]
    bias = rng.integers(-20000, 20001, oc)
    # m: saturating, mid-range, and 1/8, at which sums of 4 mod 8 are exact .5s: ties
    m = np.array([1e-4, 3e-5, 0.125, 0.01], np.float32)[np.arange(oc) % 4]
    tie = m == 0.125
    centred[tie] = rng.choice([-1, 0, 0, 1], centred[tie].shape)
    bias[tie] = rng.integers(-40, 41, int(tie.sum()))
    xz = int(rng.integers(0, 256))
    yz = 0 if y == "f" else int(rng.integers(TYPES[y][1] + 90, TYPES[y][2] - 89))
    return x, centred, bias, m, xz, yz


def _op_session(library, case, centred, bias, m, xz, yz, threads: int = 1):
    c, _, h, w, kernel, stride, pads, dilation, y = case
    conv = helper.make_node("Conv", ["a"], ["b"], kernel_shape=list(kernel), strides=list(stride),
                            pads=list(pads), dilations=list(dilation))  # fmt: skip
    made, inits = qconv_kernel.nodes(conv, "x", xz, "y", TYPES[y][0], yz, centred, bias, m, "t",
                                     set())  # fmt: skip
    graph = helper.make_graph(made, "qconv", [helper.make_tensor_value_info(
        "x", TensorProto.UINT8, [2, c, h, w])], [helper.make_tensor_value_info(
            "y", TYPES[y][0], None)], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(kernels.DOMAIN, 1)])
    return kernel_session(library, model, threads)


def _has_vnni(library, level: int = 1) -> bool:
    """Whether the kernel's VNNI path of `level` (2 AVX-512, 1 AVX-VNNI) runs on this CPU."""
    return library[1].rknnrt_qconv_vnni() >= level


@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: f"c{c[0]}-oc{c[1]}-k{c[4][0]}{c[4][1]}-{c[8]}")
@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512vnni", "avxvnni", "scalar"])
@pytest.mark.parametrize("symmetric", [False, True], ids=["zw", "z0"])
def test_op_matches_int64_reference(library, case, level, symmetric) -> None:
    if level and not _has_vnni(library, level):
        pytest.skip(f"this CPU lacks the VNNI of path {level} (the scalar case covers the op)")
    x, centred, bias, m, xz, yz = _arrays(case, seed=case[0] * 7 + case[1], symmetric=symmetric)
    flat = centred.transpose(0, 2, 3, 1).reshape(centred.shape[0], -1)
    assert (qconv_kernel.pack(flat)[1] == 0).all() == symmetric
    library[1].rknnrt_qconv_max_level(level)
    try:
        got = _op_session(library, case, centred, bias, m, xz, yz).run(
            None, {"x": x.transpose(0, 3, 1, 2).copy()})[0].transpose(0, 2, 3, 1)  # fmt: skip
    finally:
        library[1].rknnrt_qconv_max_level(2)
    want, acc = _reference(x, centred, bias, m, xz, yz, *case[4:])
    assert got.shape == want.shape
    if case[8] == "f":
        assert got.dtype == np.float32 and got.tobytes() == want.astype(np.float32).tobytes()
        return
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    lo, hi = TYPES[case[8]][1:]
    assert (got == lo).any() and (got == hi).any() and ((got > lo) & (got < hi)).any()
    sums = acc[..., m == 0.125]
    inside = (want[..., m == 0.125] > lo) & (want[..., m == 0.125] < hi)
    assert (inside & (sums % 8 == 4)).any()  # exact .5s, rounded to even


def test_pixels_split_over_threads_give_the_same_values(library) -> None:
    """With intra-op threads the pixels run in chunks (KernelContext_ParallelFor)."""
    case = CASES[4]
    x, centred, bias, m, xz, yz = _arrays(case, seed=11)
    want, _ = _reference(x, centred, bias, m, xz, yz, *case[4:])
    feed = {"x": x.transpose(0, 3, 1, 2).copy()}
    for threads in (1, 2, 3):
        got = _op_session(library, case, centred, bias, m, xz, yz, threads).run(None, feed)[0]
        assert np.array_equal(got.transpose(0, 2, 3, 1).astype(np.int64),
                              want.astype(np.int64)), threads  # fmt: skip


def test_packing_keeps_every_weight_within_int8() -> None:
    rng = np.random.default_rng(0)
    centred = rng.integers(-128, 128, (37, 29)) - rng.integers(-128, 128, (37, 1))  # w - wz
    centred[0], centred[1] = np.arange(-255, -226), np.arange(227, 256)  # ends of the range
    packed, z = qconv_kernel.pack(centred)
    assert packed.shape == (3, 8, 16, 4) and packed.dtype == np.int8
    flat = packed.transpose(0, 2, 1, 3).reshape(48, 32).astype(np.int64)
    assert np.array_equal(flat[:37, :29] - z[:, None], centred)
    assert not flat[37:].any() and not flat[:, 29:].any()
    assert z[0] == -128 + 255 and z[1] == 127 - 255  # the only choices within int8
    assert not qconv_kernel.takes(np.full((2, 3, 3, 3), 255), None, 255)  # a stem's depth
    assert qconv_kernel.takes(np.full((2, 3, 3, 3), 255), None, 255, stored_int8=True)
    assert not qconv_kernel.takes(np.full((1, 40000, 1, 1), 255), None, 255)  # beyond int32
    assert qconv_kernel.takes(np.full((1, 8000, 1, 1), 255), None, 255)
    assert not qconv_kernel.takes(np.array([[-1, 255]]), None, 255)  # no int8 s - z spans it


@pytest.fixture
def kernel_on(library, monkeypatch):
    """The dense kernel taken wherever it applies (its scalar path where the CPU has no VNNI,
    so that the rewrite is tested on every machine)."""
    monkeypatch.setenv(switches.INT8_CONV_KERNEL.name, "1")
    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_qconv_vnni"), True)


def _two_ways(model: onnx.ModelProto, monkeypatch) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    on, off = onnx.ModelProto(), onnx.ModelProto()
    on.CopyFrom(model)
    off.CopyFrom(model)
    assert int8_islands.islands_as_integers(on.graph, {}) > 0
    with monkeypatch.context() as patch:
        patch.setenv(switches.INT8_CONV_KERNEL.name, "0")
        assert int8_islands.islands_as_integers(off.graph, {}) > 0
    from rknnrt.core.program import dw_kernel

    dw_kernel.import_domain(on)
    dw_kernel.import_domain(off)
    return on, off


def _dense_ops(model: onnx.ModelProto) -> int:
    return sum(n.op_type.startswith("ConvInt8_") for n in model.graph.node)


def _same_outputs(on: onnx.ModelProto, off: onnx.ModelProto, spread: float) -> None:
    """Both graphs' programs give the same bytes on _inputs(), each output spread over more
    than `spread` (its values, as float64)."""
    a_session = whole.open_program(on.SerializeToString())
    b_session = whole.open_program(off.SerializeToString())
    for x in _inputs():
        for k, (a, b) in enumerate(zip(a_session.run(None, {"x": x}),
                                       b_session.run(None, {"x": x}))):  # fmt: skip
            assert np.ptp(a.astype(np.float64)) > spread, k
            assert a.tobytes() == b.tobytes(), k


def test_islands_on_the_kernel_equal_the_float_convs(kernel_on, monkeypatch) -> None:
    model = _model(CONFIGS)
    on, off = _two_ways(model, monkeypatch)
    dense = [c for c in CONFIGS if c.get("group", 1) == 1]
    assert _dense_ops(on) == len(dense) and _dense_ops(off) == 0
    _same_outputs(on, off, 10)


def test_stems_go_on_the_kernel_only_where_their_output_is_stored_in_int8(kernel_on,
                                                                         monkeypatch) -> None:
    """3-channel windowed convs: stored through a HardSwish or SiLU they run on the kernel with
    the activation in its pass, and a Conv -> QuantizeLinear (27 products: onnxruntime's
    QLinearConv otherwise) runs on it requantised as QLinearConv does; kept in float32 (a
    Sigmoid and the graph's outputs read it) a stem stays a float conv."""
    configs = [{"cin": 3, "cout": 16, "s": 2, "tail": "hardswish", "fusable": True, "ys": 0.03},
               {"cin": 3, "cout": 8, "tail": "silu", "fusable": True, "ys": 0.02},
               {"cin": 4, "cout": 8, "k": 3, "tail": "sigmoid", "ys": 0.004},
               {"cin": 3, "cout": 8, "k": 3, "tail": "quantize"}]  # fmt: skip
    model = _model(configs)
    on, off = _two_ways(model, monkeypatch)
    kernel = {n.output[0].split("__")[0] for n in on.graph.node
              if n.op_type.startswith("ConvInt8_")}  # fmt: skip
    assert kernel == {"y0", "y1", "y3"} and _dense_ops(off) == 0
    assert sum(n.op_type == "Conv" for n in on.graph.node) == 1  # the Sigmoid's
    _same_outputs(on, off, 20)


@pytest.mark.parametrize("amx", [True, False], ids=["amx", "no-amx"])
def test_fused_convs_go_on_the_kernel_with_qlinearconvs_bytes(kernel_on, library, monkeypatch,
                                                              amx) -> None:
    """Conv -> QuantizeLinear (onnxruntime's QLinearConv) runs on the kernel, requantised as
    QLinearConv does: every depth where onnxruntime's int8 GEMMs have no AMX, only up to
    SHALLOW products per sum where they have (the 144-deep one then stays fused)."""
    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_cpu_amx_int8"), amx)
    configs = [{"tail": "quantize", "k": 1, "cout": 24}, {"tail": "quantize", "k": 1, "s": 2},
               {"tail": "quantize", "k": 3}]  # fmt: skip
    assert 16 <= qconv_kernel.SHALLOW < 16 * 9
    model = _model(configs)
    on, off = onnx.ModelProto(), onnx.ModelProto()
    on.CopyFrom(model)
    off.CopyFrom(model)
    taken = 2 if amx else 3
    assert int8_islands.islands_as_integers(on.graph, {}) == taken
    from rknnrt.core.program import dw_kernel

    dw_kernel.import_domain(on)
    assert _dense_ops(on) == taken and sum(n.op_type == "Conv" for n in on.graph.node) == 3 - taken
    _same_outputs(on, off, 50)  # off: QLinearConvs


def test_fused_depth_follows_the_kernel_and_amx(library, monkeypatch) -> None:
    """0 without the kernel, SHALLOW with onnxruntime's AMX int8 GEMMs, unbounded without."""
    path = str(library[0])
    monkeypatch.setitem(qconv_kernel._facts, (path, "rknnrt_qconv_vnni"), True)
    monkeypatch.setitem(qconv_kernel._facts, (path, "rknnrt_cpu_amx_int8"), True)
    assert qconv_kernel.fused_depth() == qconv_kernel.SHALLOW
    monkeypatch.setitem(qconv_kernel._facts, (path, "rknnrt_cpu_amx_int8"), False)
    assert qconv_kernel.fused_depth() == math.inf
    monkeypatch.setitem(qconv_kernel._facts, (path, "rknnrt_qconv_vnni"), False)
    assert qconv_kernel.fused_depth() == 0
    flags = open("/proc/cpuinfo").read().split() if _linux() else []
    has_amx = "amx_int8" in flags and "amx_tile" in flags  # Linux lists them when it enables them
    assert library[1].rknnrt_cpu_amx_int8() == (1 if has_amx else 0)


# residuals: the conv's output + its input (16 channels), then a Relu, a Clip or nothing
RESIDUALS = [{"tail": "add", "cout": 16, "fusable": True},
             {"tail": "add_relu", "cout": 16, "k": 1, "ys": 0.1, "fusable": True},
             {"tail": "add_clip", "cout": 16, "per_channel": False, "y_int8": True,
              "fusable": True},
             {"tail": "add_relu", "cout": 16, "cin": 3, "ys": 0.08, "fusable": True}]  # a stem


def _with_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.shape_inference.infer_shapes(model)  # as the converter records them


def _residual_reference(model: onnx.ModelProto, x: np.ndarray, k: int) -> np.ndarray:
    """Config k's output by the float program's definition in float32: the conv's value
    float32(acc) * m plus (x - xz) * xs, Relu or Clip, divided by ys, rounded half to even,
    offset and saturated."""
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    value = _island_reference(model, x, k)[0]
    skip = (x[0].astype(np.int32) - XZ).astype(np.float32) * np.float32(XS)
    total = value + skip
    tail = RESIDUALS[k]["tail"]
    if tail == "add_relu":
        total = np.maximum(total, np.float32(0))
    elif tail == "add_clip":
        total = np.minimum(np.maximum(total, consts[f"lo{k}"]), consts[f"hi{k}"])
    yz = consts[f"yz{k}"]
    lo, hi = (-128, 127) if yz.dtype == np.int8 else (0, 255)
    q = np.rint(total / consts[f"ys{k}"]).astype(np.int64) + int(yz)
    return np.clip(q, lo, hi)[None]


@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512vnni", "avxvnni", "scalar"])
def test_residuals_run_in_the_kernels_pass_with_the_float_programs_bytes(
        library, kernel_on, monkeypatch, level) -> None:  # fmt: skip
    """Conv -> Add(DequantizeLinear of a uint8 tensor) -> Relu / Clip / nothing ->
    QuantizeLinear is one ConvInt8Add op: the bytes of the float program it replaces and of
    its float32 definition, on every path."""
    if level and not _has_vnni(library, level):
        pytest.skip(f"this CPU lacks the VNNI of path {level} (the scalar case covers the op)")
    model = _with_shapes(_model(RESIDUALS))
    on, off = _two_ways(model, monkeypatch)
    ops = [n.op_type for n in on.graph.node]
    assert ops.count("ConvInt8Add_u8u8") == 3 and ops.count("ConvInt8Add_u8s8") == 1
    assert not {"Add", "Relu", "Clip", "QuantizeLinear"} & set(ops)
    assert sum(n.op_type == "Add" for n in off.graph.node) == 4
    library[1].rknnrt_qconv_max_level(level)
    try:
        _same_outputs(on, off, 20)
        session = whole.open_program(on.SerializeToString())
        for x in _inputs():
            for k, got in enumerate(session.run(None, {"x": x})):
                want = _residual_reference(model, x, k)
                assert np.array_equal(got.astype(np.int64), want), k
    finally:
        library[1].rknnrt_qconv_max_level(2)


def test_residuals_the_kernel_does_not_take_stay_as_they_are(kernel_on, monkeypatch) -> None:
    """An Add that broadcasts, one whose sum is read twice, a Clip of a computed bound, an
    int8 addend, and a graph recording no shapes keep the float program's Add."""
    def rewritten(model: onnx.ModelProto) -> list[str]:
        int8_islands.islands_as_integers(model.graph, {})
        return [n.op_type for n in model.graph.node]

    plain = _model([{"tail": "add", "cout": 16, "fusable": True}])
    plain_copy = onnx.ModelProto()
    plain_copy.CopyFrom(plain)
    assert "ConvInt8Add_u8u8" in rewritten(_with_shapes(plain))
    assert "Add" in rewritten(plain_copy)  # no shapes recorded
    broadcast = _model([{"tail": "add", "cout": 16, "fusable": True}])
    make = helper.make_node
    broadcast.graph.node.insert(0, make("MaxPool", ["x"], ["xp"], kernel_shape=[H, H]))
    broadcast.graph.node.insert(1, make("DequantizeLinear", ["xp", "xs", "xz"], ["xpd"]))
    next(n for n in broadcast.graph.node if n.op_type == "Add").input[0] = "xpd"
    assert "ConvInt8Add_u8u8" not in rewritten(_with_shapes(broadcast))  # 1x1 addend
    twice = _with_shapes(_model([{"tail": "add", "cout": 16, "fusable": True}]))
    twice.graph.output.append(helper.make_tensor_value_info("a0", TensorProto.FLOAT, None))
    assert "ConvInt8Add_u8u8" not in rewritten(twice)
    computed = _with_shapes(_model([{"tail": "add_clip", "cout": 16, "fusable": True}]))
    clip = next(n for n in computed.graph.node if n.op_type == "Clip")
    computed.graph.node.insert(0, helper.make_node("Identity", ["hi0"], ["hi0_copy"]))
    clip.input[2] = "hi0_copy"
    assert "Clip" in rewritten(computed)
    signed = _model([{"tail": "add", "cout": 16, "fusable": True}])  # the addend int8
    signed.graph.input.append(helper.make_tensor_value_info("s", TensorProto.INT8, [1, 16, H, H]))
    signed.graph.initializer.append(onnx.numpy_helper.from_array(np.array(3, np.int8), "sz"))
    signed.graph.node.insert(0, helper.make_node("DequantizeLinear", ["s", "xs", "sz"], ["sd"]))
    next(n for n in signed.graph.node if n.op_type == "Add").input[0] = "sd"
    assert "ConvInt8Add_u8u8" not in rewritten(_with_shapes(signed))


@pytest.mark.parametrize("op, trans_b", [("Gemm", 1), ("Gemm", 0), ("MatMul", 0)])
@pytest.mark.parametrize("tail", ["sigmoid", "int8"])
def test_matrix_products_on_the_kernel_equal_the_float_path(kernel_on, monkeypatch, op, trans_b,
                                                            tail) -> None:  # fmt: skip
    model = _matrix_model(op, trans_b, tail)
    if op == "MatMul":  # the kernel reads a MatMul's rows only where its rank is recorded
        model = onnx.shape_inference.infer_shapes(model)
    on, off = _two_ways(model, monkeypatch)
    assert _dense_ops(on) == 1
    rng = np.random.RandomState(4)
    for x in [rng.randint(0, 256, (5, 40)).astype(np.uint8), np.full((5, 40), 255, np.uint8)]:
        a = whole.open_program(on.SerializeToString()).run(None, {"x": x})[0]
        b = whole.open_program(off.SerializeToString()).run(None, {"x": x})[0]
        assert np.ptp(a.astype(np.int64)) > 20 and a.tobytes() == b.tobytes()


def test_a_matmul_of_unknown_rank_stays_off_the_kernel(kernel_on) -> None:
    model = _matrix_model("MatMul", 0, "sigmoid")
    assert int8_islands.islands_as_integers(model.graph, {}) == 1
    assert _dense_ops(model) == 0


def test_off_without_vnni_or_with_the_switch(library, monkeypatch) -> None:
    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_qconv_vnni"), False)
    assert not qconv_kernel.available()
    model = _model(CONFIGS)
    int8_islands.islands_as_integers(model.graph, {})
    assert _dense_ops(model) == 0
    monkeypatch.setitem(qconv_kernel._facts, (str(library[0]), "rknnrt_qconv_vnni"), True)
    assert qconv_kernel.available()
    monkeypatch.setenv(switches.INT8_CONV_KERNEL.name, "0")
    assert not qconv_kernel.available()
    flags = open("/proc/cpuinfo").read().split() if _linux() else []
    assert library[1].rknnrt_qconv_vnni() == (2 if "avx512_vnni" in flags else
                                              1 if "avx_vnni" in flags else 0)  # fmt: skip


def _linux() -> bool:
    import sys

    return sys.platform.startswith("linux")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolov8n", "efficientnet_b0", "deit_tiny", "regnetx_400mf",
                                  "mobilenetv2"])  # fmt: skip
def test_networks_give_the_same_bytes_on_the_kernel(kernel_on, name, tmp_path,
                                                    monkeypatch) -> None:  # fmt: skip
    """A whole int8 program (SiLU convs, SE convs, attention Gemms/MatMuls, residuals after
    Relu stems) with the kernel and without it: the same output bytes."""
    from tools.real_arch import catalog

    path, rng = int8_network(name, tmp_path)
    shape = catalog.input_shape(name, test=True)
    x = rng.rand(*shape).astype(np.float32)
    made: list[int] = []
    original = qconv_kernel.nodes
    monkeypatch.setattr(qconv_kernel, "nodes", lambda *a: made.append(1) or original(*a))

    def infer(on: str) -> list[np.ndarray]:
        with monkeypatch.context() as patch:
            patch.setenv(switches.INT8_CONV_KERNEL.name, on)
            return infer_lite(path, [x])[0]

    fast, plain = infer("1"), infer("0")
    assert len(made) > 3
    for a, b in zip(fast, plain):
        assert np.ptp(a) > 0 and a.tobytes() == b.tobytes()


def test_a_graph_recording_no_shapes_gets_them_for_the_kernels(kernel_on) -> None:
    """A vendor file's graph records no shapes; without them the kernels' Transposes did not
    cancel (a vendor EfficientNet kept 16). The rewrite infers them first."""
    model = _model(CONFIGS)
    assert not model.graph.value_info
    graph, _ = int8_islands.rewrite(model.SerializeToString(), {})
    shapes = {v.name: v for v in onnx.load_model_from_string(graph).graph.value_info}
    nhwc = [name for name in shapes if name.endswith("__int_knhwc")]
    assert len(nhwc) >= len([c for c in CONFIGS if c.get("group", 1) in (1, "dw")])
    assert all(len(shapes[n].type.tensor_type.shape.dim) == 4 for n in nhwc)
