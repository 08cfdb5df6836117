"""Print, per vendor fixture, how rknnrt's outputs agree with the vendor simulator's (the
figures of docs/vendor-rknn.md):

    PYTHONPATH=$PWD python tests/vendor/agreement_table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rknnrt.lite import RKNNLite  # noqa: E402
from tests.vendor.vendor_data import FIXTURES, REPORTED, STEMS, UNSUPPORTED, reference  # noqa: E402


def agreement(stem: str) -> list[str]:
    ref = reference(stem)
    rep = REPORTED[stem]
    lite = RKNNLite()
    if lite.load_rknn(str(FIXTURES / f"{stem}.rknn")) or lite.init_runtime():
        return ["refused"]
    n_in = len(rep["inputs"])
    cells = []
    outs = [
        lite.inference(inputs=[ref[f"in{i}"][s] for i in range(n_in)], data_format=["nchw"] * n_in)
        for s in range(ref["in0"].shape[0])
    ]
    lite.release()
    for k, name in enumerate(rep["outputs"]):
        got = np.concatenate([np.asarray(o[k], np.float64).ravel() for o in outs])
        want = ref[f"out{k}"].astype(np.float64).ravel()
        if rep["dtype_changed"].get(name) == "int8":
            steps = np.round(np.abs(got - want) / rep["io_quant"][name]["scale"], 3)
            cells.append(f"{name}: int8 {np.mean(steps == 0):.2%} equal, "
                         f"{np.mean(steps <= 1):.2%} <= 1 step, max {steps.max():.0f}")  # fmt: skip
        else:
            cos = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
            cells.append(f"{name}: fp16 cosine {cos:.7f}, max abs {np.abs(got - want).max():.2g}")
    return cells


def main() -> int:
    for stem in STEMS:
        cells = ["refused: " + UNSUPPORTED[stem]] if stem in UNSUPPORTED else agreement(stem)
        print(f"{stem:24s} " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
