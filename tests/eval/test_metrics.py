"""The per-sample measures and the task metrics, against values worked out by hand."""

from __future__ import annotations

import io

import numpy as np
import pytest

from rknnrt.evaluation.data import Sample
from rknnrt.evaluation.engine import Progress, complete
from rknnrt.evaluation.metrics import (
    Accuracy,
    DetectionMAP,
    average_precision,
    cosine,
    load_metric,
    max_abs,
    mean_average_precision,
    top_k,
)


def test_cosine_max_abs_top_k() -> None:
    a = np.array([[1.0, 2.0, 2.0]], np.float32)
    assert cosine(a, a) == pytest.approx(1.0)
    assert cosine(a, -a) == pytest.approx(-1.0)
    assert cosine(a, np.array([2.0, -1.0, 0.0])) == pytest.approx(0.0)
    assert cosine(np.zeros(3), np.zeros(3)) == 1.0 and cosine(np.zeros(3), a) == 0.0
    assert max_abs(a, np.array([[1.0, 2.5, 1.0]])) == pytest.approx(1.0)
    assert top_k(np.array([[0.1, 0.7, 0.7, 0.3]]), 3) == [1, 2, 3]  # a tie: lower index first


def test_accuracy_counts_top1_top5_for_model_and_reference() -> None:
    metric = Accuracy()
    scores = np.arange(10, dtype=np.float32)[None]  # top-1 = 9, top-5 = 9..5
    values = [
        metric.sample([scores], [scores[:, ::-1]], Sample(0, "a", ("a",), 9)),  # ref top-1 = 0
        metric.sample([scores], None, Sample(1, "b", ("b",), 5)),
        metric.sample([scores], None, Sample(2, "c", ("c",), None)),
    ]
    assert values == [[1, 1, 0, 0], [0, 1], None]
    summary = metric.summarize([values[0], [0, 1, 1, 1], None])
    assert summary == {
        "labelled": 2.0,
        "top1": 0.5,
        "top5": 1.0,
        "reference_top1": 0.5,
        "reference_top5": 0.5,
    }


def test_average_precision_by_hand() -> None:
    # detections ranked TP, FP, TP over 2 ground-truth boxes: precision 1, 1/2, 2/3 at recall
    # 1/2, 1/2, 1; the envelope gives AP = 0.5 * 1 + 0.5 * 2/3
    assert average_precision(np.array([0.5, 0.5, 1.0]), np.array([1, 0.5, 2 / 3])) == pytest.approx(
        0.5 + 1 / 3
    )
    truths = [[[0, 0, 0, 10, 10]], [[0, 20, 20, 30, 30]]]
    detections = [[[0, 0.9, 0, 0, 10, 10], [0, 0.8, 50, 50, 60, 60]], [[0, 0.7, 21, 21, 30, 30]]]
    assert mean_average_precision(detections, truths) == pytest.approx(0.5 + 1 / 3)
    # a second detection of an already matched box is a false positive
    assert mean_average_precision(
        [[[0, 0.9, 0, 0, 10, 10], [0, 0.8, 0, 0, 10, 10]], []], [[[0, 0, 0, 10, 10]], []]
    ) == pytest.approx(1.0)
    # two classes: class 1 never found -> mAP is the mean of 1.0 and 0.0
    assert mean_average_precision(
        [[[0, 0.9, 0, 0, 10, 10]]], [[[0, 0, 0, 10, 10], [1, 5, 5, 8, 8]]]
    ) == pytest.approx(0.5)


def _decode(outputs: list[np.ndarray]) -> np.ndarray:
    return np.asarray(outputs[0]).reshape(-1, 6)


def _truth(sample: Sample) -> np.ndarray:
    return np.array([[0, 0, 0, 10, 10]])


def test_detection_hook_reports_map_of_model_and_reference() -> None:
    metric = DetectionMAP(_decode, _truth)
    hit, miss = np.array([[0, 0.9, 0, 0, 10, 10]]), np.array([[0, 0.9, 40, 40, 50, 50]])
    values = [metric.sample([hit], [hit], Sample(k, str(k), ("x",))) for k in range(2)]
    values.append(metric.sample([miss], [hit], Sample(2, "2", ("x",))))
    result = metric.summarize(values)
    assert result["reference_map"] == pytest.approx(1.0)
    assert result["map"] == pytest.approx(2 / 3)  # 2 of 3 boxes found, both ranked first


def test_load_metric() -> None:
    assert isinstance(load_metric("accuracy"), Accuracy)
    assert isinstance(load_metric("rknnrt.evaluation.metrics:Accuracy"), Accuracy)
    with pytest.raises(ValueError, match="unknown metric"):
        load_metric("f1")
    with pytest.raises(ValueError, match="cannot load"):
        load_metric("no_such_module:x")


def test_complete_drops_retried_copies_and_refuses_gaps() -> None:
    records = [{"index": 1, "v": "a"}, {"index": 0, "v": "b"}, {"index": 1, "v": "a"}]
    assert complete(records, [0, 1]) == [{"index": 0, "v": "b"}, {"index": 1, "v": "a"}]
    with pytest.raises(RuntimeError, match="1 samples were never evaluated .first: 2"):
        complete(records, [0, 1, 2])


def test_progress_reports_throughput_and_eta() -> None:
    stream = io.StringIO()
    bar = Progress(20, stream=stream)
    for _ in range(20):
        bar.update(1)
    lines = stream.getvalue().splitlines()
    assert 5 <= len(lines) <= 11  # every 10% off a terminal, not every sample
    assert lines[-1].startswith("eval [" + "#" * 30 + "] 20/20 ")
    assert "samples/s ETA 0s" in lines[-1]
