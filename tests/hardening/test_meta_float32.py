"""Issue 27 item 12: metadata range checks in the runtime's own arithmetic (float32), the
program's float type one of the known ones, and a layout the format allows."""

from __future__ import annotations

import pytest

import rknnrt as rk

from .conftest import init_status, rebuild


def _input(key, value):
    def edit(raw: dict) -> None:
        raw["inputs"][0][key] = value

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _input("mean", [1e308, 0.0, 0.0]),  # finite in float64, inf in float32
        _input("std", [1e-308, 1.0, 1.0]),  # 0 in float32
        _input("std", [1e-40, 1.0, 1.0]),  # a float32 denormal: 1/std overflows
        _input("mean", [-3.5e38, 0.0, 0.0]),
        _input("layout", "NHWC"),  # the format stores 4-D tensors as NCHW
        _input("layout", "UNDEFINED"),
        lambda raw: raw.update(float_dtype="float64"),
        lambda raw: raw.update(float_dtype=""),
        lambda raw: raw["outputs"][0].update(layout="NCHW"),  # a 2-D output
    ],
    ids=[
        "mean1e308",
        "std1e-308",
        "std-denormal",
        "mean-3.5e38",
        "nhwc",
        "undefined4d",
        "float64",
        "empty-float-dtype",
        "nchw2d",
    ],
)
def test_refused_at_init(three_models, edit, capfd) -> None:
    blob = rebuild(three_models["float32"], meta=edit)
    assert init_status(blob) == rk.RKNN_ERR_MODEL_INVALID
    err = capfd.readouterr().err
    assert "RuntimeWarning" not in err
    assert sum(line.startswith("E RKNN") for line in err.splitlines()) == 1


@pytest.mark.parametrize(
    "edit",
    [
        _input("mean", [3e38, 0.0, 0.0]),
        _input("std", [1e-37, 1.0, 1.0]),
        lambda raw: raw.update(float_dtype="float16"),
    ],
)
def test_extremes_inside_float32_stay_accepted(three_models, edit) -> None:
    assert init_status(rebuild(three_models["float32"], meta=edit)) == rk.RKNN_SUCC


def test_the_three_float_dtypes_of_the_converter_load(three_models) -> None:
    assert all(init_status(blob) == rk.RKNN_SUCC for blob in three_models.values())
