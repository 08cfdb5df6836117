"""Regenerate tests/quant/data/vendor_*.json: the vendor's side of the differential measurement
for the small fixture models (needs the vendor's toolkit in its own environment).

usage: PYTHONPATH=. python -m tools.vendor_diff.regenerate /work/vendor_env/bin/python [NAME ...]
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from rknnrt.model import numerics

from .__main__ import diff, vendor_side
from .compare import samples
from .fixtures import FIXTURES

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "quant", "data")
SAMPLES, SEED = 16, 0


def compact(vendor: dict, names: list[str]) -> dict:
    """Vendor outputs as their int8 values where the vendor's output is int8, else float16
    precision decimals (small JSON); expand() restores them."""
    outs = []
    for name, values in zip(names, vendor["outputs"]):
        qp = vendor["tensors"].get(f"{name}_int8", {})
        if "scale" in qp:
            q = numerics.quantize(values, qp["scale"], qp["zp"], division=numerics.FLOAT64_DIVISION)
            outs.append({"int8": q.astype(int).tolist()})
        else:
            outs.append({"float": [float(f"{v:.5g}") for v in values]})
    return {"tensors": vendor["tensors"], "outputs": outs}


def expand(vendor: dict, names: list[str]) -> dict:
    outs = []
    for name, packed in zip(names, vendor["outputs"]):
        if isinstance(packed, dict) and "int8" in packed:
            qp = vendor["tensors"][f"{name}_int8"]
            outs.append(
                numerics.dequantize(
                    packed["int8"], qp["scale"], qp["zp"], precision=np.float64
                ).tolist()
            )
        else:
            outs.append(packed["float"] if isinstance(packed, dict) else packed)
    return {"tensors": vendor["tensors"], "outputs": outs}


def main(vendor_python: str, only: list[str] | None = None) -> None:
    os.makedirs(OUT, exist_ok=True)
    for name, make in FIXTURES.items():
        if only and name not in only:
            continue
        model = make()
        data = samples(model, SAMPLES + 1, SEED)
        names = [o.name for o in model.graph.output]
        # the int8 values of every tensor for the small models (SqueezeNet's would be 5 MB)
        vendor = compact(vendor_side(model, data[:-1], data[-1], vendor_python, "normal",
                                     "channel", values=not name.startswith("light_")),
                         names)  # fmt: skip
        result = diff(model, expand(vendor, names), data[:-1], data[-1])
        record = {"model": name, "samples": SAMPLES, "seed": SEED, "vendor": vendor,
                  "at_recording": {"agreement": result["tensors"]["agreement"],
                                   "outputs": result["outputs"]}}  # fmt: skip
        with open(os.path.join(OUT, f"vendor_{name}.json"), "w") as f:
            json.dump(record, f, separators=(",", ":"))
        print(
            name,
            f"agreement {result['tensors']['agreement']:.1%}",
            [(o["name"], round(o["cosine"], 6), o.get("max_steps")) for o in result["outputs"]],
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
