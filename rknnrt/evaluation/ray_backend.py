"""Scale-out on Ray (the `cluster` extra): samples streamed with Ray Data to actors that each
hold an rknnrt context, and sweep configurations as Ray tasks.

A lost actor is restarted and its unfinished batches are run again (Ray's retries); the driver
keeps one record per sample index (`engine.complete`), so nothing is counted twice or missed.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .data import Sample
from .engine import EvalJob, Record, Worker, complete

LOOPBACK = "127.0.0.1"


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RuntimeError("--ray needs Ray: pip install 'rknnrt[cluster]'") from None
    return ray


# Ray turns a loopback node address into the host's routable one (resolve_ip_for_localhost)
# unless it believes clusters are off, as on Windows and macOS: then the node address is
# 127.0.0.1 and the GCS, raylet, workers and agents all listen on loopback (measured with
# `ss -ltnp`, Ray 2.60; docs/evaluation.md "Ray security").
LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class _Session:
    """Connects to Ray (address None: a local cluster of `cpus` CPUs) and shuts down on exit
    what it started; a Ray already initialised by the caller is used and left running. A local
    cluster listens on loopback only, or is not kept: if Ray gives it another node address, it
    is shut down at once and RuntimeError says why."""

    def __init__(self, address: str | None, cpus: int) -> None:
        self.ray = _ray()
        self.started = False
        self.address, self.cpus = address, cpus

    def __enter__(self) -> Any:
        if not self.ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "logging_level": logging.WARNING,
            }
            if self.address:
                self.ray.init(address=self.address, **kwargs)
            else:
                self._start_local(kwargs)
            self.started = True
        return self.ray

    def _start_local(self, kwargs: dict[str, Any]) -> None:
        previous = os.environ.get(LOCAL_ONLY_ENV)
        os.environ[LOCAL_ONLY_ENV] = "0"  # read by the daemons Ray starts now
        constants = _ray_constants()
        flag = getattr(constants, "ENABLE_RAY_CLUSTER", None)
        if flag is not None:  # read by the driver at each call (fixed when ray was imported)
            constants.ENABLE_RAY_CLUSTER = False
        try:
            self.ray.init(num_cpus=self.cpus, _node_ip_address=LOOPBACK, **kwargs)
        finally:
            if previous is None:
                os.environ.pop(LOCAL_ONLY_ENV, None)
            else:
                os.environ[LOCAL_ONLY_ENV] = previous
            if flag is not None:
                constants.ENABLE_RAY_CLUSTER = flag
        node = self.ray.util.get_node_ip_address()
        if node != LOOPBACK:
            self.ray.shutdown()
            raise RuntimeError(
                f"the local Ray cluster came up on {node}, not on loopback (this Ray version "
                "ignores the local-only setting): start a cluster yourself and pass --ray ADDRESS"
            )

    def __exit__(self, *exc: object) -> None:
        if self.started:
            self.ray.shutdown()


def _ray_constants() -> Any:
    try:
        from ray._private import ray_constants
    except ImportError:  # a Ray without the module: the environment variable alone applies
        return None
    return ray_constants


class EvalActor:
    """A Ray Data actor: the model is loaded once (from the object store) and evaluates batches.

    `kill_at`/`kill_marker` inject the loss of a worker for tests: the first actor to reach
    sample `kill_at` kills its own process (SIGKILL), once per marker file."""

    def __init__(
        self,
        job: EvalJob,
        model_ref: Any = None,
        kill_at: int | None = None,
        kill_marker: str | None = None,
    ) -> None:
        if model_ref is not None:
            import ray

            # a read-only numpy view of the object store: the model bytes are not copied
            # (passed inside a list: Ray then lends the reference instead of resolving it)
            model = ray.get(model_ref[0])
            job = EvalJob(model, job.reference, job.mean, job.std, job.metrics, job.threads)
        self.worker = Worker(job)
        self.kill_at, self.kill_marker = kill_at, kill_marker

    def _maybe_die(self, indices: np.ndarray) -> None:
        if self.kill_marker is None or self.kill_at not in set(int(i) for i in indices):
            return
        try:
            os.close(os.open(self.kill_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._maybe_die(batch["index"])
        records = []
        for index, name, paths, label in zip(
            batch["index"], batch["name"], batch["paths"], batch["label"]
        ):
            sample = Sample(
                int(index),
                str(name),
                tuple(str(paths).split("\n")),
                None if int(label) < 0 else int(label),
            )
            records.append(json.dumps(self.worker.evaluate(sample)))
        return {"record": np.asarray(records, dtype=object)}


def run_ray(
    job: EvalJob,
    samples: Sequence[Sample],
    workers: int,
    address: str | None = None,
    batch_size: int = 16,
    progress: Callable[[int], None] = lambda n: None,
    kill_at: int | None = None,
    kill_marker: str | None = None,
) -> list[Record]:
    """Evaluate on Ray with `workers` actors; records in sample order, one per sample."""
    with _Session(address, workers) as ray:
        import ray.data

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        items = [
            {
                "index": s.index,
                "name": s.name,
                "paths": "\n".join(s.paths),
                "label": -1 if s.label is None else s.label,
            }
            for s in samples
        ]
        model_ref = ray.put(np.frombuffer(job.model, np.uint8))
        light = EvalJob(b"", job.reference, job.mean, job.std, job.metrics, job.threads)
        dataset = ray.data.from_items(items, override_num_blocks=max(len(items) // batch_size, 1))
        # Ray Data restarts a lost actor and retries its tasks without limit by default
        # (max_restarts=-1, max_task_retries=-1): the kill test relies on it.
        results = dataset.map_batches(
            EvalActor,
            fn_constructor_kwargs={
                "job": light,
                "model_ref": [model_ref],
                "kill_at": kill_at,
                "kill_marker": kill_marker,
            },
            batch_size=batch_size,
            compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=1,
        )
        records = []
        for batch in results.iter_batches(batch_size=None, batch_format="numpy"):
            part = [json.loads(r) for r in batch["record"]]
            records.extend(part)
            progress(len(part))
    return complete(records, [s.index for s in samples])


def run_tasks(
    function: Callable[..., Any],
    calls: Sequence[tuple],
    workers: int,
    address: str | None = None,
    progress: Callable[[int], None] = lambda n: None,
) -> list[Any]:
    """`function(*args)` for each args tuple as Ray tasks (retried if a worker dies), results in
    call order."""
    with _Session(address, workers) as ray:
        remote = ray.remote(max_retries=3, num_cpus=1)(function)
        refs = [remote.remote(*args) for args in calls]
        position = {ref: k for k, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                results[position[ref]] = ray.get(ref)
                progress(1)
    return results
