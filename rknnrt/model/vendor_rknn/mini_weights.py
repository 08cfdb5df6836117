"""Weight packings of the rv1103/rv1106 mini format ("RKNPU t3") that v6 files do not use.

Found from toolkit 2.5.0 builds (docs/vendor-rknn.md, "The mini format"); the other rv1106
convolutions follow the generic tiles of weights.py.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ..errors import VendorFormatError


def unpack_depthwise(raw: memoryview, native: list[int], channels: int, kh: int, kw: int,
                     name: str) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """int8 depthwise weights: per tile of the native shape (6-tuples [1, IC1, KH, KW, 1,
    IC2]; tiles of zero elements are placeholders), per IC1 step, [KH][KW][IC2][w, -zw] byte
    pairs (-zw = 128 wraps to -128), tile after tile; 32 bytes follow (unused). Returns the
    weights [channels, 1, kh, kw] and the weight zero points [channels]."""
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
        part = data[at : at + kh * kw * c_pad * 2].reshape(kh, kw, c_pad, 2)
        qs.append(part[..., 0].transpose(2, 0, 1))
        zws.append(part[0, 0, :, 1])
        at += kh * kw * c_pad * 2
    q = np.concatenate(qs)[:channels, None]
    minus_zw = np.concatenate(zws)[:channels].astype(np.float64)
    minus_zw[minus_zw == -128] = 128  # zw is in [-128, 127]
    return np.ascontiguousarray(q), -minus_zw
