"""`evaluate()`: the Python API behind `rknnrt eval`."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import files
from . import engine, report
from .data import Sample, decode, list_samples, to_nchw
from .engine import EvalJob, Progress, Record
from .metrics import Accuracy, Metric
from .runner import ModelRunner


@dataclass
class EvalResult:
    report: dict[str, Any]
    records: list[Record]
    output_names: list[str]

    def to_json(self) -> str:
        return report.to_json(self.report)

    def table(self) -> str:
        return report.table(self.report)

    def plot(self, path: str | os.PathLike) -> bool:
        return report.plot(self.records, self.output_names, path)


def _read(model: str | os.PathLike | bytes) -> bytes:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    return files.read_bytes(model)


def evaluate(
    model: str | os.PathLike | bytes,
    data: str | os.PathLike | Sequence[Sample],
    *,
    reference: str | os.PathLike | bytes | None = None,
    labels: str | os.PathLike | None = None,
    metrics: Sequence[Metric] = (),
    limit: int | None = None,
    workers: int = 1,
    ray: bool = False,
    ray_address: str | None = None,
    mean: list[list[float] | None] | None = None,
    std: list[list[float] | None] | None = None,
    progress: bool = True,
    chunk_size: int = 16,
    on_progress: Callable[[int], None] | None = None,
) -> EvalResult:
    """Run the converted `model` (file or bytes) on every sample of `data` (a folder, a list
    file or listed samples) and, with `reference` (an ONNX file or bytes), the float model too.

    workers=1 runs in this process; workers>1 a local process pool; ray=True Ray actors (local
    cluster unless ray_address). All three give the same report. `mean`/`std` override the
    model's normalisation for the reference (needed only for a file that does not record it).
    With a labels file, classification accuracy is added to `metrics` unless already there.
    `chunk_size`: samples per task (pool) or per batch (Ray). `on_progress(count)` is called
    in the driver each time `count` more samples are done."""
    blob = _read(model)
    samples = (
        list(data)
        if not isinstance(data, (str, os.PathLike))
        else list_samples(data, labels, limit)
    )
    if limit is not None:
        samples = samples[: max(int(limit), 0)]
    metrics = list(metrics)
    if labels is not None and not any(m.name == "accuracy" for m in metrics):
        metrics.append(Accuracy())
    ref = os.fspath(reference) if isinstance(reference, os.PathLike) else reference
    job = EvalJob(blob, ref, mean, std, metrics)
    probe = ModelRunner(blob)  # fails here, once, for a model that cannot load
    output_names = probe.output_names
    probe.close()
    bar = Progress(len(samples), enabled=progress)

    def advance(count: int) -> None:
        bar.update(count)
        if on_progress is not None:
            on_progress(count)

    if ray:
        from .ray_backend import run_ray

        records = run_ray(job, samples, max(workers, 1), ray_address, chunk_size, advance)
    elif workers > 1:
        records = engine.run_pool(job, samples, workers, chunk_size, advance)
    else:
        records = engine.run_serial(job, samples, advance)
    records = engine.complete(records, [s.index for s in samples])
    return EvalResult(report.summarize(records, metrics, output_names), records, output_names)


def add_drift(
    result: EvalResult,
    model: str | os.PathLike | bytes,
    reference: str | os.PathLike | bytes,
    calib: str | os.PathLike,
    samples: Sequence[Sample],
    algorithm: str = "normal",
    per_channel: bool = True,
    mean: list | None = None,
    std: list | None = None,
) -> dict[str, Any]:
    """The per-layer drift on the report's worst samples, stored in `result.report["drift"]`.
    `calib`, `algorithm` and `per_channel` must be those the model was converted with."""
    from .drift import layer_drift
    from .runner import normalisation
    from .sweep import calibration_set, onnx_inputs

    ref = reference if isinstance(reference, bytes) else files.read_bytes(reference)
    model_mean, model_std = normalisation(_read(model))
    mean = mean if mean is not None else model_mean
    std = std if std is not None else model_std
    by_index = {s.index: s for s in samples}
    specs = onnx_inputs(ref)
    worst = [by_index[w["index"]] for w in result.report["worst"] if w["index"] in by_index]
    arrays = [
        [to_nchw(x, spec).astype("float32") for x, spec in zip(decode(s, specs), specs)]
        for s in worst
    ]
    layers = layer_drift(
        ref, calibration_set(ref, calib), arrays, mean, std, algorithm, per_channel
    )
    drift = {
        "samples": [s.name for s in worst],
        "layers": layers,
        "first_below_0.99": next((x["tensor"] for x in layers if x["cosine"] < 0.99), None),
    }
    result.report["drift"] = drift
    return drift
