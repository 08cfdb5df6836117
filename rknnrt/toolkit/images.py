"""Image files for calibration datasets, `inference` and evaluation: decoded to RGB uint8 HWC.

Decoding goes through Pillow (the `images` extra): small, maintained, wheels for every platform,
and it reads the formats vision datasets use (JPEG, PNG, BMP). It is imported only when an image
is actually read, so the core install stays numpy + onnx + onnxruntime.
"""

from __future__ import annotations

import os

import numpy as np

from ..model import files

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


class ImageError(ValueError):
    """An image could not be read; the message names the file and the reason."""


def is_image_path(path: str | os.PathLike) -> bool:
    return os.fspath(path).lower().endswith(IMAGE_SUFFIXES)


def load_image(path: str | os.PathLike, size: tuple[int, int] | None = None,
               rgb2bgr: bool = False, gray: bool = False) -> np.ndarray:  # fmt: skip
    """Read an image as a (H, W, 3) uint8 RGB array (BGR with `rgb2bgr`), or (H, W, 1) with
    `gray` (for 1-channel inputs).

    `size` is (height, width): an image of another size is resized bilinearly, as the vendor's
    toolkit does for calibration images.
    """
    try:
        from PIL import Image
    except ImportError:
        raise ImageError("reading image files needs Pillow: pip install 'rknnrt[images]'") from None
    try:
        with files.open_regular(path) as f, Image.open(f) as im:
            im = im.convert("L" if gray else "RGB")
            if size is not None and (im.height, im.width) != tuple(size):
                im = im.resize((int(size[1]), int(size[0])), Image.BILINEAR)
            array = np.asarray(im, dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise ImageError(f"cannot read image {os.fspath(path)!r}: {exc}") from None
    if gray:
        return array[..., np.newaxis]
    return np.ascontiguousarray(array[..., ::-1]) if rgb2bgr else array
