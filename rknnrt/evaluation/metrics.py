"""What is measured per sample, and the pluggable task metrics.

A metric is any object with a `name`, a `sample(outputs, reference, sample)` method that runs in
the worker and returns a small JSON-able value (the model's outputs never leave the worker),
and a `summarize(values)` method that runs once in the driver on every sample's value, in sample
order, and returns {name: number}. It must be picklable (a class defined at module level), since
workers receive it. `Accuracy` and `DetectionMAP` are the two shipped ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ..toolkit.probe import cosine as cosine  # the metric, shared with the converter
from .data import Sample


class Metric(Protocol):
    name: str

    def sample(
        self, outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray] | None, sample: Sample
    ) -> Any: ...

    def summarize(self, values: Sequence[Any]) -> dict[str, float]: ...


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def top_k(output: np.ndarray, k: int = 5) -> list[int]:
    """Class indices of the k highest scores (ties: lower index first)."""
    scores = output.astype(np.float64).ravel()
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


class Accuracy:
    """Classification accuracy against the sample's label (a labels file): top-1 and top-5 of
    the first output, for the converted model and, when there is one, the float reference."""

    name = "accuracy"

    def sample(
        self, outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray] | None, sample: Sample
    ) -> list[int] | None:
        if sample.label is None:
            return None
        hits = [
            int(sample.label == top_k(outputs[0], 1)[0]),
            int(sample.label in top_k(outputs[0], 5)),
        ]
        if reference is not None:
            hits += [
                int(sample.label == top_k(reference[0], 1)[0]),
                int(sample.label in top_k(reference[0], 5)),
            ]
        return hits

    def summarize(self, values: Sequence[list[int] | None]) -> dict[str, float]:
        rows = [v for v in values if v is not None]
        if not rows:
            return {}
        means = np.mean(np.asarray(rows, np.float64), axis=0)
        names = ["top1", "top5", "reference_top1", "reference_top5"]
        return {"labelled": float(len(rows)), **{n: float(m) for n, m in zip(names, means)}}


Boxes = np.ndarray  # (N, 6): class, score, x1, y1, x2, y2 (detections) / (N, 5) ground truth


class DetectionMAP:
    """The detection hook: mean average precision at one IoU threshold (VOC all-point AP).

    `decode(outputs) -> (N, 6) array [class, score, x1, y1, x2, y2]` turns a model's outputs
    into detections (the model-specific part: anchors, NMS); `ground_truth(sample) -> (M, 5)
    array [class, x1, y1, x2, y2]` gives a sample's boxes. Both must be module-level functions
    (workers receive them pickled). Reports `map` and `reference_map` (the float model's)."""

    name = "detection"

    def __init__(
        self,
        decode: Callable[[Sequence[np.ndarray]], Boxes],
        ground_truth: Callable[[Sample], Boxes],
        iou: float = 0.5,
    ) -> None:
        self.decode, self.ground_truth, self.iou = decode, ground_truth, iou

    def sample(
        self, outputs: Sequence[np.ndarray], reference: Sequence[np.ndarray] | None, sample: Sample
    ) -> dict[str, list]:
        value = {
            "gt": np.asarray(self.ground_truth(sample), np.float64).reshape(-1, 5).tolist(),
            "det": np.asarray(self.decode(outputs), np.float64).reshape(-1, 6).tolist(),
        }
        if reference is not None:
            value["ref"] = np.asarray(self.decode(reference), np.float64).reshape(-1, 6).tolist()
        return value

    def summarize(self, values: Sequence[dict[str, list]]) -> dict[str, float]:
        result = {
            "map": mean_average_precision(
                [v["det"] for v in values], [v["gt"] for v in values], self.iou
            )
        }
        if values and all("ref" in v for v in values):
            result["reference_map"] = mean_average_precision(
                [v["ref"] for v in values], [v["gt"] for v in values], self.iou
            )
        return result


def _iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    x1, y1 = np.maximum(box[0], boxes[:, 0]), np.maximum(box[1], boxes[:, 1])
    x2, y2 = np.minimum(box[2], boxes[:, 2]), np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / np.maximum(area + areas - inter, 1e-12)


def average_precision(recall: np.ndarray, precision: np.ndarray) -> float:
    """VOC all-point interpolated AP: area under the precision envelope."""
    r = np.concatenate([[0.0], recall, [1.0]])
    p = np.concatenate([[0.0], precision, [0.0]])
    p = np.maximum.accumulate(p[::-1])[::-1]
    steps = np.nonzero(r[1:] != r[:-1])[0]
    return float(np.sum((r[steps + 1] - r[steps]) * p[steps + 1]))


def mean_average_precision(
    detections: Sequence[list], truths: Sequence[list], iou: float = 0.5
) -> float:
    """mAP over the classes present in the ground truth; a detection matches the unmatched
    ground-truth box of its class with the highest IoU >= `iou`, highest scores first."""
    classes = sorted({int(g[0]) for gt in truths for g in gt})
    aps = []
    for c in classes:
        gts = [
            np.asarray([g[1:] for g in gt if int(g[0]) == c], np.float64).reshape(-1, 4)
            for gt in truths
        ]
        n_gt = sum(len(g) for g in gts)
        dets = [
            (d[1], k, np.asarray(d[2:], np.float64))
            for k, det in enumerate(detections)
            for d in det
            if int(d[0]) == c
        ]
        dets.sort(key=lambda d: -d[0])  # stable: equal scores keep sample order
        used = [np.zeros(len(g), bool) for g in gts]
        tp = np.zeros(len(dets))
        for j, (_, k, box) in enumerate(dets):
            if len(gts[k]):
                overlaps = np.where(used[k], -1.0, _iou(box, gts[k]))
                best = int(np.argmax(overlaps))
                if overlaps[best] >= iou:
                    used[k][best] = True
                    tp[j] = 1
        hits = np.cumsum(tp)
        recall = hits / max(n_gt, 1)
        precision = hits / np.arange(1, len(dets) + 1) if len(dets) else np.zeros(0)
        aps.append(average_precision(recall, precision))
    return float(np.mean(aps)) if aps else 0.0


def load_metric(spec: str) -> Metric:
    """A metric named on the command line: 'accuracy', or 'package.module:factory' whose
    factory() returns a metric object (this is how a detection decoder is plugged in)."""
    if spec == "accuracy":
        return Accuracy()
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"unknown metric {spec!r}: use 'accuracy' or 'module:factory'")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load metric {spec!r}: {exc}") from None
    return factory()
