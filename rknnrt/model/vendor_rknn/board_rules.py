"""What a board would report for a vendor file where the file does not store it: the INFERRED
rules, in one place. None of these has been confirmed on a board (no board was available;
docs/vendor-rknn.md): they were derived from toolkit 2.5.0 builds and its logs.

- w_stride of a 4-D NHWC input = W rounded up to the input tensor's width alignment (tensor
  field 20: 16 on rk3588/rk3576, 8 on rk3566, as rknnrt's platform table says).
- native NC1HWC2 dims = [N, ceil(C / C2), H, W, C2] with C2 from the tensor's stored native
  shape (field 3). NOT the prototype's "C1 from the allocated size": allocations (field 12) are
  rounded up, and the stored C1 itself sometimes exceeds ceil(C / C2) (e.g. 6 channels stored
  as [1, 2, 10, 11, 16] on rk3588 int8); which one a board reports is open
  (docs/vendor-rknn.md lists the cases).
- 4-D inputs with C in {1, 3, 4} are NHWC natively, others NC1HWC2.

rknnrt's runtime computes native attributes from its platform table (core/io/attrs.py);
`native_attrs` computes them from the file's stored values instead, so the tests can check the
two agree on every fixture, and `check` refuses a file whose stored values contradict the
rules (a layout rknnrt would report wrongly).
"""

from __future__ import annotations

import numpy as np

from ..errors import VendorFormatError
from .fileformat import Tensor, VendorModel

NHWC_INPUT_CHANNELS = (1, 3, 4)


def _itemsize(dtype: str) -> int:
    return 1 if dtype == "bool" else np.dtype(dtype).itemsize


def io_dtype(m: VendorModel, t: Tensor) -> str:
    return m.io_types.get(t.name, {}).get("dtype") or t.dtype


def native_attrs(m: VendorModel, t: Tensor, is_input: bool) -> dict:
    """{fmt, dims, w_stride, size_with_stride} as inferred from tensor `t`'s stored values."""
    dtype = io_dtype(m, t)
    es = _itemsize(dtype)
    if len(t.shape) != 4:
        size = int(np.prod(t.shape)) * es
        return dict(fmt="UNDEFINED", dims=list(t.shape), w_stride=0, size_with_stride=size)
    n, c, h, w = t.shape
    if is_input and c in NHWC_INPUT_CHANNELS:
        align = t.width_align or 1
        w_stride = -(-w // align) * align
        return dict(fmt="NHWC", dims=[n, h, w, c], w_stride=w_stride,
                    size_with_stride=n * h * w_stride * c * es)  # fmt: skip
    c2 = t.native_shape[-1] if len(t.native_shape) == 5 else 0
    if c2 <= 0 or t.size <= 0:
        raise VendorFormatError(
            f"vendor .rknn model: tensor '{t.name}' has no native NC1HWC2 shape"
        )
    c1 = -(-c // c2)
    return dict(fmt="NC1HWC2", dims=[n, c1, h, w, c2], w_stride=0,
                size_with_stride=n * c1 * h * w * c2 * es)  # fmt: skip


def check(m: VendorModel) -> None:
    """Refuse stored values that contradict the inferred rules (so that rknnrt's answers,
    computed from its platform table, would be wrong for this file)."""
    for k, i in enumerate(m.inputs):
        t = m.tensors[i]
        if (
            len(t.shape) == 4
            and t.shape[1] in NHWC_INPUT_CHANNELS
            and t.width_align not in (0, 4, 8, 16, 32)
        ):
            raise VendorFormatError(
                f"vendor .rknn model: input {k} has an unexpected width alignment {t.width_align}"
            )
