"""Conv weights and BatchNorm factors on which the vendor's float32 folding and division give
other int8 weights than float64 would: the `bn_ties` fixture's, found by a seeded search.

    python -m tools.vendor_diff.tie_weights    (rewrites tests/quant/data/bn_ties_weights.json)

Each of the four output channels (3x3x3 weights, a BN scale and variance) quantises, under
rknnrt's rule (W * (scale / sqrt(var + eps)) in float32, then round(w / s) in float32), to int8
weights that differ in at least one value from each alternative: float64 folding, float64
division, or both. The values are stored as float32 bit patterns, so they round-trip exactly.
"""

from __future__ import annotations

import json
import os

import numpy as np

from rknnrt.model import numerics
from rknnrt.toolkit.quantize.rules import quantize_weight, weight_qparams

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "quant", "data",
                    "bn_ties_weights.json")  # fmt: skip
EPS = np.float32(1e-5)


def int8_weights(w: np.ndarray, scale: np.float32, var: np.float32, fold32: bool,
                 div32: bool) -> np.ndarray:  # fmt: skip
    """One channel's int8 weights under the chosen folding and division precision."""
    if fold32:
        folded = w * (scale / np.sqrt(var + EPS))
    else:
        factor = np.float64(scale) / np.sqrt(np.float64(var) + np.float64(EPS))
        folded = (w.astype(np.float64) * factor).astype(np.float32)
    folded = folded.reshape(1, -1)  # one output channel
    step, zp = weight_qparams(folded, 0, per_channel=True)
    if div32:  # rknnrt's rule
        return quantize_weight(folded, step, zp, 0).astype(np.int16).ravel()
    q = numerics.quantize(folded, step[0], int(zp[0]), division=numerics.FLOAT64_DIVISION)
    return q.astype(np.int16).ravel()


def search(count: int = 4, seed: int = 5) -> list[tuple[np.ndarray, np.float32, np.float32]]:
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        w = rng.normal(0, 0.3, 27).astype(np.float32)
        scale, var = np.float32(rng.uniform(0.5, 1.5)), np.float32(rng.uniform(0.5, 2.0))
        ours = int8_weights(w, scale, var, True, True)
        if all(np.any(int8_weights(w, scale, var, f, d) != ours)
               for f, d in ((True, False), (False, True), (False, False))):  # fmt: skip
            found.append((w, scale, var))
    return found


def load() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights [4, 3, 3, 3], BN scales [4], BN variances [4]), float32."""
    with open(PATH) as f:
        record = json.load(f)
    bits = {k: np.array(v, np.uint32).view(np.float32) for k, v in record.items()}
    return bits["w"].reshape(4, 3, 3, 3), bits["scale"], bits["var"]


def main() -> None:
    found = search()
    record = {
        "w": np.stack([w for w, _, _ in found]).view(np.uint32).ravel().tolist(),
        "scale": np.array([s for _, s, _ in found], np.float32).view(np.uint32).tolist(),
        "var": np.array([v for _, _, v in found], np.float32).view(np.uint32).tolist(),
    }
    with open(PATH, "w") as f:
        json.dump(record, f)
    print(f"wrote {os.path.normpath(PATH)}")


if __name__ == "__main__":
    main()
