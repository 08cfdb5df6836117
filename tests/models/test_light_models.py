"""The onnx package's nine light models convert with default settings and, through
rknn_inputs_set / rknn_run / rknn_outputs_get(want_float=1), match onnxruntime on the original."""

from __future__ import annotations

import ctypes
import gc
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import rknnrt as rk
from rknnrt.toolkit import RKNN

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = [
    "light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
    "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512",
]  # fmt: skip


def _real_input(model: onnx.ModelProto) -> onnx.ValueInfoProto:
    constants = {t.name for t in model.graph.initializer}
    (inp,) = [i for i in model.graph.input if i.name not in constants]
    return inp


QUICK = {"light_squeezenet", "light_shufflenet", "light_inception_v1"}  # < 2 s each


@pytest.mark.parametrize(
    "name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in MODELS]
)
def test_light_model_matches_onnxruntime(name: str) -> None:
    path = os.path.join(LIGHT, f"{name}.onnx")
    rknn = RKNN()
    assert rknn.config(float_dtype="float32") == 0  # exact float; fp16 is tested elsewhere
    assert rknn.load_onnx(path) == 0
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    blob = rknn.model_bytes()
    rknn.release()

    inp = _real_input(onnx.load(path))
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.RandomState(0).uniform(-1, 1, shape).astype(np.float32)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    expected = session.run(None, {inp.name: x})[0]
    del session

    ctx = rk.rknn_context()
    assert rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None) == rk.RKNN_SUCC
    del blob
    try:
        attr = rk.rknn_tensor_attr(index=0)
        assert rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, attr, ctypes.sizeof(attr)) == 0
        n, c, h, w = shape
        assert list(attr.dims[: attr.n_dims]) == [n, h, w, c]
        assert attr.fmt == rk.RKNN_TENSOR_NHWC and attr.type == rk.RKNN_TENSOR_FLOAT32

        nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        inputs = (rk.rknn_input * 1)()
        inputs[0].buf, inputs[0].size = nhwc.ctypes.data, nhwc.nbytes
        inputs[0].type, inputs[0].fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NHWC
        assert rk.rknn_inputs_set(ctx, 1, inputs) == rk.RKNN_SUCC
        assert rk.rknn_run(ctx, None) == rk.RKNN_SUCC
        outputs = (rk.rknn_output * 1)()
        outputs[0].want_float = 1
        assert rk.rknn_outputs_get(ctx, 1, outputs, None) == rk.RKNN_SUCC
        assert outputs[0].size == expected.size * 4
        raw = (ctypes.c_char * outputs[0].size).from_address(outputs[0].buf)
        got = np.frombuffer(raw, np.float32).reshape(expected.shape).copy()
        assert rk.rknn_outputs_release(ctx, 1, outputs) == rk.RKNN_SUCC
    finally:
        assert rk.rknn_destroy(ctx) == rk.RKNN_SUCC
        gc.collect()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert np.abs(expected).max() > 0  # a real comparison, not two arrays of zeros
