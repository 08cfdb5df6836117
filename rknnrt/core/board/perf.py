"""The per-layer performance table (RKNN_QUERY_PERF_DETAIL, RKNN_LOG_LEVEL=4, `rknnrt perf`) and
the board estimates behind RKNN_QUERY_PERF_RUN and RKNN_QUERY_MEM_SIZE.

The table is the vendor's (facts §5.8): one row per vendor layer after fusion (board_layers:
no Quantize/Dequantize rows, `ConvRelu`, `ConvAddRelu`, ...), and `Time(us)` is the estimated
board time of the model's target with the core mask in effect (board_model). The time this PC
took stays available: the last column, `HostTime(us)`, holds each layer's share of an
onnxruntime profile of the converted graph (its nodes plus the Q/DQ nodes around them), and
`RKNNRT_PERF_HOST=1` makes `Time(us)` and PERF_RUN report host times instead.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from ...model.meta import ModelMeta
from ...sessions import factory, policies
from .. import log, switches
from ..lazy_imports import onnx, ort
from ..platforms import Platform
from . import layers as board_layers
from . import segment_layers
from . import soc_costs as board_model
from .layers import Layer
from .soc_costs import Cost

PROFILE_RUNS = 3  # measured runs after the warm-up (1 when a run takes longer than SLOW_S)
SLOW_S = 0.2
_QUANT = frozenset({"QuantizeLinear", "DequantizeLinear"})


def host_times() -> bool:
    """Whether the switch asks for host times (read at each query)."""
    return switches.perf_host()


def model_dtype(graph: onnx.GraphProto) -> str:
    """What the NPU computes the model in: INT8 when it is quantised, FLOAT16 otherwise."""
    quantized = any(n.op_type in _QUANT or n.op_type.startswith("QLinear") for n in graph.node)
    return "INT8" if quantized else "FLOAT16"


@dataclass
class OpRow:
    layer: Layer
    dtype: str
    cost: Cost
    host_us: float = 0.0

    @property
    def time_us(self) -> float:
        return self.host_us if host_times() else self.cost.time_us


@dataclass
class CostModel:
    """The board model of one platform, dtype and core count (cores a splittable op uses)."""

    platform: Platform
    dtype: str  # "INT8" or "FLOAT16"
    cores: int = 1
    board: board_model.Board | None = field(init=False)

    def __post_init__(self) -> None:
        self.board = board_model.board(self.platform.name)

    @property
    def known(self) -> bool:
        return self.board is not None

    @property
    def elem(self) -> int:
        return 1 if self.dtype == "INT8" else 2

    def layers(self, graph: onnx.GraphProto, shapes: dict[str, list[int]]) -> list[Layer]:
        tile = self.board.tile_bytes if self.board else board_layers.TILE_BYTES
        layers = board_layers.vendor_layers(graph, shapes, self.elem, tile)
        return segment_layers.place(layers, graph, self.platform.name)  # custom-ops hook

    def cost(self, layer: Layer) -> Cost:
        if self.board is None:
            return Cost(workload=[0.0] * self.platform.npu_cores)
        return board_model.cost(layer, self.board, self.elem, self.cores)

    def run_us(self, layers: list[Layer]) -> float:
        if self.board is None:
            return 0.0
        return board_model.estimate(layers, self.board, self.elem, self.cores)[1]


# -- static shapes of a converted model ----------------------------------------------------------
def model_with_constants(graph: bytes, meta: ModelMeta, weights: np.ndarray) -> onnx.ModelProto:
    """The converted graph with its small integer constants (shapes, axes) read from the weights,
    so that shape inference sees them; large tensors keep only their dims."""
    model = onnx.load_model_from_string(graph)
    specs = {w.name: w for w in meta.weights}
    for init in model.graph.initializer:
        spec = specs.get(init.name)
        init.data_location = onnx.TensorProto.DEFAULT
        del init.external_data[:]
        small_int = init.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
        if spec is not None and small_int and spec.nbytes <= 4096 and weights.size:
            init.raw_data = bytes(weights[spec.offset : spec.offset + spec.nbytes])
    return model


@dataclass
class Board:
    """A converted model's vendor layers and board figures on one platform (cached per model)."""

    layers: list[Layer]
    model: CostModel

    def run_us(self) -> int:
        """µs per run on the board; 0 when there is no estimate."""
        return round(self.model.run_us(self.layers)) if self.layers else 0

    def memory(self) -> tuple[int, int]:
        """(weight bytes, internal bytes) the board would report; (0, 0) without a model."""
        b = self.model.board
        if b is None or not self.layers:
            return 0, 0
        elem = self.model.elem
        return (board_model.weight_bytes(self.layers, b, elem),
                board_model.internal_bytes(self.layers, b, elem))  # fmt: skip


_CACHE: dict[tuple[int, str, int], tuple[object, Board]] = {}


def board_view(meta: ModelMeta, graph: bytes, weights: np.ndarray | None, platform: Platform,
               cores: int = 1) -> Board:  # fmt: skip
    """The Board of a loaded model (meta identifies it; cached, at most 32 entries)."""
    key = (id(meta), platform.name, cores)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is meta:
        return hit[1]
    model = model_with_constants(graph, meta, weights if weights is not None else np.zeros(0))
    cost_model = CostModel(platform, model_dtype(model.graph), cores)
    try:
        shapes = board_layers.static_shapes(model)
        for spec in [*meta.inputs, *meta.outputs]:
            shapes[spec.name] = list(spec.shape)
        layers = cost_model.layers(model.graph, shapes)
    except Exception as exc:  # noqa: BLE001 - an estimate must never break a query
        log.warning(f"board estimate unavailable for this model ({type(exc).__name__}: {exc}); "
                    "PERF_RUN reports host time and MEM_SIZE rknnrt's own plan")  # fmt: skip
        layers = []
    view = Board(layers, cost_model)
    if len(_CACHE) >= 32:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (meta, view)
    return view


# -- host profiling --------------------------------------------------------------------------
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
        self.model = model
        self.graph = model.SerializeToString()
        self.meta = meta
        self.dtype = model_dtype(model.graph)

    def measure(self, weights: np.ndarray, feeds: dict[str, np.ndarray]) -> dict[str, dict]:
        """Per node name: {'us': median time, 'ins': shapes, 'outs': shapes}."""
        folder = tempfile.mkdtemp(prefix="rknnrt-perf-")
        names, values = [], []
        for w in self.meta.weights:
            dtype = np.dtype(np.bool_) if w.dtype == "bool" else np.dtype(w.dtype)
            view = weights[w.offset : w.offset + w.nbytes].view(dtype).reshape(w.shape)
            names.append(w.name)
            values.append(ort.OrtValue.ortvalue_from_numpy(view))
        try:
            session = factory.create(self.graph, policies.PROFILER, threads=switches.num_threads(),
                                     initializers=(names, values),
                                     profile_prefix=os.path.join(folder, "profile"))  # fmt: skip
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

    def shapes(self, times: dict[str, dict]) -> dict[str, list[int]]:
        """Tensor shapes as the profiled run saw them (initializers: their dims)."""
        shapes = {i.name: list(i.dims) for i in self.model.graph.initializer}
        for spec in [*self.meta.inputs, *self.meta.outputs]:
            shapes[spec.name] = list(spec.shape)
        for node in self.model.graph.node:
            seen = times.get(node.name)
            if seen is None:
                continue
            for name, shape in zip([i for i in node.input if i], seen["ins"]):
                shapes.setdefault(name, shape)
            for name, shape in zip([o for o in node.output if o], seen["outs"]):
                shapes[name] = shape
        return shapes


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
            found[node] = {
                "ins": _shapes(args.get("input_type_shape", [])),
                "outs": _shapes(args.get("output_type_shape", [])),
            }
    for node, values in durations.items():
        measured = values[1:] or values  # the first is the warm-up run
        found[node]["us"] = float(statistics.median(measured))
    return found


def _host_owner(graph: onnx.GraphProto, layers: list[Layer]) -> dict[str, int]:
    """Converted-graph node name -> index of the layer whose host time includes it: its own
    layer, or for Q/DQ/Cast bookkeeping the layer of the first real node that reads it (else
    the one that produced its input)."""
    owner = {name: i for i, layer in enumerate(layers) for name in layer.nodes}
    readers: dict[str, list[onnx.NodeProto]] = {}
    producer: dict[str, onnx.NodeProto] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
        for name in node.output:
            producer[name] = node
    for node in graph.node:
        if node.name in owner or node.op_type not in board_layers.BOOKKEEPING:
            continue
        frontier, hops = list(node.output), 0
        while frontier and node.name not in owner and hops < 8:
            nxt = []
            for tensor in frontier:
                for reader in readers.get(tensor, []):
                    if reader.name in owner and reader.op_type not in board_layers.BOOKKEEPING:
                        owner[node.name] = owner[reader.name]
                        break
                    nxt += list(reader.output)
            frontier, hops = nxt, hops + 1
        source = producer.get(node.input[0]) if node.input else None
        if node.name not in owner and source is not None and source.name in owner:
            owner[node.name] = owner[source.name]
    return owner


def rows(profiler: Profiler, times: dict[str, dict], model: CostModel) -> list[OpRow]:
    """The table's rows: the vendor layers with their estimated cost and host time."""
    layers = model.layers(profiler.model.graph, profiler.shapes(times))
    result = [OpRow(layer, _row_dtype(layer, profiler.meta, model), model.cost(layer))
              for layer in layers]  # fmt: skip
    for name, index in _host_owner(profiler.model.graph, layers).items():
        if name in times:
            result[index].host_us += times[name].get("us", 0.0)
    return result


def _row_dtype(layer: Layer, meta: ModelMeta, model: CostModel) -> str:
    if layer.kind != "io":
        return model.dtype
    specs = {s.name: s for s in [*meta.inputs, *meta.outputs]}
    spec = specs.get(layer.name)
    return spec.dtype.upper() if spec else model.dtype
