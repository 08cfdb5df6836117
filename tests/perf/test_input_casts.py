"""core/program/input_casts.py: float32 inputs converted to float16 or quantised to int8 by
onnxruntime or in one pass of the compiled kernel, bit-identical to numpy's conversion, and used
by rknn_inputs_set."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rknnrt.core.program import input_casts, whole
from rknnrt.lite import RKNNLite
from rknnrt.model import numerics
from rknnrt.sessions import factory, policies
from rknnrt.toolkit import RKNN

from .models import shufflenet_like


def _awkward_values(rng: np.random.RandomState) -> np.ndarray:
    """Normal, tiny (float16 subnormal), huge (overflow), halfway (ties) values, zeros, inf."""
    huge = rng.uniform(6e4, 7e4, 2000) * rng.choice([-1, 1], 2000)
    parts = [rng.randn(20000) * 10.0 ** rng.randint(-9, 6, 20000),
             rng.uniform(-1e-4, 1e-4, 5000), huge,
             np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.99, 65520, 2.0**-24, 2.0**-25,
                       3 * 2.0**-26, -(2.0**-25)])]  # fmt: skip
    halves = rng.randn(5000).astype(np.float16).astype(np.float32)
    ulp = np.abs(np.spacing(halves.astype(np.float16))).astype(np.float32)
    parts.append(halves + ulp / 2)  # exactly between two float16 values: ties to even
    return np.concatenate(parts).astype(np.float32)


@np.errstate(over="ignore")  # numpy warns about values beyond float16
def test_float16_conversion_is_numpys_bit_for_bit() -> None:
    values = _awkward_values(np.random.RandomState(0))
    out = np.empty(values.shape, np.float16)
    assert input_casts.fits(values, out)
    input_casts.to_float16(values, out)
    assert out.view(np.uint16).tobytes() == values.astype(np.float16).view(np.uint16).tobytes()
    block = values[: 3 * 64 * 64].reshape(1, 3, 64, 64)
    strided = block.transpose(0, 1, 3, 2)  # a non-contiguous view
    out = np.empty(strided.shape, np.float16)
    input_casts.to_float16(strided, out)
    assert np.array_equal(out.view(np.uint16), strided.astype(np.float16).view(np.uint16))


def _numpy_quantised(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """rknn_inputs_set's numpy formula (core/io/plans.py)."""
    target = x.astype(np.float32)
    np.divide(target, scale, out=target)
    np.rint(target, out=target)
    target += zp
    np.clip(target, -128, 127, out=target)
    return target.astype(np.int8)


@pytest.mark.parametrize("seed", range(4))
def test_int8_quantisation_is_numpys(seed) -> None:
    rng = np.random.RandomState(seed)
    for _ in range(10):
        scale = float(10.0 ** rng.uniform(-4, 1) * rng.uniform(1, 2))
        zp = int(rng.randint(-128, 128))
        steps = rng.randint(-300, 300, 5000)
        grid = np.float32(scale)
        special = [np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30]
        x = np.concatenate([rng.uniform(-300, 300, 5000) * grid, (steps + 0.5) * grid,
                            steps * grid, np.nextafter((steps + 0.5) * grid, np.float32(1e9)),
                            special]).astype(np.float32)  # fmt: skip
        out = np.empty(x.shape, np.int8)
        assert input_casts.fits(x, out)
        input_casts.quantize_int8(x, scale, zp, out)
        assert np.array_equal(out, _numpy_quantised(x, scale, zp))


def test_nan_and_small_arrays_are_left_to_numpy() -> None:
    values = np.random.RandomState(1).randn(10000).astype(np.float32)
    assert input_casts.fits(values, np.empty(values.shape, np.float16))
    values[77] = np.nan
    assert not input_casts.fits(values, np.empty(values.shape, np.float16))
    small = np.ones(input_casts.MIN_ELEMENTS - 1, np.float32)
    assert not input_casts.fits(small, np.empty(small.shape, np.int8))


@pytest.mark.parametrize("level", [2, 1, 0])
@np.errstate(over="ignore")
def test_the_kernels_one_pass_is_numpys_bit_for_bit(library, level) -> None:
    """inputcast.c on the AVX-512, AVX2(+F16C) and scalar paths: float16 rounding of the
    awkward values and of every 7th float32 bit pattern that is not a NaN; int8 and uint8
    quantisation at random scales and zero points with ties and out-of-range values."""
    library[1].rknnrt_inputcast_max_level(level)
    try:
        _check_one_pass(level)
    finally:
        library[1].rknnrt_inputcast_max_level(2)


def _check_one_pass(seed: int) -> None:
    values = _awkward_values(np.random.RandomState(0))
    patterns = np.arange(0, 2**32, 7 * 97, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for x in (values, patterns[~np.isnan(patterns)]):
        out = np.empty(x.shape, np.float16)
        assert input_casts.in_one_pass(x, out, None, None)
        assert out.view(np.uint16).tobytes() == x.astype(np.float16).view(np.uint16).tobytes()
    rng = np.random.RandomState(seed)
    for _ in range(6):
        scale = float(10.0 ** rng.uniform(-4, 1) * rng.uniform(1, 2))
        grid, steps = np.float32(scale), rng.randint(-300, 300, 5000)
        x = np.concatenate([rng.uniform(-300, 300, 5001) * grid, (steps + 0.5) * grid,
                            [np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30]]).astype(np.float32)
        for dtype, zp in ((np.int8, int(rng.randint(-128, 128))), (np.uint8, 130)):
            out = np.empty(x.shape, dtype)
            assert input_casts.in_one_pass(x, out, scale, zp)
            want = numerics.quantize(x, scale, zp, out=np.empty(x.shape, dtype))
            assert np.array_equal(out, want), (dtype, scale, zp)


@pytest.mark.parametrize("level", [2, 1, 0])
def test_the_kernel_leaves_nan_and_other_types_to_the_caller(library, level) -> None:
    library[1].rknnrt_inputcast_max_level(level)
    try:
        _check_refusals()
    finally:
        library[1].rknnrt_inputcast_max_level(2)


def _check_refusals() -> None:
    values = np.random.RandomState(1).randn(1, 3, 20, 20).astype(np.float32)
    strided = values.transpose(0, 2, 3, 1)  # converted as C order, as numpy's copyto does
    out = np.empty(strided.shape, np.int8)
    assert input_casts.in_one_pass(strided, out, 0.01, 3)
    assert np.array_equal(out, numerics.quantize(np.ascontiguousarray(strided), 0.01, 3,
                                                 out=np.empty(strided.shape, np.int8)))
    for position in (0, 77, values.size - 1):  # in a vector, at the end (the scalar tail)
        with_nan = values.copy().reshape(-1)
        with_nan[position] = np.nan
        assert not input_casts.in_one_pass(with_nan, np.empty(with_nan.shape, np.int8), 0.1, 0)
        assert not input_casts.in_one_pass(with_nan, np.empty(with_nan.shape, np.float16), None,
                                           None)  # fmt: skip
    assert not input_casts.in_one_pass(values, np.empty(values.shape, np.int16), 0.1, 0)
    assert not input_casts.in_one_pass(values, np.empty(values.shape, np.float32), None, None)
    assert not input_casts.in_one_pass(values.astype(np.float64), np.empty(values.shape,
                                       np.float16), None, None)  # fmt: skip


class _Recorder:
    """The kernel library's direct calls, each call's name recorded."""

    def __init__(self, library, used: list[str]) -> None:
        self.library, self.used = library, used

    def __getattr__(self, name: str):
        real = getattr(self.library, name)
        return lambda *args: self.used.append(name) or real(*args)


@pytest.mark.parametrize("dtype", ["float16", "int8"])
@pytest.mark.parametrize("converter", ["kernel", "onnxruntime"])
def test_inputs_set_uses_it_with_the_numpy_converted_result(dtype, converter, tmp_path,
                                                            monkeypatch) -> None:
    size = 40  # 1x3x40x40 = 4800 elements: above MIN_ELEMENTS
    rng = np.random.RandomState(4)
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float16")
    rknn.load_onnx(shufflenet_like(size=size))
    calib = [[rng.rand(1, 3, size, size).astype(np.float32)] for _ in range(4)]
    assert rknn.build(do_quantization=dtype == "int8", dataset=calib) == 0
    path = str(tmp_path / f"{dtype}.rknn")
    assert rknn.export_rknn(path) == 0
    program: onnx.ModelProto = rknn._built.program
    used: list[str] = []
    original = input_casts._session
    monkeypatch.setattr(input_casts, "_session", lambda kind: used.append(kind) or original(kind))
    if converter == "kernel":
        direct = input_casts._library()
        assert direct is not None, "the kernel library is built where a C compiler is"
        monkeypatch.setattr(input_casts, "_library", lambda: _Recorder(direct, used))
    else:  # no kernel library: onnxruntime's ops
        monkeypatch.setattr(input_casts, "_library", lambda: None)
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    # the graph the runtime runs (whole.execution_graph: the integer island sums) under the
    # program's own policy: exact int8 kernels where this CPU's fast ones saturate
    graph, _ = whole.execution_graph(program.SerializeToString(), {})
    session = factory.create(graph, policies.PROGRAM)
    try:
        for _ in range(3):
            x = (rng.randn(1, 3, size, size) * 3).astype(np.float32)
            (got,) = runtime.inference([x], data_format="nchw")
            if dtype == "int8":
                scale, zp = rknn._built.io_qparams["x"]
                (want,) = session.run(None, {"x": _numpy_quantised(x, scale, zp)})
                out_scale, out_zp = rknn._built.io_qparams[program.graph.output[0].name]
                want = (want.astype(np.float32) - out_zp) * np.float32(out_scale)
            else:
                (want,) = session.run(None, {"x": x.astype(np.float16)})
            assert np.ptp(want) > 0 and np.array_equal(got, want.astype(np.float32))
    finally:
        runtime.release()
    # a float16 program's output (1x5x40x40) is widened to float32 by onnxruntime too
    cast = {"kernel": {"int8": "rknnrt_quantize_f32", "float16": "rknnrt_half_f32"},
            "onnxruntime": {"int8": "quantize", "float16": "cast"}}[converter][dtype]
    assert used == ([cast] if dtype == "int8" else [cast, "widen"]) * 3


def test_float16_widening_is_numpys_bit_for_bit() -> None:
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    halves = every[~np.isnan(every)].reshape(1, -1)  # every float16 but the NaNs
    assert input_casts.widen_fits(halves)
    got = input_casts.to_float32(halves)
    assert got.shape == halves.shape and got.dtype == np.float32
    assert got.view(np.uint32).tobytes() == halves.astype(np.float32).view(np.uint32).tobytes()


def test_nan_small_and_strided_float16_outputs_are_left_to_numpy() -> None:
    values = np.random.RandomState(2).randn(8, 1000).astype(np.float16)
    assert input_casts.widen_fits(values)
    assert not input_casts.widen_fits(values[:, ::2])  # not C-contiguous
    assert not input_casts.widen_fits(values[:4, :1000])  # 4000 < MIN_ELEMENTS
    for nan in (0x7E00, 0x7C01, 0xFE00):  # quiet, signalling, negative
        with_nan = values.copy()
        with_nan.view(np.uint16)[3, 5] = nan
        assert not input_casts.widen_fits(with_nan)
    infinite = values.copy()
    infinite[0, 0], infinite[1, 1] = np.inf, -np.inf
    assert input_casts.widen_fits(infinite)
    assert np.array_equal(input_casts.to_float32(infinite), infinite.astype(np.float32))
