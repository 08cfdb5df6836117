"""Vendor `.rknn` files of the real-architecture set at their real size: run time against the
same network converted by rknnrt and against onnxruntime float32, and agreement with the
vendor's simulator, in one run (issue 24: run <= 1.2x rknnrt's conversion).

For each network of tools/real_arch (seeded weights, real input size unless --test), the
vendor's rknn-toolkit2 (its own environment, a subprocess; never a dependency) builds int8
(calibrated on --calib seeded uniform[0, 1) samples) and fp16 files for --platform, exports
them and runs its simulator on one more sample; rknnrt.toolkit.RKNN converts the same ONNX with
the same settings and samples. Both files then run through rknnrt.lite.RKNNLite, alternating
with onnxruntime on the original model (benchmarks/runtimes.py: the fair baseline). Nothing is
written outside a temporary folder: the vendor files are never committed.

    PYTHONPATH=. python benchmarks/vendor_arch.py [--models mobilenetv2,resnet18] [--test]
        [--kinds int8,fp16] [--platform rk3588] [--repeat N]
        [--vendor-python /work/vendor_env/bin/python]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.runtimes import alternate, baseline_options, build  # noqa: E402
from rknnrt.lite import RKNNLite  # noqa: E402
from tools.vendor_diff import real_size  # noqa: E402
from tools.vendor_diff.real_arch import cosine  # noqa: E402

DEFAULT_MODELS = ("mobilenetv2", "mobilenetv3_small", "resnet18", "densenet121", "yolov5s",
                  "deit_tiny")  # fmt: skip
RUN_TARGET = 1.2

def _load(path: Path) -> RKNNLite:
    lite = RKNNLite()
    if lite.load_rknn(str(path)) != 0 or lite.init_runtime() != 0:
        raise RuntimeError(f"rknnrt refuses {path.name}")
    return lite


def bench(name: str, kinds: list[str], args: argparse.Namespace, work: Path) -> dict:
    # the inputs and the vendor's files as tools/vendor_diff/real_size.py makes them
    real_size.prepare(work, [name], test=args.test, calib=args.calib)
    model = onnx.load(str(work / "onnx" / f"{name}.onnx"))
    folder = work / name
    calib = [np.load(folder / f"calib{k}.npy") for k in range(args.calib)]
    x = np.load(folder / "input.npy")
    session = ort.InferenceSession(model.SerializeToString(), baseline_options(),
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    runs = {"ort": lambda: session.run(None, {"images": x})}
    row: dict = {}
    opened = []
    for kind in kinds:
        dtype = "i8" if kind == "int8" else kind
        real_size.build_vendor(args.vendor_python, work, [name], [args.platform], [dtype])
        found = real_size.vendor_outputs(work, name, args.platform, dtype)
        try:
            if isinstance(found, str):
                raise RuntimeError(found)
            vendor_path, sim = found
            vendor = _load(vendor_path)
        except RuntimeError as exc:
            row[kind] = str(exc)
            continue
        own = build(model, kind == "int8", [[c] for c in calib], str(work / f"own_{kind}.rknn"),
                    platform=args.platform)  # fmt: skip
        opened += [vendor, own]
        outs = vendor.inference([x], data_format="nchw")
        row[f"{kind}_cos"] = min(cosine(o, s) for o, s in zip(outs, sim))
        runs[f"{kind}_vendor"] = lambda r=vendor: r.inference([x], data_format="nchw")
        runs[f"{kind}_own"] = lambda r=own: r.inference([x], data_format="nchw")
    row["ms"] = alternate(runs, args.repeat)
    for lite in opened:
        lite.release()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--kinds", default="int8,fp16")
    ap.add_argument("--platform", default="rk3588")
    ap.add_argument("--test", action="store_true", help="reduced input sizes")
    ap.add_argument("--calib", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--vendor-python", default="/work/vendor_env/bin/python")
    args = ap.parse_args()
    if not os.path.exists(args.vendor_python):
        print(f"the vendor toolkit's python ({args.vendor_python}) is missing: nothing to compare")
        return 1
    kinds = [k for k in ("int8", "fp16") if k in args.kinds.split(",")]
    print(f"{'network':20s} {'kind':5s} {'ort ms':>8s} {'vendor ms':>9s} {'rknnrt ms':>9s} "
          f"{'v/rknnrt':>8s} {'v/ort':>6s} {'v vs sim cos':>12s}", flush=True)  # fmt: skip
    ratios: dict[str, list[float]] = {k: [] for k in kinds}
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix="rknnrt_vendor_arch_") as tmp:
            row = bench(name, kinds, args, Path(tmp))
        ms = row["ms"]
        for kind in kinds:
            if f"{kind}_vendor" not in ms:
                print(f"{name:20s} {kind:5s} {row[kind]}", flush=True)
                continue
            v, o = ms[f"{kind}_vendor"], ms[f"{kind}_own"]
            ratios[kind].append(v / o)
            print(f"{name:20s} {kind:5s} {ms['ort']:8.2f} {v:9.2f} {o:9.2f} {v / o:8.2f} "
                  f"{v / ms['ort']:6.2f} {row[f'{kind}_cos']:12.6f}", flush=True)  # fmt: skip
    for kind, values in ratios.items():
        if values:
            geo = math.exp(sum(map(math.log, values)) / len(values))
            over = sum(r > RUN_TARGET for r in values)
            print(f"{kind}: vendor / rknnrt geometric mean {geo:.2f}, {over} of {len(values)} "
                  f"over {RUN_TARGET}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
