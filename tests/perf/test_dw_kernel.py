"""sessions/kernels: the compiled int8 depthwise kernel (dwconv.c) gives QLinearConv's values bit
for bit: against a numpy int64 reference on the op itself (its AVX2 and scalar paths), against
the exact float chain of core/program/int8_depthwise.py on QDQ graphs, and on a whole int8
network; without a compiler the float chain stays, with one W line."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import switches
from rknnrt.core.program import dw_kernel, int8_depthwise, whole
from rknnrt.sessions import kernels

from .conftest import infer_lite, int8_network, kernel_session
from .test_int8_depthwise import CONFIGS, _exact, _inputs, _qdq_model

RANGES = {"u8": (0, 255, np.uint8, TensorProto.UINT8), "s8": (-128, 127, np.int8, TensorProto.INT8)}


def _reference(x, w, bias, m, xz, yz, attrs, y_range):
    """NHWC int64: acc = sum (x - xz) * w + bias (padding contributes 0), then
    round_half_even(float32(acc) * m) + yz, saturated."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[:2]
    sh, sw, dh, dw = attrs["stride_h"], attrs["stride_w"], attrs["dilation_h"], attrs["dilation_w"]
    pt, pl, pb, pr = attrs["pad_top"], attrs["pad_left"], attrs["pad_bottom"], attrs["pad_right"]
    xp = np.zeros((n, h + pt + pb, wd + pl + pr, c), np.int64)
    xp[:, pt : pt + h, pl : pl + wd] = x.astype(np.int64) - xz
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    acc = np.zeros((n, oh, ow, c), np.int64) + bias.astype(np.int64)
    for i in range(kh):
        for j in range(kw):
            window = xp[:, i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                        j * dw : j * dw + sw * (ow - 1) + 1 : sw]  # fmt: skip
            acc += window * w[i, j].astype(np.int64)
    assert np.abs(acc).max() < 2**31
    y = np.rint(acc.astype(np.float32) * m) + yz
    return np.clip(y, y_range[0], y_range[1]), acc


def _op_session(library, xt: str, yt: str, x_shape, w, bias, m, xz, yz, attrs, threads=1):
    node = helper.make_node(f"DepthwiseConvInt8_{xt}{yt}", ["x", "w", "b", "m"], ["y"],
                            domain=kernels.DOMAIN, x_zero_point=xz, y_zero_point=yz,
                            **attrs)  # fmt: skip
    graph = helper.make_graph(
        [node], "dw", [helper.make_tensor_value_info("x", RANGES[xt][3], list(x_shape))],
        [helper.make_tensor_value_info("y", RANGES[yt][3], None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b"),
         numpy_helper.from_array(m, "m")])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(kernels.DOMAIN, 1)])
    return kernel_session(library, model, threads)


# (x type, y type, channels, H, W, kernel, stride, pads t/l/b/r, dilation)
CASES = [
    ("u8", "u8", 32, 9, 9, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("u8", "u8", 48, 10, 11, (3, 3), (2, 2), (0, 0, 1, 1), (1, 1)),  # stride 2, padding at the end
    ("s8", "s8", 24, 12, 9, (5, 5), (1, 2), (2, 2, 2, 2), (1, 1)),  # 5x5: an odd tap count
    ("u8", "s8", 40, 13, 13, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),  # dilation
    ("s8", "u8", 20, 8, 7, (3, 5), (2, 1), (1, 0, 1, 2), (1, 2)),  # C % 16 = 4: the tails
    ("u8", "u8", 7, 6, 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # C < 8: scalar only
    ("s8", "s8", 144, 5, 5, (7, 7), (1, 1), (3, 3, 3, 3), (1, 1)),  # a kernel bigger than the map
    ("u8", "u8", 33, 7, 3, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # rows of 3: under 4 pixels
    ("u8", "s8", 50, 9, 10, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),  # no padding: no frame
    ("s8", "u8", 64, 6, 9, (1, 1), (2, 1), (0, 0, 0, 0), (1, 1)),  # one tap
    # <= 16 channels: two pixels a vector on AVX-512 (groups of 8, then pairs, then one)
    ("u8", "u8", 16, 11, 21, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # stride 2, framed
    ("s8", "s8", 16, 9, 14, (5, 5), (1, 1), (0, 0, 0, 0), (1, 1)),  # unframed: border pixels
    ("u8", "s8", 12, 7, 5, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # rows of 5, 12 channels
]


def _case_arrays(case, seed: int):
    xt, yt, c, h, wd, (kh, kw), (sh, sw), pads, (dh, dw) = case
    rng = np.random.default_rng(seed)
    lo, hi, xdtype, _ = RANGES[xt]
    x = rng.integers(lo, hi + 1, (2, h, wd, c)).astype(xdtype)
    x[0, 0] = lo  # extremes reach both ends of the output
    x[1, -1] = hi
    w = rng.integers(-255, 256, (kh, kw, c)).astype(np.int32)  # w - wz spans [-255, 255]
    bias = rng.integers(-20000, 20001, c).astype(np.int32)
    # m: small (values near the zero point), large (saturating at both ends) and powers of two
    # 1/8 and 1/4, at which float(acc) * m is an exact .5 for sums of 4 mod 8 (2 mod 4): ties
    scales = np.array([0.125, 0.25, 0.003, 0.125, 1e-4, 0.02, 2.0], np.float32)
    m = scales[np.arange(c) % len(scales)].astype(np.float32)
    tie = m == 0.125  # small sums there, so that the .5s fall inside the output range
    w[..., tie] = rng.choice([-1, 0, 0, 0, 1], (kh, kw, int(tie.sum())))
    bias[tie] = rng.integers(-40, 41, int(tie.sum()))
    xz = int(rng.integers(lo, hi + 1))
    ylo, yhi = RANGES[yt][:2]
    yz = int(rng.integers(ylo + 100, yhi - 99))  # mid-range: ties of both signs land inside
    attrs = {"stride_h": sh, "stride_w": sw, "pad_top": pads[0], "pad_left": pads[1],
             "pad_bottom": pads[2], "pad_right": pads[3], "dilation_h": dh,
             "dilation_w": dw}  # fmt: skip
    return x, w, bias, m, xz, yz, attrs


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[1]}-c{c[2]}-k{c[5][0]}{c[5][1]}")
@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512", "avx2", "scalar"])
def test_op_matches_int64_reference(library, case, level) -> None:
    """Each path the CPU has (a path it lacks falls back to the next narrower one)."""
    x, w, bias, m, xz, yz, attrs = _case_arrays(case, seed=len(case[0]) + case[2])
    xt, yt = case[0], case[1]
    library[1].rknnrt_dw_max_level(level)
    try:
        got = _op_session(library, xt, yt, x.shape, w, bias, m, xz, yz, attrs).run(
            None, {"x": x})[0]  # fmt: skip
    finally:
        library[1].rknnrt_dw_max_level(2)
    want, acc = _reference(x, w, bias, m, xz, yz, attrs, RANGES[yt][:2])
    assert got.dtype == RANGES[yt][2] and got.shape == want.shape
    assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
    lo, hi = RANGES[yt][:2]
    assert (got == lo).any() and (got == hi).any() and ((got > lo) & (got < hi)).any()
    sums = acc[..., m == 0.125]  # 4 mod 8 times 1/8: exact .5s, rounded to even
    inside = (want[..., m == 0.125] > lo) & (want[..., m == 0.125] < hi)
    tie = inside & (sums % 8 == 4)
    assert (tie & (sums > 0)).any() and (tie & (sums < 0)).any()


@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: f"{c[0]}{c[1]}-c{c[2]}")
def test_rows_split_over_threads_give_the_same_values(library, case) -> None:
    """With intra-op threads the rows run in chunks through onnxruntime's
    KernelContext_ParallelFor (a later entry of its API table): the same values."""
    x, w, bias, m, xz, yz, attrs = _case_arrays(case, seed=3)
    want, _ = _reference(x, w, bias, m, xz, yz, attrs, RANGES[case[1]][:2])
    for threads in (1, 2, 3):
        session = _op_session(library, case[0], case[1], x.shape, w, bias, m, xz, yz, attrs,
                              threads)  # fmt: skip
        got = session.run(None, {"x": x})[0]
        assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), threads


def test_a_node_packs_its_weights_at_its_first_run_only(library) -> None:
    """The interior path's packed weights are kept in the node's kernel: runs after the first
    read them (the same values), and another session's node packs its own."""
    import ctypes

    case = CASES[1]
    x, w, bias, m, xz, yz, attrs = _case_arrays(case, seed=9)
    want, _ = _reference(x, w, bias, m, xz, yz, attrs, RANGES[case[1]][:2])
    count = library[1].rknnrt_dw_packings
    count.restype = ctypes.c_int64
    for _ in range(2):
        session = _op_session(library, case[0], case[1], x.shape, w, bias, m, xz, yz, attrs)
        before = count()
        for _ in range(3):
            got = session.run(None, {"x": x})[0]
            assert np.array_equal(got.astype(np.int64), want.astype(np.int64))
        assert count() - before == 1


def _kernel_nodes(model: onnx.ModelProto) -> int:
    return sum(n.domain == kernels.DOMAIN for n in model.graph.node)


def _rewritten(model: onnx.ModelProto, monkeypatch, on: bool) -> onnx.ModelProto:
    monkeypatch.setenv(switches.INT8_DW_KERNEL.name, "1" if on else "0")
    fast = onnx.ModelProto()
    fast.CopyFrom(model)
    graph, _ = int8_depthwise.rewrite(fast.SerializeToString(), {})
    return onnx.load_model_from_string(graph)


def test_kernel_equals_float_chain_on_qdq_graphs(library, monkeypatch) -> None:
    model = _qdq_model(CONFIGS)
    with_kernel = _rewritten(model, monkeypatch, True)
    chain = _rewritten(model, monkeypatch, False)
    assert _kernel_nodes(with_kernel) == len(CONFIGS) and _kernel_nodes(chain) == 0
    assert not any(n.op_type == "Conv" for n in with_kernel.graph.node)
    a_session = whole.open_program(with_kernel.SerializeToString())
    b_session = whole.open_program(chain.SerializeToString())
    for x in _inputs():
        for k, (a, b) in enumerate(zip(a_session.run(None, {"x": x}),
                                       b_session.run(None, {"x": x}))):  # fmt: skip
            assert np.ptp(a) > 50, CONFIGS[k]
            assert a.tobytes() == b.tobytes(), CONFIGS[k]
            assert a.tobytes() == _exact(model, x, k).tobytes(), CONFIGS[k]


def _as_int8(model: onnx.ModelProto) -> onnx.ModelProto:
    """The uint8 QDQ graph with int8 activations: input, zero points and outputs shifted by 128."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for i, t in enumerate(out.graph.initializer):
        if t.name == "xz" or t.name.startswith("yz"):
            value = numpy_helper.to_array(t).astype(np.int16) - 128
            shifted = numpy_helper.from_array(value.astype(np.int8), t.name)
            out.graph.initializer[i].CopyFrom(shifted)
    for v in (*out.graph.input, *out.graph.output):
        v.type.tensor_type.elem_type = TensorProto.INT8
    return out


def test_kernel_equals_float_chain_with_int8_activations(library, monkeypatch) -> None:
    configs = [c for c in CONFIGS if "act" not in c]  # Relu/Clip rules depend on the zero point
    model = _as_int8(_qdq_model(configs, seed=5))
    with_kernel = _rewritten(model, monkeypatch, True)
    chain = _rewritten(model, monkeypatch, False)
    assert _kernel_nodes(with_kernel) == len(configs) and _kernel_nodes(chain) == 0
    assert {n.op_type for n in with_kernel.graph.node if n.domain} == {"DepthwiseConvInt8_s8s8"}
    a_session = whole.open_program(with_kernel.SerializeToString())
    b_session = whole.open_program(chain.SerializeToString())
    for x in _inputs():
        x8 = (x.astype(np.int16) - 128).astype(np.int8)
        for k, (a, b) in enumerate(zip(a_session.run(None, {"x": x8}),
                                       b_session.run(None, {"x": x8}))):  # fmt: skip
            assert a.dtype == np.int8 and np.ptp(a.astype(np.int16)) > 50, configs[k]
            assert a.tobytes() == b.tobytes(), configs[k]


def test_no_compiler_keeps_the_float_chain_with_one_warning(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv(switches.CACHE_DIR.name, str(tmp_path))  # nothing cached there
    monkeypatch.setattr(kernels, "compiler", lambda: None)
    monkeypatch.setattr(dw_kernel, "_warned", False)
    model = _qdq_model(CONFIGS[:2])
    first = _rewritten(model, monkeypatch, True)
    second = _rewritten(model, monkeypatch, True)
    assert _kernel_nodes(first) == 0 and _kernel_nodes(second) == 0
    assert sum(n.op_type == "Conv" for n in first.graph.node) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("W RKNN:")]
    assert len(lines) == 1 and "no C compiler" in lines[0], lines
    assert not list(tmp_path.rglob(kernels.LIBRARY))


@pytest.mark.slow  # a build of its own (~0.7 s)
def test_library_is_cached_by_source_and_version(monkeypatch, tmp_path) -> None:
    path = kernels.library(tmp_path)
    assert path.is_file() and path.parent.parent == tmp_path / "kernels"
    stamp = path.stat().st_mtime_ns
    monkeypatch.setattr(kernels, "compiler", lambda: None)  # a second call builds nothing
    assert kernels.library(tmp_path) == path and path.stat().st_mtime_ns == stamp
    monkeypatch.setattr(ort, "__version__", "0.0.0-other")
    with pytest.raises(kernels.KernelsUnavailable):  # another onnxruntime: another key
        kernels.library(tmp_path)
    assert not list(tmp_path.rglob(".build-*"))


def test_sessions_register_the_library_only_for_its_domain(library, monkeypatch) -> None:
    calls: list[str] = []
    original = ort.SessionOptions.register_custom_ops_library

    class Options(ort.SessionOptions):
        def register_custom_ops_library(self, path: str) -> None:
            calls.append(path)
            original(self, path)

    monkeypatch.setattr(ort, "SessionOptions", Options)
    model = _qdq_model(CONFIGS[:1])
    whole.open_program(_rewritten(model, monkeypatch, False).SerializeToString())
    assert calls == []
    whole.open_program(_rewritten(model, monkeypatch, True).SerializeToString())
    assert calls == [str(library[0])]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenetv2"])
def test_network_identical_with_kernel_on_and_off(library, name, tmp_path, monkeypatch) -> None:
    from tools.real_arch import catalog

    shape = catalog.input_shape(name, test=True)
    path, rng = int8_network(name, tmp_path, seed=2)
    inputs = [rng.rand(*shape).astype(np.float32) * 1.5 - 0.2 for _ in range(2)]
    emitted: list[int] = []
    original = int8_depthwise.rewrite

    def rewrite(graph, weights):
        out = original(graph, weights)
        emitted.append(_kernel_nodes(onnx.load_model_from_string(out[0])))
        return out

    monkeypatch.setattr(int8_depthwise, "rewrite", rewrite)
    monkeypatch.setenv(switches.INT8_DW_KERNEL.name, "1")
    on = infer_lite(path, inputs)
    monkeypatch.setenv(switches.INT8_DW_KERNEL.name, "0")
    off = infer_lite(path, inputs)
    assert emitted[0] > 5 and emitted[-1] == 0
    for a_outputs, b_outputs in zip(on, off):
        for a, b in zip(a_outputs, b_outputs):
            assert np.ptp(a) > 0 and a.tobytes() == b.tobytes()


def test_island_depthwise_convs_equal_the_float_chain(library, monkeypatch) -> None:
    """Depthwise float islands (kept in float32 before a SiLU, Sigmoid or residual Add; or stored
    in the other int8 type): the kernel's float32(acc) * m, or its requantisation, equals the
    Conv -> Mul chain of int8_islands bit for bit, and the int64 definition."""
    from . import test_int8_islands as islands

    configs = [{"group": "dw"}, {"group": "dw", "k": 5, "s": 2, "tail": "sigmoid"},
               {"group": "dw", "tail": "add"}, {"group": "dw", "tail": None, "ys": 0.5},
               {"group": "dw", "tail": "int8", "ys": 0.3}]  # fmt: skip
    model = islands._model(configs, seed=7)
    graphs = {}
    for on in (True, False):
        monkeypatch.setenv(switches.INT8_DW_KERNEL.name, "1" if on else "0")
        graph, _ = islands.int8_islands.rewrite(model.SerializeToString(), {})
        graphs[on] = onnx.load_model_from_string(graph)
    assert _kernel_nodes(graphs[True]) == len(configs) and _kernel_nodes(graphs[False]) == 0
    kinds = {n.op_type for n in graphs[True].graph.node if n.domain == kernels.DOMAIN}
    assert kinds == {"DepthwiseConvInt8_u8f", "DepthwiseConvInt8_u8s8"}
    on = whole.open_program(graphs[True].SerializeToString())
    off = whole.open_program(graphs[False].SerializeToString())
    for x in islands._inputs():
        a, b = on.run(None, {"x": x}), off.run(None, {"x": x})
        for out_a, out_b in zip(a, b):
            assert out_a.tobytes() == out_b.tobytes()
        floats = [o for o in a if o.dtype == np.float32]
        k = 0
        for cfg_index, cfg in enumerate(configs):
            if cfg.get("tail") != "int8":
                reference = islands._reference(model, x, cfg_index)
                assert floats[k].tobytes() == reference.tobytes(), cfg
                k += 1


@pytest.mark.parametrize("xt", ["u8", "s8"])
@pytest.mark.parametrize("channels", [37, 16])
@pytest.mark.parametrize("level", [2, 1, 0], ids=["avx512", "avx2", "scalar"])
def test_float_output_op_is_the_product(library, xt, channels, level) -> None:
    """The island form DepthwiseConvInt8_<x>f: y = float32(acc) * m, no rounding, no clamp
    (16 channels: two pixels a vector on AVX-512)."""
    case = (xt, "u8", channels, 9, 8, (3, 3), (1, 2), (1, 1, 1, 0), (1, 1))
    x, w, bias, m, xz, _, attrs = _case_arrays(case, seed=11)
    node = helper.make_node(f"DepthwiseConvInt8_{xt}f", ["x", "w", "b", "m"], ["y"],
                            domain=kernels.DOMAIN, x_zero_point=xz, **attrs)  # fmt: skip
    graph = helper.make_graph(
        [node], "dw", [helper.make_tensor_value_info("x", RANGES[xt][3], list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b"),
         numpy_helper.from_array(m, "m")])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(kernels.DOMAIN, 1)])
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(library[0]))
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    library[1].rknnrt_dw_max_level(level)
    try:
        got = session.run(None, {"x": x})[0]
    finally:
        library[1].rknnrt_dw_max_level(2)
    _, acc = _reference(x, w, bias, m, xz, 0, attrs, (-(2**40), 2**40))
    assert got.dtype == np.float32
    assert got.tobytes() == (acc.astype(np.float32) * m).astype(np.float32).tobytes()


def test_fingerprint_is_hashed_once_per_state_of_the_sources(monkeypatch, tmp_path) -> None:
    """Each program open asks for the cache key: the sources are read again only when they
    change (an edited source gets another key)."""
    sources = []
    for path in (*kernels.SOURCES, *kernels.HEADERS):
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        sources.append(copy)
    n = len(kernels.SOURCES)
    monkeypatch.setattr(kernels, "SOURCES", tuple(sources[:n]))
    monkeypatch.setattr(kernels, "HEADERS", tuple(sources[n:]))
    hashed = []
    real = kernels._hash_sources
    monkeypatch.setattr(kernels, "_hash_sources", lambda: hashed.append(1) or real())
    first = kernels.fingerprint()
    assert kernels.fingerprint() == first and len(hashed) == 1
    sources[0].write_bytes(sources[0].read_bytes() + b"\n/* edited */\n")
    assert kernels.fingerprint() != first and len(hashed) == 2
