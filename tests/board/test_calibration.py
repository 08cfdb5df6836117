"""The board model against published figures: the model zoo's FPS (five models x four SoCs)
and the YOLOv5s board log (airockchip/rknn-toolkit2#129). benchmarks/board_estimate.py prints
the same table."""

from __future__ import annotations

import ctypes
import os
import sys
from collections import Counter

import pytest

import rknnrt as rk
from rknnrt.core.board import soc_costs as board_model

from .test_table import detail, perf_run, run_once
from .zoo_models import ZOO

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import board_estimate as bench  # noqa: E402

# estimated / published FPS, recorded from `python benchmarks/board_estimate.py` (2026-11-30):
# a change of the model or its constants that moves one by more than 0.03 shows here.
RECORDED = {
    "mobilenetv2": (0.986, 0.955, 0.954, 0.946),
    "resnet50_v2": (0.929, 0.879, 0.873, 1.057),
    "yolov5s": (0.899, 1.022, 1.007, 0.956),
    "yolov8n": (1.078, 1.195, 1.145, 1.011),
    "deeplabv3_mobilenetv2": (1.184, 0.976, 1.046, 1.023),
}
YOLOV5S_LOG = {"weights": 7_315_840, "internal": 6_144_000}


@pytest.fixture(scope="module")
def float_sources() -> dict:
    return {name: bench.float_source(name) for name in ZOO}


@pytest.mark.slow
def test_estimates_are_within_the_calibration_band(float_sources):
    found = bench.ratios(float_sources)
    assert len(found) == 20
    assert all(0.75 <= r <= 1.33 for r in found.values()), found
    assert bench.geo_error(list(found.values())) <= 0.15
    for (name, soc), ratio in found.items():
        assert ratio == pytest.approx(RECORDED[name][bench.SOCS.index(soc)], abs=0.03), (name, soc)


@pytest.mark.slow
def test_layer_counts_match_the_vendors_builds(float_sources, vendor):
    """The vendor's own layer count per model and SoC; two known differences (docs)."""
    known = {("resnet50_v2", soc): 1 for soc in bench.SOCS}  # the vendor's input-BN Conv
    known.update({("yolov8n", soc): 2 for soc in bench.SOCS})  # Concat+Conv split in two
    for name, source in float_sources.items():
        for soc in bench.SOCS:
            theirs = len(vendor[name][soc]["layers"])
            assert theirs - len(source.layers(soc)) == known.get((name, soc), 0), (name, soc)


@pytest.mark.slow
def test_yolov5s_memory_and_time_on_rk3588(converted, make_ctx, vendor):
    blob = converted("yolov5s")
    ctx = make_ctx(blob, rk.RKNN_FLAG_COLLECT_PERF_MASK)
    mem = rk.rknn_mem_size()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_MEM_SIZE, mem, ctypes.sizeof(mem)) == 0
    assert mem.total_weight_size == pytest.approx(YOLOV5S_LOG["weights"], rel=0.10)
    assert mem.total_internal_size == pytest.approx(YOLOV5S_LOG["internal"], rel=0.10)
    assert vendor["yolov5s"]["rk3588"]["internal_kb"] * 1024 == YOLOV5S_LOG["internal"]
    source = bench.int8_source("yolov5s", blob)
    layers = source.layers("rk3588")
    b = board_model.BOARDS["rk3588"]
    one, two, three = (board_model.estimate(layers, b, 1, cores)[1] for cores in (1, 2, 3))
    assert 1e6 / one == pytest.approx(48.4, rel=0.1)  # the zoo's single-core FPS
    assert 1.1 < one / three < 1.5 and three < two < one  # "3 cores barely faster than 1"


@pytest.mark.slow
def test_int8_resnet50_table_has_the_vendors_layers(converted, make_ctx, vendor):
    """Acceptance of issue 16: no Q/DQ rows, and the vendor's 66 rows (verbose build log)."""
    ctx = make_ctx(converted("light_resnet50"), rk.RKNN_FLAG_COLLECT_PERF_MASK)
    run_once(ctx)
    text = detail(ctx)
    assert "QuantizeLinear" not in text and "DequantizeLinear" not in text
    lines = text.splitlines()
    rule = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    rows = [line.split() for line in lines[rule[1] + 2 : rule[2]]]
    theirs = vendor["light_resnet50"]["rk3588"]["layers"]
    assert len(rows) == len(theirs) == 66
    assert Counter(row[1] for row in rows) == Counter(op for op, _, _ in theirs)
    assert [int(row[6].split("/")[1]) for row in rows] == [c for *_, c in theirs]
    assert 1e6 / perf_run(ctx) == pytest.approx(110.1, rel=0.2)  # zoo: ResNet-50 v2, 110.1 FPS
