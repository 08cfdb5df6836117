"""RKNNLite's input rules (the vendor's): 3-D HWC inputs, dtype conversion, dynamic shapes
chosen from the inputs."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN

from .models import Graph, cosine, run_onnx, tiny_cnn


def _lite(model_bytes: bytes) -> RKNNLite:
    lite = RKNNLite()
    assert lite.load_rknn(model_bytes) == 0
    assert lite.init_runtime() == 0
    return lite


def test_hwc_and_float64_inputs_like_the_vendor(tmp_path) -> None:
    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[255, 255, 255])
    rknn.load_onnx(tiny_cnn())
    images = [np.random.RandomState(k).randint(0, 256, (16, 16, 3)).astype(np.uint8)
              for k in range(3)]  # fmt: skip
    assert rknn.build(dataset=[im.transpose(2, 0, 1)[None].astype(np.float32)
                               for im in images]) == 0  # fmt: skip
    path = tmp_path / "m.rknnrt"
    rknn.export_rknn(path)
    lite = RKNNLite()
    assert lite.load_rknn(str(path)) == 0 and lite.init_runtime() == 0
    image = images[0]
    expected = run_onnx(tiny_cnn(), {"images": image.transpose(2, 0, 1)[None] / 255.0})[0]
    hwc = lite.inference([image])[0]  # 3-D: one HWC image
    assert cosine(hwc, expected) > 0.999
    np.testing.assert_array_equal(hwc, lite.inference([image[None]])[0])
    as_f64 = lite.inference([image.astype(np.float64)])
    assert as_f64 is not None
    np.testing.assert_allclose(as_f64[0], hwc, atol=0.05)


def _dynamic_model() -> bytes:
    g = Graph(5)
    x = g.node("Relu", [g.conv("x", "c1", 3, 4)], "r1")
    g.node("GlobalAveragePool", [x], "out")
    model = g.model([("x", [1, 3, "h", "w"])], ["out"])
    rknn = RKNN()
    assert rknn.config(float_dtype="float32",
                       dynamic_input=[[[1, 3, 8, 8]], [[1, 3, 16, 12]]]) == 0  # fmt: skip
    assert rknn.load_onnx(model) == 0
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    return rknn.model_bytes(), model


def test_dynamic_shapes_chosen_from_the_inputs(capsys) -> None:
    blob, model = _dynamic_model()
    lite = _lite(blob)
    rng = np.random.RandomState(0)
    for h, w, fmt in ((16, 12, None), (8, 8, None), (16, 12, "nchw"), (8, 8, "nhwc")):
        nchw = rng.rand(1, 3, h, w).astype(np.float32)
        given = nchw if fmt == "nchw" else nchw.transpose(0, 2, 3, 1)
        (out,) = lite.inference([given], data_format=fmt)
        np.testing.assert_allclose(out, run_onnx(model, {"x": nchw})[0], rtol=1e-5, atol=1e-6)
    assert lite.inference([rng.rand(1, 9, 9, 3).astype(np.float32)]) is None
    assert "not supported" in capsys.readouterr().err


def test_errors_return_none_with_one_line(capsys) -> None:
    lite = RKNNLite()
    assert lite.inference([np.zeros(3)]) is None
    blob = RKNN()
    blob.config(float_dtype="float32")
    blob.load_onnx(tiny_cnn())
    blob.build(do_quantization=False)
    lite = _lite(blob.model_bytes())
    assert "rk3588" in lite.list_support_target_platform()
    capsys.readouterr()
    assert lite.inference([np.zeros((1, 16, 16, 3))] * 2) is None
    err = capsys.readouterr().err
    assert err.count("E RKNN:") == 1 and "2 were given" in err


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.int64, np.float64, np.uint16])
def test_dtypes_of_a_float_input(dtype) -> None:
    rknn = RKNN()
    rknn.config(float_dtype="float32")
    rknn.load_onnx(tiny_cnn())
    rknn.build(do_quantization=False)
    lite = _lite(rknn.model_bytes())
    x = np.random.RandomState(1).randint(0, 100, (1, 16, 16, 3))
    expected = run_onnx(tiny_cnn(), {"images": x.transpose(0, 3, 1, 2)})[0]
    (out,) = lite.inference([x.astype(dtype)])
    np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-2)
