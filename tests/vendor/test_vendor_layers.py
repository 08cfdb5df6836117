"""Per-layer agreement of the int8 vendor fixtures with the vendor's simulator (issue 24, item
4): each op of the rebuilt program fed the simulator's own int8 inputs, and the elements that
differ although rknnrt's value lies more than 0.02 steps from a rounding tie counted
(tools/vendor_diff/vendor_file.py; the simulator's values in tests/vendor/fixtures_arch/layers,
made by tools/vendor_diff/arch_layers.py in the vendor's environment)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tools.vendor_diff import vendor_file

from .test_vendor_arch import ARCH, PLATFORMS

LAYERS = ARCH / "layers"
STEMS = [s for s in sorted(json.loads((ARCH / "reported.json").read_text()))
         if s.endswith("_i8") and vendor_file.layer_path(LAYERS, s) is not None]  # fmt: skip
_3576 = ("rk3576", "rv1126b")
_ALL = PLATFORMS
_SDPA = ("rk3588", "rk3562", "rk3576", "rv1126b")  # (rk3566: exMatMul)
# Rules not matched yet (docs/vendor-rknn.md, "Per-layer agreement"): (stem, op) -> the
# count of elements that are not ties, measured at main 1bda3fe + the vendor_diff merge (the
# transformer's at vtrans). A fix lowers it (the test still passes). (The lookup-table fixes
# dropped effnet's conv3, conv14, conv27 and yoloneck's conv3, conv8 to 0; the attention's
# inner grids and exMatMul's symmetric operand the transformer's exSDPAttention and exMatMul:
# every op not listed is held at 0.)
KNOWN: dict[tuple[str, str], int] = {
    # the simulator rounds the conv to its own scale, then to the Concat's; rk3576 writes the
    # Concat's grid straight away and stores no other scale
    **{(f"densenet_{p}_i8", "Concat:concat13"): 305 for p in _3576},
    # the simulator rounds the depthwise ConvExSwish's pre-activation to a calibrated grid the
    # file does not store, then applies the table (test_vendor_lut: within half a grid step)
    **{(f"effnet_{p}_i8", op): n for p in _ALL
       for op, n in (("Conv:conv8", 878), ("Conv:conv32", 769))},
    # the same for HardSigmoid(1/6, 1/2)'s pre-activation (its (0.2, 0.4) conv3 agrees)
    **{(f"hsig_{p}_i8", "Conv:conv7"): 513 for p in _ALL},
    # exNorm's scale is stored as float16, the simulator rounds the ONNX float32 value to its
    # int8 grid: 1 (layernormalization3) and 3 (41) channels lie within half a float16 step of
    # a tie, so the file cannot tell their grid point (test_vendor_transformer_int8)
    **{(f"transformer_{p}_i8", "exNorm:layernormalization3#1"): 1 for p in _ALL},
    **{(f"transformer_{p}_i8", "exNorm:layernormalization41#1"): 6 for p in _SDPA},
    ("transformer_rk3566_i8", "exNorm:layernormalization41#1"): 11,
}  # fmt: skip
# ops whose output the simulator does not round with the file's parameters (not compared):
# rk3576's DenseNet conv writing into its Concat's grid, and rk3576's conv before a standalone
# exGelu, which the file stores as int8 and the simulator keeps in float32 (its readers read it
# unrounded: vendor_file; its exGelu was 168 of 768 off ties fed the int8 value, now 0)
NOT_COMPARED = {**{f"densenet_{p}_i8": 1 for p in _3576}, "transformer_rk3576_i8": 1}
FAST = ["clip_rk3588_i8", "mbv2_rk3576_i8", "densenet_rk3576_i8", "stem_rk3562_i8",
        "argmax_rv1126b_i8", "slice_rk3566_i8", "mbv3_rk3588_i8", "transformer_rk3588_i8",
        "transformer_rk3566_i8", "transformer_rk3576_i8"]  # fmt: skip


def _check(stem: str) -> None:
    buf = (ARCH / f"{stem}.rknn").read_bytes()
    # every fixture loads: a refusal raises VendorFormatError and fails the test
    rows = vendor_file.per_layer(buf, vendor_file.load_layers(vendor_file.layer_path(LAYERS, stem)))
    assert len(rows) == vendor_file.stored_ops(buf) - NOT_COMPARED.get(stem, 0)
    known = {op: n for (s, op), n in KNOWN.items() if s == stem}
    assert {r.node for r in rows} >= set(known), stem  # (a stale entry is caught)
    for r in rows:
        assert r.off_tie <= KNOWN.get((stem, r.node), 0), (stem, r)
        assert r.max_steps <= 1, (stem, r)


def test_the_simulator_dumps_cover_every_int8_fixture() -> None:
    assert len(STEMS) == 12 * len(PLATFORMS)


@pytest.mark.parametrize("stem", FAST)
def test_per_layer_agreement(stem: str) -> None:
    _check(stem)


@pytest.mark.slow
@pytest.mark.parametrize("stem", [s for s in STEMS if s not in FAST])
def test_per_layer_agreement_of_every_fixture(stem: str) -> None:
    _check(stem)


def test_a_rule_difference_is_counted_and_a_tie_is_not() -> None:
    """The same file against a simulator dump with ten output values moved by one step:
    exactly those ten count as differences that are not ties."""
    buf = (ARCH / "clip_rk3588_i8.rknn").read_bytes()
    layers = vendor_file.load_layers(vendor_file.layer_path(LAYERS, "clip_rk3588_i8"))
    (before,) = vendor_file.per_layer(buf, layers)
    q = layers["clip6_int8"]["q"].copy()
    flat = q.reshape(-1)
    inner = np.flatnonzero((flat > -120) & (flat < 120))[:40:4]  # not saturated
    flat[inner] += 1
    layers["clip6_int8"]["q"] = q
    (after,) = vendor_file.per_layer(buf, layers)
    assert before.off_tie == 0 and before.differ == 2  # two rounding ties
    assert after.off_tie == 10 and after.differ in (10, 11, 12)


def test_the_table_lists_each_file() -> None:
    text = vendor_file.table([ARCH / "clip_rk3566_i8.rknn", ARCH / "hsig_rk3588_i8.rknn",
                              ARCH / "clip_rk3566_fp16.rknn"], LAYERS)  # fmt: skip
    lines = text.splitlines()
    assert lines[2] == "| clip_rk3566_i8 | 1 (1) | 0 | 2 | 0 | 1 |"
    assert lines[3] == "| hsig_rk3588_i8 | 3 (3) | 1 | 537 | 513 | 1 |"  # (conv7: KNOWN)
    assert len(lines) == 6 and lines[4] == ""  # (no simulator dump for a float16 file)
    assert lines[5] == ("  hsig_rk3588_i8: ConvHardSigmoid 'Conv:conv7' -> hardsigmoid8: 534 of "
                        "1024 differ, 513 not ties, max 1 steps")  # fmt: skip
