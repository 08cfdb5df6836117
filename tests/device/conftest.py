"""Helpers for the simulated-NPU tests: contexts on the default model, inputs, outputs, and the
single-thread reference results those tests compare against."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry
from rknnrt.core.device import Device
from rknnrt.toolkit.samples import default_input
from tests.helpers import get_output, set_input  # noqa: F401 - re-exported to the tests here

N_IMAGES = 8


@pytest.fixture(scope="session")
def images() -> list[np.ndarray]:
    """Eight different NHWC uint8 images for the default model."""
    return [default_input(seed=s) for s in range(N_IMAGES)]


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
