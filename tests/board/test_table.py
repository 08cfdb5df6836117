"""RKNN_QUERY_PERF_DETAIL / PERF_RUN / MEM_SIZE as a board reports them (core/board/perf.py,
core/board/table.py), `rknnrt perf` and board_eval (docs/performance.md)."""

from __future__ import annotations

import ctypes
import os
import re

import numpy as np
import pytest

import rknnrt as rk
from rknnrt import board_eval, cli
from rknnrt.core import registry
from rknnrt.core.board import soc_costs as board_model
from rknnrt.toolkit.samples import default_input

from .conftest import int8_bytes

PERF = rk.RKNN_FLAG_COLLECT_PERF_MASK
HEADER = ["ID", "OpType", "DataType", "Target", "InputShape", "OutputShape",
          "Cycles(DDR/NPU/Total)", "Time(us)", "MacUsage(%)", "WorkLoad(0/1/2)", "RW(KB)",
          "FullName", "HostTime(us)"]  # fmt: skip
RANKING = ["OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)", "NPUTime(us)", "TotalTime(us)",
           "TimeRatio(%)", "HostTime(us)"]  # fmt: skip


def run_once(ctx: rk.rknn_context, mask: int = 0) -> None:
    if mask:
        assert rk.rknn_set_core_mask(ctx, mask) == 0
    attr = rk.rknn_tensor_attr(index=0)
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, attr, ctypes.sizeof(attr)) == 0
    dims = list(attr.dims)[: attr.n_dims]  # NHWC
    image = default_input(seed=0) if dims == [1, 64, 64, 3] else np.zeros(dims, np.uint8)
    inp = rk.rknn_input(index=0, buf=image.ctypes.data, size=image.nbytes,
                        type=rk.RKNN_TENSOR_UINT8, fmt=rk.RKNN_TENSOR_NHWC)  # fmt: skip
    assert rk.rknn_inputs_set(ctx, 1, inp) == 0
    assert rk.rknn_run(ctx, None) == 0


def detail(ctx: rk.rknn_context) -> str:
    d = rk.rknn_perf_detail()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_PERF_DETAIL, d, ctypes.sizeof(d)) == 0
    return ctypes.string_at(d.perf_data, d.data_len).decode()


def perf_run(ctx: rk.rknn_context) -> int:
    r = rk.rknn_perf_run()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_PERF_RUN, r, ctypes.sizeof(r)) == 0
    return r.run_duration


def tables(text: str, header: list[str] = HEADER):
    """(layer rows, totals lines, ranking rows), rows split into columns."""
    lines = text.splitlines()
    rule = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    assert len(rule) == 7
    assert lines[rule[0] + 1].strip() == "Network Layer Information Table"
    assert lines[rule[1] + 1].split() == header
    layers = [line.split() for line in lines[rule[1] + 2 : rule[2]]]
    assert lines[rule[4] + 1].strip() == "Operator Time Consuming Ranking Table"
    assert lines[rule[5] + 1].split() == RANKING
    return layers, lines[rule[2] + 1 : rule[3]], [x.split() for x in lines[rule[5] + 2 : rule[6]]]


@pytest.fixture(scope="module")
def int8_model(default_onnx) -> bytes:
    return int8_bytes(default_onnx)


def test_the_table_has_the_vendors_layers_and_estimated_times(make_ctx, int8_model):
    ctx = make_ctx(int8_model, PERF)
    run_once(ctx)
    layers, totals, ranking = tables(detail(ctx))
    ops = [row[1] for row in layers]
    assert ops == ["InputOperator", "ConvRelu", "ConvRelu", "ConvAdd", "MaxPool", "ConvRelu",
                   "ConvRelu", "Concat", "Conv", "Conv", "Conv", "exSoftmax13", "Reshape",
                   "OutputOperator"]  # fmt: skip
    assert [row[0] for row in layers] == [str(i) for i in range(1, len(layers) + 1)]
    assert {row[2] for row in layers[1:-2]} == {"INT8"}
    assert layers[-2][3] == "CPU" and {row[3] for row in layers[1:-2]} == {"NPU"}
    first = layers[1]
    assert first[4] == "(1,3,64,64),(16,3,3,3),(16)" and first[5] == "(1,16,32,32)"
    # RK3588 int8: 1024 pixels x align32(16) x align32(3) x 9 taps / 1024 MACs per cycle
    assert first[6].split("/")[1] == str(1024 * 32 * 32 * 9 // 1024)
    assert first[9] == "100.0%/0.0%/0.0%" and first[11] == "Conv:conv1"
    times = [int(row[7]) for row in layers]
    total = int(re.fullmatch(r"Total Operator Elapsed Per Frame Time\(us\): (\d+)", totals[0])[1])
    assert abs(total - sum(times)) <= len(times)
    assert "estimated on RK3588 (INT8, core mask 0x0" in totals[2]
    # PERF_RUN: the layers plus the fixed cost of a run, as the board's run_duration
    job = board_model.BOARDS["rk3588"].job_us
    assert abs(perf_run(ctx) - (total + job)) <= len(times)
    # host times: the last column, Q/DQ nodes included in their layer's share
    host = [int(row[-1]) for row in layers]
    assert sum(host) > 0
    spent = [int(row[5]) for row in ranking]
    assert spent == sorted(spent, reverse=True)
    assert sum(float(row[6].rstrip("%")) for row in ranking) == pytest.approx(100, abs=0.1)
    assert {row[0]: int(row[1]) for row in ranking}["ConvRelu"] == 4


def test_host_switch_reports_host_times(make_ctx, default_model_bytes, monkeypatch):
    ctx = make_ctx(default_model_bytes, PERF)
    run_once(ctx)
    estimated = perf_run(ctx)
    monkeypatch.setenv("RKNNRT_PERF_HOST", "1")
    assert perf_run(ctx) == registry.get(ctx.value).last_run_us != estimated
    run_once(ctx)
    _, totals, _ = tables(detail(ctx))
    assert "host times (RKNNRT_PERF_HOST=1)" in totals[2]


def test_core_mask_splits_only_the_splittable_layers(make_ctx, default_model_bytes):
    one = make_ctx(default_model_bytes, PERF)
    run_once(one)
    three = make_ctx(default_model_bytes, PERF)
    run_once(three, rk.RKNN_NPU_CORE_0_1_2)
    layers, totals, _ = tables(detail(three))
    workload = {row[1]: row[9] for row in layers}
    assert workload["ConvRelu"] == workload["Concat"] == "33.3%/33.3%/33.3%"
    assert workload["MaxPool"] == workload["exSoftmax13"] == "100.0%/0.0%/0.0%"
    assert "core mask 0x7" in totals[2]
    # on layers this small each split costs more synchronisation than it saves compute
    # (YOLOv5s: tests/board/test_calibration.py)
    assert perf_run(three) > perf_run(one)


def test_single_core_npu_has_no_workload_column(make_ctx, convert, default_onnx):
    ctx = make_ctx(convert(default_onnx, target_platform="rk3566"), PERF)
    run_once(ctx)
    header = [h for h in HEADER if not h.startswith("WorkLoad")]
    _, totals, _ = tables(detail(ctx), header)
    assert "estimated on RK3566" in totals[2]


def test_rk3566_is_slower_than_rk3588(convert, default_onnx):
    fast = board_eval.eval_perf(convert(default_onnx, target_platform="rk3588"))
    slow = board_eval.eval_perf(convert(default_onnx, target_platform="rk3566"))
    assert slow.run_us > fast.run_us > 0
    assert "Network Layer Information Table" in fast.table


def test_eval_memory_reports_mem_size(default_model_bytes):
    mem = board_eval.eval_memory(default_model_bytes)
    assert set(mem) == {"total_weight_size", "total_internal_size", "total_dma_allocated_size",
                        "total_sram_size", "free_sram_size"}  # fmt: skip
    assert mem["total_weight_size"] == 15232  # the weights section, as before
    assert mem["total_internal_size"] >= 196608  # never below what rknnrt allocates


def test_cli_perf_and_compare(tmp_path, capsys, int8_model):
    path = tmp_path / "m.rknnrt"
    path.write_bytes(int8_model)
    assert cli.main(["perf", str(path), "--core-mask", "0x3"]) == 0
    out = capsys.readouterr().out
    assert "Network Layer Information Table" in out and "core mask 0x3" in out
    assert re.search(r"rknn_run: \d+ us \(estimated board time", out)
    assert cli.main(["perf", "--compare", "rk3588,rk3576,rk3566", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("note: one NPU core each") and "--core-mask 0x7" in lines[-1]
    assert "lets rk3588, rk3576 split layers" in lines[-1]  # the SoCs with several cores
    rows = {line.split()[0]: line.split() for line in lines[2:-1]}
    assert set(rows) == {"rk3588", "rk3576", "rk3566"}
    fps = {soc: float(row[3]) for soc, row in rows.items()}
    assert fps["rk3588"] > fps["rk3566"] and all(row[-1] == "calibrated" for row in rows.values())
    assert cli.main(["perf", "--compare", "rk3588", "--core-mask", "0x3", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].split()[:2] == ["rk3588", "2"] and "--core-mask 0x3" in lines[-1]
    with pytest.raises(SystemExit, match="unknown SoC"):
        cli.main(["perf", "--compare", "rk9999", str(path)])
    assert np.isfinite(fps["rk3576"])


def test_the_observed_board_row():
    """facts §5.8, a runtime table on RK3588: UINT8 Conv (1,3,1920,1920),(16,3,3,3) ->
    (1,16,960,960): DDR/NPU cycles 1091036/8294400, 16130 us, RW 10802 KB."""
    from rknnrt.core.board.layers import Layer

    layer = Layer("ConvExSwish", "Conv", "c", "NPU", [[1, 3, 1920, 1920], [16, 3, 3, 3], [16]],
                  [[1, 16, 960, 960]], "conv", [3, 3], 1, 16 * 27 + 16)  # fmt: skip
    cost = board_model.cost(layer, board_model.BOARDS["rk3588"], 1)
    assert cost.npu_cycles == 8294400
    assert cost.ddr_cycles == pytest.approx(1091036, rel=0.01)
    assert round(cost.read_bytes / 1024) == 10800  # the board: 10802 (padded weights)
    assert cost.time_us == pytest.approx(16130, rel=0.25)


def test_perf_detail_is_made_once_per_frame_and_needs_a_run(make_ctx, default_model_bytes,
                                                            rknn_log):  # fmt: skip
    ctx = make_ctx(default_model_bytes, PERF)
    d = rk.rknn_perf_detail()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_PERF_DETAIL, d, ctypes.sizeof(d)) < 0
    assert "no finished run" in rknn_log.take("E")[0]
    assert perf_run(ctx) == 0  # nothing ran yet
    run_once(ctx)
    first = detail(ctx)
    assert detail(ctx) == first  # cached: the host column does not change either
    run_once(ctx)
    assert detail(ctx).startswith("-")


def test_log_level_4_prints_the_table(make_ctx, default_model_bytes, monkeypatch, capsys):
    monkeypatch.setenv("RKNN_LOG_LEVEL", "4")
    ctx = make_ctx(default_model_bytes)  # the level is read at rknn_init
    capsys.readouterr()
    run_once(ctx)
    err = capsys.readouterr().err
    assert re.search(r"^I RKNN: .*rknn_run: frame 1: \d+ us on NPU core 0$", err, re.M)
    assert "Network Layer Information Table" in err and "ConvRelu" in err
    assert "Operator Time Consuming Ranking Table" in err


def test_cli_bench_threads(capsys):
    """(moved here with the perf tests from tests/device/test_perf_table.py)"""
    assert cli.main(["bench", "--threads", "3", "--runs", "10", "--warmup", "1",
                     "--core-mask", "0x0"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert re.search(r"threads: 3 \(duplicated contexts\), core mask: 0x0, frames: 30, "
                     r"[\d.]+ s: [\d.]+ FPS", captured.out)  # fmt: skip
    jobs = re.search(r"NPU cores of rk3588: core 0: (\d+) jobs, core 1: (\d+) jobs, "
                     r"core 2: (\d+) jobs", captured.out)  # fmt: skip
    assert jobs and sum(int(j) for j in jobs.groups()) == 30
    assert "30/30" in captured.err  # the progress bar's last state


def test_no_estimate_falls_back_to_host_figures(make_ctx, default_model_bytes, monkeypatch,
                                                rknn_log):  # fmt: skip
    """A graph the board model cannot read must not break a query: one warning, then
    PERF_RUN reports the host time and MEM_SIZE rknnrt's own plan."""
    from rknnrt.core.board import layers as board_layers
    from rknnrt.core.board import perf

    def unreadable(model):
        raise ValueError("no shapes")

    monkeypatch.setattr(board_layers, "static_shapes", unreadable)
    monkeypatch.setattr(perf, "_CACHE", {})
    ctx = make_ctx(default_model_bytes, PERF)
    run_once(ctx)
    rknn_log.clear()
    assert perf_run(ctx) == registry.get(ctx.value).last_run_us > 0
    warnings = rknn_log.take("W")
    assert len(warnings) == 1 and "board estimate unavailable" in warnings[0]
    mem = board_eval.eval_memory(default_model_bytes)
    assert mem["total_internal_size"] == 196608  # rknnrt's plan of the default model


def test_cli_perf_refuses_a_mask_the_platform_lacks(capsys, tmp_path, convert, default_onnx):
    path = tmp_path / "m.rknnrt"
    path.write_bytes(convert(default_onnx, target_platform="rk3566"))
    with pytest.raises(SystemExit, match=r"perf: rknn_set_core_mask\(0x7\) failed"):
        cli.main(["perf", str(path), "--core-mask", "0x7"])


def test_cli_perf_converts_onnx_to_int8(tmp_path, capsys, default_onnx):
    path = tmp_path / "m.onnx"
    path.write_bytes(default_onnx.SerializeToString())
    assert cli.main(["perf", str(path), "--int8", "--target", "rk3576", "--host"]) == 0
    out = capsys.readouterr().out
    assert "(int8 for rk3576)" in out and "host times (RKNNRT_PERF_HOST=1)" in out
    assert re.search(r"rknn_run: \d+ us \(host time", out)
    assert "DequantizeLinear" not in out and "WorkLoad(0/1)" in out
    assert "RKNNRT_PERF_HOST" not in os.environ  # the switch was for that run only


@pytest.mark.parametrize(
    "argv, message",
    [
        (["perf", "{missing}"], "E perf: cannot read"),
        (["perf", "{junk}", "--compare", "rk3588"], "E perf: model is too small"),
        (["perf", "--core-mask", "zz"], "E perf: --core-mask 'zz' is not a number"),
    ],
)
def test_perf_user_errors_are_one_e_line(tmp_path, argv, message):
    junk = tmp_path / "junk.rknnrt"
    junk.write_bytes(b"junk")
    paths = {"missing": str(tmp_path / "none.rknnrt"), "junk": str(junk)}
    with pytest.raises(SystemExit) as raised:
        cli.main([a.format(**paths) for a in argv])
    assert str(raised.value).startswith(message)
