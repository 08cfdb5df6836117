"""python -m tools.vendor_layers DIR [DIR ...]   (or: --build MODEL.onnx PLATFORM DIR
   [--vendor-python /work/vendor_env/bin/python]; --record OUT.npz DIR:STEM:OP ...)

Each op of DIR/model.rknn fed the vendor simulator's own inputs (DIR/dumps.npz, written by
vendor_side.py in the vendor's environment), its int8 output against the simulator's
(tools/vendor_layers/layers.py), then the whole file on the test input.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from .layers import check, record

SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor_side.py")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.vendor_layers")
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--build", nargs=3, metavar=("MODEL", "PLATFORM", "DIR"))
    ap.add_argument("--vendor-python", default="/work/vendor_env/bin/python")
    ap.add_argument("--record", nargs="+", metavar=("OUT.npz", "DIR:STEM:OP"),
                    help="write the IO values of the ops DIR:STEM:OP into OUT.npz")
    args = ap.parse_args(argv)
    if args.record:
        record([tuple(e.split(":", 2)) for e in args.record[1:]], args.record[0])
        return 0
    dirs = list(args.dirs)
    if args.build:
        model, platform, out = args.build
        subprocess.run([args.vendor_python, SIDE, model, platform, out], check=True,
                       capture_output=True, timeout=900)  # fmt: skip
        dirs.append(out)
    for d in dirs:
        print(d)
        check(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
