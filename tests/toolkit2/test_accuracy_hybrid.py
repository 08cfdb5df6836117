"""accuracy_analysis (the vendor's snapshot layout, worst layers first) and the hybrid
quantisation two-step flow (the vendor's .model/.data/.cfg files)."""

from __future__ import annotations

import os

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from rknnrt.toolkit import RKNN, hybrid
from rknnrt.toolkit.errors import ConversionError

from .models import Graph, cosine, run_onnx, smooth_images, tiny_cnn, write_images


def _dataset(folder, count: int = 4) -> str:
    paths = write_images(str(folder), smooth_images(count, 16))
    (folder / "dataset.txt").write_text("\n".join(os.path.basename(p) for p in paths) + "\n")
    return str(folder / "dataset.txt")


def _int8(folder, target: str = "rk3588") -> RKNN:
    rknn = RKNN()
    assert rknn.config(mean_values=[0, 0, 0], std_values=[255, 255, 255],
                       target_platform=target) == 0  # fmt: skip
    assert rknn.load_onnx(tiny_cnn()) == 0
    assert rknn.build(dataset=_dataset(folder)) == 0, rknn.last_error
    return rknn


def _table(path) -> dict[str, list[float]]:
    rows = {}
    for line in open(path):
        if line.startswith("[") and "|" in line:
            name = line.split("]")[1].split()[0]
            rows[name] = [float(v) for v in line.split("]")[1].replace("|", " ").split()[1:]]
    return rows


def test_snapshot_layout_and_values(tmp_path) -> None:
    rknn = _int8(tmp_path)
    image = smooth_images(1, 16, seed=7)[0]
    (tmp_path / "in").mkdir()
    (img_path,) = write_images(str(tmp_path / "in"), [image])
    out_dir = tmp_path / "snapshot"
    assert rknn.accuracy_analysis(inputs=[img_path], output_dir=str(out_dir)) == 0
    for part in ("golden", "simulator"):
        assert {"images.txt", "relu1.txt", "out.txt"} <= set(os.listdir(out_dir / part))
        assert "out.npy" in os.listdir(out_dir / part / "npy")
    assert (out_dir / "map_name_to_file.txt").read_text().count(".txt") >= 3
    # golden = the float model on the normalised input, per tensor
    x = image.transpose(2, 0, 1)[None].astype(np.float32) / 255.0
    model = tiny_cnn()
    model.graph.output.append(helper.make_empty_tensor_value_info("relu1"))
    session = ort.InferenceSession(model.SerializeToString())
    out_ref, relu_ref = session.run(["out", "relu1"], {"images": x})
    golden_relu = np.load(out_dir / "golden" / "npy" / "relu1.npy", allow_pickle=False)
    np.testing.assert_allclose(golden_relu, relu_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.loadtxt(out_dir / "golden" / "out.txt"), out_ref.ravel(),
                               atol=1e-5)  # fmt: skip
    # simulator = what the runtime computes
    assert rknn.init_runtime() == 0
    (got,) = rknn.inference([image])
    simulated = np.load(out_dir / "simulator" / "npy" / "out.npy", allow_pickle=False)
    np.testing.assert_allclose(simulated, got, atol=1e-5)
    rows = _table(out_dir / "error_analysis.txt")
    entire_cos, entire_euc = rows["out"][0], rows["out"][1]
    assert entire_cos == pytest.approx(cosine(out_ref, got), abs=2e-5)
    assert entire_euc == pytest.approx(float(np.linalg.norm(out_ref - got)), rel=1e-3, abs=1e-4)
    assert rows["images"][0] == pytest.approx(1.0, abs=1e-4)  # the input's own quantisation


def test_npy_inputs_and_default_folder(tmp_path, monkeypatch) -> None:
    rknn = _int8(tmp_path)
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", np.random.RandomState(0).rand(1, 3, 16, 16) * 255)
    assert rknn.accuracy_analysis(inputs=["x.npy"], output_dir=None) == 0  # vendor example
    assert (tmp_path / "snapshot" / "error_analysis.txt").exists()
    assert rknn.accuracy_analysis(inputs=["x.npy", "x.npy"]) == -1
    assert "2 inputs given for a model with 1" in rknn.last_error


def _step1(folder, monkeypatch, **kwargs) -> tuple[str, dict]:
    monkeypatch.chdir(folder)
    rknn = RKNN()
    assert rknn.config(mean_values=[0, 0, 0], std_values=[255, 255, 255],
                       target_platform="rk3566") == 0  # fmt: skip
    assert rknn.load_onnx(tiny_cnn()) == 0
    assert rknn.hybrid_quantization_step1(dataset=_dataset(folder), **kwargs) == 0, \
        rknn.last_error  # fmt: skip
    for suffix in (".model", ".data", ".quantization.cfg"):
        assert (folder / f"tiny_cnn{suffix}").exists()
    cfg = hybrid.parse_cfg((folder / "tiny_cnn.quantization.cfg").read_text())
    return str(folder / "tiny_cnn.quantization.cfg"), cfg


def _step2(folder) -> RKNN:
    rknn = RKNN()
    assert rknn.hybrid_quantization_step2(
        model_input="./tiny_cnn.model", data_input="./tiny_cnn.data",
        model_quantization_cfg="./tiny_cnn.quantization.cfg") == 0, rknn.last_error
    return rknn


def test_hybrid_steps_roundtrip_and_edited_range(tmp_path, monkeypatch) -> None:
    cfg_path, cfg = _step1(tmp_path, monkeypatch)
    params = cfg["quantize_parameters"]
    assert cfg["custom_quantize_layers"] == {}
    relu = params["relu1"]
    assert relu["dtype"] == "int8" and relu["zero_point"] == [-128]  # a ReLU output: min 0
    assert relu["max"][0] == pytest.approx((127 + 128) * relu["scale"][0])
    unchanged = _step2(tmp_path)
    reference = _int8(tmp_path, "rk3566")  # the same dataset, a plain build
    assert unchanged.init_runtime(target="rk3566") == 0  # the stored config: rk3566
    assert reference.init_runtime() == 0
    image = smooth_images(1, 16, seed=5)[0]
    np.testing.assert_array_equal(unchanged.inference([image])[0],
                                  reference.inference([image])[0])  # fmt: skip
    # widen relu1's range 500x: that layer becomes the worst and is named first
    text = open(cfg_path).read()
    old_max = repr(relu["max"][0])
    open(cfg_path, "w").write(text.replace(f"-   {old_max}", f"-   {relu['max'][0] * 500!r}"))
    edited = _step2(tmp_path)
    assert edited.accuracy_analysis([str(tmp_path / "img0.png")], output_dir="snap") == 0
    lines = (tmp_path / "snap" / "error_analysis.txt").read_text().splitlines()
    assert lines[1].startswith("#   [Relu] relu1")
    rows = _table(tmp_path / "snap" / "error_analysis.txt")
    assert rows["relu1"][2] < 0.99  # its single-layer cosine


def test_cfg_is_parsed_never_executed(tmp_path) -> None:
    marker = tmp_path / "pwned"
    cfg = tmp_path / "x.cfg"
    cfg.write_text(f"custom_quantize_layers:\n    __import__('os').system('touch {marker}'): "
                   "float16\nquantize_parameters: {}\n")  # fmt: skip
    layers, overrides = hybrid.read_cfg(str(cfg))
    assert not marker.exists() and overrides == {}
    assert layers == [f"__import__('os').system('touch {marker}')"]
    cfg.write_text("custom_quantize_layers:\n    conv1: int4\n")
    with pytest.raises(ConversionError, match="may only say float16"):
        hybrid.read_cfg(str(cfg))
    cfg.write_text("quantize_parameters:\n  - 3\n")
    with pytest.raises(ConversionError, match="must map tensor names"):
        hybrid.read_cfg(str(cfg))
    cfg.write_text("quantize_parameters:\n  x:\n    dtype: int8\n  - 3\n")
    with pytest.raises(ConversionError, match="line 4"):
        hybrid.read_cfg(str(cfg))


def test_step1_then_step2_on_one_object_as_the_zoo_does(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[255, 255, 255], target_platform="rk3566")
    assert rknn.load_onnx(tiny_cnn()) == 0
    assert rknn.hybrid_quantization_step1(dataset=_dataset(tmp_path),
                                          custom_hybrid=[["images", "relu1"]]) == 0  # fmt: skip
    assert rknn.hybrid_quantization_step2("tiny_cnn.model", "tiny_cnn.data",
                                          "tiny_cnn.quantization.cfg") == 0, rknn.last_error
    fresh = _step2(tmp_path)
    assert rknn.model_bytes() == fresh.model_bytes()  # the same build as on a new object
    assert rknn.init_runtime() == 0 and fresh.init_runtime() == 0
    image = smooth_images(1, 16, seed=4)[0]
    np.testing.assert_array_equal(rknn.inference([image])[0], fresh.inference([image])[0])
    int8 = _int8(tmp_path)
    assert rknn.model_bytes() != int8.model_bytes()  # conv1 and relu1 stayed float16


def test_step2_errors(tmp_path, monkeypatch) -> None:
    cfg_path, _ = _step1(tmp_path, monkeypatch)
    text = open(cfg_path).read().replace("custom_quantize_layers: {}",
                                         "custom_quantize_layers:\n    nope: float16")
    open(cfg_path, "w").write(text)
    rknn = RKNN()
    assert rknn.hybrid_quantization_step2("tiny_cnn.model", "tiny_cnn.data", cfg_path) == -1
    assert "no layer named 'nope'" in rknn.last_error


def test_custom_hybrid_lists_the_layers_between(tmp_path, monkeypatch) -> None:
    _, cfg = _step1(tmp_path, monkeypatch, custom_hybrid=[["relu1", "out"]])
    assert cfg["custom_quantize_layers"] == {"out": "float16"}


def _branches():
    """x -> conv_a -> relu_a -> conv_b -> add <- conv_s <- x ; add -> conv_t -> out."""
    g = Graph(2)
    a = g.node("Relu", [g.conv("x", "conv_a", 3, 4)], "relu_a")
    b = g.conv(a, "conv_b", 4, 4)
    s = g.conv("x", "conv_s", 3, 4)
    t = g.node("Add", [b, s], "add")
    g.conv(t, "out", 4, 2, k=1)
    return g.model([("x", [1, 3, 8, 8])], ["out"])


def test_custom_hybrid_takes_only_the_subgraph_between() -> None:
    model = _branches()
    # not conv_s (feeds 'add' from elsewhere), not conv_a/relu_a (upstream of the start)
    assert hybrid.layers_between(model, "relu_a", "add") == ["conv_b", "add"]
    assert hybrid.layers_between(model, "x", "add") == ["conv_a", "relu_a", "conv_b",
                                                        "conv_s", "add"]  # fmt: skip
    assert hybrid.layers_between(model, "relu_a", "out") == ["conv_b", "add", "out"]
    assert hybrid.layers_between(model, "conv_a", "relu_a") == ["relu_a"]  # a tensor, first
    with pytest.raises(ConversionError, match="no path from 'conv_s' to 'relu_a'"):
        hybrid.layers_between(model, "conv_s", "relu_a")
    with pytest.raises(ConversionError, match="no tensor or layer named 'nope'"):
        hybrid.layers_between(model, "nope", "add")


def test_float_layers_from_the_cfg(tmp_path, monkeypatch) -> None:
    cfg_path, _ = _step1(tmp_path, monkeypatch, custom_hybrid=[["images", "relu1"]])
    rknn = _step2(tmp_path)
    assert rknn.init_runtime() == 0
    image = smooth_images(1, 16, seed=3)[0]
    ref = run_onnx(tiny_cnn(), {"images": image.transpose(2, 0, 1)[None] / 255.0})[0]
    int8 = _int8(tmp_path)
    int8.init_runtime()
    hybrid_out, int8_out = rknn.inference([image])[0], int8.inference([image])[0]
    assert np.abs(hybrid_out - ref).max() < np.abs(int8_out - ref).max()


def test_auto_hybrid(tmp_path, capsys) -> None:
    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[255, 255, 255],
                auto_hybrid_cos_thresh=0.999999)  # fmt: skip
    rknn.load_onnx(tiny_cnn())
    assert rknn.build(dataset=_dataset(tmp_path), auto_hybrid=True) == 0, rknn.last_error
    assert "kept in float16: " in capsys.readouterr().err


def test_auto_hybrid_threshold_zero_keeps_everything_int8(tmp_path, capsys) -> None:
    rknn = RKNN()
    rknn.config(mean_values=[0, 0, 0], std_values=[255, 255, 255], auto_hybrid_cos_thresh=0)
    rknn.load_onnx(tiny_cnn())
    assert rknn.build(dataset=_dataset(tmp_path), auto_hybrid=True) == 0, rknn.last_error
    assert "auto_hybrid: 0 layer(s) below cosine 0" in capsys.readouterr().err
    assert rknn.model_bytes() == _int8(tmp_path).model_bytes()
