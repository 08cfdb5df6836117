"""What the model-file integrity checks cost at rknn_init, against rknn_init itself.

For each model (default: the largest light model of the onnx package, VGG-19, as float16 and
float32), convert it, time rknn_init from bytes and with RKNN_FLAG_MODEL_BUFFER_ZERO_COPY
(median of --repeat), and time the checks rknn_init performs on the same bytes: the weights
CRC-32 (format version 2), the graph rules (external data, UTF-8, convolution attributes) and,
for comparison, SHA-256 (what a version 1 file is checked with). Prints each as a share of
rknn_init measured in the same run.

    python benchmarks/model_digest.py [--models light_vgg19,light_resnet50] [--repeat N]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import hashlib
import statistics
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

import rknnrt as rk
from rknnrt.model import container, graph_rules
from rknnrt.toolkit import RKNN

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def median_s(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def init_once(blob: bytes, zero_copy: bool) -> None:
    ctx = rk.rknn_context()
    if zero_copy:
        buf = np.frombuffer(blob, np.uint8)
        ext = rk.rknn_init_extend()
        flag = rk.RKNN_FLAG_MODEL_BUFFER_ZERO_COPY
        status = rk.rknn_init(ctypes.byref(ctx), buf.ctypes.data, len(blob), flag, ext)
    else:
        status = rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None)
    assert status == rk.RKNN_SUCC, status
    rk.rknn_destroy(ctx)
    gc.collect()


def measure(name: str, dtype: str, repeat: int) -> None:
    rknn = RKNN()
    rknn.config(float_dtype=dtype)
    assert rknn.load_onnx(str(LIGHT / f"{name}.onnx")) == 0
    assert rknn.build(do_quantization=False) == 0, rknn.last_error
    blob = rknn.model_bytes()
    rknn.release()
    sections = container.read(memoryview(blob))
    init = median_s(lambda: init_once(blob, False), repeat)
    zc_init = median_s(lambda: init_once(blob, True), repeat)
    crc = median_s(lambda: zlib.crc32(sections.weights), repeat)
    rules = median_s(lambda: graph_rules.check_graph(sections.graph, use_cache=False), repeat)
    sha = median_s(lambda: hashlib.sha256(sections.weights).digest(), repeat)

    def share(t: float) -> str:
        return f"{t * 1e3:6.1f} ({t / init * 100:4.1f}%)"

    print(f"{name + ' ' + dtype:28s} {len(blob) / 1e6:6.0f} {init * 1e3:8.1f} "
          f"{zc_init * 1e3:8.1f} {share(crc):>14s} {share(rules):>14s} "
          f"{share(sha):>14s}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="light_vgg19")
    parser.add_argument("--dtypes", default="float16,float32")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'model':28s} {'MB':>6s} {'init ms':>8s} {'zc init':>8s} {'crc32':>14s} "
          f"{'graph rules':>14s} {'sha256 (v1)':>14s}")  # fmt: skip
    for name in args.models.split(","):
        for dtype in args.dtypes.split(","):
            measure(name, dtype, args.repeat)


if __name__ == "__main__":
    main()
