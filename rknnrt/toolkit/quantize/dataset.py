"""Calibration samples from the vendor's dataset file or from arrays."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx

from ..errors import ConversionError


def load_dataset(dataset: str | Iterable, inputs: list[onnx.ValueInfoProto]) -> list[list]:
    """The vendor's dataset file (one line per sample, space-separated .npy paths, arrays in
    the model's layout) or an iterable of arrays / tuples of arrays."""
    samples: list[list[np.ndarray]] = []
    if isinstance(dataset, str):
        try:
            with open(dataset) as f:
                lines = [line.split() for line in f if line.strip()]
        except OSError as exc:
            raise ConversionError(f"cannot read dataset {dataset!r}: {exc}") from None
        for k, paths in enumerate(lines):
            if len(paths) != len(inputs):
                raise ConversionError(
                    f"dataset line {k + 1} has {len(paths)} files for {len(inputs)} inputs"
                )
            try:
                samples.append([np.load(p, allow_pickle=False) for p in paths])
            except (OSError, ValueError) as exc:
                raise ConversionError(f"dataset line {k + 1}: {exc}") from None
    else:
        for item in dataset:
            samples.append(list(item) if isinstance(item, (list, tuple)) else [item])
    if not samples:
        raise ConversionError("the calibration dataset is empty")
    for k, sample in enumerate(samples):
        for vi, array in zip(inputs, sample):
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            array = np.asarray(array)
            if not _fits(array.shape, shape):
                if (
                    0 not in shape
                    and array.size == int(np.prod(shape))
                    and array.ndim == len(shape) - 1
                ):
                    array = array.reshape(shape)  # a sample without its batch dim
                else:
                    raise ConversionError(
                        f"dataset sample {k}: input '{vi.name}' has shape {list(array.shape)}, "
                        f"the model wants {_shown(shape)} (NCHW, the model's own layout)"
                    )
            sample[inputs.index(vi)] = array
    return samples


def _fits(actual: tuple[int, ...], wanted: list[int]) -> bool:
    """Same rank, and equal on every fixed dim (0: a dynamic dim, any size)."""
    return len(actual) == len(wanted) and all(w in (0, a) for a, w in zip(actual, wanted))


def _shown(shape: list[int]) -> list:
    return [d if d else "?" for d in shape]


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
