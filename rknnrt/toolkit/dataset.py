"""Calibration datasets: the vendor's dataset file, or an iterable of arrays (rknnrt extension).

A dataset file has one sample per line: one path per model input, separated by spaces. A path
is an image (jpg, jpeg, png, bmp: decoded to RGB, BGR with `quant_img_RGB2BGR`, resized to the
input's size with a warning, as the vendor does) or a `.npy` file in the model's own layout
(NCHW for 4-D inputs; an unambiguous NHWC array is accepted too). A relative path is looked up
next to the dataset file first, then in the working directory. Every error names the file and
the line.

Samples are read one at a time, when calibration (or any other pass) uses them (`Samples`), so
a dataset of any length takes the memory of one sample; what is kept per sample is its line's
offset in the dataset file.
"""

from __future__ import annotations

import itertools
import locale
import os
import re
import sys
from array import array as int_array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

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


class Samples(Sequence):
    """Samples read when they are used: `read(k)` gives sample k. Memory holds one sample at
    a time whatever the dataset's length (each pass reads the files again); a slice is a view
    and `map` transforms each sample as it is read. `after_pass` runs when an iteration has
    gone through every sample (the resize warning)."""

    def __init__(self, read: Callable[[int], list[np.ndarray]], indices: range,
                 after_pass: Callable[[], None] | None = None) -> None:  # fmt: skip
        self._read, self._indices, self._after_pass = read, indices, after_pass

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, k):  # type: ignore[override]  # an int gives a sample, a slice a view
        if isinstance(k, slice):
            return Samples(self._read, self._indices[k])
        return self._read(self._indices[k])

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        for k in self._indices:
            yield self._read(k)
        if self._after_pass is not None:
            self._after_pass()

    def map(self, transform: Callable[[list[np.ndarray]], list[np.ndarray]]) -> Samples:
        read = self._read
        return Samples(lambda k: transform(read(k)), self._indices, self._after_pass)


def as_samples(samples: Sequence[list[np.ndarray]]) -> Samples:
    """Any sequence of samples as `Samples` (itself when it is one)."""
    if isinstance(samples, Samples):
        return samples
    return Samples(samples.__getitem__, range(len(samples)))


def reiterable(dataset: Any, limit: int | None = None) -> Any:
    """A dataset that can be read more than once: a path or a sequence as it is; another
    iterable (a generator: it can be read once only) is gathered into a list."""
    if isinstance(dataset, (str, os.PathLike, Sequence, np.ndarray)):
        return dataset
    return list(itertools.islice(dataset, limit))


_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n|$)")  # a line as text mode reads one


def _line_offsets(name: str, inputs: int, limit: int | None) -> tuple[int_array, int_array, str]:
    """(byte offset, line number) of every non-blank line of a dataset file, and its encoding:
    16 bytes per sample, whatever the paths' length. Lines end as in text mode (LF, CR LF or
    CR); a line with a wrong number of paths is refused here, before any file is read."""
    encoding = locale.getpreferredencoding(False)
    offsets, numbers = int_array("q"), int_array("q")
    number, offset = 0, 0
    try:
        with files.open_regular(name, "rb") as f:
            for raw in f:
                for line in _LINE.finditer(raw):
                    if not line.group():
                        continue  # the empty match at the end of the chunk
                    number += 1
                    paths = line.group().decode(encoding).split()
                    if not paths or (limit is not None and len(offsets) >= limit):
                        continue
                    if len(paths) != inputs:
                        raise ConversionError(f"dataset line {number} has {len(paths)} files "
                                              f"for {inputs} inputs ({name})")  # fmt: skip
                    offsets.append(offset + line.start())
                    numbers.append(number)
                offset += len(raw)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"cannot read dataset file {name!r}: {exc}") from None
    return offsets, numbers, encoding


def _file_samples(name: str, specs: Sequence[InputSpec], rgb2bgr: Sequence[bool],
                  warn: Callable[[str], None], limit: int | None) -> Samples:  # fmt: skip
    offsets, numbers, encoding = _line_offsets(name, len(specs), limit)
    base = os.path.dirname(os.path.abspath(name))
    resized: dict[int, str] = {}  # sample -> the first resize message (one warning per dataset)
    warned = False

    def read(k: int) -> list[np.ndarray]:
        try:
            with files.open_regular(name, "rb") as f:
                f.seek(offsets[k])
                text = _LINE.match(f.readline()).group().decode(encoding)  # type: ignore[union-attr]
        except (OSError, UnicodeDecodeError) as exc:
            raise ConversionError(f"cannot read dataset file {name!r}: {exc}") from None
        messages: list[str] = []
        try:
            sample = read_file_sample([resolve(p, base) for p in text.split()], specs, rgb2bgr,
                                      messages.append)  # fmt: skip
        except ValueError as exc:
            raise ConversionError(f"dataset line {numbers[k]} ({name}): {exc}") from None
        if messages:
            resized.setdefault(k, messages[0])
        return sample

    def after_pass() -> None:
        nonlocal warned
        if resized and not warned:
            warned = True
            warn(f"{len(resized)} dataset image(s) resized to the input size; first: "
                 f"{resized[min(resized)]}")  # fmt: skip

    return Samples(read, range(len(offsets)), after_pass)


def _array_samples(items: Any, specs: Sequence[InputSpec], limit: int | None) -> Samples:
    def read(k: int) -> list[np.ndarray]:
        item = items[k]
        arrays = list(item) if isinstance(item, (list, tuple)) else [item]
        if len(arrays) != len(specs):
            raise ConversionError(f"dataset sample {k}: {len(arrays)} arrays for "
                                  f"{len(specs)} inputs")  # fmt: skip
        try:
            return [to_model_layout(np.asarray(a), s) for a, s in zip(arrays, specs)]
        except ValueError as exc:
            raise ConversionError(f"dataset sample {k}: {exc}") from None

    count = len(items) if limit is None else min(len(items), max(int(limit), 0))
    return Samples(read, range(count))


def open_dataset(dataset: str | os.PathLike | Iterable, specs: Sequence[InputSpec],
                 rgb2bgr: Sequence[bool] = (), warn: Callable[[str], None] = _warn,
                 limit: int | None = None) -> Samples:  # fmt: skip
    """The samples (a list of arrays, one per input, model layout, not yet normalised), each
    read when it is used: a dataset file's lines are checked now, its files when read."""
    if isinstance(dataset, (str, os.PathLike)):
        samples = _file_samples(os.fspath(dataset), specs, rgb2bgr, warn, limit)
    else:
        samples = _array_samples(reiterable(dataset, limit), specs, limit)
    if not len(samples):
        raise ConversionError("the calibration dataset is empty")
    return samples


def load(dataset: str | os.PathLike | Iterable, specs: Sequence[InputSpec],
         rgb2bgr: Sequence[bool] = (), warn: Callable[[str], None] = _warn,
         limit: int | None = None) -> list[list[np.ndarray]]:  # fmt: skip
    """Every sample in a list (what open_dataset streams)."""
    return list(open_dataset(dataset, specs, rgb2bgr, warn, limit))


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
