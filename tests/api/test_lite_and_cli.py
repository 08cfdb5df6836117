"""RKNNLite and the command line, on the bundled default model."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rknnrt import cli
from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN
from rknnrt.toolkit.samples import default_input, default_model


@pytest.fixture
def model_path(tmp_path, default_model_bytes: bytes):
    path = tmp_path / "default.rknnrt"
    path.write_bytes(default_model_bytes)
    return path


def test_lite_inference_matches_reference(model_path, reference) -> None:
    lite = RKNNLite()
    assert lite.load_rknn(model_path) == 0
    assert lite.init_runtime(core_mask=RKNNLite.NPU_CORE_0_1_2) == 0
    image = default_input(seed=4)
    (nhwc_out,) = lite.inference([image])
    (nchw_out,) = lite.inference([np.ascontiguousarray(image.transpose(0, 3, 1, 2))],
                                 data_format="nchw")  # fmt: skip
    assert nhwc_out.dtype == np.float32 and nhwc_out.shape == (1, 10)
    np.testing.assert_allclose(nhwc_out, reference(image), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(nhwc_out, nchw_out)
    assert re.search(r"API: 2\.5\.0 .*driver: 0\.9\.8", lite.get_sdk_version(), re.S)
    lite.release()
    assert lite.inference([image]) is None
    assert lite.get_sdk_version() == ""


def test_lite_pass_through(model_path, reference) -> None:
    lite = RKNNLite()
    assert lite.load_rknn(model_path) == 0 and lite.init_runtime() == 0
    image = default_input(seed=5)
    nchw = reference.normalise_nhwc(image)  # NCHW float32
    normalised = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1), np.float32)  # native NHWC
    (out,) = lite.inference([normalised], inputs_pass_through=[1])
    np.testing.assert_allclose(out, reference(image), rtol=1e-4, atol=1e-6)
    lite.release()


def test_lite_errors(tmp_path, capsys, convert) -> None:
    lite = RKNNLite()
    assert lite.init_runtime() == -1
    assert lite.load_rknn(tmp_path / "missing.rknnrt") == -1
    assert "E RKNN:" in capsys.readouterr().err
    path = tmp_path / "rk3566.rknnrt"
    path.write_bytes(convert(default_model(), target_platform="rk3566"))
    assert lite.load_rknn(path) == 0
    assert lite.init_runtime(core_mask=RKNNLite.NPU_CORE_0_1) == -1  # single-core NPU
    assert "rknn_set_core_mask is not supported on rk3566" in capsys.readouterr().err
    assert lite.init_runtime() == 0
    # int8 on a float model: converted to float32 by the Python layer, as the vendor's is
    np.testing.assert_array_equal(lite.inference([np.full((1, 64, 64, 3), 7, np.int8)])[0],
                                  lite.inference([np.full((1, 64, 64, 3), 7, np.float32)])[0])
    lite.release()


def test_cli_run_default_model(capsys) -> None:
    assert cli.main(["run"]) == 0
    out = capsys.readouterr().out
    assert "model: bundled default CNN" in out
    first = re.search(r"first run: ([0-9.]+) ms on this PC .*includes the one-time set-up", out)
    warm = re.search(r"warm run: ([0-9.]+) ms on this PC \(median of (\d)\)", out)
    assert first and warm and 1 <= int(warm.group(2)) <= 5
    assert re.search(r"rknn_run: \d+ us \(RKNN_QUERY_PERF_RUN of the first run: the estimated "
                     "board time", out)  # fmt: skip
    probs = re.search(r"output 0 probs: shape \[1, 10\].*top-5 (\d+):([0-9.]+)", out)
    assert probs is not None
    rknn = RKNN()
    rknn.config(mean_values=[[123.675, 116.28, 103.53]], std_values=[[58.395, 57.12, 57.375]])
    rknn.load_onnx(default_model())
    rknn.build(do_quantization=False)
    lite_model = rknn.model_bytes()
    lite = RKNNLite()
    lite._model = lite_model
    assert lite.init_runtime() == 0
    (expected,) = lite.inference([default_input()])
    lite.release()
    assert int(probs.group(1)) == int(np.argmax(expected))
    assert float(probs.group(2)) == pytest.approx(float(expected.max()), abs=1e-4)


def test_cli_convert_info_run_bench(tmp_path, capsys, default_onnx) -> None:
    import onnx

    onnx_path = tmp_path / "m.onnx"
    onnx.save(default_onnx, onnx_path)
    out_path = tmp_path / "m.rknnrt"
    args = ["-o", str(out_path), "--target", "rk3566", "--mean", "1,2,3", "--std", "4,5,6",
            "--float-dtype", "float32"]  # fmt: skip
    assert cli.main(["convert", str(onnx_path), *args, "--custom-string", "BGR"]) == 0
    assert out_path.exists()
    capsys.readouterr()
    assert cli.main(["info", str(out_path)]) == 0
    info = capsys.readouterr().out
    assert "model input num: 1, output num: 1" in info
    assert "dims=[1, 64, 64, 3]" in info and "fmt=NHWC, type=FP32" in info
    assert "custom string: 'BGR'" in info
    # native input on rk3566: NHWC with an 8-pixel width alignment (64 stays 64)
    assert re.search(r"native input tensors:\n  index=0, name=images, .*w_stride = 64", info)
    assert re.search(r"total_weight_size=15232", info)
    x = default_input(seed=1)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["run", str(out_path), "--input", str(tmp_path / "x.npy")]) == 0
    assert "output 0 probs: shape [1, 10]" in capsys.readouterr().out
    assert cli.main(["bench", str(onnx_path), "--runs", "5", "--warmup", "1"]) == 0
    bench = capsys.readouterr().out
    assert re.search(r"runs: 5, latency ms: min [0-9.]+, p50 [0-9.]+, p90", bench)
    # the default: float16 as on the NPU, weights stored as float16
    half = tmp_path / "half.rknnrt"
    assert cli.main(["convert", str(onnx_path), "-o", str(half)]) == 0
    capsys.readouterr()
    assert cli.main(["info", str(half)]) == 0
    info = capsys.readouterr().out
    assert "fmt=NHWC, type=FP16" in info and "total_weight_size=7840" in info
    assert cli.main(["convert", str(onnx_path), "--target", "rk9999"]) == 1  # no traceback
    assert "E config: target_platform 'rk9999'" in capsys.readouterr().err
