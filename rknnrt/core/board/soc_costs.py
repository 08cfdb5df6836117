"""What a board would take: per-SoC latency and memory of the vendor's layers (board_layers).

Per layer (docs/performance.md has the derivation and the calibration table):

- NPU cycles, as the vendor compiler counts them (its verbose build log prints them per layer;
  the formulas reproduce those of toolkit 2.5.0 for every Conv of the five calibration models):
  a dense Conv takes pad16(output pixels) x align(Cout) x Cin' x KhKw / MACs-per-cycle, with
  Cin' = align32(Cin), at least 128 for a 1x1 kernel (align: 32 on RK3588/RK3576, 16 on the
  512-MAC NPUs); a depthwise Conv takes
  pad16(pixels) x KhKw x ceil(C / dw_lanes). float16 takes twice the cycles.
- DDR cycles: bytes read (inputs + weights) and written / the SoC's bytes per DDR cycle.
- Time: a MAC layer max(NPU cycles / (clock x mac_eff), bytes / bandwidth) + layer_us; other NPU
  layers (pooling, concat, resize, elementwise: the vendor gives them no cycles) bytes /
  bandwidth + layer_us; CPU layers bytes / cpu_gbps + cpu_us; plus job_us per run.
- Several cores (RK3588 CORE_0_1(_2), RK3576 CORE_0_1): only the splittable ops divide their
  compute, by 1 + (cores - 1) x split_eff; bandwidth is shared and each split layer pays
  sync_us per extra core.

mac_eff, bandwidth, layer_us and job_us are fitted to the model zoo's published FPS
(benchmarks/board_estimate.py --fit); every other constant comes from the vendor's logs or
documents. rv1106/rv1103 and rv1126b have no published figures: their constants are scaled from
the nearest calibrated NPU (marked "scaled" in the table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil, prod

from .. import platforms
from .layers import Layer

# Ops the vendor splits over the cores of a multi-core mask (facts §5.10; DepthwiseConvolution
# is a grouped Conv, Relu6 a Clip); the fused names start with these.
SPLITTABLE = ("Conv", "Add", "Concat", "Relu", "Clip", "ThresholdedRelu", "PRelu", "LeakyRelu")


@dataclass(frozen=True)
class Board:
    """One SoC's NPU as the latency model sees it (sources: docs/performance.md, table 1): the
    fitted numbers; the core count and the NC1HWC2 block are the platform's (core/platforms.py)."""

    name: str
    macs_per_cycle: int  # int8 MACs per cycle per core (vendor log cycles; TRM for RK3588)
    dw_lanes: int  # depthwise channels per cycle (vendor log cycles)
    ddr_bytes_per_cycle: float  # vendor log DDR cycles
    clock_mhz: float  # NPU clock
    mac_eff: float  # fitted: achieved / peak MAC rate
    bw_gbps: float  # fitted: effective DRAM bandwidth of the NPU
    layer_us: float  # fitted: fixed cost per NPU layer (task setup, sync)
    job_us: float  # fitted: fixed cost per rknn_run
    cpu_gbps: float = 2.0  # CPU-fallback ops: GB per second they stream
    cpu_us: float = 30.0  # CPU-fallback ops: fixed cost (runtime hand-over)
    split_eff: float = 0.25  # multi-core: each extra core adds this share of one core
    sync_us: float = 8.0  # multi-core: extra fixed cost per split layer and extra core
    cout_align: int = 32  # output channels a dense Conv computes at once (vendor log cycles)
    tile_bytes: int | None = 4096  # Conv kernel limit per output channel (board_layers)
    calibrated: bool = True

    @property
    def cores(self) -> int:
        return platforms.get(self.name).npu_cores

    @property
    def c2_int8(self) -> int:
        """Channels per int8 NC1HWC2 block (memory layout)."""
        return platforms.get(self.name).c2_for("int8")


# Fitted values: benchmarks/board_estimate.py --fit (least squares on log FPS, five models).
# CPU-fallback rates follow each SoC's big cores (RK3588 A76 2.4 GHz, RK3576 A72 2.2 GHz, RK3566
# A55 1.8 GHz, RK3562 A53 2.0 GHz, RV1126B A53 1.6 GHz, RV1106 A7 1.2 GHz): rknnrt's judgement.
BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        Board("rk3588", 1024, 64, 23.6, 1000, 0.62, 13.5, 0.0, 150.0, 4.0, 30.0),
        Board("rk3576", 1024, 64, 7.46, 1000, 0.76, 10.0, 0.0, 150.0, 3.0, 40.0,
              tile_bytes=None),
        Board("rk3566", 512, 32, 6.57, 1000, 0.42, 12.5, 2.0, 150.0, 1.5, 60.0,
              cout_align=16, tile_bytes=None),
        Board("rk3562", 512, 64, 7.46, 1000, 0.60, 8.5, 0.0, 150.0, 1.5, 60.0,
              tile_bytes=None, cout_align=16),
        # Not calibrated (no published figures): the nearest calibrated NPU's efficiency.
        Board("rv1126b", 1024, 64, 7.46, 1000, 0.62, 8.0, 0.0, 150.0, 1.2, 70.0,
              tile_bytes=None, calibrated=False),
        Board("rv1106", 256, 32, 6.57, 1000, 0.42, 3.5, 0.0, 150.0, 0.5, 120.0,
              tile_bytes=None, cout_align=16, calibrated=False),
    )
}  # fmt: skip
BOARDS["rk3568"] = BOARDS["rk3566"]
BOARDS["rv1103"] = BOARDS["rv1106"]


def board(platform: str) -> Board | None:
    """The latency model of `platform` (rknnrt's platform names), None when it has none."""
    return BOARDS.get(platform.lower())


@dataclass
class Cost:
    """The model's view of one layer on one SoC."""

    npu_cycles: int = 0
    ddr_cycles: int = 0
    time_us: float = 0.0
    macs: int = 0
    read_bytes: int = 0
    mac_usage: list[float] = field(default_factory=list)  # per core, %
    workload: list[float] = field(default_factory=list)  # per core, %


def _align(value: int, to: int) -> int:
    return -(-value // to) * to


def _elems(shapes: list[list[int]]) -> int:
    return sum(prod(s) for s in shapes if s)


def cycles(layer: Layer, b: Board, elem: int) -> tuple[int, int]:
    """(NPU cycles, useful MACs) of a MAC layer on one core; (0, 0) for other layers."""
    if layer.kind not in ("conv", "dwconv") or not layer.outs or len(layer.outs[0]) < 4:
        return 0, 0
    n, cout, *spatial = layer.outs[0]
    pixels = _align(n * prod(spatial), 16)
    kk = prod(layer.kernel)
    if layer.kind == "dwconv":
        c = layer.ins[0][1]
        return pixels * kk * ceil(c / b.dw_lanes) * elem, n * prod(spatial) * c * kk
    groups = max(1, layer.groups)
    cin = layer.ins[0][1] // groups if len(layer.ins[0]) > 1 else 1
    cin_p = max(_align(cin, 32), 128) if kk == 1 else _align(cin, 32)
    padded = pixels * _align(cout // groups, b.cout_align) * cin_p * kk * groups
    return ceil(padded / b.macs_per_cycle) * elem, n * prod(spatial) * cout * cin * kk


def cost(layer: Layer, b: Board, elem: int, cores: int = 1) -> Cost:
    """Cycles and time of one layer; `cores`: the cores a splittable layer is spread over."""
    if layer.kind == "io":
        return Cost(workload=[0.0] * b.cores)
    out_bytes = _elems(layer.outs) * elem
    feature_bytes = _elems(layer.ins[:1] if layer.kind.endswith("conv") else layer.ins) * elem
    extra = _elems(layer.ins[3:]) * elem if layer.kind == "conv" else 0  # the fused Add's input
    reads = feature_bytes + extra + layer.weight_elems * elem
    total_bytes = reads + out_bytes
    if layer.target == "CPU":
        time_us = total_bytes / (b.cpu_gbps * 1e3) + b.cpu_us
        return Cost(0, 0, time_us, 0, reads, [0.0] * b.cores, [0.0] * b.cores)
    npu, macs = cycles(layer, b, elem)
    split = cores if cores > 1 and layer.op.startswith(SPLITTABLE) else 1
    memory_us = total_bytes / (b.bw_gbps * 1e3)
    compute_us = npu / (b.clock_mhz * b.mac_eff)
    if split > 1:
        compute_us /= 1 + (split - 1) * b.split_eff
    time_us = max(compute_us, memory_us) + b.layer_us + (split - 1) * b.sync_us
    workload = [100.0 / split if i < split else 0.0 for i in range(b.cores)]
    peak = time_us * b.clock_mhz * b.macs_per_cycle / elem  # MACs one core could do
    usage = [100.0 * macs * share / 100.0 / peak if peak else 0.0 for share in workload]
    ddr = round(total_bytes / b.ddr_bytes_per_cycle) if npu else 0
    return Cost(npu, ddr, time_us, macs, reads, usage, workload)


def estimate(layers: list[Layer], b: Board, elem: int, cores: int = 1) -> tuple[list[Cost], float]:
    """(per-layer costs, µs per run including the fixed cost of a run)."""
    costs = [cost(layer, b, elem, cores) for layer in layers]
    return costs, sum(c.time_us for c in costs) + b.job_us


# -- memory ------------------------------------------------------------------------------------
def weight_bytes(layers: list[Layer], b: Board, elem: int) -> int:
    """Weights as the vendor packs them: kernels with Cin padded to C2 when smaller, 8 bytes
    per output channel of bias and requantisation parameters (vendor feature-table records)."""
    total = 0
    for layer in layers:
        if layer.kind not in ("conv", "dwconv") or layer.weight_elems == 0 or len(layer.ins) < 2:
            continue
        weight = layer.ins[1]
        if len(weight) < 2:
            continue
        cout = weight[0] if layer.kind == "conv" else layer.ins[0][1]
        cin = weight[1]
        kk = prod(weight[2:])
        c2 = b.c2_int8 if elem == 1 else b.c2_int8 // 2
        if layer.kind == "dwconv":
            kernel = cout * kk
        else:
            kernel = cout * (cin if cin >= c2 else c2) * kk
        total += kernel * elem + 8 * cout
    return total


def _tensor_bytes(shape: list[int], b: Board, elem: int, compact: bool) -> int:
    if len(shape) != 4 or compact:
        return prod(shape) * elem
    c2 = b.c2_int8 if elem == 1 else b.c2_int8 // 2
    return shape[0] * _align(shape[1], c2) * shape[2] * shape[3] * elem


def internal_bytes(layers: list[Layer], b: Board, elem: int) -> int:
    """First fit of the feature maps in layer order, each freed after its last reader, as the
    vendor's feature-tensor table places them (the input included, NHWC-compact)."""
    size: dict[str, int] = {}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    inputs = {t for layer in layers if layer.op == "InputOperator" for t in layer.feature_outs}
    for step, layer in enumerate(layers):
        if layer.op == "OutputOperator":
            continue
        for t in layer.feature_ins:
            if t in first:
                last[t] = step
        for t, shape in zip(layer.feature_outs, layer.outs or [[]]):
            if t not in first:
                first[t], last[t] = step, step
                size[t] = _tensor_bytes(shape, b, elem, t in inputs)
    for layer in layers:  # split outputs and tiles share one output shape list
        for t in layer.feature_outs:
            if t not in size and layer.outs:
                size[t] = _tensor_bytes(layer.outs[0], b, elem, False)
                first.setdefault(t, 0)
                last.setdefault(t, first[t])
    placed: list[tuple[int, int, int]] = []  # (offset, end, last step)
    top = 0
    for t in sorted(first, key=lambda k: (first[k], list(first).index(k))):
        step = first[t]
        live = sorted((o, e) for o, e, until in placed if until >= step)
        offset = 0
        for o, e in live:
            if offset + size[t] <= o:
                break
            offset = max(offset, e)
        placed.append((offset, offset + size[t], last[t]))
        top = max(top, offset + size[t])
    return top
