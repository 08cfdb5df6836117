"""A dynamic-shape vendor file (config dynamic_input: one compiled graph per shape set) loads,
answers INPUT_DYNAMIC_RANGE and runs at each set's shapes (docs/vendor-rknn.md)."""

from __future__ import annotations

import ctypes

import numpy as np
import onnxruntime as ort
import pytest

import rknnrt as rk
from rknnrt.lite import RKNNLite

from .make_fixtures import make_onnx
from .vendor_data import FIXTURES

DYNAMIC = FIXTURES / "dynamic_wide_rk3588_fp16.rknn"


def test_dynamic_range_lists_the_files_shape_sets(make_ctx) -> None:
    ctx = make_ctx(DYNAMIC.read_bytes())
    r = rk.rknn_input_range()
    r.index = 0
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_DYNAMIC_RANGE, r, ctypes.sizeof(r)) == 0
    assert (r.name.decode(), r.fmt, r.shape_number, r.n_dims) == ("x", rk.RKNN_TENSOR_NHWC, 2, 4)
    # NHWC, in the file's graph order (the build's dynamic_input listed 10x11 first)
    assert [list(r.dyn_range[s][:4]) for s in range(2)] == [[1, 16, 16, 8], [1, 10, 11, 8]]


@pytest.fixture(scope="module")
def reference() -> ort.InferenceSession:
    model = make_onnx("wide")  # the float model the fixture was built from, H and W symbolic
    for vi in [*model.graph.input, *model.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        dims[2].dim_param, dims[3].dim_param = "h", "w"
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_runs_at_every_shape_set(reference: ort.InferenceSession) -> None:
    lite = RKNNLite()
    assert lite.load_rknn(str(DYNAMIC)) == 0 and lite.init_runtime() == 0
    rng = np.random.default_rng(0)
    try:
        for shape in ([1, 8, 10, 11], [1, 8, 16, 16], [1, 8, 10, 11]):
            x = rng.standard_normal(shape).astype(np.float32)
            (got,) = lite.inference(inputs=[x], data_format=["nchw"])
            (want,) = reference.run(None, {"x": x})
            assert got.shape == (1, 6, *shape[2:])
            g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
            assert g @ w / (np.linalg.norm(g) * np.linalg.norm(w)) >= 0.99999  # float16 weights
            assert np.abs(g - w).max() <= 0.02
    finally:
        lite.release()
