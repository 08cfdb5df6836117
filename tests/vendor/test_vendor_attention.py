"""exSDPAttention's scale (attention_ops._scale, docs/vendor-rknn.md): float16 in float16
files, a multiplier over a power of two in int8 files (register 0x4068 on rk3588/rk3562, a
BnCfg constant on rk3576/rv1126b), nothing programmed for s = 1."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import attention_ops, fileformat, mini_format
from rknnrt.model.vendor_rknn.graph import GraphBuilder

from .test_vendor_arch import ARCH
from .test_vendor_mini import MINI

SDPA_PLATFORMS = ("rk3588", "rk3576", "rk3562", "rv1126b")  # (rk3566 emits exMatMul)


def _sdpa(stem: str) -> tuple[GraphBuilder, fileformat.Node]:
    m = fileformat.parse(memoryview((ARCH / f"{stem}.rknn").read_bytes()))
    return GraphBuilder(m), next(n for n in m.nodes if n.op_type == "exSDPAttention")


@pytest.mark.parametrize("dtype", ["i8", "fp16"])
@pytest.mark.parametrize("platform", SDPA_PLATFORMS)
def test_the_fixtures_scale_is_one_over_sqrt_head_dim(platform: str, dtype: str) -> None:
    b, n = _sdpa(f"transformer_{platform}_{dtype}")
    # (rk3588's int8 register reads as float16 2.0: the multiplier 0x4000 with shift 16)
    assert attention_ops._scale(b, n, 16) == 0.25


@pytest.mark.parametrize("stem, scale", [("transformer_rv1106_i8", 0.25), ("attn1_rv1106_i8", 1.0)])
def test_rv1106_int8_scale_is_the_multiply_tasks(stem: str, scale: float) -> None:
    """rv1106 writes 0x4068 in its softmax's tasks too (0x6a660000): the scale is the value
    of the tasks whose BN_CFG is 0x2 (transformer: 0x40001000 = 2^14 / 2^16); s = 1 programs
    no such task (attn1), where the softmax's value alone would read as 27238."""
    m = mini_format.parse(memoryview((MINI / f"{stem}.rknn").read_bytes()))
    b, n = GraphBuilder(m), next(n for n in m.nodes if n.op_type == "exSDPAttention")
    assert 0x6A660000 in b.registers().register_values(n, 0x4068)
    assert attention_ops._scale(b, n, 16) == scale


def _program(monkeypatch, b, n, values: set[int]) -> None:  # type: ignore[no-untyped-def]
    """Op `n`'s tasks write `values` to the scale register (the rest as the file has it)."""
    registers, reg = b.registers(), attention_ops.SCALE_REG["RKNPU v2"]
    stored = registers.register_values
    monkeypatch.setattr(registers, "register_values", lambda node, r: values
                        if (node.index, r) == (n.index, reg) else stored(node, r))  # fmt: skip


@pytest.mark.parametrize("value, scale", [(0x4CCD1000, 19661 / 2**16), (0x66661300, 26214 / 2**19),
                                          (0x50000D00, 2.5), (0x5A821000, 8**-0.5)])  # fmt: skip
def test_int8_register_multiplier_and_shift(value: int, scale: float, monkeypatch) -> None:
    b, n = _sdpa("transformer_rk3588_i8")
    _program(monkeypatch, b, n, {0, value})
    assert attention_ops._scale(b, n, 8) == scale  # (1/sqrt(8) where it rounds to that)


@pytest.mark.parametrize("words, scale", [({0: 19661, 8: 0x1010}, 19661 / 2**16),
                                          ({0: 16384, 8: 0x1111}, 0.125),
                                          ({0: 22938, 8: 0x0F0F}, 22938 / 2**15),
                                          (None, 1.0), ({0: 16384, 8: 0x1011}, None)])  # fmt: skip
def test_int8_bncfg_multiplier_and_shift(monkeypatch, words: dict | None,
                                         scale: float | None) -> None:  # fmt: skip
    b, n = _sdpa("transformer_rk3576_i8")
    real = attention_ops._const_words

    def fake(builder: GraphBuilder, name: str) -> np.ndarray | None:
        if not name.endswith(attention_ops.SCALE_INT8_SUFFIX):
            return real(builder, name)
        if words is None:
            return None
        out = np.zeros(16, np.uint16)
        for k, v in words.items():
            out[k] = v
        return out

    monkeypatch.setattr(attention_ops, "_const_words", fake)
    if scale is None:  # the shift's two bytes disagree
        with pytest.raises(VendorFormatError, match="scale of exSDPAttention"):
            attention_ops._scale(b, n, 16)
    else:
        assert attention_ops._scale(b, n, 16) == scale


def test_no_scale_without_the_qk_constant_is_refused(monkeypatch) -> None:
    b, n = _sdpa("transformer_rk3588_i8")
    _program(monkeypatch, b, n, {0})
    assert attention_ops._scale(b, n, 16) == 1.0
    monkeypatch.setattr(attention_ops, "QK_SUFFIX", "_no_such_constant")
    with pytest.raises(VendorFormatError, match="scale of exSDPAttention"):
        attention_ops._scale(b, n, 16)
