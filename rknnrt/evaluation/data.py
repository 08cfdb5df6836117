"""Evaluation datasets: which samples there are (listed once, in the driver) and how one sample
becomes the model's inputs (decoded in whichever process evaluates it).

A dataset is a folder (every image or .npy file in it, sorted by name) or a list file (one
sample per line: space-separated files, one per model input, relative paths resolved against
the list's folder). Labels come from a labels file: `<sample name> <class index>` per line,
the sample name being its first file's name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model import files
from ..toolkit.images import is_image_path, load_image

SAMPLE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".npy")


class DatasetError(ValueError):
    """A dataset, list or labels file that cannot be used; the message says why."""


@dataclass(frozen=True)
class Sample:
    index: int
    name: str
    paths: tuple[str, ...]
    label: int | None = None


def list_samples(
    data: str | os.PathLike, labels: str | os.PathLike | None = None, limit: int | None = None
) -> list[Sample]:
    """The samples of a folder or list file, in a fixed order (the order of every report)."""
    data = os.fspath(data)
    if os.path.isdir(data):
        names = sorted(n for n in os.listdir(data) if n.lower().endswith(SAMPLE_SUFFIXES))
        groups = [(os.path.join(data, n),) for n in names]
    elif os.path.isfile(data):
        base = os.path.dirname(os.path.abspath(data))
        with files.open_regular(data, "r") as f:
            groups = [
                tuple(p if os.path.isabs(p) else os.path.join(base, p) for p in line.split())
                for line in f
                if line.strip() and not line.lstrip().startswith("#")
            ]
    else:
        raise DatasetError(f"dataset {data!r} is neither a folder nor a list file")
    if limit is not None:
        groups = groups[: max(int(limit), 0)]
    if not groups:
        raise DatasetError(f"dataset {data!r} holds no samples ({', '.join(SAMPLE_SUFFIXES)})")
    label_of = read_labels(labels) if labels is not None else {}
    samples = []
    for k, paths in enumerate(groups):
        name = os.path.basename(paths[0])
        if labels is not None and name not in label_of:
            raise DatasetError(f"labels file {os.fspath(labels)!r} has no label for {name!r}")
        samples.append(Sample(k, name, paths, label_of.get(name)))
    return samples


def read_labels(path: str | os.PathLike) -> dict[str, int]:
    labels: dict[str, int] = {}
    try:
        with files.open_regular(path, "r") as f:
            for number, line in enumerate(f, 1):
                fields = line.split()
                if not fields or fields[0].startswith("#"):
                    continue
                if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
                    raise DatasetError(f"{os.fspath(path)}:{number}: want '<name> <class index>'")
                labels[fields[0]] = int(fields[1])
    except OSError as exc:
        raise DatasetError(f"cannot read labels file {os.fspath(path)!r}: {exc}") from None
    return labels


@dataclass(frozen=True)
class InputSpec:
    """One model input as the runtime reports it: NHWC dims for a 4-D image input."""

    name: str
    dims: tuple[int, ...]
    nhwc: bool


def decode(sample: Sample, inputs: Sequence[InputSpec]) -> list[np.ndarray]:
    """The model's inputs for one sample, as a board application feeds them: images decoded to
    RGB uint8 (resized to the input as for calibration), NHWC with the batch dim; .npy files
    as stored (NHWC, or NCHW which `to_nchw` recognises)."""
    if len(sample.paths) != len(inputs):
        raise DatasetError(
            f"sample {sample.name!r} has {len(sample.paths)} files for {len(inputs)} model inputs"
        )
    arrays = []
    for path, spec in zip(sample.paths, inputs):
        if is_image_path(path):
            if not spec.nhwc:
                raise DatasetError(f"input {spec.name!r} is not a 4-D image input: use .npy")
            _, h, w, _ = spec.dims
            array = load_image(path, size=(h, w))[None]
        elif path.lower().endswith(".npy"):
            try:
                with files.open_regular(path) as f:
                    array = np.load(f, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise DatasetError(f"cannot read {path!r}: {exc}") from None
            if array.size == int(np.prod(spec.dims)) and array.ndim == len(spec.dims) - 1:
                array = array[None]
        else:
            raise DatasetError(f"{path!r}: not an image or .npy file")
        arrays.append(np.ascontiguousarray(array))
    return arrays


def to_nchw(array: np.ndarray, spec: InputSpec) -> np.ndarray:
    """An input as the float reference model takes it (ONNX layout: NCHW for 4-D)."""
    if spec.nhwc and tuple(array.shape) == spec.dims:
        return np.ascontiguousarray(array.transpose(0, 3, 1, 2))
    return array
