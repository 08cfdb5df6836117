"""Evaluation throughput: samples/s with 1 and 2 workers (local process pool) and Ray's overhead
per sample, on a generated classifier whose converted model takes >= 5 ms per run.

Start-up (spawning workers or Ray actors, loading models) and the last stragglers are left out:
samples/s is measured in the driver between the moments 10% and 90% of the samples are done
(the best of --repeat runs, interleaved: on a shared machine the fastest run is the least
disturbed). Ray's
overhead per sample is Ray's time per sample minus the pool's, both with 2 workers, on a light
model where that cost is not hidden by the model's own time; Ray runs on a local cluster started
here. One onnxruntime thread per worker.

    PYTHONPATH=$PWD python benchmarks/eval_scale.py [--samples 300] [--repeat 2] [--no-ray]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from rknnrt.evaluation import evaluate, list_samples, synthetic
from rknnrt.evaluation.runner import ModelRunner
from rknnrt.evaluation.sweep import calibration_set, convert

MEAN = [[123.675, 116.28, 103.53]]
STD = [[58.395, 57.12, 57.375]]


class _Marks:
    """(time, samples done) each time the driver hears of finished samples."""

    def __init__(self) -> None:
        self.done, self.marks = 0, []

    def __call__(self, count: int) -> None:
        self.done += count
        self.marks.append((time.perf_counter(), self.done))


def _rate(model: bytes, samples: list, chunk: int, **kwargs: object) -> float:
    """Steady-state samples/s of one run, between 10% and 90% done."""
    marks = _Marks()
    evaluate(model, samples, progress=False, chunk_size=chunk, on_progress=marks, **kwargs)
    n = len(samples)
    t0, d0 = next(m for m in marks.marks if m[1] >= n // 10)
    t1, d1 = next(m for m in marks.marks if m[1] >= n * 9 // 10)
    return (d1 - d0) / (t1 - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--light-samples", type=int, default=1000)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eval_scale_") as root:
        data = os.path.join(root, "data")
        synthetic.make_images(data, args.samples, (args.size, args.size))
        synthetic.make_images(os.path.join(root, "calib"), 4, (args.size, args.size), seed=1)
        onnx_bytes = synthetic.make_classifier(args.size, (48, 96, 192)).SerializeToString()
        calib = calibration_set(onnx_bytes, os.path.join(root, "calib"))
        model = convert(onnx_bytes, {"quantize": True}, calib, MEAN, STD)
        samples = list_samples(data)
        runner = ModelRunner(model, threads=1)
        x = np.zeros(runner.inputs[0].dims, np.uint8)
        runner.run([x])
        start = time.perf_counter()
        for _ in range(10):
            runner.run([x])
        latency = (time.perf_counter() - start) / 10 * 1e3
        runner.close()
        print(
            f"model: generated classifier {args.size}x{args.size}, int8, {latency:.2f} ms per "
            f"run (one onnxruntime thread); {args.samples} samples, with the float reference; "
            f"{os.cpu_count()} CPUs"
        )
        one, two = "1 worker (in process)", "2 workers (process pool)"
        rates = {one: 0.0, two: 0.0}
        for _ in range(args.repeat):  # interleaved, so both see the same background load
            rates[one] = max(rates[one], _rate(model, samples, 4))
            rates[two] = max(rates[two], _rate(model, samples, 4, workers=2))
        for label, rate in rates.items():
            print(f"{label:<28} {rate:8.1f} samples/s")
        print(f"scaling, 2 workers / 1 worker: {rates[two] / rates[one]:.2f}x")
        if args.no_ray:
            return 0
        try:
            import ray
        except ImportError:
            print("Ray not installed: no Ray figures (pip install 'rknnrt[cluster]')")
            return 0
        # Ray's own cost per sample shows best on a light model (64x64, well under 1 ms per
        # sample): Ray actors against the pool, both with 2 workers, on the same samples.
        light_dir = os.path.join(root, "light")
        synthetic.make_images(light_dir, args.light_samples, (64, 64), seed=5)
        light_onnx = synthetic.make_classifier(64).SerializeToString()
        light = convert(light_onnx, {"quantize": True}, calibration_set(light_onnx, light_dir),
                        MEAN, STD)  # fmt: skip
        light_samples = list_samples(light_dir)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
        ray_rate, light_pool, light_ray = 0.0, 0.0, 0.0
        try:
            for _ in range(args.repeat):
                # Ray Data batches of 20 samples (a batch costs Ray a few ms)
                ray_rate = max(ray_rate, _rate(model, samples, 20, workers=2, ray=True))
                light_pool = max(light_pool, _rate(light, light_samples, 20, workers=2))
                light_ray = max(light_ray, _rate(light, light_samples, 20, workers=2, ray=True))
        finally:
            ray.shutdown()
        print(f"{'2 workers (Ray actors)':<28} {ray_rate:8.1f} samples/s")
        print(
            f"light model ({args.light_samples} samples of 64x64), 2 workers: pool "
            f"{light_pool:.1f} samples/s, Ray {light_ray:.1f} samples/s"
        )
        overhead = 1e3 / light_ray - 1e3 / light_pool
        print(
            f"Ray overhead per sample vs the pool (light model): {overhead:.3f} ms "
            f"(target <= 0.5 ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
