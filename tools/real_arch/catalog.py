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

import numpy as np
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
    "yolov5su": (detectors.yolov5su, 640, 128),
    "yolov8n": (detectors.yolov8n, 640, 128),
    "yolo11n": (detectors.yolo11n, 640, 128),
    "deeplabv3_mobilenetv2": (dense.deeplabv3_mobilenetv2, 513, 129),
    "deit_tiny": (dense.deit_tiny, 224, 64),
    "deit_tiny_split_ln": (partial(dense.deit_tiny, split_layernorm=True), 224, 64),
    "deit_tiny_split_ln18": (partial(dense.deit_tiny, split_layernorm=True, opset=18), 224, 64),
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


# the detectors' class scores: inside their one output (axis, first index; all the rest), and
# in their head's Sigmoid outputs (the first index on the last axis: after v5's box and
# objectness; v8/v11's Sigmoid holds only the scores)
_CLASS_SCORES = {"yolov5s": (2, 5), "yolov5su": (1, 4), "yolov8n": (1, 4), "yolo11n": (1, 4)}
_SIGMOID_FIRST = {"yolov5s": 5, "yolov5su": 0, "yolov8n": 0, "yolo11n": 0}
# The seeded detectors' class logits lie near 0 on uniform[0,1) images (scores 0.44-0.55) and
# the boxes beside them in the one output set its int8 step (~1.9 at the test size): every
# score quantises to 0 on both sides. On uniform[0, CLASS_SCORE_INPUT_SCALE[name]) images
# the scores spread over (0, 1): 1st/50th/99th percentiles 0/0.45/1 (v5s), 0/0.50/1 (v5su),
# 0.002/0.47/0.99 (v8n), 0/0.60/1 (v11n), with 20-85% of them in (0.05, 0.95).
CLASS_SCORE_INPUT_SCALE = {"yolov5s": 3.0, "yolov5su": 3.0, "yolov8n": 4.0, "yolo11n": 6.0}


def class_scores(name: str, output: np.ndarray) -> np.ndarray | None:
    """The Sigmoid class scores a detector's output carries beside its boxes (YOLOv5: after the
    objectness, v8/v11: after the four box rows), or None for a network without them."""
    if name not in _CLASS_SCORES:
        return None
    axis, first = _CLASS_SCORES[name]
    return np.take(output, np.arange(first, output.shape[axis]), axis=axis)


def with_score_outputs(name: str, model: onnx.ModelProto) -> onnx.ModelProto:
    """The detector with its head's Sigmoid outputs (the class scores before any Concat with
    the boxes) also as graph outputs, after its own: their own int8 scale, as the model zoo's
    exports give the scores. A Sigmoid that is half of a SiLU (its Mul reads the Sigmoid's
    input too) is not a head's."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes = out.graph.node
    silu = {n.input[1] if n.input[0] in _producer_inputs(nodes, n.input[1]) else n.input[0]
            for n in nodes if n.op_type == "Mul"}  # fmt: skip
    heads = [n.output[0] for n in nodes if n.op_type == "Sigmoid" and n.output[0] not in silu]
    shapes = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(model).graph.value_info}
    out.graph.output.extend(shapes[h] for h in heads)
    assert heads and name in _SIGMOID_FIRST
    return out


def _producer_inputs(nodes, tensor: str) -> list[str]:
    return next((list(n.input) for n in nodes if tensor in n.output), [])


def head_scores(name: str, outputs: list[np.ndarray]) -> np.ndarray:
    """The class scores of with_score_outputs' extra outputs (all after the first), flattened
    in order."""
    first = _SIGMOID_FIRST[name]
    return np.concatenate([o[..., first:].ravel() for o in outputs[1:]])


def test_data(name: str, test: bool = True, scale: float = 1.0,
              ) -> tuple[list[list[np.ndarray]], np.ndarray]:  # fmt: skip
    """The int8 measurement's data (tests/quant/test_real_arch.py, tools/vendor_diff/real_arch.py):
    4 uniform[0,1) calibration samples and the test input, from RandomState(0) in that order,
    times `scale`."""
    shape = input_shape(name, test)
    rng = np.random.RandomState(0)
    calib = [[(rng.rand(*shape) * scale).astype(np.float32)] for _ in range(4)]
    return calib, (rng.rand(*shape) * scale).astype(np.float32)
