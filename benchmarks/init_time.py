"""rknn_init of a float16 model against onnxruntime's session creation on the original model.

For each model (default: the onnx package's light ResNet-50), write it as a user has it, every
weight an initializer (the light files make their weights with ConstantOfShape nodes; ResNet-50
becomes a 100 MB float32 ONNX file), convert it to fp16 with rknnrt.toolkit.RKNN and time,
alternating iteration by iteration:

- `ort`: onnxruntime.InferenceSession(that file) with default options (what a user of
  onnxruntime pays);
- `cold`: rknn_init from the model's bytes with the laid-out program cache off
  (RKNNRT_LAYOUT_CACHE_MB=0: the program is laid out at this init, core/program/fp16_layout);
- `first`: rknn_init with the cache on and empty (the first init of a model: laid out, the
  cache written on a thread of its own after rknn_init returns, not timed);
- `warm`: rknn_init from the same bytes with the cache on, in a temporary folder, after one
  init has filled it (every later init of the model: core/program/layout_cache).

Each rknn_init is followed by rknn_destroy. Prints medians and the ratios to `ort` (median of
the per-iteration ratios) measured in this one run.

    PYTHONPATH=. python benchmarks/init_time.py [--models light_resnet50,...] [--repeat N]

Target (issue 25 item 5): rknn_init of a 100 MB fp16 model <= 2x onnxruntime's session creation.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import rknnrt as rk  # noqa: E402
from rknnrt.core import switches  # noqa: E402
from rknnrt.core.program import layout_cache  # noqa: E402
from rknnrt.sessions import kernels  # noqa: E402
from rknnrt.toolkit import RKNN  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def with_initializers(path: str, folder: str) -> str:
    """The model at `path` saved in `folder` with each ConstantOfShape of a constant shape as
    the initializer it makes."""
    model = onnx.load(path)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    kept = []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            value = numpy_helper.to_array(node.attribute[0].t).reshape(-1)[0]
            shape = numpy_helper.to_array(inits[node.input[0]]).astype(np.int64)
            weight = numpy_helper.from_array(np.full(shape, value, value.dtype), node.output[0])
            graph.initializer.append(weight)
            if model.ir_version < 4:  # before IR 4 every initializer is also a graph input
                graph.input.append(onnx.helper.make_tensor_value_info(
                    weight.name, weight.data_type, list(weight.dims)))  # fmt: skip
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    out = os.path.join(folder, os.path.basename(path))
    onnx.save(model, out)
    return out


def convert(path: str) -> bytes:
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float16")
    rknn.load_onnx(path)
    if rknn.build(do_quantization=False) != 0:
        raise RuntimeError(f"build failed: {rknn.last_error}")
    return rknn.model_bytes()


def rknn_init(blob: bytes, cache_mb: str, cache_dir: str | None = None) -> None:
    ctx = rk.rknn_context()
    with switches.override(switches.LAYOUT_CACHE_MB, cache_mb), \
            switches.override(switches.CACHE_DIR, cache_dir):  # fmt: skip
        status = rk.rknn_init(ctypes.byref(ctx), blob, len(blob), 0, None)
    if status != 0:
        raise RuntimeError(f"rknn_init returned {status}")
    rk.rknn_destroy(ctx)


_empty: list[str] = []


def first_init(blob: bytes, folder: str) -> None:
    """rknn_init into a cache folder without the model's layout (its write goes on after
    rknn_init returns). The folder links the compiled kernel library of the user cache
    (sessions/kernels, built once per machine and onnxruntime version, ~2 s, before the timing):
    the first init of a model, not the first use of rknnrt on the machine."""
    _empty.append(tempfile.mkdtemp(dir=folder))
    os.symlink(kernels.library(switches.cache_root()).parent.parent,
               os.path.join(_empty[-1], "kernels"))  # fmt: skip
    rknn_init(blob, switches.LAYOUT_CACHE_MB.default, _empty[-1])


def settle() -> None:
    """Untimed, after each init: the cache write ended, the `first` folders removed."""
    layout_cache.wait()
    while _empty:
        shutil.rmtree(_empty.pop())


def ort_session(path: str) -> None:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="light_resnet50")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'model':18s} {'ONNX MB':>8s} {'ort s':>7s} {'cold s':>7s} {'first s':>7s} "
          f"{'warm s':>7s} {'cold/ort':>9s} {'first/ort':>9s} {'warm/ort':>9s}",
          flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rknnrt_init_bench_") as folder:
        with switches.override(switches.CACHE_DIR, folder):
            for name in args.models.split(","):
                path = with_initializers(os.path.join(LIGHT, f"{name}.onnx"), folder)
                blob = convert(path)
                runs: dict[str, Callable[[], None]] = {
                    "ort": lambda p=path: ort_session(p),
                    "cold": lambda b=blob: rknn_init(b, "0"),
                    "first": lambda b=blob: first_init(b, folder),
                    "warm": lambda b=blob: rknn_init(b, switches.LAYOUT_CACHE_MB.default),
                }
                for fn in runs.values():
                    fn()  # warm-up; fills the cache for `warm`
                    settle()
                times: dict[str, list[float]] = {k: [] for k in runs}
                for _ in range(args.repeat):
                    for key, fn in runs.items():
                        start = time.perf_counter()
                        fn()
                        times[key].append(time.perf_counter() - start)
                        settle()
                med = {k: statistics.median(v) for k, v in times.items()}
                ratio = {k: statistics.median(a / b for a, b in zip(times[k], times["ort"]))
                         for k in ("cold", "first", "warm")}  # fmt: skip
                print(f"{name:18s} {os.path.getsize(path) / 1e6:8.1f} {med['ort']:7.3f} "
                      f"{med['cold']:7.3f} {med['first']:7.3f} {med['warm']:7.3f} "
                      f"{ratio['cold']:9.2f} {ratio['first']:9.2f} {ratio['warm']:9.2f}",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
