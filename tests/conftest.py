"""Shared fixtures: the bundled default model converted once, a converter factory, a live
context, an onnxruntime reference for the default model, a checked C-API caller and a capture of
the runtime's `E RKNN:`/`W RKNN:`/`I RKNN:` lines. Plain helpers (query an attribute, set an
input, set-run-get, open descriptors) are in tests/helpers.py.

Test groups (folders): unit (pure functions, no runtime), api (the C-shaped calls), memory,
device (scheduling, threads, fences), models (dynamic shapes, real models), quant. Anything over
~2 s is marked slow: `pytest -m "not slow"` is the quick loop."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import rknnrt as rk
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.samples import default_model

# rknn_init raises the process priority as the vendor does; the suite opts out (the test of that
# behaviour runs in a subprocess without this variable).
os.environ.setdefault("RKNNRT_KEEP_PRIORITY", "1")
# Laid-out float16 programs are not cached between the suite's inits (each test sees the layout
# made, and the user's cache folder is left alone); tests/perf/test_layout_cache.py turns it on.
os.environ.setdefault("RKNNRT_LAYOUT_CACHE_MB", "0")

# The conversion the default-model fixtures use (rknn.config arguments).
DEFAULT_MEAN = [123.675, 116.28, 103.53]
DEFAULT_STD = [58.395, 57.12, 57.375]
DEFAULT_CONFIG: dict[str, Any] = {
    "target_platform": "rk3588",
    "float_dtype": "float32",  # exact float results; fp16 and int8 have their own tests
    "mean_values": [DEFAULT_MEAN],
    "std_values": [DEFAULT_STD],
    "custom_string": "RGB",
}

_LOG_LINE = re.compile(r"^([EWID]) RKNN: ")


def _convert(onnx_model: onnx.ModelProto, **config: Any) -> bytes:
    config.setdefault("float_dtype", "float32")
    rknn = RKNN()
    assert rknn.config(**config) == 0, rknn.last_error
    assert rknn.load_onnx(onnx_model) == 0, rknn.last_error
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    return rknn.model_bytes()


@pytest.fixture(scope="session")
def default_onnx() -> onnx.ModelProto:
    """The bundled default CNN as ONNX (input 'images' [1,3,64,64] -> 'probs' [1,10])."""
    return default_model()


@pytest.fixture(scope="session")
def default_model_bytes(default_onnx: onnx.ModelProto) -> bytes:
    """The default model converted for rk3588 with ImageNet mean/std and custom_string 'RGB'."""
    return _convert(default_onnx, **DEFAULT_CONFIG)


@pytest.fixture(scope="session")
def convert() -> Callable[..., bytes]:
    """`convert(onnx_model, **config)` -> model bytes (RKNN.config/load_onnx/build)."""
    return _convert


class CApi:
    """Calls a C-shaped function and checks the C contract: no exception, an int status."""

    def __call__(self, func: Callable[..., Any], *args: Any) -> int:
        try:
            rc = func(*args)
        except BaseException as exc:  # noqa: B036 - any escape is the failure under test
            pytest.fail(f"{func.__name__} raised {type(exc).__name__}: {exc}")
        assert type(rc) is int, f"{func.__name__} returned {rc!r}, not an int status"
        return rc


@pytest.fixture(scope="session")
def capi() -> CApi:
    return CApi()


class RknnLog:
    """The runtime's log lines written to sys.stderr since the last `take()`."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def take(self, level: str | None = None) -> list[str]:
        """All `X RKNN:` lines since the last call (`level` 'E', 'W', 'I' or 'D' filters)."""
        err = self._capsys.readouterr().err
        lines = [line for line in err.splitlines() if _LOG_LINE.match(line)]
        if level is not None:
            lines = [line for line in lines if line.startswith(f"{level} RKNN: ")]
        return lines

    def clear(self) -> None:
        self._capsys.readouterr()

    def one_error(self, *words: str) -> str:
        """The one `E RKNN:` line since the last take; it contains every word given."""
        (line,) = self.take("E")
        for word in words:
            assert word in line, line
        return line


@pytest.fixture
def rknn_log(capsys: pytest.CaptureFixture[str]) -> RknnLog:
    log = RknnLog(capsys)
    log.clear()
    return log


def init_context(capi: CApi, model: bytes, flag: int = 0, extend=None) -> rk.rknn_context:
    ctx = rk.rknn_context()
    rc = capi(rk.rknn_init, ctx, model, len(model), flag, extend)
    assert rc == rk.RKNN_SUCC
    assert ctx.value != 0
    return ctx


@pytest.fixture
def ctx(capi: CApi, default_model_bytes: bytes) -> Iterator[rk.rknn_context]:
    """A context on the default model; destroyed after the test (unless the test did)."""
    context = init_context(capi, default_model_bytes)
    yield context
    assert rk.rknn_destroy(context) in (rk.RKNN_SUCC, rk.RKNN_ERR_CTX_INVALID)


@pytest.fixture
def make_ctx(capi: CApi) -> Iterator[Callable[[bytes], rk.rknn_context]]:
    """`make_ctx(model_bytes, flag=0, extend=None)` -> a live context, destroyed after the
    test."""
    made: list[rk.rknn_context] = []

    def make(model: bytes, flag: int = 0, extend=None) -> rk.rknn_context:
        context = init_context(capi, model, flag, extend)
        made.append(context)
        return context

    yield make
    for context in made:
        assert rk.rknn_destroy(context) in (rk.RKNN_SUCC, rk.RKNN_ERR_CTX_INVALID)


class Reference:
    """onnxruntime on the original ONNX model, fed the normalised NCHW float32 input."""

    def __init__(self, model: onnx.ModelProto, mean: list[float], std: list[float]) -> None:
        self.session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        self.input_name = self.session.get_inputs()[0].name
        self.mean = np.asarray(mean, np.float32).reshape(1, -1, 1, 1)
        self.std = np.asarray(std, np.float32).reshape(1, -1, 1, 1)

    def normalise_nhwc(self, nhwc: np.ndarray) -> np.ndarray:
        """(x - mean) / std in NCHW float32 for an NHWC image of any numeric dtype."""
        nchw = np.ascontiguousarray(nhwc.astype(np.float32).transpose(0, 3, 1, 2))
        return (nchw - self.mean) / self.std

    def raw(self, nchw_float32: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: nchw_float32})[0]

    def __call__(self, nhwc: np.ndarray) -> np.ndarray:
        return self.raw(self.normalise_nhwc(nhwc))


@pytest.fixture(scope="session")
def reference(default_onnx: onnx.ModelProto) -> Reference:
    """`reference(nhwc_image)` -> the default model's float32 output [1,10]."""
    return Reference(default_onnx, DEFAULT_MEAN, DEFAULT_STD)
