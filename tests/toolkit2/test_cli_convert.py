"""`rknnrt convert`: the options that reach the toolkit2 features, progress, and one E line
(exit 1, no traceback) per user error."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from rknnrt import cli
from rknnrt.lite import RKNNLite

from .models import Graph, cosine, run_onnx, smooth_images, tiny_cnn, two_input_model, write_images


@pytest.fixture
def files(tmp_path):
    onnx.save(tiny_cnn(), tmp_path / "m.onnx")
    paths = write_images(str(tmp_path / "imgs"), smooth_images(4, 16), ".png")
    (tmp_path / "ds.txt").write_text("\n".join(os.path.relpath(p, tmp_path) for p in paths))
    return tmp_path


def _run(path) -> RKNNLite:
    lite = RKNNLite()
    assert lite.load_rknn(str(path)) == 0 and lite.init_runtime() == 0
    return lite


def test_images_flat_mean_std_algorithm(files, capsys) -> None:
    out = files / "m.rknnrt"
    assert cli.main(["convert", str(files / "m.onnx"), "--dataset", str(files / "ds.txt"),
                     "--mean", "0,0,0", "--std", "255,255,255", "--algorithm", "mmse",
                     "--method", "layer", "-o", str(out)]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert "wrote" in captured.out and "I calibrating" in captured.err
    assert "I building ..." in captured.err
    img = smooth_images(1, 16, seed=3)[0]
    (got,) = _run(out).inference([img])
    ref = run_onnx(tiny_cnn(), {"images": img.transpose(2, 0, 1)[None] / 255.0})[0]
    assert cosine(got, ref) > 0.999


def test_hybrid_level_and_dynamic_input(files, capsys) -> None:
    out = files / "h.rknnrt"
    assert cli.main(["convert", str(files / "m.onnx"), "--dataset", str(files / "ds.txt"),
                     "--hybrid-level", "1", "--hybrid-cos", "0", "-o", str(out)]) == 0
    assert "auto_hybrid: 0 layer(s)" in capsys.readouterr().err
    g = Graph(5)
    g.node("GlobalAveragePool", [g.node("Relu", [g.conv("x", "c1", 3, 4)], "r1")], "out")
    onnx.save(g.model([("x", [1, 3, "h", "w"])], ["out"]), files / "d.onnx")
    dyn = files / "d.rknnrt"
    assert cli.main(["convert", str(files / "d.onnx"), "--float-dtype", "float32",
                     "--dynamic-input", "1,3,8,8;1,3,16,12", "-o", str(dyn)]) == 0
    lite = _run(dyn)
    for h, w in ((8, 8), (16, 12)):
        (got,) = lite.inference([np.ones((1, h, w, 3), np.float32)])
        assert got.shape == (1, 4, 1, 1)


@pytest.mark.parametrize(("args", "message"), [
    (["missing.onnx"], "E convert: 'missing.onnx': no such file"),
    (["m.onnx", "--dataset", "nope.txt"], "E convert: dataset 'nope.txt': no such file"),
    (["m.txt"], "unknown model type"),
    (["m.onnx", "--dataset", "two.txt"], "E build: dataset line 1 has 2 files for 1 inputs"),
    (["m.onnx", "--dataset", "bad.txt"], "E build: dataset line 1 ("),
    (["m.onnx", "--mean", "a,b"], "E convert: --mean 'a,b'"),
    (["m.onnx", "--target", "rk9999"], "E config: target_platform 'rk9999'"),
    (["m.pt"], "E load_pytorch: load_pytorch needs input_size_list"),
])  # fmt: skip
def test_user_errors_are_one_line(files, monkeypatch, capsys, args, message) -> None:
    monkeypatch.chdir(files)
    (files / "m.txt").write_text("x")
    (files / "m.pt").write_text("x")
    (files / "two.txt").write_text("imgs/img0.png imgs/img1.png\n")
    (files / "bad.txt").write_text("m.onnx\n")
    assert cli.main(["convert", *args]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("E ")]) == 1


def test_wrong_input_count_for_a_two_input_model(files, monkeypatch, capsys) -> None:
    monkeypatch.chdir(files)
    onnx.save(two_input_model(), "two.onnx")
    assert cli.main(["convert", "two.onnx", "--dataset", "ds.txt"]) == 1
    err = capsys.readouterr().err
    assert "has 1 files for 2 inputs" in err and "Traceback" not in err


def test_an_empty_dynamic_shape_set_is_one_e_line(files, capsys) -> None:
    assert cli.main(["convert", str(files / "m.onnx"), "--dynamic-input", "1,3;"]) == 1
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("E ")]
    assert line.startswith("E convert: --dynamic-input '1,3;': every shape set needs its dims")
