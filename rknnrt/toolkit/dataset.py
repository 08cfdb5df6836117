"""Calibration datasets: the vendor's dataset file, or an iterable of arrays (rknnrt extension).

A dataset file has one sample per line: one path per model input, separated by spaces. A path
is an image (jpg, jpeg, png, bmp: decoded to RGB, BGR with `quant_img_RGB2BGR`, resized to the
input's size with a warning, as the vendor does) or a `.npy` file in the model's own layout
(NCHW for 4-D inputs; an unambiguous NHWC array is accepted too). A relative path is looked up
next to the dataset file first, then in the working directory. Every error names the file and
the line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..model import files
from . import images
from .errors import ConversionError


@dataclass(frozen=True)
class InputSpec:
    """One model input as the dataset must fill it: its name and shape in the model layout."""

    name: str
    shape: tuple[int, ...]


def resolve(path: str, base_dir: str) -> str:
    """`path` next to the dataset file when it is there, else as given (working directory)."""
    if os.path.isabs(path):
        return path
    beside = os.path.join(base_dir, path)
    return beside if os.path.exists(beside) else path


def to_model_layout(array: np.ndarray, spec: InputSpec) -> np.ndarray:
    """An array for one input in the model's layout: a missing batch dim is added, and a 4-D
    NHWC array is transposed to NCHW when only that reading fits."""
    shape = tuple(spec.shape)
    if array.ndim == len(shape) - 1 and array.size == int(np.prod(shape)):
        array = array[np.newaxis]
    if array.shape == shape:
        return array
    if len(shape) == 4 and array.ndim == 4:
        n, c, h, w = shape
        if array.shape == (n, h, w, c):
            return np.ascontiguousarray(array.transpose(0, 3, 1, 2))
    raise ValueError(f"shape {list(array.shape)} does not fit input '{spec.name}' "
                     f"{list(shape)} (the model's layout, NCHW for 4-D)")  # fmt: skip


def read_image(path: str, spec: InputSpec, rgb2bgr: bool,
               warn: Callable[[str], None]) -> np.ndarray:  # fmt: skip
    """An image file as a (1, C, H, W) float32 array for a 4-D NCHW input (RGB, or gray for a
    1-channel input)."""
    if len(spec.shape) != 4 or spec.shape[1] not in (1, 3):
        raise ValueError(f"input '{spec.name}' {list(spec.shape)} is not an image input (1 or "
                         "3 channels, NCHW); give a .npy file")  # fmt: skip
    h, w, gray = spec.shape[2], spec.shape[3], spec.shape[1] == 1
    try:
        raw = images.load_image(path, None, rgb2bgr, gray)
        if raw.shape[:2] != (h, w):
            warn(f"image {path!r} is {raw.shape[1]}x{raw.shape[0]}, input '{spec.name}' wants "
                 f"{w}x{h}: resized (bilinear)")  # fmt: skip
            raw = images.load_image(path, (h, w), rgb2bgr, gray)
    except images.ImageError as exc:
        raise ValueError(str(exc)) from None
    return np.ascontiguousarray(raw.transpose(2, 0, 1)[np.newaxis], np.float32)


def read_file_sample(paths: Sequence[str], specs: Sequence[InputSpec], rgb2bgr: Sequence[bool],
                     warn: Callable[[str], None]) -> list[np.ndarray]:  # fmt: skip
    """One sample from files (images or .npy), one per input, in the model's layout."""
    sample = []
    for k, (path, spec) in enumerate(zip(paths, specs)):
        if images.is_image_path(path):
            sample.append(read_image(path, spec, rgb2bgr[k] if k < len(rgb2bgr) else False, warn))
            continue
        try:
            with files.open_regular(path) as f:  # never a FIFO or device: build would hang
                array = np.load(f, allow_pickle=False)
        except FileNotFoundError:
            raise ValueError(f"file {path!r} not found") from None
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path!r} is not a .npy array or an image (jpg, png, bmp): "
                             f"{exc}") from None  # fmt: skip
        sample.append(to_model_layout(array, spec))
    return sample


def _warn(message: str) -> None:
    sys.stderr.write(f"W {message}\n")


def load(dataset: str | os.PathLike | Iterable, specs: Sequence[InputSpec],
         rgb2bgr: Sequence[bool] = (), warn: Callable[[str], None] = _warn,
         limit: int | None = None) -> list[list[np.ndarray]]:  # fmt: skip
    """Every sample (a list of arrays, one per input, model layout, not yet normalised)."""
    samples: list[list[np.ndarray]] = []
    if isinstance(dataset, (str, os.PathLike)):
        name = os.fspath(dataset)
        try:
            with files.open_regular(name, "r") as f:
                lines = [(n + 1, line.split()) for n, line in enumerate(f) if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise ConversionError(f"cannot read dataset file {name!r}: {exc}") from None
        base = os.path.dirname(os.path.abspath(name))
        resized: list[str] = []
        for number, paths in lines[:limit]:
            where = f"dataset line {number} ({name})"
            if len(paths) != len(specs):
                raise ConversionError(f"dataset line {number} has {len(paths)} files for "
                                      f"{len(specs)} inputs ({name})")  # fmt: skip
            try:
                samples.append(read_file_sample([resolve(p, base) for p in paths], specs,
                                                rgb2bgr, resized.append))  # fmt: skip
            except ValueError as exc:
                raise ConversionError(f"{where}: {exc}") from None
        if resized:
            warn(f"{len(resized)} dataset image(s) resized to the input size; first: "
                 f"{resized[0]}")  # fmt: skip
    else:
        for index, item in enumerate(dataset):
            if limit is not None and index >= limit:
                break
            arrays = list(item) if isinstance(item, (list, tuple)) else [item]
            if len(arrays) != len(specs):
                raise ConversionError(f"dataset sample {index}: {len(arrays)} arrays for "
                                      f"{len(specs)} inputs")  # fmt: skip
            try:
                samples.append([to_model_layout(np.asarray(a), s) for a, s in zip(arrays, specs)])
            except ValueError as exc:
                raise ConversionError(f"dataset sample {index}: {exc}") from None
    if not samples:
        raise ConversionError("the calibration dataset is empty")
    return samples


def normalise(sample: Sequence[np.ndarray], means: list | None, stds: list | None) -> list:
    """(x - mean) / std per channel of each 4-D input, as the runtime applies them."""
    out = []
    for k, array in enumerate(sample):
        x = np.asarray(array, np.float32)
        if x.ndim == 4:
            mean = means[k] if means is not None and k < len(means) else None
            std = stds[k] if stds is not None and k < len(stds) else None
            if mean is not None:
                x = x - np.asarray(mean, np.float32).reshape(1, -1, 1, 1)
            if std is not None:
                x = x / np.asarray(std, np.float32).reshape(1, -1, 1, 1)
        out.append(x)
    return out
