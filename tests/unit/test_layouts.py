"""Layouts, attributes and platform profiles, against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.core import platforms
from rknnrt.core.io import attrs, layouts
from rknnrt.model.meta import TensorSpec


def test_nc1hwc2_round_trip_and_order() -> None:
    x = np.arange(1 * 5 * 2 * 3, dtype=np.float32).reshape(1, 5, 2, 3)
    native = layouts.nchw_to_nc1hwc2(x, 4)
    assert native.shape == (1, 2, 2, 3, 4)
    # lowest address first: C2 -> W -> H -> C1 -> N
    assert native[0, 0, 1, 2, 3] == x[0, 3, 1, 2]
    assert native[0, 1, 0, 0, 0] == x[0, 4, 0, 0]
    assert np.all(native[0, 1, :, :, 1:] == 0)  # padding channels
    np.testing.assert_array_equal(layouts.nc1hwc2_to_nchw(native, 5), x)


def test_native_formats() -> None:
    assert layouts.native_input_format([1, 3, 8, 8]) == "NHWC"
    assert layouts.native_input_format([1, 4, 8, 8]) == "NHWC"
    assert layouts.native_input_format([1, 16, 8, 8]) == "NC1HWC2"
    assert layouts.native_input_format([2, 8]) == "UNDEFINED"
    assert layouts.native_output_format([1, 255, 40, 40]) == "NC1HWC2"
    assert layouts.nc1hwc2_dims([1, 64, 80, 80], 16) == [1, 4, 80, 80, 16]
    assert layouts.nc1hwc2_dims([1, 255, 40, 40], 8) == [1, 32, 40, 40, 8]


# float16 rows align to 16 B = 8 px (rk3588, rk3562) or 8 B = 4 px (rk3566), as vendor .rknn
# files store them (field 20 = 8 / 4 for float16 inputs, 16 / 8 for int8: docs/vendor-rknn.md).
@pytest.mark.parametrize(
    ("platform", "width", "w_stride"),
    [("rk3588", 640, 640), ("rk3588", 225, 232), ("rk3566", 225, 228), ("rk3562", 28, 32)],
)
def test_native_input_stride(platform: str, width: int, w_stride: int) -> None:
    spec = TensorSpec("x", [1, 3, 10, width], "float16", "NCHW")
    native = attrs.native_input_attr(0, spec, platforms.get(platform))
    assert native.fmt == "NHWC" and native.dims == [1, 10, width, 3]
    assert native.w_stride == w_stride
    assert native.size == 10 * width * 3 * 2
    assert native.size_with_stride == 10 * w_stride * 3 * 2


@pytest.mark.parametrize(("platform", "w_stride"), [("rk3588", 240), ("rk3566", 232)])
def test_native_input_stride_int8(platform: str, w_stride: int) -> None:
    """int8 rows: 16 B = 16 px (rk3588), 8 B = 8 px (rk3566), UG Table 5-2's pixel figures."""
    spec = TensorSpec("x", [1, 3, 10, 225], "int8", "NCHW")
    native = attrs.native_input_attr(0, spec, platforms.get(platform))
    assert (native.w_stride, native.size_with_stride) == (w_stride, 10 * w_stride * 3)


def test_plain_attrs() -> None:
    spec = TensorSpec("x", [1, 3, 10, 225], "float32", "NCHW")
    attr = attrs.input_attr(0, spec)
    assert (attr.dims, attr.fmt, attr.n_elems, attr.size) == ([1, 10, 225, 3], "NHWC", 6750, 27000)
    assert (attr.w_stride, attr.size_with_stride) == (225, 27000)
    assert (attr.qnt_type, attr.zp, attr.scale) == ("AFFINE", 0, 1.0)
    out = attrs.output_attr(1, TensorSpec("y", [1, 20, 5, 5], "float32", "NCHW"))
    assert (out.index, out.dims, out.fmt, out.w_stride, out.size) == (
        1,
        [1, 20, 5, 5],
        "NCHW",
        0,
        2000,
    )
    ints = attrs.output_attr(0, TensorSpec("i", [4], "int64", "UNDEFINED"))
    assert (ints.fmt, ints.size, ints.qnt_type) == ("UNDEFINED", 32, "NONE")


@pytest.mark.parametrize(
    ("platform", "dtype", "c2"),
    [("rk3588", "int8", 16), ("rk3588", "float16", 8), ("rk3566", "int8", 8),
     ("rk3568", "float16", 4), ("rk3562", "float16", 8), ("rk3576", "int8", 16),
     ("rv1106", "int8", 16), ("rv1106b", "int8", 8), ("rk2118", "float16", 4),
     ("rk3588", "float32", 4), ("rk3566", "float32", 2)],
)  # fmt: skip
def test_c2_table(platform: str, dtype: str, c2: int) -> None:
    assert platforms.get(platform).c2_for(dtype) == c2


def test_native_output_attr_uses_c2() -> None:
    spec = TensorSpec("y", [1, 80, 20, 20], "float16", "NCHW")
    native = attrs.native_output_attr(0, spec, platforms.get("rk3566"), nhwc=False)
    assert native.dims == [1, 20, 20, 20, 4] and native.fmt == "NC1HWC2"
    assert native.size == native.size_with_stride == 20 * 20 * 20 * 4 * 2
    nhwc = attrs.native_output_attr(0, spec, platforms.get("rk3566"), nhwc=True)
    assert nhwc.dims == [1, 20, 20, 80] and nhwc.fmt == "NHWC"


def test_platform_table() -> None:
    assert platforms.get("RK3588S").name == "rk3588"
    assert [platforms.get(n).npu_cores for n in ("rk3588", "rk3576", "rk3566")] == [3, 2, 1]
    assert platforms.get("rk3588").sram_bytes == 956 * 1024
    assert platforms.get("rk3566").core_masks == frozenset()
    assert not platforms.get("rv1106").supports("rknn_inputs_set")
    assert not platforms.get("rk2118").supports("rknn_create_mem_from_fd")
    assert platforms.get("rk3576").supports("rknn_set_core_mask")
    assert not platforms.get("rk3568").supports("rknn_set_core_mask")
    assert "RKNN_QUERY_DEVICE_MEM_INFO" in platforms.get("rv1103").queries
    assert "RKNN_QUERY_PERF_RUN" not in platforms.get("rv1103").queries
    assert not platforms.get("rv1106").float_models and platforms.get("rk3562").float_models
    with pytest.raises(KeyError):
        platforms.get("rk9999")
