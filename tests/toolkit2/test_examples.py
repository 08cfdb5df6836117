"""The call sequences of the vendor's example scripts (rknn-toolkit2/examples, rknn-toolkit-lite2
/examples, rknn_model_zoo convert.py + rknn_executor.py), replayed with models built here and
images generated here; outputs checked against onnxruntime on the original model."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN

from .models import (
    Graph,
    cosine,
    ocr_det_like,
    run_onnx,
    smooth_images,
    tiny_cnn,
    write_images,  # fmt: skip
    yolo_like,
)

pytest.importorskip("PIL", reason="the examples read images (Pillow, the images extra)")


def _imread_rgb(path: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """The examples run from their own folder with './dataset.txt' and relative image names."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _dataset(folder, size: int, count: int = 6, name: str = "dataset.txt") -> list[str]:
    paths = write_images(str(folder / "images"), smooth_images(count, size, seed=11), ".jpg")
    (folder / name).write_text("\n".join(os.path.relpath(p, folder) for p in paths) + "\n")
    return paths


def _classifier(size: int = 32, seed: int = 6) -> onnx.ModelProto:
    g = Graph(seed)
    x = g.node("Relu", [g.conv("input", "c1", 3, 8, stride=2)], "r1")
    x = g.node("Relu", [g.conv(x, "c2", 8, 16, stride=2)], "r2")
    x = g.node("GlobalAveragePool", [x], "gap")
    x = g.node("Flatten", [x], "flat")
    w = g.const("fc.w", (g.rng.randn(16, 10) * 0.5).astype(np.float32))
    g.node("Softmax", [g.node("MatMul", [x, w], "logits")], "probs", axis=1)
    return g.model([("input", [1, 3, size, size])], ["probs"], name="classifier")


def test_onnx_resnet50v2_sequence(workdir) -> None:
    """examples/onnx/resnet50v2/test.py: flat mean/std, int8 from './dataset.txt', export,
    init_runtime, inference on an RGB NHWC image."""
    model = _classifier()
    onnx.save(model, "resnet50v2.onnx")
    _dataset(workdir, 32)
    rknn = RKNN(verbose=True)
    rknn.config(mean_values=[123.675, 116.28, 103.53], std_values=[58.82, 58.82, 58.82],
                target_platform="rk3566")  # fmt: skip
    assert rknn.load_onnx(model="resnet50v2.onnx") == 0
    assert rknn.build(do_quantization=True, dataset="./dataset.txt") == 0, rknn.last_error
    assert rknn.export_rknn("resnet50v2.rknn") == 0
    assert rknn.init_runtime() == 0
    img = np.expand_dims(smooth_images(1, 32, seed=21)[0], 0)
    outputs = rknn.inference(inputs=[img])
    mean = np.array([123.675, 116.28, 103.53]).reshape(1, 3, 1, 1)
    ref = run_onnx(model, {"input": (img.transpose(0, 3, 1, 2) - mean) / 58.82})[0]
    assert outputs[0].shape == (1, 10)
    assert cosine(outputs[0], ref) > 0.999
    assert np.argmax(outputs[0]) == np.argmax(ref)
    rknn.release()


@pytest.mark.parametrize(("make", "input_name"), [(yolo_like, "images"), (ocr_det_like, "x")])
def test_yolo_and_ocr_det_int8_from_images(workdir, make, input_name) -> None:
    """examples/onnx/yolov5/test.py and the model zoo's yolov5 / PPOCR-Det convert.py:
    mean [[0,0,0]], std [[255,255,255]], int8 from an image dataset; cosine >= 0.999."""
    model = make()
    onnx.save(model, "model.onnx")
    _dataset(workdir, 64, count=8)
    rknn = RKNN()
    rknn.config(mean_values=[[0, 0, 0]], std_values=[[255, 255, 255]], target_platform="rk3588")
    assert rknn.load_onnx(model="model.onnx") == 0
    assert rknn.build(do_quantization=True, dataset="./dataset.txt") == 0, rknn.last_error
    assert rknn.export_rknn("model.rknn") == 0
    # the model zoo's demo: load_rknn + init_runtime(target=...) through its rknn_executor
    runner = RKNN()
    assert runner.load_rknn("model.rknn") == 0
    assert runner.init_runtime(target="rk3588", device_id=None) == 0
    for seed in (31, 32):
        img = smooth_images(1, 64, seed=seed)[0]
        outputs = runner.inference(inputs=[img])  # 3-D HWC, as the demos pass after letterbox
        refs = run_onnx(model, {input_name: img.transpose(2, 0, 1)[None] / 255.0})
        for got, ref in zip(outputs, refs):
            assert got.shape == ref.shape
            assert cosine(got, ref) >= 0.999


def test_dynamic_shape_sequence(workdir) -> None:
    """examples/functions/dynamic_shape/test.py: quant_img_RGB2BGR, three shape sets, int8,
    NCHW inputs of each size."""
    g = Graph(7)
    x = g.node("Relu", [g.conv("data", "c1", 3, 8, stride=2)], "r1")
    g.node("GlobalAveragePool", [g.conv(x, "c2", 8, 4)], "out")
    model = g.model([("data", [1, 3, "h", "w"])], ["out"])
    onnx.save(model, "m.onnx")
    _dataset(workdir, 32)
    sets = [[[1, 3, 32, 32]], [[1, 3, 24, 24]], [[1, 3, 40, 40]]]
    rknn = RKNN(verbose=True)
    rknn.config(mean_values=[103.94, 116.78, 123.68], std_values=[58.82, 58.82, 58.82],
                quant_img_RGB2BGR=True, target_platform="rk3566", dynamic_input=sets)
    assert rknn.load_onnx("m.onnx") == 0
    assert rknn.build(do_quantization=True, dataset="./dataset.txt") == 0, rknn.last_error
    assert rknn.init_runtime() == 0
    bgr_mean = np.array([103.94, 116.78, 123.68]).reshape(1, 3, 1, 1)
    for size in (32, 24, 40):
        img = np.transpose(smooth_images(1, size, seed=size)[0][None], (0, 3, 1, 2))
        (out,) = rknn.inference(inputs=[img], data_format=["nchw"])
        ref = run_onnx(model, {"data": (img - bgr_mean) / 58.82})[0]
        assert out.shape == ref.shape and cosine(out, ref) > 0.999


def test_multi_input_sequence(workdir) -> None:
    """examples/functions/multi_input/test.py: four inputs (RGB image, two NCHW arrays, a gray
    image), mean per input, data_format per input."""
    g = Graph(8)
    a = g.node("GlobalAveragePool", [g.conv("rgb", "ca", 3, 4)], "ga")
    b = g.node("GlobalAveragePool", [g.conv("gray", "cb", 1, 4)], "gb")
    c = g.node("Add", ["in2", "in3"], "s23")
    d = g.node("GlobalAveragePool", [g.conv(c, "cc", 4, 4)], "gc")
    g.node("Concat", [a, b, d], "out", axis=1)
    model = g.model([("rgb", [1, 3, 16, 16]), ("in2", [1, 4, 8, 8]), ("in3", [1, 4, 8, 8]),
                     ("gray", [1, 1, 16, 16])], ["out"])  # fmt: skip
    rng = np.random.RandomState(0)
    rgb = write_images(str(workdir), smooth_images(4, 16, seed=1), ".png")
    from PIL import Image

    lines = []
    for k, path in enumerate(rgb):
        Image.open(path).convert("L").save(f"gray{k}.png")
        np.save(f"in2_{k}.npy", rng.rand(1, 4, 8, 8).astype(np.float32))
        np.save(f"in3_{k}.npy", rng.rand(1, 4, 8, 8).astype(np.float32))
        lines.append(f"{os.path.basename(path)} in2_{k}.npy in3_{k}.npy gray{k}.png")
    (workdir / "dataset.txt").write_text("\n".join(lines) + "\n")
    rknn = RKNN()
    rknn.config(mean_values=[[127.5, 127.5, 127.5], [0, 0, 0, 0], [0, 0, 0, 0], [127.5]],
                std_values=[[128, 128, 128], [1, 1, 1, 1], [1, 1, 1, 1], [128]])  # fmt: skip
    assert rknn.load_onnx(model) == 0
    assert rknn.build(do_quantization=True, dataset="./dataset.txt") == 0, rknn.last_error
    assert rknn.init_runtime() == 0
    img = np.expand_dims(_imread_rgb(rgb[0]), 0)
    gray = np.asarray(Image.open("gray0.png"))[None, :, :, None]
    in2, in3 = np.load("in2_0.npy", allow_pickle=False), np.load("in3_0.npy", allow_pickle=False)
    (out,) = rknn.inference(inputs=[img, in2, in3, gray],
                            data_format=["nhwc", "nchw", "nchw", "nhwc"])  # fmt: skip
    ref = run_onnx(model, {"rgb": (img.transpose(0, 3, 1, 2) - 127.5) / 128, "in2": in2,
                           "in3": in3, "gray": (gray.transpose(0, 3, 1, 2) - 127.5) / 128})[0]
    assert cosine(out, ref) > 0.999


def test_multi_batch_sequence(workdir) -> None:
    """examples/functions/multi_batch/test.py: rknn_batch_size=4, single images in the
    dataset, four images concatenated for inference."""
    model = tiny_cnn()
    _dataset(workdir, 16)
    rknn = RKNN()
    rknn.config(mean_values=[103.94, 116.78, 123.68], std_values=[58.82, 58.82, 58.82],
                quant_img_RGB2BGR=True)  # fmt: skip
    assert rknn.load_onnx(model) == 0
    assert rknn.build(do_quantization=True, dataset="./dataset.txt", rknn_batch_size=4) == 0, \
        rknn.last_error  # fmt: skip
    assert rknn.init_runtime() == 0
    imgs = smooth_images(3, 16, seed=40)
    batch = np.concatenate([imgs[0][None], imgs[1][None], imgs[2][None], imgs[0][None]], 0)
    (out,) = rknn.inference(inputs=[batch], data_format=["nhwc"])
    assert out.shape == (4, 4, 16, 16)
    mean = np.array([103.94, 116.78, 123.68]).reshape(1, 3, 1, 1)
    for k in range(4):
        x = (batch[k : k + 1].transpose(0, 3, 1, 2) - mean) / 58.82
        assert cosine(out[k], run_onnx(model, {"images": x})[0]) > 0.999
    np.testing.assert_array_equal(out[0], out[3])


def test_lite2_resnet18_sequence(workdir) -> None:
    """rknn-toolkit-lite2/examples/resnet18/test.py: RKNNLite load_rknn, init_runtime with a
    core mask, inference on one RGB image with its batch dim."""
    model = _classifier()
    rknn = RKNN()
    rknn.config(mean_values=[[0, 0, 0]], std_values=[[255, 255, 255]], target_platform="rk3588")
    rknn.load_onnx(model)
    _dataset(workdir, 32)
    assert rknn.build(dataset="./dataset.txt") == 0
    rknn.export_rknn("resnet18_for_rk3588.rknn")
    rknn_lite = RKNNLite()
    assert rknn_lite.load_rknn("resnet18_for_rk3588.rknn") == 0
    assert rknn_lite.init_runtime(core_mask=RKNNLite.NPU_CORE_0) == 0
    img = np.expand_dims(smooth_images(1, 32, seed=50)[0], 0)
    outputs = rknn_lite.inference(inputs=[img])
    ref = run_onnx(model, {"input": img.transpose(0, 3, 1, 2) / 255.0})[0]
    assert cosine(outputs[0], ref) > 0.999
    rknn_lite.release()
