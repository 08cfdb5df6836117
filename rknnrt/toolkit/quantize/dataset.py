"""Calibration samples at every shape set of a dynamic-shape model (the dataset file itself is
read by toolkit/dataset.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

Sample = list[np.ndarray]


def at_one_sample(sample: Sample, shape_sets: list[list[list[int]]]) -> list[Sample]:
    """`sample` at each shape set it can be used at: its 4-D inputs resampled (nearest
    neighbour) on H and W where they differ; a set where another dim differs is skipped."""
    out: list[Sample] = []
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
    return out


class _AtShapeSets(Sequence):
    """Each sample at each shape set, made as the samples are read (a dataset is streamed:
    nothing is kept). Every sample of a dataset has the same shapes, so each gives the same
    number of variants as the first."""

    def __init__(self, samples: Sequence[Sample], shape_sets: list[list[list[int]]],
                 per_sample: int) -> None:  # fmt: skip
        self.samples, self.shape_sets, self.per_sample = samples, shape_sets, per_sample

    def __len__(self) -> int:
        return len(self.samples) * self.per_sample

    def __getitem__(self, k):  # type: ignore[override]  # an int only: calibration iterates
        index, variant = divmod(range(len(self))[k], self.per_sample)
        return at_one_sample(self.samples[index], self.shape_sets)[variant]

    def __iter__(self) -> Iterator[Sample]:
        for sample in self.samples:
            yield from at_one_sample(sample, self.shape_sets)


def at_shape_sets(
    samples: Sequence[Sample], shape_sets: list[list[list[int]]] | None
) -> Sequence[Sample]:
    """int8 with dynamic_input calibrates on every shape set: each sample is used at each set's
    shapes, its 4-D inputs resampled (nearest neighbour) on H and W where they differ, so the
    ranges cover every shape the model will run at. Inputs whose other dims differ are used
    only at their own shape; samples that fit no set are used as they are."""
    if not shape_sets or not len(samples):
        return samples
    per_sample = len(at_one_sample(samples[0], shape_sets))
    return _AtShapeSets(samples, shape_sets, per_sample) if per_sample else samples
