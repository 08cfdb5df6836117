"""Fixtures of the custom-operator tests (helpers in cst_helpers.py, models in cst_models.py)."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import rknnrt as rk

sys.path.insert(0, str(Path(__file__).parent))
from cst_helpers import build  # noqa: E402
from cst_models import conv_custom_conv  # noqa: E402


@pytest.fixture(scope="session")
def sigmoid_onnx():  # type: ignore[no-untyped-def]
    return conv_custom_conv(scale=2.0)


@pytest.fixture(scope="session")
def sigmoid_model(sigmoid_onnx) -> bytes:  # type: ignore[no-untyped-def]
    return build(sigmoid_onnx)


@pytest.fixture
def new_ctx() -> Iterator[Callable[[bytes], rk.rknn_context]]:
    made: list[rk.rknn_context] = []

    def make(model: bytes) -> rk.rknn_context:
        ctx = rk.rknn_context()
        assert rk.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        assert rk.rknn_destroy(ctx) in (rk.RKNN_SUCC, rk.RKNN_ERR_CTX_INVALID)


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(1, 3, 8, 8)).astype(np.float32)
