"""The real-architecture set: the networks users convert, built with onnx's helper from a seed
(no downloads), at their real input size for benchmarks or a reduced one for tests.

    from tools.real_arch.catalog import NETWORKS, build
    model = build("mobilenetv2")            # 224x224, as benchmarked
    model = build("mobilenetv2", test=True)  # reduced resolution, same layers

Each entry: (builder, real input size, test input size). Builders take (size, seed); the OCR
recogniser's size is its width (height 48). Built with onnx's helper only: exporting them
from torchvision/ultralytics when the `pytorch` extra is present is not done yet.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import onnx

from . import classifiers, dense, detectors


def _ocr(size: int, seed: int = 0) -> onnx.ModelProto:
    return dense.ocr_recogniser(48, size, seed)


NETWORKS: dict[str, tuple[Callable[..., onnx.ModelProto], int, int]] = {
    "mobilenetv2": (classifiers.mobilenetv2, 224, 64),
    "mobilenetv3_small": (classifiers.mobilenetv3_small, 224, 64),
    "efficientnet_b0": (classifiers.efficientnet_b0, 224, 64),
    "shufflenetv2": (classifiers.shufflenetv2, 224, 64),
    "resnet18": (classifiers.resnet18, 224, 64),
    "regnetx_400mf": (classifiers.regnetx_400mf, 224, 64),
    "squeezenet": (classifiers.squeezenet, 224, 64),
    "densenet121": (classifiers.densenet121, 224, 64),
    "yolov5s": (detectors.yolov5s, 640, 128),
    "yolov8n": (detectors.yolov8n, 640, 128),
    "yolo11n": (detectors.yolo11n, 640, 128),
    "deeplabv3_mobilenetv2": (dense.deeplabv3_mobilenetv2, 513, 129),
    "deit_tiny": (dense.deit_tiny, 224, 64),
    "deit_tiny_split_ln": (partial(dense.deit_tiny, split_layernorm=True), 224, 64),
    "ocr_recogniser": (_ocr, 320, 160),
}


def input_shape(name: str, test: bool = False) -> list[int]:
    _, full, small = NETWORKS[name]
    size = small if test else full
    return [1, 3, 48, size] if name == "ocr_recogniser" else [1, 3, size, size]


def build(name: str, test: bool = False, seed: int = 0) -> onnx.ModelProto:
    """The network `name` at its real input size (or the test size), checked by onnx."""
    builder, full, small = NETWORKS[name]
    model = builder(small if test else full, seed=seed)
    onnx.checker.check_model(model)
    return model
