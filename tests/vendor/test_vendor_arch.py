"""The real-architecture vendor fixtures (tests/vendor/fixtures_arch, make_arch_fixtures.py):
every file loads and agrees with the vendor's simulator, or is refused at rknn_init with one
line naming what is not decoded (never approximated)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rknnrt.lite import RKNNLite

ARCH = Path(__file__).parent / "fixtures_arch"
REPORTED: dict = json.loads((ARCH / "reported.json").read_text())
PLATFORMS = ("rk3588", "rk3576", "rk3566", "rk3562", "rv1126b")

# Every file of the set loads (refusals by name: test_vendor_mini.py, test_vendor_robustness.py).
# Loads, but the simulator rounds the depthwise ConvExSwish's pre-activation to a calibrated
# grid the file does not store (docs/vendor-rknn.md, "Lookup tables"): measured 93.2% of the
# output within one step, at most 3 steps, on every platform.
DRIFT = {f"effnet_{p}_i8" for p in PLATFORMS}
# Load and agree within bounds: every op of the int8 ViT block is the simulator's arithmetic
# but exNorm's scale, which the file stores as float16 where the simulator rounds the ONNX
# float32 value to its int8 grid (a few channels lie within half a float16 step of a tie:
# test_vendor_layers.KNOWN, test_vendor_transformer_int8), and rk3576's exGelu input. Measured
# per input (3): >= 99.48% of the output within one step (rk3576 99.22%), at most 2 steps, but
# rk3566's third input, 98.44% (its mean 99.31%); before the attention grids and exNorm's:
# 97.9-98.7% (means 98.1-98.6%).
OTHER_OPS = {f"transformer_{p}_i8" for p in PLATFORMS}
AGREE = [s for s in sorted(REPORTED) if s not in DRIFT | OTHER_OPS]


def test_the_fixture_set_covers_every_platform_and_dtype() -> None:
    assert len(REPORTED) == 120
    for p in PLATFORMS:
        for d in ("i8", "fp16"):
            assert sum(r["platform"] == p and r["dtype"] == d for r in REPORTED.values()) == 12
    loads = {(REPORTED[s]["platform"], REPORTED[s]["dtype"]) for s in AGREE}
    assert {(p, "fp16") for p in PLATFORMS} <= loads


def _steps_and_cosines(stem: str) -> list[tuple[str, float, float]]:
    """Per output and sample: ('int8', fraction within one step, max steps) or
    ('float', cosine, max abs error)."""
    rep = REPORTED[stem]
    with np.load(ARCH / f"{stem}.npz", allow_pickle=False) as data:
        ref = {k: data[k] for k in data.files}
    lite = RKNNLite()
    assert lite.load_rknn(str(ARCH / f"{stem}.rknn")) == 0
    assert lite.init_runtime() == 0
    rows = []
    n_in = len(rep["inputs"])
    for s in range(ref["in0"].shape[0]):
        outs = lite.inference(inputs=[ref[f"in{i}"][s] for i in range(n_in)],
                              data_format=["nchw"] * n_in)  # fmt: skip
        for k, name in enumerate(rep["outputs"]):
            got = np.asarray(outs[k], np.float64).ravel()
            want = ref[f"out{k}"][s].astype(np.float64).ravel()
            assert got.shape == want.shape
            quant = rep["io_quant"].get(name)
            if rep["dtype_changed"].get(name) == "int8" and quant:
                steps = np.abs(got - want) / quant["scale"]
                rows.append(("int8", float(np.mean(steps <= 1 + 1e-3)), float(steps.max())))
            else:
                cos = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
                rows.append(("float", float(cos), float(np.abs(got - want).max())))
    lite.release()
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("stem", AGREE)
def test_outputs_agree_with_the_vendor_simulator(stem: str) -> None:
    for kind, value, worst in _steps_and_cosines(stem):
        if kind == "int8":
            assert value >= 0.99 and worst <= 2 + 1e-3, (stem, value, worst)
        else:
            assert value >= 0.9999, (stem, value, worst)


def test_fused_activations_agree_on_rk3588() -> None:
    """ConvClip (MobileNetV2), Resize nearest + bilinear and exSwish (YOLO neck), standalone
    BatchNormalizationRelu (DenseNet), rk3576's int8 7x7 stem with 3 input channels, 64-channel
    depthwise tiles and global pool, rk3562's int8 depthwise and rv1126b's int8 (not slow: one
    file each); HardSigmoid(0.2, 0.4) on rk3562, Clip(-1.5, 2.5) on rk3576, Pad, Slice,
    MobileNetV3's HardSwish/HardSigmoid, a ViT block (exNorm, exSDPAttention or rk3566's exMatMul,
    ConvExGelu)."""
    for stem in ("mbv2_rk3588_fp16", "mbv2_rk3588_i8", "yoloneck_rk3588_i8", "densenet_rk3576_i8",
                 "densenet_rk3588_fp16", "stem_rk3576_i8", "stem_rk3562_i8",
                 "mbv2_rv1126b_i8", "hsig_rk3562_fp16", "clip_rk3576_fp16", "pad_rk3588_i8",
                 "slice_rk3566_i8", "mbv3_rk3588_fp16", "transformer_rk3588_fp16",
                 "transformer_rk3576_fp16", "transformer_rk3566_fp16"):  # fmt: skip
        for kind, value, worst in _steps_and_cosines(stem):
            assert value >= (0.99 if kind == "int8" else 0.9999), (stem, value, worst)


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(DRIFT))
def test_depthwise_conv_exswish_int8_drift_is_bounded(stem: str) -> None:
    for kind, value, worst in _steps_and_cosines(stem):
        assert kind == "int8" and value >= 0.93 and worst <= 3 + 1e-3, (stem, value, worst)


@pytest.mark.parametrize("stem", [s if s == "transformer_rk3588_i8" else
                                  pytest.param(s, marks=pytest.mark.slow)
                                  for s in sorted(OTHER_OPS)])  # fmt: skip
def test_int8_transformer_block_agreement_is_bounded(stem: str) -> None:
    rows = _steps_and_cosines(stem)
    floor = 0.984 if stem.startswith("transformer_rk3566") else 0.99
    for kind, value, worst in rows:
        assert kind == "int8" and value >= floor and worst <= 2 + 1e-3, (stem, value, worst)
    assert np.mean([value for _, value, _ in rows]) >= 0.993, (stem, rows)


@pytest.mark.parametrize("stem", [f"argmax_{p}_{d}" for p in PLATFORMS for d in ("i8", "fp16")])
def test_argmax_indices_equal_the_simulator(stem: str) -> None:
    """ArgMax (int64 output, on the vendor's CPU) gives the simulator's class indices."""
    with np.load(ARCH / f"{stem}.npz", allow_pickle=False) as data:
        ref = {k: data[k] for k in data.files}
    lite = RKNNLite()
    assert lite.load_rknn(str(ARCH / f"{stem}.rknn")) == 0
    assert lite.init_runtime() == 0
    for s in range(ref["in0"].shape[0]):
        (out,) = lite.inference(inputs=[ref["in0"][s]], data_format=["nchw"])
        np.testing.assert_array_equal(np.asarray(out).ravel(), ref["out0"][s].ravel())
        assert len(np.unique(ref["out0"][s])) > 1  # a real choice between classes
    lite.release()
