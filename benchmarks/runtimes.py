"""What the speed benchmarks share: build a model with rknnrt.toolkit.RKNN and load it through
rknnrt.lite.RKNNLite, the fair onnxruntime baseline, and alternating timing.

Used by benchmarks/quantized.py (the light models), benchmarks/real_arch.py (the
real-architecture set) and benchmarks/vendor_arch.py (its vendor files).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import onnxruntime as ort

from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN


def build(model: Any, quantize: bool, calib: list, path: str,
          platform: str = "rk3588") -> RKNNLite:  # fmt: skip
    """`model` (an ONNX path or ModelProto) built for `platform` (int8 with `calib` when
    `quantize`, else float16), exported to `path` and initialised through RKNNLite."""
    rknn = RKNN()
    rknn.config(target_platform=platform, float_dtype="float16")
    rknn.load_onnx(model)
    if rknn.build(do_quantization=quantize, dataset=calib if quantize else None) != 0:
        raise RuntimeError(f"build failed: {rknn.last_error}")
    rknn.export_rknn(path)
    runtime = RKNNLite()
    runtime.load_rknn(path)
    if runtime.init_runtime() != 0:
        raise RuntimeError("init_runtime failed")
    return runtime


def baseline_options() -> ort.SessionOptions:
    """onnxruntime float32 as rknnrt's sessions run: the same intra-op threads (its default
    unless RKNNRT_NUM_THREADS), workers' spinning stopped after each run (otherwise each
    runtime's spinning workers slow the one timed after it on a 2-core machine)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.force_spinning_stop", "1")
    threads = os.environ.get("RKNNRT_NUM_THREADS", "")
    if threads.isdigit():
        options.intra_op_num_threads = int(threads)
    return options


def alternate(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median ms of each callable, run in turn `repeat` times after one warm-up each."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():
        fn()
    for _ in range(repeat):
        for key, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}
