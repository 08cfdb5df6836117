"""Crafted model files for the hardening tests: a converted model taken apart and put back
together by container.write, so that every checksum is right and only the rule under test can
refuse the file."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest

import rknnrt as rk
from rknnrt.model import container
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.samples import default_model

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def rebuild(blob: bytes, meta: Callable[[dict], Any] | None = None,
            graph: Callable[[onnx.ModelProto], Any] | None = None,
            weights: bytes | None = None, raw_meta: bytes | None = None) -> bytes:  # fmt: skip
    """`blob` with its metadata (a dict edited in place), graph (a ModelProto edited in place)
    or weights replaced, written with valid checksums."""
    sections = container.read(memoryview(blob))
    meta_bytes = bytes(sections.metadata)
    if meta is not None:
        raw = json.loads(meta_bytes)
        meta(raw)
        meta_bytes = json.dumps(raw).encode()
    if raw_meta is not None:
        meta_bytes = raw_meta
    graph_bytes = bytes(sections.graph)
    if graph is not None:
        proto = onnx.load_model_from_string(graph_bytes)
        graph(proto)
        graph_bytes = proto.SerializeToString()
    return container.write(
        meta_bytes, graph_bytes, bytes(sections.weights) if weights is None else weights
    )


def init_status(blob: bytes | str, flag: int = 0, extend: Any = None) -> int:
    """rknn_init's status for `blob` (bytes, or a path), destroying the context on success."""
    ctx = rk.rknn_context()
    size = 0 if isinstance(blob, str) else len(blob)
    rc = rk.rknn_init(ctypes.byref(ctx), blob, size, flag, extend)
    assert type(rc) is int
    if rc == rk.RKNN_SUCC:
        assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC
    return rc


def run_once(blob: bytes, x: np.ndarray) -> np.ndarray:
    """One rknn_run of input `x` (NHWC float32), the first output as float32."""
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == rk.RKNN_SUCC
    try:
        inputs = (rk.rknn_input * 1)()
        inputs[0].buf, inputs[0].size, inputs[0].fmt = x.ctypes.data, x.nbytes, rk.RKNN_TENSOR_NHWC
        inputs[0].type = rk.RKNN_TENSOR_FLOAT32
        assert rk.rknn_inputs_set(ctx, 1, inputs) == 0 and rk.rknn_run(ctx, None) == 0
        outputs = (rk.rknn_output * 1)()
        outputs[0].want_float = 1
        assert rk.rknn_outputs_get(ctx, 1, outputs, None) == 0
        raw = (ctypes.c_char * outputs[0].size).from_address(outputs[0].buf)
        y = np.frombuffer(raw, np.float32).copy()
        rk.rknn_outputs_release(ctx, 1, outputs)
        return y
    finally:
        rk.rknn_destroy(ctx)


def convert_three() -> dict[str, bytes]:
    """The default model as float16, as float32 with mean/std and as int8 (the fuzz seeds)."""
    model = default_model()
    rng = np.random.RandomState(0)
    samples = [[rng.randint(0, 256, [1, 3, 64, 64]).astype(np.float32)] for _ in range(4)]
    out = {}
    for name, config, quantize in (
        ("float16", {"float_dtype": "float16"}, False),
        ("float32", {"float_dtype": "float32", "mean_values": [MEAN], "std_values": [STD]}, False),
        ("int8", {"mean_values": [MEAN], "std_values": [STD]}, True),
    ):
        rknn = RKNN()
        assert rknn.config(target_platform="rk3588", **config) == 0, rknn.last_error
        assert rknn.load_onnx(model) == 0, rknn.last_error
        assert rknn.build(do_quantization=quantize, dataset=samples if quantize else None) == 0
        out[name] = rknn.model_bytes()
        rknn.release()
    return out


@pytest.fixture(scope="session")
def three_models() -> dict[str, bytes]:
    return convert_three()
