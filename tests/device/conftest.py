"""Helpers for the simulated-NPU tests: contexts on the default model, inputs, outputs, and the
single-thread reference results those tests compare against."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.core.device import Device
from rknnrt.toolkit.samples import default_input

N_IMAGES = 8


@pytest.fixture(scope="session")
def images() -> list[np.ndarray]:
    """Eight different NHWC uint8 images for the default model."""
    return [default_input(seed=s) for s in range(N_IMAGES)]


def set_input(ctx: rk.rknn_context, image: np.ndarray) -> None:
    inp = rk.rknn_input(index=0, buf=image.ctypes.data, size=image.nbytes,
                        type=rk.RKNN_TENSOR_UINT8, fmt=rk.RKNN_TENSOR_NHWC)  # fmt: skip
    assert rk.rknn_inputs_set(ctx, 1, inp) == rk.RKNN_SUCC


def get_output(ctx: rk.rknn_context) -> tuple[np.ndarray, int]:
    """(float32 output [10], frame id) through rknn_outputs_get; the buffer is released."""
    outs = (rk.rknn_output * 1)()
    outs[0].want_float = 1
    ext = rk.rknn_output_extend()
    assert rk.rknn_outputs_get(ctx, 1, outs, ext) == rk.RKNN_SUCC
    data = np.frombuffer(ctypes.string_at(outs[0].buf, outs[0].size), np.float32).copy()
    assert rk.rknn_outputs_release(ctx, 1, outs) == rk.RKNN_SUCC
    return data, int(ext.frame_id)


def device_of(ctx: rk.rknn_context) -> Device:
    return registry.get(ctx.value).device


def run_ext(**fields: int) -> rk.rknn_run_extend:
    ext = rk.rknn_run_extend()
    ext.fence_fd = -1
    for name, value in fields.items():
        setattr(ext, name, value)
    return ext


@pytest.fixture(scope="session")
def expected(default_model_bytes: bytes, images: list[np.ndarray]) -> list[np.ndarray]:
    """The default model's outputs for `images`, one blocking run each on one context."""
    ctx = rk.rknn_context()
    model = default_model_bytes
    assert rk.rknn_init(ctx, model, len(model), 0, None) == 0
    results = []
    for image in images:
        set_input(ctx, image)
        assert rk.rknn_run(ctx, None) == 0
        results.append(get_output(ctx)[0])
    assert rk.rknn_destroy(ctx) == 0
    return results


@pytest.fixture
def hold_cores() -> Iterator[Callable[..., object]]:
    """`hold_cores(ctx, cores)` keeps those NPU cores busy until the test ends (or `.release()`
    on the returned handle): a long job that the test controls."""
    held: list[tuple[Device, object]] = []

    def hold(ctx: rk.rknn_context, cores: tuple[int, ...]) -> object:
        dev = device_of(ctx)
        req = dev.hold(cores)
        held.append((dev, req))
        return req

    yield hold
    for dev, req in held:
        dev.release(req)  # a no-op for those the test released already
