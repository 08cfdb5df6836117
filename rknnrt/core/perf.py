"""The per-layer performance table (RKNN_QUERY_PERF_DETAIL, RKNN_LOG_LEVEL=4, `rknnrt perf`).

Times are measured on the host: the converted graph runs once more in a separate onnxruntime
session with profiling on and graph optimisations off (so each profiled kernel is one node of the
converted graph), on the context's current inputs: one warm-up run, then the median of the
measured runs per node. Next to each measured time, a cost model estimates the target NPU's
time (`estimate`; numbers from the platform table, rules in docs/device.md).

The layout follows the vendor's table (facts §5.8): `Network Layer Information Table` with one row
per op (first InputOperator, last OutputOperator), the two totals, then the `Operator Time
Consuming Ranking Table`. rknnrt adds one column, `EstTime(us)`, at the end of both tables.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from math import ceil, prod

import numpy as np
import onnx
import onnxruntime as ort

from ..model.meta import ModelMeta, TensorSpec
from .platforms import Platform

# Ops the vendor splits across the cores of a CORE_0_1 / CORE_0_1_2 mask (facts §5.10; ONNX
# spells DepthwiseConvolution as a grouped Conv and Relu6 as Clip). Others run on core 0.
SPLITTABLE = frozenset(
    {"Conv", "Add", "Concat", "Relu", "Clip", "ThresholdedRelu", "PRelu", "LeakyRelu"}
)
# Cost model constants (docs/device.md). One RK3588 core does 1024 int8 or 512 fp16 MACs per
# cycle (TRM, quoted by jas-hacks.blogspot.com 2024-02), read as a 32 x 32 array of input x
# output channels: channel counts are rounded up to ALIGN before MACs are counted. The same
# geometry is assumed on every platform (unverified); the clock follows from the TOPS figure.
ARRAY_MACS_INT8 = 1024
FP16_RATE = 0.5  # fp16 MACs per cycle relative to int8 (TRM: 512 / 1024)
ALIGN = {"INT8": 32, "FLOAT16": 16}
LANES = {"INT8": 16, "FLOAT16": 8}  # elements per cycle of the non-MAC units (16 bytes)
# Nodes that only emulate the NPU's number format: quantise/dequantise pairs around int8 ops, and
# float32 <-> float16 Casts that round stored tensors. On the NPU they are part of the
# neighbouring ops, so the cost model gives them no time, traffic or core.
FUSED = frozenset({"QuantizeLinear", "DequantizeLinear"})
_FLOATS = frozenset({"FLOAT32", "FLOAT16"})
# An activation right after one of these runs inside it on the NPU (the tensor between is never
# stored; the converter's quantiser makes the same assumption), so it costs nothing either.
_FUSES_ACTIVATION = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Add"})
_ACTIVATIONS = frozenset({"Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "HardSwish"})
_MAC_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
_TYPE_NAMES = {
    "float": "FLOAT32", "float16": "FLOAT16", "int8": "INT8", "uint8": "UINT8",
    "int16": "INT16", "int32": "INT32", "int64": "INT64", "bool": "BOOL", "double": "FLOAT64",
}  # fmt: skip
_SIZES = {"FLOAT32": 4, "FLOAT16": 2, "INT8": 1, "UINT8": 1, "INT16": 2, "INT32": 4,
          "INT64": 8, "BOOL": 1, "FLOAT64": 8}  # fmt: skip
PROFILE_RUNS = 3  # measured runs after the warm-up (1 when a run takes longer than SLOW_S)
SLOW_S = 0.2


@dataclass
class Estimate:
    """The cost model's view of one op on the target NPU."""

    npu_cycles: int = 0
    ddr_cycles: int = 0
    time_us: float = 0.0
    macs: int = 0
    mac_usage: list[float] = field(default_factory=list)  # per core, %
    workload: list[float] = field(default_factory=list)  # per core, %


@dataclass
class OpRow:
    op_type: str
    name: str
    dtype: str
    target: str
    in_shapes: list[list[int]]
    out_shapes: list[list[int]]
    time_us: float
    rw_bytes: int
    est: Estimate


@dataclass
class CostModel:
    """Per-platform throughput and bandwidth (docs/device.md, "Cost model")."""

    platform: Platform
    dtype: str  # "INT8" or "FLOAT16": what the NPU computes in for this model
    cores: int  # cores a splittable op is spread over (1 unless a multi-core mask)

    @property
    def known(self) -> bool:
        return self.platform.npu_tops > 0 and self.platform.ddr_gbps > 0

    @property
    def core_macs_per_s(self) -> float:
        rate = self.platform.npu_tops * 1e12 / 2 / self.platform.npu_cores
        return rate * (FP16_RATE if self.dtype == "FLOAT16" else 1.0)

    @property
    def clock_hz(self) -> float:
        return self.platform.npu_tops * 1e12 / 2 / self.platform.npu_cores / ARRAY_MACS_INT8

    def estimate(self, op_type: str, ins: list[list[int]], outs: list[list[int]]) -> Estimate:
        if not self.known:
            return Estimate(workload=self._workload(1))
        elem = _SIZES[self.dtype]
        rw = elem * (sum(prod(s) for s in ins) + sum(prod(s) for s in outs))
        macs, padded = mac_counts(op_type, ins, outs, ALIGN[self.dtype])
        split = self.cores if op_type in SPLITTABLE else 1
        if padded:
            compute_s = padded / self.core_macs_per_s / split
        else:  # the elementwise / pooling units: LANES outputs per cycle
            compute_s = sum(prod(s) for s in outs) / LANES[self.dtype] / self.clock_hz / split
        memory_s = rw / (self.platform.ddr_gbps * 1e9)
        time_s = max(compute_s, memory_s)
        capacity = time_s * self.core_macs_per_s  # MACs one core could do in that time
        usage = [macs * share / capacity if capacity else 0.0 for share in self._workload(split)]
        return Estimate(
            npu_cycles=round(compute_s * self.clock_hz),
            ddr_cycles=round(memory_s * self.clock_hz),
            time_us=time_s * 1e6,
            macs=macs,
            mac_usage=usage,
            workload=self._workload(split),
        )

    def _workload(self, split: int) -> list[float]:
        """Per core, the share of the op it runs (split 0: none, it is not an NPU op)."""
        n = self.platform.npu_cores
        return [100.0 / split if core < split else 0.0 for core in range(n)]


def mac_counts(op_type: str, ins: list[list[int]], outs: list[list[int]],
               align: int) -> tuple[int, int]:  # fmt: skip
    """(MACs, MACs after rounding channel counts up to `align`) of a MAC op; (0, 0) otherwise."""
    if op_type not in _MAC_OPS or len(ins) < 2 or not outs or not outs[0]:
        return 0, 0
    out, w = outs[0], ins[1]
    up = lambda c: ceil(c / align) * align  # noqa: E731
    if op_type == "Conv" and len(w) >= 3 and len(out) >= 2:
        n, cout, spatial = out[0], out[1], prod(out[2:])
        cin_g, kernel = w[1], prod(w[2:])
        groups = max(1, ins[0][1] // cin_g) if len(ins[0]) > 1 and cin_g else 1
        macs = n * cout * spatial * cin_g * kernel
        if groups > 1 and groups == ins[0][1]:  # depthwise: one lane per channel
            return macs, n * up(cout) * spatial * kernel * align
        return macs, groups * n * up(cout // groups) * spatial * up(cin_g) * kernel
    if op_type == "ConvTranspose" and len(w) >= 3:
        n, cin, spatial_in = ins[0][0], ins[0][1], prod(ins[0][2:])
        cout_g, kernel = w[1], prod(w[2:])
        macs = n * cin * spatial_in * cout_g * kernel
        return macs, n * up(cin) * spatial_in * up(cout_g) * kernel
    if op_type == "Gemm":
        m, n = out[0], out[-1]
        k = prod(ins[0]) // max(1, m)
        return m * n * k, m * up(n) * up(k)
    k = ins[0][-1] if ins[0] else 1  # MatMul
    rows, n = prod(out[:-1]), out[-1]
    return rows * n * k, rows * up(n) * up(k)


# -- profiling ---------------------------------------------------------------------------------
class Profiler:
    """The converted graph with every node named, ready to profile (built once per context)."""

    def __init__(self, meta: ModelMeta, graph: bytes) -> None:
        model = onnx.load_model_from_string(graph)
        seen: set[str] = set()
        self.nodes: list[tuple[str, str]] = []  # (op type, name) in graph order
        for i, node in enumerate(model.graph.node):
            name = node.name or f"{node.op_type}_{i}"
            while name in seen:
                name += "_"
            node.name = name
            seen.add(name)
            self.nodes.append((node.op_type, name))
        self.graph = model.SerializeToString()
        self.meta = meta
        self.fused = _fused_activations(model.graph)
        quantized = any(op in FUSED or op.startswith("QLinear") for op, _ in self.nodes)
        self.dtype = "INT8" if quantized else "FLOAT16"

    def measure(self, weights: np.ndarray, feeds: dict[str, np.ndarray]) -> dict[str, dict]:
        """Per node name: {'us': median time, 'ins': shapes, 'outs': shapes}."""
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.enable_profiling = True
        folder = tempfile.mkdtemp(prefix="rknnrt-perf-")
        options.profile_file_prefix = os.path.join(folder, "profile")
        threads = os.environ.get("RKNNRT_NUM_THREADS")
        if threads and threads.isdigit():
            options.intra_op_num_threads = int(threads)
        names, values = [], []
        for w in self.meta.weights:
            dtype = np.dtype(np.bool_) if w.dtype == "bool" else np.dtype(w.dtype)
            view = weights[w.offset : w.offset + w.nbytes].view(dtype).reshape(w.shape)
            names.append(w.name)
            values.append(ort.OrtValue.ortvalue_from_numpy(view))
        try:
            if names:
                options.add_external_initializers(names, values)
            session = ort.InferenceSession(self.graph, options, providers=["CPUExecutionProvider"])
            start = time.perf_counter()
            session.run(None, feeds)  # warm-up: first-run allocations are not the op's time
            runs = PROFILE_RUNS if time.perf_counter() - start < SLOW_S else 1
            for _ in range(runs):
                session.run(None, feeds)
            path = session.end_profiling()
            with open(path, encoding="utf-8") as f:
                events = json.load(f)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return _node_times(events)


def _fused_activations(graph: onnx.GraphProto) -> set[str]:
    """Names of activation nodes whose input comes only from a MAC/Add node (fused on the NPU)."""
    producer = {out: node.op_type for node in graph.node for out in node.output}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    outputs = {vi.name for vi in graph.output}
    return {
        node.name
        for node in graph.node
        if node.op_type in _ACTIVATIONS
        and node.input
        and producer.get(node.input[0]) in _FUSES_ACTIVATION
        and uses.get(node.input[0]) == 1
        and node.input[0] not in outputs
    }


def _shapes(entries: list[dict]) -> list[list[int]]:
    return [list(next(iter(e.values()))) for e in entries if e]


def _node_times(events: list[dict]) -> dict[str, dict]:
    durations: dict[str, list[int]] = {}
    found: dict[str, dict] = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        node = name[: -len("_kernel_time")]
        durations.setdefault(node, []).append(int(event.get("dur", 0)))
        if node not in found:
            args = event.get("args", {})
            outs = args.get("output_type_shape", [])
            ins = args.get("input_type_shape", [])
            found[node] = {
                "ins": _shapes(ins),
                "outs": _shapes(outs),
                "types": {_TYPE_NAMES.get(next(iter(e), ""), "") for e in ins + outs if e},
            }
    for node, values in durations.items():
        measured = values[1:] or values  # the first is the warm-up run
        found[node]["us"] = float(statistics.median(measured))
    return found


def rows(profiler: Profiler, times: dict[str, dict], model: CostModel) -> list[OpRow]:
    """The table's rows: InputOperator per input, each profiled node, OutputOperator per output."""
    elem = _SIZES[model.dtype]
    result = []
    for spec in profiler.meta.inputs:
        result.append(_io_row("InputOperator", spec, [], [spec.shape], model))
    for op_type, name in profiler.nodes:
        t = times.get(name)
        if t is None:  # not a kernel (e.g. a Constant folded at load)
            continue
        if (
            op_type in FUSED
            or name in profiler.fused
            or (op_type == "Cast" and t["types"] <= _FLOATS)
        ):
            est, rw = Estimate(workload=model._workload(0)), 0
        else:
            est = model.estimate(op_type, t["ins"], t["outs"])
            rw = elem * sum(prod(s) for s in t["ins"] + t["outs"])
        row = OpRow(op_type, name, model.dtype, "NPU", t["ins"], t["outs"], t["us"], rw, est)
        result.append(row)
    for spec in profiler.meta.outputs:
        result.append(_io_row("OutputOperator", spec, [spec.shape], [spec.shape], model))
    return result


def _io_row(kind: str, spec: TensorSpec, ins: list[list[int]], outs: list[list[int]],
            model: CostModel) -> OpRow:  # fmt: skip
    """The runtime's own input/output step (on the CPU; its time is in inputs_set/outputs_get)."""
    dtype = _TYPE_NAMES.get("float" if spec.dtype == "float32" else spec.dtype, "\\")
    return OpRow(kind, spec.name, dtype, "CPU", ins, outs, 0.0, 0,
                 Estimate(workload=model._workload(0)))  # fmt: skip


# -- rendering ---------------------------------------------------------------------------------
def _shape_text(shapes: list[list[int]]) -> str:
    return ",".join("(" + ",".join(str(d) for d in s) + ")" for s in shapes) or "\\"


def _join(values: list[float], fmt: str) -> str:
    return "/".join(format(v, fmt) for v in values)


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(header), *(fmt(r) for r in body)]


def render(op_rows: list[OpRow], model: CostModel, core_mask: int) -> str:
    """The vendor-format text (facts §5.8) with rknnrt's EstTime(us) column."""
    cores = model.platform.npu_cores
    multi = cores > 1
    workload = f"WorkLoad({'/'.join(str(c) for c in range(cores))})"
    header = ["ID", "OpType", "DataType", "Target", "InputShape", "OutputShape",
              "Cycles(DDR/NPU/Total)", "Time(us)", "MacUsage(%)"]  # fmt: skip
    header += [workload] if multi else []
    header += ["RW(KB)", "FullName", "EstTime(us)"]
    body = []
    for i, r in enumerate(op_rows, start=1):
        e = r.est
        io = r.target == "CPU"
        cycles = f"{e.ddr_cycles}/{e.npu_cycles}/{max(e.ddr_cycles, e.npu_cycles)}"
        usage = (
            "\\" if io or not e.macs else _join(e.mac_usage if multi else e.mac_usage[:1], ".2f")
        )
        row = [str(i), r.op_type, r.dtype, r.target, _shape_text(r.in_shapes),
               _shape_text(r.out_shapes), cycles, str(round(r.time_us)), usage]  # fmt: skip
        row += [_join(e.workload, ".1f").replace("/", "%/") + "%"] if multi else []
        full = f"{r.op_type}:{r.name}"
        est = "\\" if not model.known else f"{e.time_us:.1f}"
        row += [str(round(r.rw_bytes / 1024)), full, est]
        body.append(row)
    lines = _table(header, body)
    width = max(len(line) for line in lines)
    rule = "-" * width
    total_us = round(sum(r.time_us for r in op_rows))
    total_kb = round(sum(r.rw_bytes for r in op_rows) / 1024)
    est_total = sum(r.est.time_us for r in op_rows)
    out = [rule, "Network Layer Information Table".center(width).rstrip(), rule, *lines, rule]
    out.append(f"Total Operator Elapsed Per Frame Time(us): {total_us}")
    out.append(f"Total Memory Read/Write Per Frame Size(KB): {total_kb}")
    if model.known:
        out.append(
            f"Estimated Per Frame Time(us) on {model.platform.name.upper()} "
            f"({model.dtype}, core mask {core_mask:#x}, rknnrt cost model): {round(est_total)}"
        )
    out.append(rule)
    out += _ranking(op_rows, model, width)
    return "\n".join(out) + "\n"


def _ranking(op_rows: list[OpRow], model: CostModel, width: int) -> list[str]:
    groups: dict[str, list[OpRow]] = {}
    for r in op_rows:
        groups.setdefault(r.op_type, []).append(r)
    total = sum(r.time_us for r in op_rows) or 1.0
    order = sorted(groups.items(), key=lambda kv: (-sum(r.time_us for r in kv[1]), kv[0]))
    header = ["OpType", "CallNumber", "CPUTime(us)", "GPUTime(us)", "NPUTime(us)",
              "TotalTime(us)", "TimeRatio(%)", "EstTime(us)"]  # fmt: skip
    body = []
    for op_type, items in order:
        cpu = sum(r.time_us for r in items if r.target == "CPU")
        npu = sum(r.time_us for r in items if r.target == "NPU")
        est = "\\" if not model.known else f"{sum(r.est.time_us for r in items):.1f}"
        body.append([op_type, str(len(items)), str(round(cpu)), "0", str(round(npu)),
                     str(round(cpu + npu)), f"{100 * (cpu + npu) / total:.2f}%", est])  # fmt: skip
    lines = _table(header, body)
    width = max(width, *(len(line) for line in lines))
    rule = "-" * width
    return [rule, "Operator Time Consuming Ranking Table".center(width).rstrip(), rule, *lines,
            rule]  # fmt: skip
