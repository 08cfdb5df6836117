"""Calibration datasets: image files, .npy files, multi-input lines, relative paths, errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rknnrt.toolkit import RKNN
from rknnrt.toolkit import dataset as datasets
from rknnrt.toolkit.errors import ConversionError

from .models import smooth_images, tiny_cnn, two_input_model, write_images

pytest.importorskip("PIL", reason="image datasets need Pillow (the images extra)")
SPEC = [datasets.InputSpec("images", (1, 3, 16, 16))]


@pytest.mark.parametrize("suffix", [".png", ".bmp", ".jpg"])
def test_images_decode_to_rgb_nchw(tmp_path, suffix: str) -> None:
    images = smooth_images(2, 16)
    paths = write_images(str(tmp_path), images, suffix)
    (tmp_path / "ds.txt").write_text("\n".join(os.path.basename(p) for p in paths) + "\n")
    samples = datasets.load(str(tmp_path / "ds.txt"), SPEC)
    assert len(samples) == 2
    from PIL import Image

    for sample, image, path in zip(samples, images, paths):
        assert sample[0].shape == (1, 3, 16, 16) and sample[0].dtype == np.float32
        decoded = np.asarray(Image.open(path).convert("RGB"))  # jpeg is lossy: its decoding
        np.testing.assert_array_equal(sample[0][0], decoded.transpose(2, 0, 1))
        if suffix != ".jpg":
            np.testing.assert_array_equal(sample[0][0], image.transpose(2, 0, 1))


def test_rgb2bgr_swaps_channels(tmp_path) -> None:
    paths = write_images(str(tmp_path), smooth_images(1, 16))
    (tmp_path / "ds.txt").write_text(paths[0] + "\n")
    rgb = datasets.load(str(tmp_path / "ds.txt"), SPEC)[0][0]
    bgr = datasets.load(str(tmp_path / "ds.txt"), SPEC, rgb2bgr=[True])[0][0]
    np.testing.assert_array_equal(bgr, rgb[:, ::-1])


def test_quant_img_rgb2bgr_reaches_calibration(tmp_path) -> None:
    """With mean (0, 0, 255) only the channel order decides whether the first channel's
    calibrated range is around 0..255 or -255..0."""
    from rknnrt.toolkit import builder

    img = np.zeros((16, 16, 3), np.uint8)
    img[..., 0] = 200  # red
    paths = write_images(str(tmp_path), [img])
    (tmp_path / "ds.txt").write_text(paths[0] + "\n")
    for flag, first in ((False, 200.0), (True, 0.0)):
        rknn = RKNN()
        assert rknn.config(quant_img_RGB2BGR=flag) == 0
        assert rknn.load_onnx(tiny_cnn()) == 0
        prepared, _, _ = builder.prepare(rknn._onnx, rknn._config, True, None)  # noqa: SLF001
        (sample,) = builder.calibration_samples(prepared, rknn._config,  # noqa: SLF001
                                                str(tmp_path / "ds.txt"))  # fmt: skip
        assert sample[0][0, 0].max() == first


def test_resized_with_one_warning(tmp_path) -> None:
    paths = write_images(str(tmp_path), smooth_images(3, 24))
    (tmp_path / "ds.txt").write_text("\n".join(paths) + "\n")
    warnings: list[str] = []
    samples = datasets.load(str(tmp_path / "ds.txt"), SPEC, warn=warnings.append)
    assert [s[0].shape for s in samples] == [(1, 3, 16, 16)] * 3
    assert len(warnings) == 1 and "3 dataset image(s) resized" in warnings[0]
    from PIL import Image

    expected = np.asarray(Image.open(paths[0]).convert("RGB").resize((16, 16), Image.BILINEAR))
    np.testing.assert_array_equal(samples[0][0][0], expected.transpose(2, 0, 1))


def test_relative_paths_resolve_against_the_dataset_folder(tmp_path, monkeypatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    arr = np.random.RandomState(0).rand(1, 3, 16, 16).astype(np.float32)
    np.save(data / "a.npy", arr)
    (data / "ds.txt").write_text("a.npy\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    decoy = np.zeros_like(arr)
    np.save(elsewhere / "a.npy", decoy)
    monkeypatch.chdir(elsewhere)
    (sample,) = datasets.load(str(data / "ds.txt"), SPEC)
    np.testing.assert_array_equal(sample[0], arr)  # the file beside the dataset, not the cwd's
    (data / "ds2.txt").write_text("sub/b.npy\n")  # not beside the dataset: the cwd's
    (elsewhere / "sub").mkdir()
    np.save(elsewhere / "sub" / "b.npy", decoy)
    np.testing.assert_array_equal(datasets.load(str(data / "ds2.txt"), SPEC)[0][0], decoy)


def test_npy_layouts(tmp_path) -> None:
    arr = np.random.RandomState(1).rand(1, 3, 16, 16).astype(np.float32)
    np.save(tmp_path / "nchw.npy", arr)
    np.save(tmp_path / "chw.npy", arr[0])  # no batch dim
    np.save(tmp_path / "nhwc.npy", arr.transpose(0, 2, 3, 1))  # unambiguous NHWC
    (tmp_path / "ds.txt").write_text("nchw.npy\nchw.npy\nnhwc.npy\n")
    for (sample,) in datasets.load(str(tmp_path / "ds.txt"), SPEC):
        np.testing.assert_array_equal(sample, arr)


def test_multi_input_lines_build_and_run(tmp_path) -> None:
    model = two_input_model()
    rng = np.random.RandomState(2)
    images = smooth_images(3, 8)
    lines = []
    for k, path in enumerate(write_images(str(tmp_path), images)):
        np.save(tmp_path / f"v{k}.npy", rng.randn(1, 4).astype(np.float32))
        lines.append(f"{os.path.basename(path)} v{k}.npy")
    (tmp_path / "ds.txt").write_text("\n".join(lines) + "\n")
    rknn = RKNN()
    assert rknn.config(mean_values=[[0, 0, 0]], std_values=[[255, 255, 255]]) == 0
    assert rknn.load_onnx(model) == 0
    assert rknn.build(dataset=str(tmp_path / "ds.txt")) == 0, rknn.last_error
    assert rknn.init_runtime() == 0
    vec = np.load(tmp_path / "v0.npy", allow_pickle=False)
    (out,) = rknn.inference([images[0], vec])
    from .models import cosine, run_onnx

    ref = run_onnx(model, {"img": images[0].transpose(2, 0, 1)[None] / 255.0, "vec": vec})[0]
    assert cosine(out, ref) > 0.999


@pytest.mark.parametrize(("content", "message"), [
    ("a.npy b.npy\n", "dataset line 1 has 2 files for 1 inputs"),
    ("a.npy\n\nmissing.npy\n", "dataset line 3 ("),
    ("a.npy\nnotes.txt\n", "is not a .npy array or an image"),
    ("bad.png\n", "cannot read image"),
    ("small.npy\n", "does not fit input 'images'"),
])  # fmt: skip
def test_errors_name_the_line_and_the_file(tmp_path, content: str, message: str) -> None:
    np.save(tmp_path / "a.npy", np.zeros((1, 3, 16, 16), np.float32))
    np.save(tmp_path / "small.npy", np.zeros((1, 3, 8, 8), np.float32))
    (tmp_path / "notes.txt").write_text("not an array")
    (tmp_path / "bad.png").write_bytes(b"\x89PNG broken")
    (tmp_path / "ds.txt").write_text(content)
    with pytest.raises(ConversionError) as info:
        datasets.load(str(tmp_path / "ds.txt"), SPEC)
    assert message in str(info.value)
    assert str(tmp_path / "ds.txt") in str(info.value)


def test_missing_dataset_file_through_build(tmp_path, capsys) -> None:
    rknn = RKNN()
    assert rknn.load_onnx(tiny_cnn()) == 0
    assert rknn.build(dataset=str(tmp_path / "nope.txt")) == -1
    err = capsys.readouterr().err
    assert err.count("E build:") == 1 and "nope.txt" in err and "Traceback" not in err
