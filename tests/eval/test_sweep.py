"""`sweep()` / `rknnrt sweep` and the per-layer drift."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from rknnrt.cli import main
from rknnrt.evaluation import evaluate, load_grid, sweep
from rknnrt.evaluation.evaluate import add_drift
from rknnrt.evaluation.sweep import GridError, expand
from rknnrt.toolkit import RKNN

MEAN = [[123.675, 116.28, 103.53]]  # as tests/eval/conftest.py converts with
STD = [[58.395, 57.12, 57.375]]


def test_grid_files(tmp_path: Any) -> None:
    grid = tmp_path / "grid.json"
    grid.write_text(
        json.dumps(
            {"algorithm": ["normal", "mmse"], "method": ["channel", "layer"], "target": "rk3588"}
        )
    )
    configs = load_grid(grid)
    assert configs[0] == {"algorithm": "normal", "method": "channel", "target": "rk3588"}
    assert [(c["algorithm"], c["method"]) for c in configs] == [
        ("normal", "channel"),
        ("normal", "layer"),
        ("mmse", "channel"),
        ("mmse", "layer"),
    ]
    assert expand({"configs": [{"quantize": False}]}) == [{"quantize": False}]
    with pytest.raises(GridError, match="mapping of key"):
        expand([1, 2])
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(GridError, match="bad.json"):
        load_grid(tmp_path / "bad.json")
    yaml = pytest.importorskip("yaml", reason="YAML grids need PyYAML (the cluster extra)")
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump({"algorithm": ["normal", "mmse"]}))
    assert load_grid(tmp_path / "grid.yaml") == [{"algorithm": "normal"}, {"algorithm": "mmse"}]
    (tmp_path / "evil.yaml").write_text("!!python/object/apply:os.system ['true']")
    with pytest.raises(GridError):  # the safe loader builds no objects
        load_grid(tmp_path / "evil.yaml")


def test_failing_configuration_is_reported_not_raised(eval_dir: dict[str, Any]) -> None:
    entries = sweep(
        eval_dir["onnx"],
        eval_dir["data"],
        [{"algorithm": "no-such-algorithm"}, {"quantize": False, "float_dtype": "float32"}],
        calib=eval_dir["calib"],
        mean=MEAN,
        std=STD,
        limit=4,
        progress=False,
    )
    ok, failed = entries
    assert ok["status"] == "ok" and ok["report"]["samples"] == 4
    assert ok["score"] == pytest.approx(1.0, abs=1e-6)
    assert failed["status"] == "failed" and failed["score"] is None
    assert failed["error"].startswith("config: quantized_algorithm 'no-such-algorithm'")


@pytest.mark.slow
def test_sweep_ranking_matches_each_configuration_alone(
    eval_dir: dict[str, Any], tmp_path: Any
) -> None:
    grid = tmp_path / "grid.json"
    grid.write_text(
        json.dumps(
            {
                "configs": [
                    *(
                        {"algorithm": a, "method": m}
                        for a in ("normal", "mmse", "kl")
                        for m in ("channel", "layer")
                    ),
                    {"quantize": False, "float_dtype": "float16"},
                    {"quantize": False, "float_dtype": "float32"},
                ]
            }
        )
    )
    out = tmp_path / "sweep.json"
    assert (
        main(
            [
                "sweep",
                eval_dir["onnx_path"],
                "--data",
                eval_dir["data"],
                "--calib",
                eval_dir["calib"],
                "--config-grid",
                str(grid),
                "--mean",
                ",".join(map(str, MEAN[0])),
                "--std",
                ",".join(map(str, STD[0])),
                "--limit",
                "12",
                "--workers",
                "2",
                "--rank-by",
                "cosine",
                "--quiet",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    entries = json.loads(out.read_text())
    assert len(entries) == 8
    alone = {}
    for config in [e["config"] for e in entries]:
        rknn = RKNN()
        quantize = config.get("quantize", True)
        if (
            rknn.config(
                mean_values=MEAN,
                std_values=STD,
                quantized_algorithm=config.get("algorithm", "normal"),
                quantized_method=config.get("method", "channel"),
                float_dtype=config.get("float_dtype", "float16"),
            )
            != 0
        ):
            alone[json.dumps(config)] = None  # kl: not an algorithm of this converter (yet)
            continue
        assert rknn.load_onnx(eval_dir["onnx"]) == 0
        assert (
            rknn.build(
                do_quantization=quantize, dataset=eval_dir["calibration"] if quantize else None
            )
            == 0
        )
        result = evaluate(
            rknn.model_bytes(),
            eval_dir["data"],
            reference=eval_dir["onnx"],
            limit=12,
            progress=False,
        )
        alone[json.dumps(config)] = result.report["outputs"]["logits"]["cosine"]["mean"]
    failed = [e for e in entries if e["status"] == "failed"]
    assert {json.dumps(e["config"]) for e in failed} == {k for k, v in alone.items() if v is None}
    ranked = [e for e in entries if e["status"] == "ok"]
    assert [e["score"] for e in ranked] == [alone[json.dumps(e["config"])] for e in ranked]
    expected = sorted((k for k, v in alone.items() if v is not None), key=lambda k: -alone[k])
    assert [json.dumps(e["config"]) for e in ranked] == expected
    assert ranked[0]["config"] == {"quantize": False, "float_dtype": "float32"}
    assert entries[-len(failed) :] == failed if failed else True


def test_layer_drift_ends_at_the_evaluated_output(eval_dir: dict[str, Any]) -> None:
    result = evaluate(
        eval_dir["models"]["int8"],
        eval_dir["data"],
        reference=eval_dir["onnx"],
        limit=10,
        progress=False,
    )
    from rknnrt.evaluation import list_samples

    drift = add_drift(
        result,
        eval_dir["models"]["int8"],
        eval_dir["onnx"],
        eval_dir["calib"],
        list_samples(eval_dir["data"], limit=10),
    )
    names = [x["tensor"] for x in drift["layers"]]
    # conv0 is fused with its Relu on the NPU: relu0 is the first tensor it stores
    assert names[0] == "relu0" and names[-1] == "logits" and "conv0" not in names
    worst = np.mean([w["cosine"][0] for w in result.report["worst"]])
    # the rebuilt int8 program is the one the model runs: its last tensor drifts as measured
    assert drift["layers"][-1]["cosine"] == pytest.approx(worst, abs=1e-4)
    assert all(0.9 < x["cosine"] <= 1.0 + 1e-9 for x in drift["layers"])
    assert "per-layer drift on 5 worst samples" in result.table()
