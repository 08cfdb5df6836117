"""Scale-out: the single process, the local process pool and Ray give the same report on 2,000
generated images; a Ray worker killed mid-run still gives the complete, correct result; a sweep
on Ray equals the local one. Ray tests start a local cluster and shut it down themselves."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from rknnrt.evaluation import evaluate, list_samples, sweep, synthetic
from rknnrt.evaluation.engine import EvalJob, run_serial
from rknnrt.evaluation.sweep import calibration_set, convert

MEAN = [[123.675, 116.28, 103.53]]
STD = [[58.395, 57.12, 57.375]]


@pytest.fixture(scope="module")
def big_set(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("PIL", reason="image datasets need Pillow (the images extra)")
    root = tmp_path_factory.mktemp("scale")
    data = os.fspath(root / "data")
    synthetic.make_images(data, 2000, (32, 32), classes=10, seed=3)
    synthetic.make_images(os.fspath(root / "calib"), 8, (32, 32), seed=4)
    onnx_bytes = synthetic.make_classifier(32, (8, 16, 16)).SerializeToString()
    calibration = calibration_set(onnx_bytes, root / "calib")
    model = convert(onnx_bytes, {"method": "layer"}, calibration, MEAN, STD)
    return {
        "root": root,
        "data": data,
        "onnx": onnx_bytes,
        "model": model,
        "labels": os.path.join(data, "labels.txt"),
        "calib": os.fspath(root / "calib"),
    }


@pytest.fixture
def ray_cluster() -> Iterator[Any]:
    """Ray, imported or skipped; whatever a test leaves running is shut down."""
    ray = pytest.importorskip(
        "ray",
        reason="Ray is not installed: pip install 'rknnrt[cluster]'"
        " (the pool tests cover the same per-sample code)",
    )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_single_pool_and_ray_identical_on_2000_images(
    big_set: dict[str, Any], ray_cluster: Any
) -> None:
    kwargs = {"reference": big_set["onnx"], "labels": big_set["labels"], "progress": False}
    one = evaluate(big_set["model"], big_set["data"], **kwargs)
    assert one.report["samples"] == 2000
    assert 0.9 < one.report["outputs"]["logits"]["cosine"]["min"] < 1.0  # int8 is not float
    pool = evaluate(big_set["model"], big_set["data"], workers=2, **kwargs)
    on_ray = evaluate(big_set["model"], big_set["data"], workers=2, ray=True, **kwargs)
    assert not ray_cluster.is_initialized()  # evaluate shut down the cluster it started
    assert pool.records == one.records and on_ray.records == one.records
    assert pool.to_json() == one.to_json() == on_ray.to_json()


@pytest.mark.slow
def test_killed_ray_worker_still_gives_the_complete_result(
    big_set: dict[str, Any], ray_cluster: Any, tmp_path: Any
) -> None:
    from rknnrt.evaluation.ray_backend import run_ray

    samples = list_samples(big_set["data"], limit=600)
    job = EvalJob(big_set["model"], big_set["onnx"])
    expected = run_serial(job, samples)
    marker = tmp_path / "killed"
    records = run_ray(
        job, samples, workers=2, batch_size=20, kill_at=300, kill_marker=os.fspath(marker)
    )
    assert marker.exists()  # an actor reached sample 300 and SIGKILLed itself
    assert [r["index"] for r in records] == list(range(600))
    assert records == expected


@pytest.mark.slow
def test_sweep_on_ray_equals_local(big_set: dict[str, Any], ray_cluster: Any) -> None:
    configs = [
        {"algorithm": "normal", "method": "layer"},
        {"algorithm": "kl"},
        {"quantize": False, "float_dtype": "float16"},
    ]
    kwargs = {"calib": big_set["calib"], "mean": MEAN, "std": STD, "limit": 40, "progress": False}
    local = sweep(big_set["onnx"], big_set["data"], configs, **kwargs)
    on_ray = sweep(big_set["onnx"], big_set["data"], configs, ray=True, workers=2, **kwargs)
    for entry in local + on_ray:
        entry.pop("seconds")
    assert on_ray == local
    assert [e["status"] for e in local] == ["ok", "ok", "failed"]
