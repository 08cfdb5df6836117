"""Repeated create/destroy cycles leave descriptors and resident memory where they were."""

from __future__ import annotations

import ctypes
import gc
import os

import numpy as np
import pytest

import rknnrt as rk
from rknnrt.core import registry
from tests.helpers import open_fds

MB = 1 << 20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_10000_memory_cycles(ctx) -> None:
    def cycle() -> None:
        a = rk.rknn_create_mem(ctx, 4096)
        b = rk.rknn_create_mem2(0, 8192, rk.RKNN_MEM_FLAG_ALLOC_NO_CONTEXT)
        w = rk.rknn_create_mem_from_fd(ctx, a.contents.fd, a.contents.virt_addr, 1024, 0)
        ctypes.memset(a.contents.virt_addr, 7, 4096)
        assert rk.rknn_mem_sync(ctx, a, rk.RKNN_MEMORY_SYNC_TO_DEVICE) == 0
        assert rk.rknn_destroy_mem(ctx, w) == 0
        assert rk.rknn_destroy_mem(ctx, a) == 0
        assert rk.rknn_destroy_mem(0, b) == 0

    for _ in range(200):  # warm up allocators and caches
        cycle()
    gc.collect()
    fds, resident = open_fds(), rss()
    for _ in range(10_000):
        cycle()
    gc.collect()
    assert open_fds() == fds
    assert rss() - resident < 5 * MB


@pytest.mark.slow
def test_1000_context_cycles(default_model_bytes) -> None:
    image = np.zeros((1, 64, 64, 3), np.uint8)
    inputs = (rk.rknn_input * 1)()
    inputs[0].buf, inputs[0].size = image.ctypes.data, image.nbytes
    inputs[0].type, inputs[0].fmt = rk.RKNN_TENSOR_UINT8, rk.RKNN_TENSOR_NHWC
    outs = (rk.rknn_output * 1)()

    def cycle(run: bool) -> None:
        ctx = rk.rknn_context()
        model = default_model_bytes
        assert rk.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
        if run:
            mem = rk.rknn_create_mem(ctx, 1024)  # left for rknn_destroy to free
            assert mem
            assert rk.rknn_inputs_set(ctx, 1, inputs) == 0 and rk.rknn_run(ctx, None) == 0
            assert rk.rknn_outputs_get(ctx, 1, outs, None) == 0  # never released
        assert rk.rknn_destroy(ctx) == 0

    for k in range(30):
        cycle(run=k % 10 == 0)
    gc.collect()
    fds, resident, contexts = open_fds(), rss(), registry.count()
    for k in range(1000):
        cycle(run=k % 10 == 0)
    gc.collect()
    assert open_fds() == fds
    assert registry.count() == contexts
    assert rss() - resident < 5 * MB
