"""numpy reference of the RGA behaviour rknnrt's librga stand-in documents (docs/c-library.md,
"RGA"): scale-up bilinear and scale-down area average per axis (pixel centres aligned),
BT.601 limited-range colour conversion, 4:2:0 chroma as the mean of each 2x2 block."""

from __future__ import annotations

import numpy as np

RGB2YUV = np.array(
    [[0.257, 0.504, 0.098], [-0.148, -0.291, 0.439], [0.439, -0.368, -0.071]], np.float64
)
YUV_OFFSET = np.array([16.0, 128.0, 128.0])


def _axis_matrix(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] weights of one axis."""
    m = np.zeros((n_out, n_in))
    if n_in == n_out:
        return np.eye(n_in)
    scale = n_in / n_out
    for o in range(n_out):
        if n_out > n_in:  # bilinear
            s = min(max((o + 0.5) * scale - 0.5, 0.0), n_in - 1.0)
            i0 = int(np.floor(s))
            f = s - i0
            m[o, i0] += 1 - f
            if i0 + 1 < n_in:
                m[o, i0 + 1] += f
            else:
                m[o, i0] = 1.0
        else:  # area average
            lo, hi = o * scale, (o + 1) * scale
            for i in range(int(np.floor(lo)), min(int(np.ceil(hi)), n_in)):
                m[o, i] = (min(hi, i + 1) - max(lo, i)) / scale
    return m


def resize(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """[H, W, C] -> float64 [height, width, C]."""
    my, mx = _axis_matrix(img.shape[0], height), _axis_matrix(img.shape[1], width)
    rows = np.tensordot(my, img.astype(np.float64), axes=(1, 0))  # [height, W, C]
    return np.tensordot(rows, mx, axes=(1, 1)).transpose(0, 2, 1)  # [height, width, C]


def to_u8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(x + 0.5), 0, 255).astype(np.uint8)


def rgb_to_yuv(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(np.float64) @ RGB2YUV.T + YUV_OFFSET


def yuv_to_rgb(yuv: np.ndarray) -> np.ndarray:
    return (yuv.astype(np.float64) - YUV_OFFSET) @ np.linalg.inv(RGB2YUV).T


def yuv420(rgb: np.ndarray, layout: str) -> np.ndarray:
    """RGB [H, W, 3] -> bytes of an NV12 / NV21 / I420 frame."""
    yuv = rgb_to_yuv(rgb)
    h, w = rgb.shape[:2]
    chroma = yuv[:, :, 1:].reshape(h // 2, 2, w // 2, 2, 2).mean(axis=(1, 3))
    u, v = to_u8(chroma[..., 0]), to_u8(chroma[..., 1])
    y = to_u8(yuv[:, :, 0]).reshape(-1)
    if layout == "i420":
        return np.concatenate([y, u.reshape(-1), v.reshape(-1)])
    first, second = (u, v) if layout == "nv12" else (v, u)
    return np.concatenate([y, np.stack([first, second], -1).reshape(-1)])


def nv12_to_rgb(frame: np.ndarray, h: int, w: int) -> np.ndarray:
    y = frame[: h * w].reshape(h, w).astype(np.float64)
    uv = frame[h * w :].reshape(h // 2, w // 2, 2).astype(np.float64)
    uv = uv.repeat(2, axis=0).repeat(2, axis=1)  # nearest chroma
    return yuv_to_rgb(np.dstack([y, uv]))
