"""The text of RKNN_QUERY_PERF_DETAIL in the vendor's layout (facts §5.8; docs/performance.md).

`Network Layer Information Table`: ID, OpType, DataType, Target, InputShape, OutputShape,
Cycles(DDR/NPU/Total), Time(us), MacUsage(%), WorkLoad(0/1/2) (multi-core NPUs only), RW(KB),
FullName; rknnrt adds HostTime(us) last, so the vendor's columns keep their positions. Then the
two totals lines, rknnrt's estimate line, and the `Operator Time Consuming Ranking Table`.
"""

from __future__ import annotations

from .perf import CostModel, OpRow, host_times


def _shape_text(shapes: list[list[int]], limit: int = 3) -> str:
    parts = ["(" + ",".join(str(d) for d in s) + ")" for s in shapes if s]
    if len(parts) > limit:
        parts = [*parts[:limit], "..."]
    return ",".join(parts) or "\\"


def _join(values: list[float], fmt: str) -> str:
    return "/".join(format(v, fmt) for v in values)


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(header), *(fmt(r) for r in body)]


def render(op_rows: list[OpRow], model: CostModel, core_mask: int) -> str:
    """The vendor-format table with the whole run's estimate (the layers plus the fixed cost of
    a run); Time(us) holds host times with RKNNRT_PERF_HOST=1 or where no board model exists."""
    run_us = model.run_us([r.layer for r in op_rows]) if model.known else None
    host = host_times() or not model.known
    cores = model.platform.npu_cores
    multi = cores > 1
    header = ["ID", "OpType", "DataType", "Target", "InputShape", "OutputShape",
              "Cycles(DDR/NPU/Total)", "Time(us)", "MacUsage(%)"]  # fmt: skip
    header += [f"WorkLoad({'/'.join(str(c) for c in range(cores))})"] if multi else []
    header += ["RW(KB)", "FullName", "HostTime(us)"]
    body = []
    for i, r in enumerate(op_rows, start=1):
        c, layer = r.cost, r.layer
        cycles = f"{c.ddr_cycles}/{c.npu_cycles}/{max(c.ddr_cycles, c.npu_cycles)}"
        usage = _join(c.mac_usage if multi else c.mac_usage[:1], ".2f") if c.macs else "\\"
        time_us = r.host_us if host else c.time_us
        row = [str(i), layer.op, r.dtype, layer.target, _shape_text(layer.ins),
               _shape_text(layer.outs), cycles, str(round(time_us)), usage]  # fmt: skip
        if multi:
            row.append(_join(c.workload or [0.0] * cores, ".1f").replace("/", "%/") + "%")
        row += [str(round(c.read_bytes / 1024)), layer.full_name, f"{r.host_us:.0f}"]
        body.append(row)
    lines = _table(header, body)
    width = max(len(line) for line in lines)
    rule = "-" * width
    layer_total = sum(r.host_us if host else r.cost.time_us for r in op_rows)
    out = [rule, "Network Layer Information Table".center(width).rstrip(), rule, *lines, rule]
    out.append(f"Total Operator Elapsed Per Frame Time(us): {round(layer_total)}")
    out.append(
        f"Total Memory Read/Write Per Frame Size(KB): "
        f"{round(sum(r.cost.read_bytes for r in op_rows) / 1024)}"
    )
    host_total = round(sum(r.host_us for r in op_rows))
    if model.board is None:
        out.append(f"Time(us): host times (no board model for {model.platform.name.upper()})")
    elif host:
        out.append(f"Time(us): host times (RKNNRT_PERF_HOST=1); host total {host_total}")
    else:
        calibrated = "calibrated" if model.board.calibrated else "NOT calibrated"
        out.append(
            f"Time(us): estimated on {model.platform.name.upper()} ({model.dtype}, core mask "
            f"{core_mask:#x}, rknnrt board model, {calibrated}); per run with fixed costs "
            f"{round(run_us or layer_total)}; host (this PC) total {host_total}"
        )
    out.append(rule)
    out += _ranking(op_rows, width, host)
    return "\n".join(out) + "\n"


def _ranking(op_rows: list[OpRow], width: int, host: bool) -> list[str]:
    groups: dict[str, list[OpRow]] = {}
    for r in op_rows:
        groups.setdefault(r.layer.op, []).append(r)
    spent = lambda r: r.host_us if host else r.cost.time_us  # noqa: E731
    total = sum(spent(r) for r in op_rows) or 1.0
    order = sorted(groups.items(), key=lambda kv: (-sum(spent(r) for r in kv[1]), kv[0]))
    header = ["OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)", "NPUTime(us)",
              "TotalTime(us)", "TimeRatio(%)", "HostTime(us)"]  # fmt: skip
    body = []
    for op, items in order:
        cpu = sum(spent(r) for r in items if r.layer.target == "CPU")
        npu = sum(spent(r) for r in items if r.layer.target == "NPU")
        body.append([op, str(len(items)), str(round(cpu)), "0", str(round(npu)),
                     str(round(cpu + npu)), f"{100 * (cpu + npu) / total:.2f}%",
                     str(round(sum(r.host_us for r in items)))])  # fmt: skip
    lines = _table(header, body)
    width = max(width, *(len(line) for line in lines))
    rule = "-" * width
    return [rule, "Operator Time Consuming Ranking Table".center(width).rstrip(), rule, *lines,
            rule]  # fmt: skip
