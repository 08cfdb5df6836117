"""`evaluate()` and `rknnrt eval` on a small generated dataset: values checked against an
independent run (RKNNLite + onnxruntime + Pillow in the test), and the pool against one process."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from rknnrt.cli import main
from rknnrt.evaluation import DatasetError, evaluate, list_samples
from rknnrt.lite import RKNNLite

MEAN = [[123.675, 116.28, 103.53]]  # as tests/eval/conftest.py converts with
STD = [[58.395, 57.12, 57.375]]


def _independent(eval_dir: dict[str, Any], model: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """One sample through RKNNLite and through onnxruntime, without the evaluation package."""
    image = np.asarray(Image.open(os.path.join(eval_dir["data"], name)).convert("RGB"))[None]
    lite = RKNNLite()
    assert lite.load_rknn(eval_dir["paths"][model]) == 0 and lite.init_runtime() == 0
    out = lite.inference([image])[0]
    lite.release()
    x = (
        image.transpose(0, 3, 1, 2).astype(np.float32) - np.reshape(MEAN, (1, 3, 1, 1))
    ) / np.reshape(STD, (1, 3, 1, 1))
    session = ort.InferenceSession(eval_dir["onnx"], providers=["CPUExecutionProvider"])
    ref = session.run(None, {"images": x.astype(np.float32)})[0]
    return out, ref


def test_int8_report_matches_an_independent_run(eval_dir: dict[str, Any]) -> None:
    result = evaluate(
        eval_dir["paths"]["int8"],
        eval_dir["data"],
        reference=eval_dir["onnx_path"],
        labels=eval_dir["labels"],
        progress=False,
    )
    report = result.report
    assert report["samples"] == 24 and [r["index"] for r in result.records] == list(range(24))
    worst = report["worst"][0]
    out, ref = _independent(eval_dir, "int8", worst["name"])
    a, b = out.ravel().astype(np.float64), ref.ravel().astype(np.float64)
    expected_cos = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
    assert worst["cosine"][0] == pytest.approx(expected_cos, abs=1e-5)
    assert worst["max_abs"][0] == pytest.approx(np.abs(a - b).max(), abs=1e-4)
    cos = [r["cosine"][0] for r in result.records]
    assert worst["cosine"][0] == min(cos) and report["outputs"]["logits"]["cosine"][
        "mean"
    ] == pytest.approx(np.mean(cos))
    assert 0.99 < min(cos) < 1.0  # int8 departs a little from float, never much on this model
    # accuracy from the labels file, counted here from the records' top-5 lists
    labels = dict(line.split() for line in open(eval_dir["labels"]))
    hits = [int(labels[r["name"]]) == r["top5"][0] for r in result.records]
    assert report["metrics"]["accuracy"]["top1"] == pytest.approx(np.mean(hits))
    agree = [r["top5"][0] == r["ref_top5"][0] for r in result.records]
    assert report["agreement"]["top1"] == pytest.approx(np.mean(agree))


def test_float32_model_agrees_with_reference(eval_dir: dict[str, Any]) -> None:
    result = evaluate(
        eval_dir["models"]["float32"],
        eval_dir["data"],
        reference=eval_dir["onnx"],
        limit=6,
        progress=False,
    )
    stats = result.report["outputs"]["logits"]
    assert result.report["samples"] == 6
    assert stats["cosine"]["min"] > 1 - 1e-6 and stats["max_abs"]["max"] < 1e-3
    assert result.report["agreement"] == {"top1": 1.0, "top5": 1.0}


def test_without_reference_only_predictions(eval_dir: dict[str, Any]) -> None:
    result = evaluate(eval_dir["models"]["int8"], eval_dir["data"], limit=3, progress=False)
    out, _ = _independent(eval_dir, "int8", "img_00000.png")
    assert result.records[0]["top5"] == list(np.argsort(-out.ravel(), kind="stable")[:5])
    assert result.report["outputs"] == {} and result.report["agreement"] is None


@pytest.mark.slow  # two worker processes; the larger-pool test below is the fast pool check
def test_pool_gives_the_same_report(eval_dir: dict[str, Any]) -> None:
    args = (eval_dir["models"]["int8"], eval_dir["data"])
    kwargs = {"reference": eval_dir["onnx"], "labels": eval_dir["labels"], "progress": False}
    one = evaluate(*args, **kwargs)
    pool = evaluate(*args, workers=2, chunk_size=5, **kwargs)
    assert pool.records == one.records and pool.to_json() == one.to_json()


def test_a_pool_larger_than_the_batches_does_not_wait_for_idle_workers(
    eval_dir: dict[str, Any],
) -> None:
    """One batch, three workers: the pool starts one process per batch, so waiting for three
    workers to load their model hung for the barrier's two minutes."""
    args = (eval_dir["models"]["int8"], eval_dir["data"])
    one = evaluate(*args, progress=False)
    result: list[Any] = []
    worker = threading.Thread(
        target=lambda: result.append(evaluate(*args, workers=3, chunk_size=1000, progress=False))
    )
    worker.start()
    worker.join(90)  # a hang guard, far above the seconds this takes
    assert not worker.is_alive() and result and result[0].records == one.records


def test_list_file_and_labels(eval_dir: dict[str, Any], tmp_path: Any) -> None:
    listing = tmp_path / "list.txt"
    listing.write_text(
        f"# two samples\n{eval_dir['data']}/img_00003.png\n\n{eval_dir['data']}/img_00001.png\n"
    )
    samples = list_samples(listing, eval_dir["labels"])
    assert [(s.index, s.name) for s in samples] == [(0, "img_00003.png"), (1, "img_00001.png")]
    labels = dict(line.split() for line in open(eval_dir["labels"]))
    assert samples[1].label == int(labels["img_00001.png"])
    (tmp_path / "bad.txt").write_text("img_00003.png 1\n")
    with pytest.raises(DatasetError, match="no label for 'img_00001.png'"):
        list_samples(listing, tmp_path / "bad.txt")
    with pytest.raises(DatasetError, match="neither a folder nor a list file"):
        list_samples(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="holds no samples"):
        list_samples(tmp_path / "empty")


def test_cli_eval_json_and_table(
    eval_dir: dict[str, Any], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "eval",
                eval_dir["paths"]["int8"],
                "--data",
                eval_dir["data"],
                "--reference",
                eval_dir["onnx_path"],
                "--labels",
                eval_dir["labels"],
                "--limit",
                "8",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    report = json.loads(out.read_text())
    assert report["samples"] == 8 and "accuracy" in report["metrics"]
    cos_mean = report["outputs"]["logits"]["cosine"]["mean"]
    assert f"{cos_mean:.6f}" in captured.out.splitlines()[2]  # the logits row
    assert "agreement with the reference: top-1" in captured.out
    assert "8/8" in captured.err and "samples/s" in captured.err  # the progress bar
    with pytest.raises(SystemExit, match="E eval: dataset .* neither a folder"):
        main(["eval", eval_dir["paths"]["int8"], "--data", str(tmp_path / "nope")])


def test_unreadable_image_is_named(eval_dir: dict[str, Any], tmp_path: Any) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.png").write_bytes(open(os.path.join(eval_dir["data"], "img_00000.png"), "rb").read())
    (data / "b.png").write_bytes(b"not a png")
    with pytest.raises(SystemExit, match=r"E eval: cannot read image .*b\.png"):
        main(["eval", eval_dir["paths"]["int8"], "--data", str(data), "--quiet"])
    with pytest.raises(SystemExit, match="E eval: rknn_init failed"):
        main(["eval", str(data / "b.png"), "--data", str(data), "--quiet"])


def test_plot_needs_matplotlib(eval_dir: dict[str, Any], tmp_path: Any) -> None:
    result = evaluate(
        eval_dir["models"]["int8"],
        eval_dir["data"],
        reference=eval_dir["onnx"],
        limit=4,
        progress=False,
    )
    target = tmp_path / "cos.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert result.plot(target) is False and not target.exists()
    else:
        assert result.plot(target) is True and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    no_reference = evaluate(eval_dir["models"]["int8"], eval_dir["data"], limit=2, progress=False)
    assert no_reference.plot(tmp_path / "none.png") is False
