"""Reading the vendor's accuracy_analysis snapshot (runs INSIDE the vendor's environment, numpy
only, imported as a plain module by vendor_side.py and arch_layers.py, which run as scripts):
which dump holds which tensor, and whether the simulator rounded a tensor to its int8 grid."""

from __future__ import annotations

import os

import numpy as np


def dump_files(snapshot: str) -> dict[str, str]:
    """Tensor name -> the path of its simulator dump (.npy) in the snapshot folder."""
    files = {}
    with open(os.path.join(snapshot, "map_name_to_file.txt")) as f:
        for line in f.read().splitlines()[2:]:  # (two header lines)
            fields = line.split()
            if len(fields) == 2:
                files[fields[0]] = os.path.join(
                    snapshot, "simulator", "npy", fields[1][: -len(".txt")] + ".npy"
                )
    return files


def on_grid(path: str, scale: float, zp: int) -> tuple[bool, np.ndarray]:
    """(the dump lies on the tensor's int8 grid, its int8 values): the dump's values need no
    quantisation when rounded; without rknnrt here, model/numerics.py's half-to-even rule is
    written out (np.round)."""
    grid = np.load(path).astype(np.float64) / scale + zp
    rounded = bool(np.abs(grid - np.round(grid)).max() < 1e-3)
    return rounded, np.clip(np.round(grid), -128, 127).astype(np.int8)
