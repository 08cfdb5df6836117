"""rv1103/rv1106 int8 ConvClip (tests/vendor/fixtures_mini: `clip` Clip(-1.5, 2.5), `cliphi`
Clip(-1.5, -0.5), `cliplo` Clip(0.5, 2.5), mbv2's ReLU6): the file keeps the upper bound in
channel 0's accumulator units (0x4028) and only the integer part of the lower one (0x4064;
conv_ops.MINI_CLIP_REGS). A lower bound <= 0 is the output grid's saturation, an upper one is
decoded, a lower one above 0 is refused by name."""

from __future__ import annotations

import onnx
import pytest

from rknnrt.model import container
from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import conv_ops, int8, mini_format

from .test_vendor_mini import _agreement, _bytes


def _upper_bounds(stem: str) -> list[float]:
    """The upper bounds the rebuilt graph clips at (its clip_hi constants)."""
    graph = onnx.load_model_from_string(bytes(container.read(memoryview(_bytes(stem))).graph))
    values = {t.name: float(onnx.numpy_helper.to_array(t)) for t in graph.graph.initializer
              if "clip_hi" in t.name}  # fmt: skip
    return [values[n.input[1]] for n in graph.graph.node if n.op_type == "Min"
            and n.input[1] in values]  # fmt: skip


def test_the_registers_hold_the_upper_bound_and_the_lower_ones_integer_part() -> None:
    cfg_reg, lo_reg, hi_reg = conv_ops.MINI_CLIP_REGS["RKNPU t3"]
    seen = {}
    for stem in ("clip_rv1106_i8", "cliphi_rv1106_i8", "cliplo_rv1106_i8"):
        m = mini_format.parse(memoryview(_bytes(stem)))
        (n,) = [n for n in m.nodes if n.op_type == "ConvClip"]
        regs = int8.RegisterFile(m).first_task(n)
        seen[stem] = (regs[cfg_reg], conv_ops._int_reg(regs, lo_reg), regs[0x4018])
    # lo -1.5 -> -1 (truncated toward 0; 0x4018 its negation), 0.5 -> 0: only the BN_CFG flag
    # says that lo is not 0
    assert seen == {"clip_rv1106_i8": (0x20010, -1, 1), "cliphi_rv1106_i8": (0x20010, -1, 1),
                    "cliplo_rv1106_i8": (0x20010, 0, 0)}  # fmt: skip
    assert _upper_bounds("clip_rv1106_i8") == [2.5]
    assert _upper_bounds("cliphi_rv1106_i8") == [-0.5]
    assert _upper_bounds("mbv2_rv1106_i8") == [6.0] * 4  # ReLU6


def test_a_lower_bound_above_zero_is_refused_by_name() -> None:
    with pytest.raises(VendorFormatError, match="lower bound above 0 .*rv1106 stores only its "
                       "integer part, 0"):  # fmt: skip
        container.read(memoryview(_bytes("cliplo_rv1106_i8")))


@pytest.mark.parametrize("stem", ["clip_rv1106_i8", "cliphi_rv1106_i8"])
def test_clip_outputs_agree_with_the_simulator(stem: str, make_ctx) -> None:
    """Every output within one step of the simulator's (cliphi's negative upper bound is
    above the grid's top: without the decoded bound 80% of it is off, up to 85 steps)."""
    for kind, within, worst in _agreement(stem, make_ctx):
        assert kind == "int8" and within == 1.0 and worst <= 1 + 1e-3, (within, worst)
