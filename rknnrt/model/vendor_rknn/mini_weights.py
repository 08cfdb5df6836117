"""Weight packings of the mini format (rv1103/rv1106 "RKNPU t3", rv1103b/rv1106b "RKNPU w1")
that v6 files do not use.

Found from toolkit 2.5.0 builds (docs/vendor-rknn.md, "The mini format"); the other
convolutions follow the generic tiles of weights.py.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ..errors import VendorFormatError


def unpack_depthwise(raw: memoryview, native: list[int], channels: int, kh: int, kw: int,
                     name: str, split: bool = False) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """int8 depthwise weights: per tile of the native shape (6-tuples [1, IC1, KH, KW, 1,
    IC2]; tiles of zero elements are placeholders), per IC1 step, [KH][KW][IC2][w, -zw] byte
    pairs (rv1106; `split`, rv1106b: [KH][KW] of IC2 weights then their IC2 -zw) (-zw = 128
    wraps to -128), tile after tile; 32 bytes follow (unused). Returns the weights [channels,
    1, kh, kw] and the weight zero points [channels]."""
    data = np.frombuffer(raw, np.int8)
    tiles = [native[k : k + 6] for k in range(0, len(native), 6)] if native and \
        len(native) % 6 == 0 else []  # fmt: skip
    sizes = [t[5] for t in tiles if prod(t) for _ in range(t[1])]
    if not sizes or sum(sizes) < channels or any(t[2:4] != [kh, kw] for t in tiles if prod(t)) \
            or data.size < kh * kw * sum(sizes) * 2:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: rv1106 int8 depthwise weight '{name}' packing {native} "
            "is not decoded"
        )
    qs, zws, at = [], [], 0
    for c_pad in sizes:
        part = data[at : at + kh * kw * c_pad * 2].reshape(kh, kw, c_pad, 2) if not split \
            else data[at : at + kh * kw * c_pad * 2].reshape(kh, kw, 2, c_pad).swapaxes(2, 3)
        qs.append(part[..., 0].transpose(2, 0, 1))
        zws.append(part[0, 0, :, 1])
        at += kh * kw * c_pad * 2
    q = np.concatenate(qs)[:channels, None]
    minus_zw = np.concatenate(zws)[:channels].astype(np.float64)
    minus_zw[minus_zw == -128] = 128  # zw is in [-128, 127]
    return np.ascontiguousarray(q), -minus_zw


W1_BLOCK = 8  # output channels per rv1106b bias block


def w1_bias_blob(raw: memoryview, channels: int, name: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """rv1106b's int8 bias blob: per block of 8 output channels [4 x i32 A | 4 x u16 C |
    8 x i8 B | 4 x i32 A | 4 x u16 C] (56 bytes; B = -zw of the block's 8 channels, between its
    two halves; 128 wraps to -128). Returns A, B, C per channel (int8.py's _bias_blob for the
    other formats)."""
    blocks = -(-channels // W1_BLOCK)
    data = np.frombuffer(raw, np.uint8)
    if data.size < blocks * 56:
        raise VendorFormatError(f"vendor .rknn model: int8 bias '{name}' is too short")
    blob = data[: blocks * 56].reshape(blocks, 56)
    halves = [blob[:, 0:24], blob[:, 32:56]]  # [A x 4 | C x 4] each
    a = np.stack([h[:, :16].copy().view("<i4") for h in halves], 1).reshape(-1)
    c = np.stack([h[:, 16:].copy().view("<u2") for h in halves], 1).reshape(-1)
    b = blob[:, 24:32].copy().view(np.int8).reshape(-1)[:channels].astype(np.float64)
    b[b == -128] = 128  # -zw with zw in [-128, 127]: 128 wraps to -128
    return a[:channels].astype(np.float64), b, c[:channels].astype(np.float64)


def unpack_depthwise_split(raw: memoryview, native: list[int], channels: int, kh: int, kw: int,
                           name: str) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """rv1106b's depthwise weights (unpack_depthwise with the weights and -zw apart)."""
    return unpack_depthwise(raw, native, channels, kh, kw, name, split=True)
