"""A fused Clip's bounds (conv_ops.CLIP_REGS, docs/vendor-rknn.md): float32 registers in float16
files, units of the output conversion's input in int8 files, on every platform; the fixtures'
Clip(-1.5, 2.5) and MobileNetV2's ReLU6 (make_arch_fixtures.py; no vendor toolkit needed)."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import conv_ops, fileformat
from rknnrt.model.vendor_rknn.graph import GraphBuilder

from .test_vendor_arch import ARCH, PLATFORMS, _steps_and_cosines


def _clips(stem: str) -> tuple[GraphBuilder, list[fileformat.Node]]:
    m = fileformat.parse(memoryview((ARCH / f"{stem}.rknn").read_bytes()))
    return GraphBuilder(m), [n for n in m.nodes if n.op_type == "ConvClip"]


@pytest.mark.parametrize("dtype", ["i8", "fp16"])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_clip_bounds_are_the_models(platform: str, dtype: str) -> None:
    b, (clip,) = _clips(f"clip_{platform}_{dtype}")
    assert conv_ops.clip_bounds(b, clip) == (-1.5, 2.5)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_relu6_bounds(platform: str) -> None:
    b, clips = _clips(f"mbv2_{platform}_fp16")
    assert [conv_ops.clip_bounds(b, n) for n in clips] == [(0.0, 6.0)] * 4
    b, clips = _clips(f"mbv2_{platform}_i8")
    for n in clips:
        lo, hi = conv_ops.clip_bounds(b, n)
        out = b.m.tensors[n.outputs[0]]
        # lo = 0; hi is 6 (rk3588/rk3566) or another value beyond the output's int8 range
        # (rk3576/rk3562/rv1126b, where 6 is too): either way saturation clips first
        assert lo == 0.0 and hi >= min(6.0, (127 - out.zp[0]) * out.scale[0])


def test_the_int8_register_keeps_the_bound_to_one_unit() -> None:
    # rk3588's Clip(-1.5, 2.5): lo -8227 and span 21940 units of 1.8232e-4
    unit = 24375 / 2.0**21 * 0.01568627543747425
    assert conv_ops._shortest(-8227 * unit, unit) == -1.5
    assert conv_ops._shortest(21940 * unit, unit) == 4.0
    assert conv_ops._shortest(3074 * 1.6265e-4, 1.6265e-4) == 0.5  # Clip(0.5, 3)
    assert conv_ops._shortest(1234.5678, 1e-4) == 1234.5678  # no shorter decimal that close


@pytest.mark.parametrize("stem", ["clip_rk3588_fp16", "clip_rk3562_i8"])
def test_a_shift_that_disagrees_with_the_value_added_back_is_refused(stem: str) -> None:
    b, (clip,) = _clips(stem)
    shift, _, _ = conv_ops.CLIP_REGS[(b.m.npu_format, b.quantized)]
    regs = b.registers().first_task(clip)
    regs[shift] = int(np.array(regs[shift], np.uint32).view(np.int32) // 2) & 0xFFFFFFFF \
        if b.quantized else int(np.array(0.75, np.float32).view(np.uint32))  # fmt: skip
    with pytest.raises(VendorFormatError, match="bounds of ConvClip 'Conv:conv3'"):
        conv_ops.clip_bounds(b, clip)


@pytest.mark.parametrize("stem", ["clip_rk3588_i8", "clip_rk3566_fp16", "clip_rk3562_fp16",
                                  "clip_rk3576_i8", "clip_rv1126b_i8"])  # fmt: skip
def test_clip_agrees_with_the_vendor_simulator(stem: str) -> None:
    for kind, value, worst in _steps_and_cosines(stem):
        if kind == "int8":
            assert value == 1.0 and worst <= 1 + 1e-3, (stem, value, worst)
        else:
            assert value >= 0.9999999, (stem, value, worst)
