"""Evaluating samples: one Worker per process (model loaded once), the same per-sample code on
every path, and the two local drivers (in-process and a process pool).

Every path returns the per-sample records sorted by sample index, and a record depends only on
its sample (one onnxruntime thread per model), so the single process, the pool and Ray give the
same numbers in the same order.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from ..toolkit.probe import cosine
from .data import Sample, decode
from .metrics import Metric, max_abs, top_k
from .runner import ModelRunner, Reference, normalisation

Record = dict[str, Any]


@dataclass
class EvalJob:
    """Everything a worker needs, picklable: the model's bytes, the optional float reference
    (a path or bytes), mean/std for the reference (None: the model's own), the metrics."""

    model: bytes
    reference: str | bytes | None = None
    mean: list[list[float] | None] | None = None
    std: list[list[float] | None] | None = None
    metrics: list[Metric] = field(default_factory=list)
    threads: int = 1


class Worker:
    """The rknnrt context (and reference session) of one process, reused for every sample."""

    def __init__(self, job: EvalJob) -> None:
        self.job = job
        self.runner = ModelRunner(job.model, job.threads)
        self.reference = None
        if job.reference is not None:
            mean, std = normalisation(job.model)
            self.reference = Reference(
                job.reference,
                self.runner.inputs,
                job.mean if job.mean is not None else mean,
                job.std if job.std is not None else std,
                job.threads,
            )

    def outputs(self, sample: Sample) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        arrays = decode(sample, self.runner.inputs)
        outputs = self.runner.run(arrays)
        reference = self.reference.run(arrays) if self.reference is not None else None
        return outputs, reference

    def evaluate(self, sample: Sample) -> Record:
        outputs, reference = self.outputs(sample)
        record: Record = {
            "index": sample.index,
            "name": sample.name,
            "top5": top_k(outputs[0], 5),
            "ref_top5": None,
            "cosine": None,
            "max_abs": None,
        }
        if reference is not None:
            if len(reference) != len(outputs):
                raise ValueError(
                    f"the reference has {len(reference)} outputs, the model {len(outputs)}"
                )
            record["cosine"] = [cosine(o, r) for o, r in zip(outputs, reference)]
            record["max_abs"] = [max_abs(o, r) for o, r in zip(outputs, reference)]
            record["ref_top5"] = top_k(reference[0], 5)
        record["metrics"] = {m.name: m.sample(outputs, reference, sample) for m in self.job.metrics}
        return record

    def evaluate_many(self, samples: Iterable[Sample]) -> list[Record]:
        return [self.evaluate(s) for s in samples]

    def close(self) -> None:
        self.runner.close()


class Progress:
    """A progress bar with throughput and ETA on stderr (redrawn on a terminal; every 10% and
    at the end otherwise, so logs stay short)."""

    def __init__(
        self,
        total: int,
        label: str = "eval",
        stream: TextIO | None = None,
        enabled: bool = True,
        unit: str = "samples",
    ) -> None:
        self.total, self.label, self.unit, self.enabled = total, label, unit, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done, self.start, self._last, self._decile = 0, time.perf_counter(), 0.0, -1

    def update(self, count: int) -> None:
        self.done += count
        if not self.enabled:
            return
        now = time.perf_counter()
        tty = getattr(self.stream, "isatty", lambda: False)()
        decile = self.done * 10 // max(self.total, 1)
        if self.done < self.total and (now - self._last < 0.2 if tty else decile == self._decile):
            return
        self._last, self._decile = now, decile
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        filled = self.done * 30 // max(self.total, 1)
        line = (
            f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
            f"{rate:.1f} {self.unit}/s ETA {eta:.0f}s"
        )
        self.stream.write(("\r" + line) if tty else line + "\n")
        if tty and self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


def chunks(samples: Sequence[Sample], size: int) -> list[list[Sample]]:
    return [list(samples[k : k + size]) for k in range(0, len(samples), size)]


def run_serial(
    job: EvalJob, samples: Sequence[Sample], progress: Callable[[int], None] = lambda n: None
) -> list[Record]:
    worker = Worker(job)
    try:
        records = []
        for sample in samples:
            records.append(worker.evaluate(sample))
            progress(1)
        return records
    finally:
        worker.close()


_WORKER: Worker | None = None


def own_session() -> None:
    """Put this worker process in its own session: with Linux's autogroup scheduling (the
    default) the processes of one session share one CPU share, so workers left in the caller's
    session got no more CPU than one process while other sessions kept the cores busy."""
    if hasattr(os, "setsid"):
        try:
            os.setsid()
        except OSError:
            pass  # already a session leader


def _init_worker(job: EvalJob, ready: threading.Barrier | None = None) -> None:
    global _WORKER
    own_session()
    _WORKER = Worker(job)
    if ready is not None:
        # every worker loads its model before any takes work: otherwise the first one up takes
        # most of the queue while the others still import onnxruntime
        try:
            ready.wait(timeout=120)
        except threading.BrokenBarrierError:
            pass  # a worker that failed to start: the pool reports it


def _evaluate_chunk(chunk: list[Sample]) -> list[Record]:
    assert _WORKER is not None, "the pool initializer did not run"
    return _WORKER.evaluate_many(chunk)


def run_pool(
    job: EvalJob,
    samples: Sequence[Sample],
    workers: int,
    chunk_size: int = 16,
    progress: Callable[[int], None] = lambda n: None,
) -> list[Record]:
    """A local process pool (spawned processes: onnxruntime's threads do not survive fork)."""
    context = multiprocessing.get_context("spawn")
    records: list[Record] = []
    batches = list(chunks(samples, chunk_size))
    # the pool starts one process per submitted batch: never wait for more workers than that
    workers = max(1, min(workers, len(batches)))
    ready = context.Barrier(workers)
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(job, ready)
    )
    try:
        pending = {pool.submit(_evaluate_chunk, c) for c in batches}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                part = future.result()
                records.extend(part)
                progress(len(part))
    finally:
        # an error or Ctrl-C: queued chunks are dropped, running ones finish, workers exit
        pool.shutdown(wait=True, cancel_futures=True)
    return sorted(records, key=lambda r: r["index"])


def complete(records: Iterable[Record], indices: Sequence[int]) -> list[Record]:
    """One record per sample index, in index order: a retried chunk's second copy (Ray re-runs
    the work of a lost worker) is dropped, and a missing sample is an error, never a gap."""
    by_index: dict[int, Record] = {}
    for record in records:
        by_index.setdefault(record["index"], record)
    missing = sorted(set(indices) - set(by_index))
    if missing:
        raise RuntimeError(f"{len(missing)} samples were never evaluated (first: {missing[0]})")
    return [by_index[k] for k in sorted(indices)]
