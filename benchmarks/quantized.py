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
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.runtimes import alternate, baseline_options, build  # noqa: E402
from rknnrt.sessions import int8_kernels  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
HEAVY = ("light_vgg19", "light_bvlc_alexnet", "light_zfnet512")


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
    print(f"{'model':22s} {'ort f32 ms':>10s} {'int8 ms':>9s} {'fp16 ms':>9s} "
          f"{'int8/ort':>9s} {'fp16/ort':>9s}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            path = os.path.join(LIGHT, f"{name}.onnx")
            session = ort.InferenceSession(path, baseline_options(),
                                           providers=["CPUExecutionProvider"])  # fmt: skip
            feed_name = session.get_inputs()[0].name
            shape = session.get_inputs()[0].shape
            rng = np.random.RandomState(0)
            calib = [[rng.rand(*shape).astype(np.float32)] for _ in range(4)]
            x = rng.rand(*shape).astype(np.float32)
            int8 = build(path, True, calib, os.path.join(folder, f"{name}.int8.rknn"))
            fp16 = build(path, False, calib, os.path.join(folder, f"{name}.fp16.rknn"))
            med = alternate({
                "ort": lambda s=session, n=feed_name, x=x: s.run(None, {n: x}),
                "int8": lambda r=int8, x=x: r.inference([x], data_format="nchw"),
                "fp16": lambda r=fp16, x=x: r.inference([x], data_format="nchw"),
            }, args.repeat)  # fmt: skip
            print(f"{name:22s} {med['ort']:10.2f} {med['int8']:9.2f} {med['fp16']:9.2f} "
                  f"{med['int8'] / med['ort']:9.2f} {med['fp16'] / med['ort']:9.2f}",
                  flush=True)  # fmt: skip
            int8.release()
            fp16.release()


if __name__ == "__main__":
    main()
