"""The NPU segments of a model with custom ops run the same execution graph as a whole
program (core/program/whole.execution_graph): an int8 segment's unfused convs are summed in
integers there too."""

from __future__ import annotations

import ctypes

import numpy as np
from cst_helpers import build, make_op, run, sigmoid_compute

import rknnrt as rk
from rknnrt.core.program import int8_islands


def test_int8_segments_get_the_integer_island_sums(sigmoid_onnx, x, monkeypatch) -> None:
    model = build(sigmoid_onnx, dtype="float16", quantize=True)
    counts: list[int] = []
    original = int8_islands.islands_as_integers
    monkeypatch.setattr(int8_islands, "islands_as_integers",
                        lambda g, w, limit=2.0**24: counts.append(original(g, w, limit))
                        or counts[-1])  # fmt: skip
    outputs = []
    for islands in ("1", "0"):
        monkeypatch.setenv("RKNNRT_INT8_ISLANDS", islands)
        ctx = rk.rknn_context()
        assert rk.rknn_init(ctypes.byref(ctx), model, len(model), 0, None) == 0
        try:
            op, keep = make_op(compute=sigmoid_compute)
            assert rk.rknn_register_custom_ops(ctx, ctypes.byref(op), 1) == 0
            status, out = run(ctx, x)
            assert status == 0
            outputs.append(out)
        finally:
            rk.rknn_destroy(ctx)
    # the last conv (an int8 graph output of a uint8 input: not fused by onnxruntime)
    assert counts and counts[0] >= 1
    on, off = outputs
    assert np.ptp(on) > 0
    np.testing.assert_allclose(on, off, atol=np.ptp(on) / 50)  # ties apart at most
