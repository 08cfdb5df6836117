"""The emulated NPU program: the model's graph section run by onnxruntime on the CPU.

One Program is built per model at rknn_init and shared by contexts made with rknn_dup_context:
onnxruntime sessions are safe to run from several threads, and the weights are not copied again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...model import dtypes
from ...model.errors import ModelFormatError
from ...model.meta import ModelMeta, TensorSpec
from ...sessions import factory, policies
from .. import switches
from ..board import perf
from ..board import table as perf_table
from ..errors import MODEL_INVALID, PARAM_INVALID, RknnError
from ..lazy_imports import onnx, ort
from . import (
    byte_maps,
    byte_tables,
    channel_muls,
    deadline,
    fast_graph,
    fp16_layout,
    fp16_round,
    grouped_convs,
    int8_affine,
    int8_depthwise,
    int8_islands,
    layout_cache,
    nhwc_pools,
    selection_convs,
    softmax_quantize,
    window_means,
)


def open_program(graph: bytes, round_in_one_pass: bool = True, **kwargs: Any) -> Any:
    """A program's (or segment's) session: the PROGRAM policy with RKNNRT_NUM_THREADS threads
    (sessions/policies.py: workers stop spinning after each run, exact int8 kernels), its
    float16 roundings in one pass unless `round_in_one_pass` is False (fp16_round.py; for a
    graph onnxruntime optimises, the rounded tensors' shapes recorded first: without them its
    optimiser picked other kernels, plain ResNet-18 fp16 627 values apart). The Cast pairs'
    graph should onnxruntime refuse that one: the same values."""
    threads = switches.num_threads()
    if round_in_one_pass and isinstance(graph, bytes):
        rounded = fp16_round.rewrite(graph, record_shapes=kwargs.get("optimise") is not False)
        if rounded is not graph:
            try:
                return factory.create(rounded, policies.PROGRAM, threads=threads, **kwargs)
            except Exception:  # onnxruntime raises several types; the pairs' graph decides
                pass
    return factory.create(graph, policies.PROGRAM, threads=threads, **kwargs)


def execution_graph(graph: bytes, weights: dict[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """The graph onnxruntime runs for a program's `graph` (weights-section tensors `weights`),
    and the weights it no longer reads: the channel shuffles as Gathers (exact), a vendor
    file's per-group convs as one grouped conv (the same products), 1x1 convs that
    only select channels as Gathers (exact for finite values), depthwise int8 convs off a slow
    kernel path (exact), float-island convs accumulated in integers (the NPU's sums),
    per-channel affine int8 maps in one kernel pass (exact), per-tensor requantisations as one
    table pass (exact), quantised activations as one table pass (exact), per-channel int8
    multiplies in one kernel pass (exact), a Softmax's QuantizeLinear kept from onnxruntime's
    approximate QLinearSoftmax fusion (the nodes' bytes), a vendor AveragePool's window sums
    in one kernel pass (exact), an int8 global pool between the NHWC kernels channels-last
    (the same bytes). Each NPU
    segment of a segmented program runs it too, and tools/vendor_diff for its per-layer
    values."""
    graph, unused = fast_graph.rewrite(graph), set()
    for on, module in ((switches.grouped_convs(), grouped_convs),
                       (switches.selection_convs(), selection_convs),
                       (switches.int8_depthwise(), int8_depthwise),
                       (switches.int8_islands(), int8_islands),
                       (switches.int8_affine_kernel(), int8_affine),
                       (switches.int8_byte_map_kernel(), byte_maps),
                       (switches.int8_byte_map_kernel(), byte_tables),
                       (switches.int8_channel_mul_kernel(), channel_muls),
                       (switches.int8_exact_softmax(), softmax_quantize),
                       (switches.window_mean_kernel(), window_means),
                       (switches.int8_islands(), nhwc_pools)):
        if on:
            graph, dropped = module.rewrite(graph, weights)
            unused |= dropped
    return graph, unused


def _weights_as_inputs(graph: bytes) -> bytes:
    """The graph with every weights-section constant turned into a graph input, so that the
    program reads the weights where they lie (onnxruntime copies initializers it is given)."""
    model = onnx.load_model_from_string(graph)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    for tensor in external:
        model.graph.input.append(
            onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
        )
        model.graph.initializer.remove(tensor)
    return model.SerializeToString()


def weight_views(meta: ModelMeta, graph: bytes, weights: np.ndarray) -> dict[str, np.ndarray]:
    """The metadata's weights as views of the weight memory, after checking that the graph's
    weights-section constants are exactly those weights (graph_rules: nothing else may reach
    onnxruntime as external data). Shared by one program and a segmented one."""
    from ...model import graph_rules  # imports onnx: not at `import rknnrt`

    try:  # the graph's rules were checked (and cached) by container.read at init
        graph_rules.cross_check(graph_rules.check_graph(graph), meta.weights)
    except ModelFormatError as exc:
        raise RknnError(MODEL_INVALID, str(exc)) from None
    views = {}
    try:
        for w in meta.weights:
            dtype = np.dtype(np.bool_) if w.dtype == "bool" else np.dtype(w.dtype)
            views[w.name] = weights[w.offset : w.offset + w.nbytes].view(dtype).reshape(w.shape)
    except ValueError as exc:  # a weight that does not fit the weight memory
        raise RknnError(MODEL_INVALID, f"the model's weights do not fit: {exc}") from None
    return views


class Program:
    """A compiled graph plus the weights it reads (views of the context's weight memory).

    `in_place`: the weights stay inputs bound to the weight memory (MODEL_BUFFER_ZERO_COPY: no
    copy at all). onnxruntime then cannot pre-pack them or re-lay them out (its NCHWc
    transform), so such a program is slower and its results may differ from the copying one's
    by float rounding (docs/memory.md). Otherwise the weights are handed to onnxruntime as
    initializers, which it copies and optimises.
    """

    def bind(self, inputs: list[np.ndarray], outputs: list[TensorSpec]) -> Binding:
        return Binding(self, inputs, outputs)

    def perf_table(self, binding: Binding, weights: np.ndarray, platform: Any, split: int,
                   core_mask: int) -> str:  # fmt: skip
        """The graph profiled on the binding's inputs, one row per vendor layer
        (core/board/perf.py); the profiler (its renamed graph) is made once per program."""
        with self._profiler_lock:
            if self._profiler is None:
                self._profiler = perf.Profiler(self._meta, self._graph)
        profiler = self._profiler
        times = profiler.measure(weights, dict(zip(self.input_names, binding.feeds)))
        model = perf.CostModel(platform, profiler.dtype, split)
        return perf_table.render(perf.rows(profiler, times, model), model, core_mask)

    def _check_types(self, meta: ModelMeta) -> None:
        """The graph's IO types and static dims must be what the metadata reports."""
        nodes = {n.name: n for n in self.session.get_inputs() + self.session.get_outputs()}
        for spec in [*meta.inputs, *meta.outputs]:
            node = nodes.get(spec.name)
            if node is None:
                continue  # reported by the name check
            dims = [d for d in node.shape]
            fixed = [(a, b) for a, b in zip(dims, spec.shape) if isinstance(a, int)]
            if (
                node.type != dtypes.BY_NAME[spec.dtype].ort
                or len(dims) != len(spec.shape)
                or any(a != b for a, b in fixed)
            ):
                raise RknnError(
                    MODEL_INVALID,
                    f"tensor '{spec.name}': the graph has {node.type} {dims}, the metadata "
                    f"{spec.dtype} {spec.shape}",
                )

    def __init__(self, meta: ModelMeta, graph: bytes, weights: np.ndarray,
                 in_place: bool = False) -> None:  # fmt: skip
        source = graph  # the model's graph as stored (PERF_DETAIL profiles it)
        views = weight_views(meta, graph, weights)
        names, values = list(views), list(views.values())
        try:
            graph, unused = execution_graph(graph, views)
            names, values = [n for n in names if n not in unused], \
                [v for n, v in zip(names, values) if n not in unused]  # fmt: skip
            self.weight_views = list(zip(names, values)) if in_place else []
            if in_place:
                self.session = open_program(_weights_as_inputs(graph))
            else:
                blocked, keep = _fp16_blocked(meta, graph, names, values)
                if blocked is not None:  # laid out, weights included: run as it is
                    self.session = _open_laid_out(blocked)
                    self._laid_out = blocked  # its data (a mapped file) is read in place
                else:
                    self.session = open_program(graph, initializers=(
                        names, [ort.OrtValue.ortvalue_from_numpy(v) for v in values]))
                if keep is not None:  # the cache write begins once the session is built
                    keep()
        except Exception as exc:  # onnx and onnxruntime raise several types for a bad graph
            raise RknnError(MODEL_INVALID, f"the model's graph cannot be loaded: {exc}") from None
        self._keep = weights  # the program reads these bytes (in place, or once at load)
        self._meta, self._graph = meta, source
        self._profiler: perf.Profiler | None = None
        self._profiler_lock = threading.Lock()
        weight_names = {name for name, _ in self.weight_views}
        self.input_names = [i.name for i in self.session.get_inputs() if i.name not in weight_names]
        self.output_names = [o.name for o in self.session.get_outputs()]
        expected_in = [t.name for t in meta.inputs]
        expected_out = [t.name for t in meta.outputs]
        self._check_types(meta)
        if self.input_names != expected_in or self.output_names != expected_out:
            raise RknnError(
                MODEL_INVALID,
                f"graph IO {self.input_names} -> {self.output_names} does not match the "
                f"metadata {expected_in} -> {expected_out}",
            )


def _open_laid_out(blocked: fp16_layout.Blocked) -> Any:
    """The session of a laid-out program, unoptimised, reading its constants where they lie
    (views of the mapped data); the data as an in-memory file where they do not decode."""
    data = blocked.data
    found = fp16_layout.constants(blocked) if data.size else None
    if found is not None:
        names, arrays = found
        return open_program(blocked.graph, optimise=False, initializers=(
            names, [ort.OrtValue.ortvalue_from_numpy(a) for a in arrays]))  # fmt: skip
    return open_program(blocked.graph, optimise=False,
                        files_in_memory=([fp16_layout.DATA_FILE], [data], [data.size])
                        if data.size else None)  # fmt: skip


def _fp16_blocked(meta: ModelMeta, graph: bytes, names: list[str], values: list[np.ndarray]
                  ) -> tuple[fp16_layout.Blocked | None, Callable[[], None] | None]:  # fmt: skip
    """core/program/fp16_layout's graph for a float16 program (the metadata's kind: not an int8
    one, whose float16 islands keep their place; RKNNRT_FP16_BLOCKED=0: never); None keeps
    `graph`, also where onnxruntime cannot lay it out (that failure is the plain session's to
    report, with the plain graph). Laid out once per program and CPU: later inits read it from
    core/program/layout_cache (RKNNRT_LAYOUT_CACHE_MB=0: laid out at every init). The second
    value, where not None, starts the cache's write: the caller calls it once its session is
    built (the write's 100 MB then do not compete with that build, ResNet-50 fp16)."""
    if not switches.fp16_blocked() or meta.float_dtype == "int8":
        return None, None
    if not fp16_layout.may_lay_out(graph):  # before the cache key's hashing
        return None, None
    cache_key = layout_cache.key(graph, names, values) if switches.layout_cache_bytes() else ""
    if cache_key:
        found, blocked = layout_cache.load(cache_key)
        if found:
            return blocked, None
    try:
        blocked = fp16_layout.blocked_program(
            graph, open_program, (names, [ort.OrtValue.ortvalue_from_numpy(v) for v in values]))
    except Exception:  # onnx and onnxruntime raise several types; the plain path decides
        return None, None  # not kept: the plain session reports the graph's fault at each init
    if not cache_key:
        return blocked, None
    return blocked, lambda: layout_cache.store_later(cache_key, blocked)


def address_of(array: np.ndarray) -> int:
    """The address of an array's first byte (cheaper than array.ctypes.data)."""
    return array.__array_interface__["data"][0]


class Binding:
    """One context's IO binding: the program reads the context's input buffers in place and
    writes into output buffers allocated once, so a run converts nothing on the way."""

    def __init__(self, program: Program, inputs: list[np.ndarray], outputs: list[TensorSpec]):
        self._program = program
        self.feeds = inputs
        self._io = program.session.io_binding()
        for name, array in [*zip(program.input_names, inputs), *program.weight_views]:
            self._io.bind_input(name, "cpu", 0, array.dtype, array.shape, address_of(array))
        self.outputs: list[np.ndarray] = []
        self.addresses: list[int] = []
        for spec in outputs:
            dtype = np.dtype(np.bool_) if spec.dtype == "bool" else np.dtype(spec.dtype)
            self.outputs.append(np.empty(spec.shape, dtype))
            self.addresses.append(0)
            self.replace_output(len(self.outputs) - 1)

    def replace_output(self, index: int) -> None:
        """Give output `index` a new buffer (the old one now belongs to whoever holds it)."""
        array = np.empty_like(self.outputs[index])
        name = self._program.output_names[index]
        address = address_of(array)
        self._io.bind_output(name, "cpu", 0, array.dtype, array.shape, address)
        self.outputs[index], self.addresses[index] = array, address

    def run(self) -> None:
        deadline.run(self._program.session, self._io)

    def register(self, ops: list[Any]) -> None:
        raise RknnError(PARAM_INVALID, "this model has no custom ops (nothing to register)")

    def registered_ops(self) -> list[Any]:
        return []

    def use_internal(self, views: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Nothing crosses between segments: onnxruntime keeps the intermediates."""

    def destroy(self) -> None:
        """No custom op, no destroy callback."""
