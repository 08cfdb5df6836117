"""int8 and fp16 speed on the real-architecture set against onnxruntime float32, in one run.

For each network of tools/real_arch (seeded weights, real input size unless --test), build
int8 (--calib uniform[0,1) samples, `normal`/`channel`) and fp16 with rknnrt.toolkit.RKNN,
load each through rknnrt.lite.RKNNLite, and time one inference (inputs set, run, float
outputs) against onnxruntime.InferenceSession(original).run on the same input. The baseline
is fair: the same intra-op threads as the programs (onnxruntime's default unless
RKNNRT_NUM_THREADS), its workers' spinning stopped after each run as rknnrt's sessions do,
and the three runtimes alternate iteration by iteration. Prints medians, the ratios and their
geometric means.

    PYTHONPATH=. python benchmarks/real_arch.py [--repeat N] [--models a,b] [--test] [--calib N]
        [--kinds int8,fp16]

Targets (issue 25): int8 <= 1.0x onnxruntime float32 on every network (geometric mean
<= 0.8x), fp16 <= 1.2x.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Callable

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.runtimes import alternate, baseline_options, build  # noqa: E402
from rknnrt.sessions import int8_kernels  # noqa: E402
from tools.real_arch import catalog  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--models", default="")
    parser.add_argument("--test", action="store_true", help="reduced input sizes")
    parser.add_argument("--calib", type=int, default=2)
    parser.add_argument("--kinds", default="int8,fp16", help="programs to time: int8, fp16")
    args = parser.parse_args()
    names = [n for n in catalog.NETWORKS if not args.models or n in args.models.split(",")]
    exact = int8_kernels.fast_kernels_exact()
    print(f"int8 kernels: {'fast u8s8 (probed exact on this CPU)' if exact else 'exact u8u8'}")
    print(f"{'network':24s} {'ort f32 ms':>10s} {'int8 ms':>9s} {'fp16 ms':>9s} "
          f"{'int8/ort':>9s} {'fp16/ort':>9s}", flush=True)  # fmt: skip
    kinds = [k for k in ("int8", "fp16") if k in args.kinds.split(",")]
    ratios: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            model = catalog.build(name, test=args.test)
            shape = catalog.input_shape(name, args.test)
            rng = np.random.RandomState(0)
            calib = [[rng.rand(*shape).astype(np.float32)] for _ in range(args.calib)]
            x = rng.rand(*shape).astype(np.float32)
            session = ort.InferenceSession(model.SerializeToString(), baseline_options(),
                                           providers=["CPUExecutionProvider"])  # fmt: skip
            runtimes = {k: build(model, k == "int8", calib,
                                 os.path.join(folder, f"{name}.{k}.rknn")) for k in kinds}
            runs: dict[str, Callable[[], object]] = {
                "ort": lambda s=session, x=x: s.run(None, {"images": x})}
            for k, r in runtimes.items():
                runs[k] = lambda r=r, x=x: r.inference([x], data_format="nchw")
            med = alternate(runs, args.repeat)
            rel = {k: med[k] / med["ort"] for k in kinds}
            for k in kinds:
                ratios[k].append(rel[k])
            cells = [f"{med[k]:9.2f}" if k in med else f"{'-':>9s}" for k in ("int8", "fp16")]
            cells += [f"{rel[k]:9.2f}" if k in rel else f"{'-':>9s}" for k in ("int8", "fp16")]
            print(f"{name:24s} {med['ort']:10.2f} {' '.join(cells)}", flush=True)
            for r in runtimes.values():
                r.release()
    geo = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in ratios.items() if v}
    cells = [f"{geo[k]:9.2f}" if k in geo else f"{'-':>9s}" for k in ("int8", "fp16")]
    print(f"{'geometric mean':24s} {'':10s} {'':9s} {'':9s} {' '.join(cells)}")


if __name__ == "__main__":
    main()
