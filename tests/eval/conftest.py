"""Fixtures of the evaluation tests: a small generated image set and classifier, converted
float32 and int8 once per session."""

from __future__ import annotations

import os
from typing import Any

import pytest

from rknnrt.evaluation import synthetic
from rknnrt.evaluation.sweep import calibration_set, convert

MEAN = [[123.675, 116.28, 103.53]]
STD = [[58.395, 57.12, 57.375]]


@pytest.fixture(scope="session")
def eval_dir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """24 evaluation images (+ labels.txt), 8 calibration images, the classifier as ONNX bytes
    and file, and the model converted float32 and int8 (normal, per channel)."""
    pytest.importorskip("PIL", reason="image datasets need Pillow (the images extra)")
    root = tmp_path_factory.mktemp("eval")
    data, calib = os.fspath(root / "data"), os.fspath(root / "calib")
    synthetic.make_images(data, 24, (64, 64), seed=1)
    synthetic.make_images(calib, 8, (64, 64), seed=2)
    onnx_bytes = synthetic.make_classifier(64).SerializeToString()
    onnx_path = os.fspath(root / "cls.onnx")
    with open(onnx_path, "wb") as f:
        f.write(onnx_bytes)
    calibration = calibration_set(onnx_bytes, calib)
    models = {
        "float32": convert(onnx_bytes, {"float_dtype": "float32"}, [], MEAN, STD),
        "int8": convert(onnx_bytes, {"quantize": True}, calibration, MEAN, STD),
    }
    paths = {}
    for name, blob in models.items():
        paths[name] = os.fspath(root / f"cls_{name}.rknnrt")
        with open(paths[name], "wb") as f:
            f.write(blob)
    return {
        "root": root,
        "data": data,
        "calib": calib,
        "labels": os.path.join(data, "labels.txt"),
        "onnx": onnx_bytes,
        "onnx_path": onnx_path,
        "models": models,
        "paths": paths,
        "calibration": calibration,
    }
