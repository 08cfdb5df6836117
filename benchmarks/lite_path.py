"""What RKNNLite.inference costs outside onnxruntime's run, with its Python path read cold: each
inference follows a run of the float32 baseline (as in real_arch.py, whose alternation this
repeats), which pushes the interpreter's code and data out of the caches.

For each network of tools/real_arch (real input size unless --test) and each kind (int8, fp16,
built as real_arch builds them), two paths are timed in turn on the same context: RKNNLite's
one call (rknnrt_inference) and the four C-shaped calls a board application makes
(rknn_inputs_set, rknn_run, rknn_outputs_get, rknn_outputs_release, through rknnrt.client).
onnxruntime's InferenceSession.run_with_iobinding is wrapped with timestamps, so each inference
splits into the time before the session run, the run, and the time after it. Prints the medians
in microseconds and the time outside the run against the baseline's run (the share of
real_arch's ratio the Python path costs).

    PYTHONPATH=. python benchmarks/lite_path.py [--repeat N] [--models a,b] [--kinds int8,fp16]
        [--test]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rknnrt as rk  # noqa: E402
from benchmarks.runtimes import baseline_options, build  # noqa: E402
from rknnrt.lite import RKNNLite  # noqa: E402
from tools.real_arch import catalog  # noqa: E402

ROWS = ("before the session run", "after the session run", "outside the session run",
        "onnxruntime float32 run", "outside / onnxruntime run")  # fmt: skip


@contextlib.contextmanager
def session_marks(marks: dict[str, float]) -> Iterator[None]:
    """onnxruntime's IO-binding runs stamping `marks`: the first entry ("<"), the last exit
    (">") and their summed time ("run": a program of several sessions runs each)."""
    clock = time.perf_counter
    original = ort.InferenceSession.run_with_iobinding

    def stamped(*args):
        start = clock()
        marks.setdefault("<", start)
        try:
            return original(*args)
        finally:
            marks[">"] = end = clock()
            marks["run"] = marks.get("run", 0.0) + end - start

    ort.InferenceSession.run_with_iobinding = stamped
    try:
        yield
    finally:
        ort.InferenceSession.run_with_iobinding = original


def four_calls(lite: RKNNLite, x: np.ndarray) -> list[np.ndarray]:
    """RKNNLite.inference's work as the four C-shaped calls (its preparation included; `x`
    float32 NCHW)."""
    arrays, fmts = lite._prepare([x], "nchw")
    client = lite._client
    client.set_inputs(arrays, [rk.RKNN_TENSOR_FLOAT32], fmts)
    client.run()
    return client.get_outputs()


def timeline(paths: dict[str, Callable[[], object]], baseline: Callable[[], object],
             repeat: int) -> dict[str, dict[str, float]]:  # fmt: skip
    """Per path: median µs before and after the session run and outside it, and the
    baseline's median µs (each path's inference follows its own baseline run)."""
    marks: dict[str, float] = {}
    rows: dict[str, dict[str, list[float]]] = {p: {r: [] for r in ROWS[:4]} for p in paths}
    with session_marks(marks):
        for i in range(repeat + 3):  # three warm-up rounds
            for name, path in paths.items():
                start = time.perf_counter()
                baseline()
                base_us = (time.perf_counter() - start) * 1e6
                marks.clear()
                marks["start"] = time.perf_counter()
                path()
                end = time.perf_counter()
                if i < 3:
                    continue
                row = rows[name]
                row["before the session run"].append((marks["<"] - marks["start"]) * 1e6)
                row["after the session run"].append((end - marks[">"]) * 1e6)
                row["outside the session run"].append((end - marks["start"] - marks["run"]) * 1e6)
                row["onnxruntime float32 run"].append(base_us)
    out = {p: {r: statistics.median(v) for r, v in row.items()} for p, row in rows.items()}
    for row in out.values():
        row["outside / onnxruntime run"] = row[ROWS[2]] / row[ROWS[3]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--models", default="mobilenetv3_small,mobilenetv2,deit_tiny")
    parser.add_argument("--kinds", default="int8,fp16")
    parser.add_argument("--test", action="store_true", help="reduced input sizes")
    args = parser.parse_args()
    names = [n for n in catalog.NETWORKS if n in args.models.split(",")]
    kinds = [k for k in ("int8", "fp16") if k in args.kinds.split(",")]
    columns: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            model = catalog.build(name, test=args.test)
            shape = catalog.input_shape(name, args.test)
            rng = np.random.RandomState(0)
            calib = [[rng.rand(*shape).astype(np.float32)] for _ in range(2)]
            x = rng.rand(*shape).astype(np.float32)
            session = ort.InferenceSession(model.SerializeToString(), baseline_options(),
                                           providers=["CPUExecutionProvider"])  # fmt: skip
            feed = {session.get_inputs()[0].name: x}
            for kind in kinds:
                lite = build(model, kind == "int8", calib, os.path.join(folder, f"{name}.{kind}"))
                paths = {"one call": lambda lite=lite, x=x: lite.inference([x], data_format="nchw"),
                         "four calls": lambda lite=lite, x=x: four_calls(lite, x)}  # fmt: skip
                got = {p: fn() for p, fn in paths.items()}
                assert all(a.tobytes() == b.tobytes()
                           for a, b in zip(got["one call"], got["four calls"]))  # fmt: skip
                baseline = lambda s=session, f=feed: s.run(None, f)  # noqa: E731
                for path, row in timeline(paths, baseline, args.repeat).items():
                    columns[f"{name} {kind}, {path}"] = row
                lite.release()
    heads = ("before run", "after run", "outside", "ort run", "outside/ort")
    width = max(len(c) for c in columns) + 2
    print(f"{'µs (median)':{width}s}" + "".join(f"{h:>12s}" for h in heads))
    for column, row in columns.items():
        cells = "".join(f"{row[r]:12.{3 if '/' in r else 1}f}" for r in ROWS)
        print(f"{column:{width}s}{cells}")


if __name__ == "__main__":
    main()
