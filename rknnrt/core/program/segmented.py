"""A graph with custom operators run as NPU segments and CPU steps (docs/custom-ops.md).

The model's graph is cut at each custom node: the runs of standard nodes between them become
NPU segments, each its own onnxruntime session; a custom node is a CPU step that calls the
registered operator. The tensors that cross between steps live in one arena allocated at
rknn_init, each at an offset planned from first to last use (64-byte aligned, a guard area
after each custom output), and every session reads and writes them there through IO binding,
so a run copies nothing between segments.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...model import numerics
from ...model.meta import ModelMeta, TensorSpec
from ..board import segmented_table
from ..errors import MODEL_INVALID, RknnError
from ..lazy_imports import onnx, ort
from . import custom_ops, deadline, segment_memory
from .whole import address_of, execution_graph, open_program, weight_views

_ALIGN = 64


@dataclass
class Step:
    """One NPU or CPU segment (session is set) or one custom node (node is set)."""

    inputs: list[str]
    outputs: list[str]
    device: str
    session: ort.InferenceSession | None = None
    node: onnx.NodeProto | None = None
    graph: bytes = b""  # the segment's ONNX model (for per-layer profiling)
    # A custom step's storage conversions: (op type, source, destination, scale, zero point)
    # before and after the op (int8/float16 <-> the float32 the op sees), run on the CPU.
    pre: list[tuple] = field(default_factory=list)
    post: list[tuple] = field(default_factory=list)
    mids: list[str] = field(default_factory=list)  # the float32 tensors the op itself reads/writes


def _types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    graph = inferred.graph
    return {vi.name: vi.type for vi in [*graph.input, *graph.value_info, *graph.output]}


def _segment(
    nodes: list[onnx.NodeProto],
    model: onnx.ModelProto,
    ins: list[str],
    outs: list[str],
    types: dict[str, onnx.TypeProto],
) -> onnx.ModelProto:
    used = {i for n in nodes for i in n.input}
    inits = [t for t in model.graph.initializer if t.name in used]
    graph = onnx.helper.make_graph(
        nodes,
        "segment",
        [onnx.helper.make_value_info(n, types[n]) for n in ins],
        [onnx.helper.make_value_info(n, types[n]) for n in outs],
        inits,
    )
    opsets = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return onnx.helper.make_model(graph, opset_imports=opsets, ir_version=model.ir_version)


_CONVERSIONS = ("DequantizeLinear", "QuantizeLinear", "Cast")


def _attached_conversions(nodes: list[onnx.NodeProto]) -> dict[int, tuple[list, list]]:
    """Per custom node: the conversions that feed only it and those that only it feeds (the
    converter's DequantizeLinear/Cast before and QuantizeLinear/Cast after, docs/custom-ops.md):
    they run with the op on the CPU, so the tensors crossing are the stored int8/float16."""
    from ...model.custom_ops import is_custom  # imports onnx: not at `import rknnrt`

    producer = {o: n for n in nodes for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for n in nodes:
        for i in n.input:
            consumers[i].append(n)
    attached = {}
    for node in nodes:
        if not is_custom(node):
            continue
        pre = [
            producer[i]
            for i in node.input
            if i in producer and producer[i].op_type in _CONVERSIONS and len(consumers[i]) == 1
        ]
        post = [
            consumers[o][0]
            for o in node.output
            if len(consumers[o]) == 1 and consumers[o][0].op_type in _CONVERSIONS
        ]
        attached[id(node)] = (pre, post)
    return attached


def _conversion(node: onnx.NodeProto, constants: dict[str, onnx.TensorProto]) -> tuple:
    """(op type, source, destination, scale, zero point) of one attached conversion."""
    scale = zp = None
    if node.op_type != "Cast":
        scale = onnx.numpy_helper.to_array(constants[node.input[1]]).astype(np.float32)
        zp = onnx.numpy_helper.to_array(constants[node.input[2]]).astype(np.float32)
    return (node.op_type, node.input[0], node.output[0], scale, zp)


def _converter(kind: str, src: np.ndarray, dst: np.ndarray, scale: Any, zp: Any) -> Callable:
    """A call that writes `dst` from `src` as the conversion node would (onnxruntime's
    rules: float32 division, half to even, saturation to dst's type; model/numerics.py)."""
    if kind == "DequantizeLinear":
        return lambda: numerics.dequantize(src, scale, zp, out=dst)
    if kind == "QuantizeLinear":
        work = np.empty(src.shape, np.float32)
        return lambda: numerics.quantize(src, scale, zp, work=work, out=dst)
    return lambda: np.copyto(dst, src, casting="unsafe")


class SegmentedProgram:
    """The compiled steps of a graph with custom nodes; shared by duplicated contexts."""

    def __init__(self, meta: ModelMeta, graph: bytes, weights: np.ndarray, platform: str) -> None:
        from ...model.custom_ops import is_custom  # these import onnx: not at `import rknnrt`
        from ...model.op_placement import device_for

        model = onnx.load_model_from_string(graph)
        try:
            types = _types(model)
        except Exception as exc:  # onnx raises several types for a bad graph
            raise RknnError(MODEL_INVALID, f"the model's graph cannot be read: {exc}") from None
        views = weight_views(meta, graph, weights)
        self._keep = weights
        self.input_names = [t.name for t in meta.inputs]
        self.output_names = [t.name for t in meta.outputs]
        self.weight_views: list[tuple[str, np.ndarray]] = []
        inits = {t.name for t in model.graph.initializer}
        nodes = list(model.graph.node)  # one set of node objects: they are keyed by id below
        attached = _attached_conversions(nodes)
        taken = {id(n) for pre, post in attached.values() for n in pre + post}
        groups: list[list[onnx.NodeProto]] = []
        for node in nodes:
            if id(node) in taken:
                continue
            device = device_for(node, platform)
            if is_custom(node):
                pre, post = attached.get(id(node), ([], []))
                groups.append([*pre, node, *post])
            elif (
                not groups
                or any(is_custom(n) for n in groups[-1])
                or device != device_for(groups[-1][0], platform)
            ):
                groups.append([node])
            else:
                groups[-1].append(node)
        needed_later: list[set[str]] = []
        later = set(self.output_names)
        for group in reversed(groups):
            needed_later.append(set(later))
            later |= {i for n in group for i in n.input}
        needed_later.reverse()
        self.steps: list[Step] = []
        for group, later in zip(groups, needed_later):
            made = [o for n in group for o in n.output if o]
            produced = set(made)
            ins = list(
                dict.fromkeys(
                    i for n in group for i in n.input if i and i not in produced and i not in inits
                )
            )
            outs = [o for o in made if o in later]
            missing = [n for n in ins + outs if n not in types]
            if missing:
                raise RknnError(MODEL_INVALID, f"the types of {missing} are not in the graph")
            custom = next((n for n in group if is_custom(n)), None)
            if custom is not None:
                constants = {t.name: t for t in model.graph.initializer}
                pre, post = attached.get(id(custom), ([], []))
                step = Step(ins, outs, "CPU", node=custom, mids=list(custom.output))
                step.pre = [_conversion(n, constants) for n in pre]
                step.post = [_conversion(n, constants) for n in post]
                step.mids += [n.output[0] for n in pre]
                self.steps.append(step)
                continue
            if not outs:  # nothing later reads what it makes (dead conversions): no session
                continue
            segment = _segment(group, model, ins, outs, types)
            external = [t.name for t in segment.graph.initializer if t.name in views]
            try:
                # the same execution graph as a whole program's (its integer island sums)
                serialized = segment.SerializeToString()  # as stored: what the profile times
                runs, unused = execution_graph(serialized, {n: views[n] for n in external})
                external = [n for n in external if n not in unused]
                given = (external, [ort.OrtValue.ortvalue_from_numpy(views[n]) for n in external])
                session = open_program(runs, initializers=given)
            except Exception as exc:  # onnxruntime raises several types for a bad graph
                raise RknnError(MODEL_INVALID, f"a graph segment cannot be loaded: {exc}") from None
            device = device_for(group[0], platform)
            self.steps.append(Step(ins, outs, device, session=session, graph=serialized))
        self.types = {n: t.tensor_type.elem_type for n, t in types.items()}
        self.shapes = {n: [d.dim_value for d in t.tensor_type.shape.dim] for n, t in types.items()}
        self.graph = model.graph
        self.meta = meta

    def bind(self, inputs: list[np.ndarray], outputs: list[TensorSpec]) -> SegmentedBinding:
        return SegmentedBinding(self, inputs, outputs)

    def perf_table(self, binding: SegmentedBinding, weights: np.ndarray, platform: Any,
                   split: int, core_mask: int) -> str:  # fmt: skip
        """Each NPU/CPU segment profiled, each custom op timed (core/board/segmented_table.py)."""
        return segmented_table.perf_table(self, binding, weights, platform, split, core_mask)


def _dtype(elem: int) -> np.dtype:
    return (
        np.dtype(np.bool_)
        if elem == onnx.TensorProto.BOOL
        else np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    )


class SegmentedBinding:
    """One context's buffers and sessions' IO bindings for a SegmentedProgram; the same
    interface as executor.Binding (outputs, addresses, replace_output, run)."""

    def __init__(
        self, program: SegmentedProgram, inputs: list[np.ndarray], outputs: list[TensorSpec]
    ) -> None:
        self._program = program
        self.buffers: dict[str, np.ndarray] = dict(zip(program.input_names, inputs))
        custom_outputs = {o for s in program.steps if s.node is not None for o in s.node.output}
        for step in program.steps:
            for name in [*step.mids, *step.outputs]:
                if name in self.buffers or name in program.output_names:
                    continue
                dtype, shape = _dtype(program.types[name]), program.shapes[name]
                if name in custom_outputs:
                    self.buffers[name] = custom_ops.guarded_empty(shape, dtype)
                else:
                    self.buffers[name] = np.empty(shape, dtype)
        # The materialised intermediate tensors in buffers of their own, until use_internal
        # places them in the internal memory.
        self._own = {n: a for n, a in self.buffers.items() if n not in program.input_names}
        self.cpu_buffers = self.buffers  # the same arrays until use_internal places some
        self._internal: np.ndarray | None = None
        self.placed: dict[str, int] = {}  # name -> offset in the internal memory
        self.outputs: list[np.ndarray] = []
        self.addresses: list[int] = []
        for spec in outputs:
            dtype = np.dtype(np.bool_) if spec.dtype == "bool" else np.dtype(spec.dtype)
            self.outputs.append(custom_ops.guarded_empty(spec.shape, dtype))
            self.addresses.append(address_of(self.outputs[-1]))
            self.buffers[spec.name] = self.outputs[-1]
        self.custom = custom_ops.ContextOps.of_graph(program.graph, program.types)
        self._bindings: list[tuple[Step, ort.IOBinding | None]] = []
        for step in program.steps:
            io = step.session.io_binding() if step.session is not None else None
            self._bindings.append((step, io))
        self._bind_all()

    def _bind_all(self) -> None:
        """Bind every session's IO to the buffers, and plan each run's calls (the hot path
        then only calls: no lookups)."""
        nodes = iter(self.custom.nodes)
        self._plan: list[tuple] = []
        for step, io in self._bindings:
            if io is None:
                node = next(nodes)
                node.generation += 1
                b = self.cpu_buffers  # a custom step runs on the CPU
                ins, outs = custom_ops.arrays_of(node, b)
                guards = [self._guard(n, a, outs) for n, a in zip(node.outputs, outs)]
                shared = [g for n, g in zip(node.outputs, guards) if n in self.placed]
                pre = [*self._syncs(step.inputs, to_cpu=True),
                       *(_converter(k, b[x], b[y], sc, zp) for k, x, y, sc, zp in step.pre)]
                post = [*(_converter(k, b[x], b[y], sc, zp) for k, x, y, sc, zp in step.post),
                        *self._syncs(step.outputs, to_cpu=False)]  # fmt: skip
                self._plan.append((None, None, (node, ins, outs, guards, pre, post, shared)))
            else:
                self._plan.append((step.session, io, ()))
        for step, io in self._bindings:
            if io is None:
                continue
            for name in step.inputs:
                a = self.buffers[name]
                io.bind_input(name, "cpu", 0, a.dtype, a.shape, address_of(a))
            for name in step.outputs:
                a = self.buffers[name]
                io.bind_output(name, "cpu", 0, a.dtype, a.shape, address_of(a))

    def use_internal(self, views: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Place the planned crossing tensors in the context's internal memory at their
        planned offsets (`views`: its uint8 device and CPU views), or back in buffers of their
        own (None). NPU segments use the device view, custom ops the CPU one; when they differ
        (cacheable memory) a custom step syncs its placed inputs in and outputs out, as a
        board's runtime does around a CPU op."""
        program = self._program
        placed: dict[str, int] = {}
        if views is not None:
            size = views[0].size
            steps = [(s.inputs, [*s.mids, *s.outputs]) for s in program.steps]
            sizes = {n: a.nbytes for n, a in self._own.items()}
            placed = segment_memory.placements(program.meta.memory, steps, sizes, size)
            for step in program.steps:  # a custom output needs its guard area there too
                if step.node is not None:
                    segment_memory.keep_guards(placed, sizes, step, custom_ops.GUARD_BYTES,
                                                 size)  # fmt: skip
        if not placed and not self.placed:
            return
        self.cpu_buffers = dict(self.buffers)
        for name, own in self._own.items():
            offset = placed.get(name)
            if offset is None or views is None:
                self.buffers[name] = self.cpu_buffers[name] = own
                continue
            device, cpu = (v[offset : offset + own.nbytes].view(own.dtype).reshape(own.shape)
                           for v in views)  # fmt: skip
            self.buffers[name], self.cpu_buffers[name] = device, cpu
        self._internal, self.placed = None if views is None else views[1], placed
        self._bind_all()

    def _syncs(self, names: list[str], to_cpu: bool) -> list[Callable]:
        """Copies between the device and CPU views of the placed tensors among `names`."""
        pairs = [(self.buffers[n], self.cpu_buffers[n]) for n in names if n in self.placed]
        pairs = [(d, c) for d, c in pairs if d.ctypes.data != c.ctypes.data]
        if to_cpu:
            return [functools.partial(np.copyto, c, d) for d, c in pairs]
        return [functools.partial(np.copyto, d, c) for d, c in pairs]

    def _guard(self, name: str, array: np.ndarray, outs: list[np.ndarray]) -> np.ndarray:
        """The bytes after a custom output where a stray write shows: its own guard area, or
        in internal memory the bytes after it (no tensor of its step: keep_guards)."""
        offset = self.placed.get(name)
        if offset is None or self._internal is None:
            return custom_ops.guard_of(array)
        start = offset + array.nbytes
        return self._internal[start : start + custom_ops.GUARD_BYTES]

    def replace_output(self, index: int) -> None:
        """Give output `index` a new buffer (the old one now belongs to whoever holds it)."""
        old = self.outputs[index]
        array = custom_ops.guarded_empty(list(old.shape), old.dtype)
        name = self._program.output_names[index]
        self.outputs[index], self.addresses[index] = array, address_of(array)
        self.buffers[name] = self.cpu_buffers[name] = array
        self._bind_all()

    def run(self) -> None:
        self.custom.started = True
        for session, io, node_args in self._plan:
            if io is not None:
                deadline.run(session, io)
            else:
                self.run_custom(*node_args)

    def run_custom(self, node: custom_ops.NodeInstance, ins: list, outs: list, guards: list,
                   pre: list[Callable], post: list[Callable], shared: list) -> None:  # fmt: skip
        """One custom step: its input conversions, the op, its output conversions."""
        for convert in pre:
            convert()
        self.custom.run_node(node, ins, outs, guards, shared)
        for convert in post:
            convert()

    def custom_calls(self) -> list[tuple]:
        """The arguments of run_custom for each custom step, in graph order."""
        return [args for session, io, args in self._plan if io is None]

    def register(self, ops: list[custom_ops.OpCallbacks]) -> None:
        self.custom.register(ops, self.cpu_buffers)

    def registered_ops(self) -> list[custom_ops.OpCallbacks]:
        return list(self.custom.ops.values())

    def destroy(self) -> None:
        self.custom.destroy()
