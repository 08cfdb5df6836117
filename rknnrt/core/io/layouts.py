"""Tensor layouts as tiny pure functions: shapes, strides and conversions to and from NCHW.

NC1HWC2 stores, from the lowest address up: C2 -> W -> H -> C1 -> N, with C1 = ceil(C / C2)
and the padding channels of the last block zero (facts §5.2).
"""

from __future__ import annotations

import numpy as np

NATIVE_NHWC_CHANNELS = (1, 3, 4)  # 4-D inputs with these C stay NHWC natively (UG 5.2.3)


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def nchw_to_nhwc_dims(shape: list[int]) -> list[int]:
    n, c, h, w = shape
    return [n, h, w, c]


def nhwc_to_nchw_dims(dims: list[int]) -> list[int]:
    n, h, w, c = dims
    return [n, c, h, w]


def nc1hwc2_dims(shape: list[int], c2: int) -> list[int]:
    """[N, C1, H, W, C2] for an NCHW shape."""
    n, c, h, w = shape
    return [n, -(-c // c2), h, w, c2]


def native_input_format(shape: list[int]) -> str:
    """The NPU's own layout for a model input given in NCHW (or UNDEFINED for other ranks)."""
    if len(shape) != 4:
        return "UNDEFINED"
    return "NHWC" if shape[1] in NATIVE_NHWC_CHANNELS else "NC1HWC2"


def native_output_format(shape: list[int]) -> str:
    return "NC1HWC2" if len(shape) == 4 else "UNDEFINED"


def nhwc_to_nchw(x: np.ndarray) -> np.ndarray:
    return x.transpose(0, 3, 1, 2)


def nchw_to_nhwc(x: np.ndarray) -> np.ndarray:
    return x.transpose(0, 2, 3, 1)


def nc1hwc2_to_nchw(x: np.ndarray, channels: int) -> np.ndarray:
    """A view of an [N, C1, H, W, C2] array as NCHW with the padding channels dropped."""
    n, c1, h, w, c2 = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c2, h, w)[:, :channels]


def nchw_to_nc1hwc2(x: np.ndarray, c2: int) -> np.ndarray:
    """A new [N, C1, H, W, C2] array; padding channels are zero."""
    n, c, h, w = x.shape
    c1 = -(-c // c2)
    out = np.zeros((n, c1 * c2, h, w), dtype=x.dtype)
    out[:, :c] = x
    return np.ascontiguousarray(out.reshape(n, c1, c2, h, w).transpose(0, 1, 3, 4, 2))


def strip_w_stride(x: np.ndarray, width: int) -> np.ndarray:
    """A view of an [N, H, w_stride, C] array without the padding columns."""
    return x[:, :, :width, :]


# -- sizes and strides ------------------------------------------------------------------------
def output_dims(shape: list[int], fmt: str, c2: int) -> list[int]:
    """The dims of an output of model shape `shape` (NCHW for 4-D) stored in `fmt`."""
    if len(shape) == 4 and fmt == "NHWC":
        return nchw_to_nhwc_dims(shape)
    if len(shape) == 4 and fmt == "NC1HWC2":
        return nc1hwc2_dims(shape, c2)
    return list(shape)


def w_stride(width: int, width_align_bytes: int, itemsize: int) -> int:
    """A native NHWC input's row pitch in pixels: the width aligned to the platform's alignment
    in bytes over the element size (16 B: int8 16 px, float16 8 px; vendor files' field 20)."""
    return align_up(width, max(1, width_align_bytes // itemsize))


def size_with_stride(dims_nhwc: list[int], stride: int, itemsize: int) -> int:
    """Bytes of an [N, H, W, C] tensor whose rows are `stride` pixels apart."""
    n, h, _, c = dims_nhwc
    return n * h * stride * c * itemsize


def nhwc_bytes(shape: tuple[int, ...], itemsize: int, stride: int = 0, h_stride: int = 0) -> int:
    """Bytes an NHWC buffer of a model input of NCHW `shape` must hold: rows may be padded to
    `stride` pixels and, for multi-batch inputs, batches to `h_stride` rows."""
    n, c, h, w = shape
    pitch = max(stride, w) * c * itemsize
    return ((n - 1) * max(h_stride, h) + h) * pitch


def padded_nhwc_view(data: np.ndarray, shape: tuple[int, ...], stride: int,
                     h_stride: int) -> np.ndarray:  # fmt: skip
    """An [N, H, W, C] view of NHWC bytes with padded rows and/or batches (see nhwc_bytes)."""
    n, c, h, w = shape
    if not (stride > w or (h_stride > h and n > 1)):
        return data.reshape(n, h, w, c)
    item = data.itemsize
    pitch = max(stride, w) * c * item
    return np.lib.stride_tricks.as_strided(
        data, (n, h, w, c), (max(h_stride, h) * pitch, pitch, c * item, item)
    )
