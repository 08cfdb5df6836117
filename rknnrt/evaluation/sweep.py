"""`sweep()`: convert an ONNX model with every configuration of a grid, evaluate each against
the float model, and rank them. Configurations run in parallel (a process pool, or Ray tasks);
one that fails to convert is reported as failed with the converter's message."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np
import onnx

from ..model import files
from ..toolkit import RKNN
from . import engine, report
from .data import InputSpec, Sample, decode, list_samples, to_nchw
from .engine import EvalJob
from .metrics import Metric

# config keys of a grid and the RKNN.config arguments they set; other keys pass through as is
_CONFIG_KEYS = {
    "algorithm": "quantized_algorithm",
    "method": "quantized_method",
    "target": "target_platform",
    "float_dtype": "float_dtype",
}
# how configurations are ranked: report path, and whether higher is better
RANKINGS = {
    "cosine": (("outputs", 0, "cosine", "mean"), True),
    "cosine_p1": (("outputs", 0, "cosine", "p1"), True),
    "cosine_p5": (("outputs", 0, "cosine", "p5"), True),
    "max_abs": (("outputs", 0, "max_abs", "mean"), False),
    "top1": (("agreement", "top1"), True),
    "top5": (("agreement", "top5"), True),
    "accuracy": (("metrics", "accuracy", "top1"), True),
}


class GridError(ValueError):
    """A configuration grid that cannot be read."""


MAX_CONFIGS = 10_000  # configurations of one grid, counted before any is made
MAX_GRID_BYTES = 1 << 20  # a grid file is a few lines
_MAX_VALUE_NODES = 10_000  # items in one grid's values, aliases counted each time they appear
_MAX_DEPTH = 16


def _value_nodes(value: Any, budget: list[int]) -> None:
    """Count the items of a grid value (a YAML alias counts every time it is used), stopping
    once the budget is spent: an alias bomb costs at most the budget, never its expansion."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget[0] -= 1
        if depth > _MAX_DEPTH:
            raise GridError(f"the grid is nested more than {_MAX_DEPTH} levels deep")
        if budget[0] < 0:
            raise GridError(
                f"the grid's values hold more than {_MAX_VALUE_NODES} items (YAML aliases "
                "count each time they are used)"
            )
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in (*item.keys(), *item.values()))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
        elif not isinstance(item, (str, int, float, bool, type(None))):
            raise GridError(f"a grid value of type {type(item).__name__} is not allowed")


def load_grid(path: str | os.PathLike) -> list[dict[str, Any]]:
    """A grid file: JSON (always) or YAML (with PyYAML's safe loader, in the cluster extra).
    Either a mapping of key -> list of values (every combination, in the file's key order),
    a list of configurations, or {"configs": [...]}."""
    path = os.fspath(path)
    try:
        with files.open_regular(path, "rb") as f:
            data = f.read(MAX_GRID_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GridError(f"cannot read grid {path!r}: {exc}") from None
    if len(data) > MAX_GRID_BYTES:
        raise GridError(f"grid {path!r} is larger than {MAX_GRID_BYTES} bytes")
    if path.lower().endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise GridError(
                "YAML grids need PyYAML: pip install 'rknnrt[cluster]', or use JSON"
            ) from None
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise GridError(f"{path}: {exc}") from None
        except RecursionError:
            raise GridError(f"{path}: the grid is nested too deeply") from None
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GridError(f"{path}: {exc}") from None
        except RecursionError:
            raise GridError(f"{path}: the grid is nested too deeply") from None
    return expand(raw)


def expand(raw: Any) -> list[dict[str, Any]]:
    """The grid's configurations, counted before any is made (at most MAX_CONFIGS) and with
    values of bounded size (YAML alias bombs and deep nesting give a GridError)."""
    if isinstance(raw, dict) and "configs" in raw:
        raw = raw["configs"]
    _value_nodes(raw, [_MAX_VALUE_NODES])
    if isinstance(raw, dict):
        keys = list(raw)
        values = [v if isinstance(v, list) else [v] for v in raw.values()]
        count = 1
        for v in values:
            count *= len(v)
            if count > MAX_CONFIGS:
                break
        if count > MAX_CONFIGS:
            sizes = " x ".join(str(len(v)) for v in values)
            raise GridError(f"the grid has {sizes} configurations, more than {MAX_CONFIGS}")
        configs = [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    elif isinstance(raw, list) and all(isinstance(c, dict) for c in raw):
        if len(raw) > MAX_CONFIGS:
            raise GridError(f"the grid lists {len(raw)} configurations, more than {MAX_CONFIGS}")
        configs = [dict(c) for c in raw]
    else:
        raise GridError("a grid is a mapping of key -> values or a list of configurations")
    if not configs:
        raise GridError("the grid holds no configuration")
    return configs


def config_name(config: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items()) or "default"


def convert(
    onnx_model: bytes,
    config: dict[str, Any],
    calibration: Sequence[list[np.ndarray]],
    mean: list[list[float]] | None,
    std: list[list[float]] | None,
) -> bytes:
    """The model converted with one configuration; RuntimeError with the converter's message
    when it fails. `quantize` (default: True when there is a calibration set) picks int8."""
    options = {_CONFIG_KEYS.get(k, k): v for k, v in config.items() if k != "quantize"}
    quantize = bool(config.get("quantize", len(calibration) > 0))
    rknn = RKNN()
    steps = (
        ("config", lambda: rknn.config(mean_values=mean, std_values=std, **options)),
        ("load_onnx", lambda: rknn.load_onnx(onnx_model)),
        (
            "build",
            lambda: rknn.build(
                do_quantization=quantize, dataset=list(calibration) if quantize else None
            ),
        ),
    )
    for step, call in steps:
        if call() != 0:
            raise RuntimeError(f"{step}: {rknn.last_error}")
    return rknn.model_bytes()


def onnx_inputs(onnx_model: bytes) -> list[InputSpec]:
    """The ONNX model's inputs as the runtime will present them (NHWC for 4-D)."""
    model = onnx.load_model_from_string(onnx_model)
    inits = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        nhwc = len(dims) == 4
        specs.append(
            InputSpec(vi.name, (dims[0], dims[2], dims[3], dims[1]) if nhwc else dims, nhwc)
        )
    return specs


def calibration_set(onnx_model: bytes, calib: str | os.PathLike) -> list[list[np.ndarray]]:
    """Calibration samples decoded as for evaluation, in the ONNX layout, before mean/std."""
    specs = onnx_inputs(onnx_model)
    return [
        [to_nchw(x, spec).astype(np.float32) for x, spec in zip(decode(s, specs), specs)]
        for s in list_samples(calib)
    ]


def evaluate_config(
    onnx_model: bytes,
    config: dict[str, Any],
    calibration: Sequence[list[np.ndarray]],
    mean: Any,
    std: Any,
    samples: Sequence[Sample],
    metrics: Sequence[Metric],
) -> dict[str, Any]:
    """Convert with one configuration and evaluate it (one process: configurations are the
    unit of parallelism of a sweep)."""
    start = time.perf_counter()
    entry: dict[str, Any] = {"name": config_name(config), "config": config}
    try:
        blob = convert(onnx_model, config, calibration, mean, std)
    except Exception as exc:  # every failure of one configuration is that configuration's
        entry.update(status="failed", error=str(exc), seconds=time.perf_counter() - start)
        return entry
    try:
        job = EvalJob(blob, onnx_model, None, None, list(metrics))
        records = engine.run_serial(job, samples)
        probe = engine.ModelRunner(blob)
        names = probe.output_names
        probe.close()
        entry.update(status="ok", report=report.summarize(records, metrics, names))
    except Exception as exc:
        entry.update(status="failed", error=f"evaluation: {exc}")
    entry["seconds"] = time.perf_counter() - start
    return entry


def score(entry: dict[str, Any], rank_by: str) -> float | None:
    path, _ = RANKINGS[rank_by]
    value: Any = entry.get("report")
    for key in path:
        if value is None:
            return None
        if isinstance(key, int):  # the k-th output
            value = list(value.values())[key] if len(value) > key else None
        else:
            value = value.get(key)
    return float(value) if value is not None else None


def rank(entries: Sequence[dict[str, Any]], rank_by: str) -> list[dict[str, Any]]:
    """Configurations best first (ties: grid order); failed and unscored ones last."""
    higher = RANKINGS[rank_by][1]
    for entry in entries:
        entry["score"] = score(entry, rank_by) if entry["status"] == "ok" else None
    scored = [e for e in entries if e["score"] is not None]
    scored.sort(key=lambda e: -e["score"] if higher else e["score"])
    return scored + [e for e in entries if e["score"] is None]


def sweep(
    onnx_model: str | os.PathLike | bytes,
    data: str | os.PathLike | Sequence[Sample],
    configs: Sequence[dict[str, Any]],
    *,
    calib: str | os.PathLike | None = None,
    mean: list[list[float]] | None = None,
    std: list[list[float]] | None = None,
    labels: str | os.PathLike | None = None,
    metrics: Sequence[Metric] = (),
    rank_by: str = "cosine",
    limit: int | None = None,
    workers: int = 1,
    ray: bool = False,
    ray_address: str | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Every configuration converted and evaluated, ranked by `rank_by` (see RANKINGS)."""
    if rank_by not in RANKINGS:
        raise ValueError(f"unknown ranking {rank_by!r}: one of {', '.join(RANKINGS)}")
    if isinstance(onnx_model, (str, os.PathLike)):
        with open(onnx_model, "rb") as f:
            onnx_model = f.read()
    samples = (
        list(data)
        if not isinstance(data, (str, os.PathLike))
        else list_samples(data, labels, limit)
    )
    metrics = list(metrics)
    if labels is not None and not any(m.name == "accuracy" for m in metrics):
        from .metrics import Accuracy

        metrics.append(Accuracy())
    calibration = calibration_set(onnx_model, calib) if calib is not None else []
    calls = [(onnx_model, c, calibration, mean, std, samples, metrics) for c in configs]
    bar = engine.Progress(len(calls), label="sweep", unit="configs", enabled=progress)
    if ray:
        from .ray_backend import run_tasks

        entries = run_tasks(evaluate_config, calls, max(workers, 1), ray_address, bar.update)
    elif workers > 1:
        with ProcessPoolExecutor(
            workers, mp_context=get_context("spawn"), initializer=engine.own_session
        ) as pool:
            futures = [pool.submit(evaluate_config, *call) for call in calls]
            entries = []
            for future in futures:
                entries.append(future.result())
                bar.update(1)
    else:
        entries = []
        for call in calls:
            entries.append(evaluate_config(*call))
            bar.update(1)
    return rank(entries, rank_by)
