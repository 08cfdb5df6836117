"""rknn_outputs_get's conversion of one output (core/io/plans.OutputPlan.convert)."""

from __future__ import annotations

import numpy as np
import pytest

from rknnrt.core.io import conversions, plans
from rknnrt.model.meta import TensorSpec


def _spec(dtype: str = "int8", shape: list[int] | None = None) -> TensorSpec:
    return TensorSpec(name="y", shape=shape or [2, 3, 4, 5], dtype=dtype, layout="NCHW",
                      qnt_type="AFFINE", zp=-7, scale=0.0173)  # fmt: skip


def test_an_int8_output_as_float_is_its_dequantisation_without_the_general_pipeline(
        monkeypatch) -> None:  # fmt: skip
    spec = _spec()
    result = np.random.default_rng(0).integers(-128, 128, spec.shape).astype(np.int8)
    want = conversions.output_as(result, spec, "float32")

    def refused(*args, **kwargs):
        raise AssertionError("the general pipeline ran")

    monkeypatch.setattr(conversions, "output_as", refused)
    got = plans.OutputPlan(0, spec).convert(result, True)
    assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == result.shape
    assert got.tobytes() == want.tobytes()
    assert got[0, 0, 0, 0] == (np.float32(result[0, 0, 0, 0]) + np.float32(7)) * np.float32(0.0173)


@pytest.mark.parametrize("case", ["strided", "uint8", "as_int8"])
def test_other_outputs_keep_the_general_pipeline(monkeypatch, case: str) -> None:
    spec = _spec("uint8" if case == "uint8" else "int8")
    data = np.random.default_rng(1).integers(0, 128, spec.shape)
    result = data.astype(spec.dtype)
    if case == "strided":  # a view the pipeline makes contiguous
        result = np.ascontiguousarray(result.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    calls = []
    real = conversions.output_as
    monkeypatch.setattr(conversions, "output_as",
                        lambda *a, **k: calls.append(a[2]) or real(*a, **k))  # fmt: skip
    got = plans.OutputPlan(0, spec).convert(result, case != "as_int8")
    if case == "as_int8":  # the model's own type, contiguous: handed as it is
        assert got is result and calls == []
        return
    assert calls == ["float32"] and got.flags.c_contiguous
    assert got.tobytes() == real(np.ascontiguousarray(result), spec, "float32").tobytes()
