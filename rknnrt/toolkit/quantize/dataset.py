"""Calibration samples at every shape set of a dynamic-shape model (the dataset file itself is
read by toolkit/dataset.py)."""

from __future__ import annotations

import numpy as np


def at_shape_sets(
    samples: list[list[np.ndarray]], shape_sets: list[list[list[int]]] | None
) -> list[list[np.ndarray]]:
    """int8 with dynamic_input calibrates on every shape set: each sample is used at each set's
    shapes, its 4-D inputs resampled (nearest neighbour) on H and W where they differ, so the
    ranges cover every shape the model will run at. Inputs whose other dims differ are used
    only at their own shape."""
    if not shape_sets:
        return samples
    out: list[list[np.ndarray]] = []
    for sample in samples:
        for shapes in shape_sets:
            resized = []
            for array, shape in zip(sample, shapes):
                if list(array.shape) == list(shape):
                    resized.append(array)
                elif array.ndim == 4 and list(array.shape[:2]) == list(shape[:2]):
                    rows = (np.arange(shape[2]) * array.shape[2] // shape[2]).astype(np.intp)
                    cols = (np.arange(shape[3]) * array.shape[3] // shape[3]).astype(np.intp)
                    resized.append(np.ascontiguousarray(array[:, :, rows][:, :, :, cols]))
                else:
                    break
            else:
                out.append(resized)
    return out or samples
