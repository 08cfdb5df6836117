"""python -m tools.vendor_diff MODEL.onnx [--vendor-python /work/vendor_env/bin/python]
   [--record OUT.json | --recorded IN.json] [--samples 16] [--seed 0] [--algorithm normal]

Builds MODEL in int8 with rknnrt and (with --vendor-python) with the vendor's toolkit in a
subprocess with its own temp folder, or takes the vendor's side from a recorded JSON; prints
per-tensor scale/zero-point agreement, IO attributes side by side and the outputs' agreement
in the vendor's quantisation steps. --record writes the vendor's side (and the summary) as a
small JSON fixture that tests compare against without the vendor package.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from .compare import match, output_steps, rknnrt_side, samples, single_layer_values, vendor_values

VENDOR_SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor_side.py")


def vendor_side(model: onnx.ModelProto, calib: list, test: list, vendor_python: str,
                algorithm: str, method: str, values: bool = True,
                analysis: bool = True) -> dict:  # fmt: skip
    """The vendor's per-tensor parameters, simulator outputs and (`values`) the int8 value of
    every tensor its simulator rounds, on the test input (its own process and folder); without
    `analysis` only the simulator's outputs (no parameters, no dumps)."""
    with tempfile.TemporaryDirectory(prefix="vendor_diff_") as work:
        onnx.save(model, os.path.join(work, "model.onnx"))
        lines = []
        for k, sample in enumerate(calib):
            paths = []
            for i, x in enumerate(sample):
                paths.append(os.path.join(work, f"c{k}_{i}.npy"))
                np.save(paths[-1], x)
            lines.append(" ".join(paths))
        with open(os.path.join(work, "dataset.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        tests = []
        for i, x in enumerate(test):
            tests.append(os.path.join(work, f"t_{i}.npy"))
            np.save(tests[-1], x)
        request = {"workdir": work, "platform": "rk3588", "algorithm": algorithm,
                   "method": method, "model": os.path.join(work, "model.onnx"),
                   "dataset": os.path.join(work, "dataset.txt"), "test_inputs": tests,
                   "values": values, "analysis": analysis}  # fmt: skip
        with open(os.path.join(work, "request.json"), "w") as f:
            json.dump(request, f)
        done = subprocess.run([vendor_python, VENDOR_SIDE, os.path.join(work, "request.json")],
                              capture_output=True, text=True, timeout=3600)  # fmt: skip
        if done.returncode != 0:
            log = open(os.path.join(work, "vendor.log")).read()[-2000:] if os.path.exists(
                os.path.join(work, "vendor.log")) else ""  # fmt: skip
            raise RuntimeError(f"vendor build failed: {error_line(done.stderr + log)}\n"
                               f"{done.stderr[-2000:]}\n{log}")  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])


def error_line(text: str) -> str:
    """The vendor's first error line (`E <call>: <message>`, colours removed); where the message
    is a traceback, `E <call>: ` and the exception's own line after it."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip() for line in text.splitlines()]
    for k, line in enumerate(lines):
        if not line.startswith("E ") or "rknn-toolkit2 version" in line:
            continue
        if not line.endswith("Traceback (most recent call last):"):
            return line
        exception = next((ln for ln in lines[k + 1:] if ln and not ln[0].isspace()), "")
        return line[: -len("Traceback (most recent call last):")] + exception
    return next((ln for ln in reversed(lines) if ln.strip()), "")[:300]


def diff(model: onnx.ModelProto, vendor: dict, calib: list, test: list,
         algorithm: str = "normal", method: str = "channel", **options) -> dict:  # fmt: skip
    valued = any("q" in v for v in vendor["tensors"].values())  # the vendor recorded values
    ours = rknnrt_side(model, calib, test, algorithm, method, values=valued, **options)
    recorded = vendor_values(ours["tensors"], vendor["tensors"])
    for name, q in single_layer_values(ours["quantized"], test, recorded).items():
        ours["tensors"][name]["q_single"] = q
    for name, r in single_layer_values(ours["quantized"], test, recorded, exact=True).items():
        ours["tensors"][name]["r_single"] = r
    names = [o.name for o in model.graph.output]
    vendor_outputs = vendor["outputs"]
    return {
        "tensors": match(ours["tensors"], vendor["tensors"]),
        "io": {
            name: {
                "rknnrt": ours["io"].get(name),
                "vendor": vendor["tensors"].get(f"{name}_int8", vendor["tensors"].get(name)),
            }
            for name in [i.name for i in model.graph.input] + names
        },  # fmt: skip
        "outputs": output_steps(ours["outputs"], vendor_outputs, vendor["tensors"], names),
    }


def report(result: dict) -> str:
    t = result["tensors"]
    lines = [f"tensors in both: {len(t['pairs'])}, scale (1e-4 rel) and zp agree: "
             f"{t['agreement']:.1%}; vendor only: {len(t['vendor_only'])}, rknnrt only: "
             f"{len(t['rknnrt_only'])}",
             f"calibrated ranges equal to the last float32 bit: {t['range_bit_equal']} of "
             f"{len(t['pairs'])} (the rest within {t['range_max_ulps']} float32 steps)",
             ]  # fmt: skip
    if t.get("valued"):
        lines.append(f"stored tensors bit-equal to the vendor simulator's: {t['bit_equal']} of "
                     f"{t['valued']} (max {t['max_steps']} steps); with float32 emulation "
                     f"instead of integer kernels: {t['bit_equal_emulated']} (max "
                     f"{t['max_steps_emulated']} steps)")  # fmt: skip
        lines.append(f"each computed from the vendor's own int8 inputs (single layer): "
                     f"{t['bit_equal_single']} of {t['valued_single']} bit-equal, max "
                     f"{t['max_steps_single']} steps; {t['differ_single']} elements differ, "
                     f"{t['off_tie_single']} of them more than 0.02 steps from a rounding tie "
                     "(a weight, bias or rule difference)")  # fmt: skip
    if t.get("stored_by_vendor_only"):
        lines.append(f"  rounded by the vendor, not stored by rknnrt: "
                     f"{', '.join(t['stored_by_vendor_only'])}")  # fmt: skip
    if t.get("stored_by_rknnrt_only"):
        lines.append(f"  stored by rknnrt, unrounded (fused) in the vendor's simulator: "
                     f"{', '.join(t['stored_by_rknnrt_only'])}")  # fmt: skip
    for name, p in t["pairs"].items():
        if p.get("equal", 1.0) < 1.0:
            lines.append(f"  {name:24s} values equal {p['equal']:.2%}, max {p['max_steps']} "
                         "steps")  # fmt: skip
    for name, p in t["pairs"].items():
        if not p["agree"]:
            lines.append(f"  {name:24s} rknnrt {p['rknnrt'][0]:.6g}/{p['rknnrt'][1]:4d}  "
                         f"vendor {p['vendor'][0]:.6g}/{p['vendor'][1]:4d}  "
                         f"({p['scale_rel']:.1%})")  # fmt: skip
    if t["vendor_only"]:
        lines.append(f"  vendor only: {', '.join(t['vendor_only'])}")
    if t["rknnrt_only"]:
        lines.append(f"  rknnrt only: {', '.join(t['rknnrt_only'])}")
    lines.append("IO attributes (rknnrt | vendor):")
    for name, sides in result["io"].items():
        vendor = {k: v for k, v in (sides["vendor"] or {}).items() if k not in ("q", "shape")}
        lines.append(f"  {name:12s} {sides['rknnrt']} | {vendor}")
    for o in result["outputs"]:
        extra = (f", within one step {o['within_one']:.2%}, max {o['max_steps']} steps"
                 if "max_steps" in o else "")  # fmt: skip
        lines.append(f"output {o['name']}: cosine {o['cosine']:.6f}{extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vendor_diff")
    parser.add_argument("model")
    parser.add_argument("--vendor-python")
    parser.add_argument("--recorded")
    parser.add_argument("--record")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--algorithm", default="normal")
    parser.add_argument("--method", default="channel")
    args = parser.parse_args(argv)
    model = onnx.load(args.model)
    data = samples(model, args.samples + 1, args.seed)
    calib, test = data[:-1], data[-1]
    if args.recorded:
        from .regenerate import expand

        with open(args.recorded) as f:
            vendor = expand(json.load(f)["vendor"], [o.name for o in model.graph.output])
    elif args.vendor_python:
        vendor = vendor_side(model, calib, test, args.vendor_python, args.algorithm, args.method)
    else:
        parser.error("give --vendor-python or --recorded")
    result = diff(model, vendor, calib, test, args.algorithm, args.method)
    print(report(result))
    if args.record:
        with open(args.record, "w") as f:
            json.dump({"model": os.path.basename(args.model), "samples": args.samples,
                       "seed": args.seed, "algorithm": args.algorithm, "method": args.method,
                       "vendor": vendor, "summary": result}, f, separators=(",", ":"))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
