"""Vendor files of the parts of real networks the architecture blocks do not reach
(tests/vendor/fixtures_heads, built from head_probes.py by make_arch_fixtures.py): a YOLOv5 head
with its decode (grid and anchors folded into NC1HWC2 constants, a Pow, the detections joined
along an axis the file leaves at its default 0), a YOLOv8 head with its DFL decode (its
[144, 1, 1, A] maps split along the default axis 0) and a ViT embedding (a class token joined
as a constant Concat operand, a position embedding of 17 tokens), on every platform. float16
files agree with the simulator; int8 ones are refused by name (their constants' rule is not
known: decoded as the float16 one, outputs were up to 93 steps from the simulator's). The set's
ShuffleNet units (selection convs, tests/perf/test_selection_convs.py), its attention with
values wider than its queries and keys (YOLO11's PSA) and DeepLabV3's widest atrous convs
(Pad, Gather, Pad, Gather around a dense conv) agree in both dtypes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rknnrt.lite import RKNNLite
from rknnrt.model import container
from rknnrt.model.errors import VendorFormatError
from rknnrt.model.vendor_rknn import fileformat, graph

HEADS = Path(__file__).parent / "fixtures_heads"
REPORTED: dict = json.loads((HEADS / "reported.json").read_text())
FP16 = sorted(s for s in REPORTED if s.endswith("_fp16"))
REFUSED = sorted(s for s in REPORTED if s.endswith("_i8") and s.startswith(("yolohead",
                                                                              "vitembed",
                                                                              "v8head")))
INT8 = sorted(s for s in REPORTED if s.endswith("_i8") and s not in REFUSED)


def test_the_set_covers_every_probe_on_every_platform() -> None:
    assert len(FP16) == 30 and len(REFUSED) == len(INT8) == 15
    assert {REPORTED[s]["platform"] for s in FP16} == {"rk3588", "rk3576", "rk3566", "rk3562",
                                                       "rv1126b"}  # fmt: skip


def _rows(stem: str) -> list[tuple[str, float, float]]:
    """Per sample: ('int8', fraction within one step, max steps) or ('float', cosine, 0)."""
    rep = REPORTED[stem]
    with np.load(HEADS / f"{stem}.npz", allow_pickle=False) as data:
        ref = {k: data[k] for k in data.files}
    lite = RKNNLite()
    assert lite.load_rknn(str(HEADS / f"{stem}.rknn")) == 0 and lite.init_runtime() == 0
    rows = []
    name = rep["outputs"][0]
    for s in range(ref["in0"].shape[0]):
        got = np.asarray(lite.inference([ref["in0"][s]], data_format=["nchw"])[0], np.float64)
        want = ref["out0"][s].astype(np.float64)
        assert got.shape == want.shape
        got, want = got.ravel(), want.ravel()
        if rep["dtype_changed"].get(name) == "int8":
            steps = np.abs(got - want) / rep["io_quant"][name]["scale"]
            rows.append(("int8", float(np.mean(steps <= 1 + 1e-3)), float(steps.max())))
        else:
            rows.append(("float", float(got @ want / (np.linalg.norm(got) *
                                                      np.linalg.norm(want))), 0.0))  # fmt: skip
    lite.release()
    return rows


@pytest.mark.parametrize("stem", FP16 + INT8)
def test_heads_agree_with_the_simulator(stem: str) -> None:
    for kind, value, worst in _rows(stem):
        if kind == "int8":
            assert value >= 0.99 and worst <= 1 + 1e-3, (stem, value, worst)
        else:
            assert value >= 0.9999, (stem, value)


@pytest.mark.parametrize("stem", REFUSED)
def test_int8_nc1hwc2_constants_are_refused_by_name(stem: str) -> None:
    with pytest.raises(VendorFormatError, match=r"int8 constant '.*' in an NPU layout \(tag 64\)"):
        container.read(memoryview((HEADS / f"{stem}.rknn").read_bytes()))


def _tensor(native: list[int], shape: list[int]) -> fileformat.Tensor:
    return fileformat.Tensor(0, "c", "float16", 64, 5, native, shape, "", "", [], [], 0, 0, -1, 0)


def test_planes_padded_at_their_end_are_read_without_the_padding() -> None:
    """YOLOv5's anchors [3, 1, 1, 2] as the toolkit stores them: [3, 1, 1, 2, 8], each plane
    of 2 positions padded to 4 (the committed files' bytes: 96 values for 48)."""
    anchors = np.arange(1, 7, dtype=np.float16).reshape(3, 1, 1, 2)
    stored = np.zeros((3, 1, 4, 8), np.float16)
    stored[:, 0, :2, 0] = anchors[:, 0, 0, :]
    got = graph.from_nc1hwc2(stored.reshape(-1), _tensor([3, 1, 1, 2, 8], [3, 1, 1, 2]))
    assert got.shape == (3, 1, 1, 2) and np.array_equal(got, anchors)


def test_channels_are_gathered_from_their_blocks() -> None:
    """C = 12 in two blocks of C2 = 8 (the last 4 channels padding)."""
    planar = np.arange(12 * 2 * 3, dtype=np.float32).reshape(1, 12, 2, 3)
    padded = np.zeros((1, 16, 2, 3), np.float32)
    padded[:, :12] = planar
    stored = padded.reshape(1, 2, 8, 2, 3).transpose(0, 1, 3, 4, 2).reshape(-1)
    got = graph.from_nc1hwc2(stored, _tensor([1, 2, 2, 3, 8], [1, 12, 2, 3]))
    assert np.array_equal(got, planar)


@pytest.mark.parametrize("native, shape, size", [
    ([1, 2, 2, 3, 8], [1, 12, 2, 3], 95),  # the size is no whole number of planes
    ([1, 2, 2, 3, 8], [1, 20, 2, 3], 96),  # more channels than the blocks hold
    ([1, 2, 2, 3, 8], [1, 12, 3, 3], 96),  # the spatial dims differ
    ([2, 2, 3, 8], [1, 12, 2, 3], 96),  # not a 5-D native shape
])  # fmt: skip
def test_shapes_outside_the_layout_are_refused(native, shape, size) -> None:
    with pytest.raises(VendorFormatError, match="NC1HWC2 layout"):
        graph.from_nc1hwc2(np.zeros(size, np.float32), _tensor(native, shape))
