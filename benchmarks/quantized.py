"""int8 and fp16 execution speed against onnxruntime float32 on the original model.

For each "light" model of the onnx package (weights as shipped: speed does not depend on
their values), build int8 (4 uniform[0,1) calibration samples) and fp16 with
rknnrt.toolkit.RKNN, rknn_init each, and time one inference through rknnrt.lite.RKNNLite
(inputs set, run, float outputs) against onnxruntime.InferenceSession(original).run on the
same input, alternating the runtimes iteration by iteration. Prints median times and ratios
measured in this one run, and which int8 kernels the runtime chose (sessions/int8_kernels.py).

The baseline session stops its threads' spinning at the end of each run, as rknnrt's sessions
do (core/program/whole.py): otherwise each runtime's spinning workers slow the one timed after it
on a 2-core machine (the baseline ran 1.9x slower after an rknnrt run that spun).

    PYTHONPATH=. python benchmarks/quantized.py [--repeat N] [--models a,b] [--quick]

Targets (issue 15): int8 median <= 1.0x onnxruntime float32, fp16 <= 1.15x, every model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

from rknnrt.lite import RKNNLite
from rknnrt.sessions import int8_kernels
from rknnrt.toolkit import RKNN

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
HEAVY = ("light_vgg19", "light_bvlc_alexnet", "light_zfnet512")


def build(path: str, quantize: bool, calib: list, folder: str) -> RKNNLite:
    rknn = RKNN()
    rknn.config(target_platform="rk3588", float_dtype="float16")
    rknn.load_onnx(path)
    if rknn.build(do_quantization=quantize, dataset=calib if quantize else None) != 0:
        raise RuntimeError(f"build failed: {rknn.last_error}")
    out = os.path.join(folder, f"{os.path.basename(path)}.{int(quantize)}.rknn")
    rknn.export_rknn(out)
    runtime = RKNNLite()
    runtime.load_rknn(out)
    if runtime.init_runtime() != 0:
        raise RuntimeError("init_runtime failed")
    return runtime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--models", default="")
    parser.add_argument("--quick", action="store_true", help=f"skip {', '.join(HEAVY)}")
    args = parser.parse_args()
    names = sorted(f[:-5] for f in os.listdir(LIGHT) if f.endswith(".onnx"))
    if args.models:
        names = [n for n in names if n in args.models.split(",")]
    if args.quick:
        names = [n for n in names if n not in HEAVY]
    exact = int8_kernels.fast_kernels_exact()
    print(f"int8 kernels: {'fast u8s8 (probed exact on this CPU)' if exact else 'exact u8u8'}")
    baseline = ort.SessionOptions()
    baseline.add_session_config_entry("session.force_spinning_stop", "1")
    print(f"{'model':22s} {'ort f32 ms':>10s} {'int8 ms':>9s} {'fp16 ms':>9s} "
          f"{'int8/ort':>9s} {'fp16/ort':>9s}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            path = os.path.join(LIGHT, f"{name}.onnx")
            session = ort.InferenceSession(path, baseline, providers=["CPUExecutionProvider"])
            feed_name = session.get_inputs()[0].name
            shape = session.get_inputs()[0].shape
            rng = np.random.RandomState(0)
            calib = [[rng.rand(*shape).astype(np.float32)] for _ in range(4)]
            x = rng.rand(*shape).astype(np.float32)
            int8, fp16 = build(path, True, calib, folder), build(path, False, calib, folder)
            runs = {
                "ort": lambda s=session, n=feed_name, x=x: s.run(None, {n: x}),
                "int8": lambda r=int8, x=x: r.inference([x], data_format="nchw"),
                "fp16": lambda r=fp16, x=x: r.inference([x], data_format="nchw"),
            }
            times: dict[str, list[float]] = {k: [] for k in runs}
            for fn in runs.values():
                fn()  # warm-up
            for _ in range(args.repeat):
                for key, fn in runs.items():
                    start = time.perf_counter()
                    fn()
                    times[key].append(time.perf_counter() - start)
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            print(f"{name:22s} {med['ort']:10.2f} {med['int8']:9.2f} {med['fp16']:9.2f} "
                  f"{med['int8'] / med['ort']:9.2f} {med['fp16'] / med['ort']:9.2f}",
                  flush=True)  # fmt: skip
            int8.release()
            fp16.release()


if __name__ == "__main__":
    main()
