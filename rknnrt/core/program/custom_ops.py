"""Custom operators of one context (facts §5.12; docs/custom-ops.md).

`ContextOps` holds the custom nodes of a context's model and the operators registered for them.
Lifecycle as the vendor documents it: `init` once per node at rknn_register_custom_ops,
`prepare` then `compute` per node at every rknn_run, `destroy` once per node at rknn_destroy.
The core sees an operator as an `OpCallbacks` object (api/custom_op_api.py adapts the C
structure; the C library's callbacks arrive the same way), so no ctypes structure is made here.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ...sessions import factory, policies
from .. import log
from ..errors import FAIL, PARAM_INVALID, RknnError
from ..lazy_imports import onnx

SKIP_COMPUTE = -14  # RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE
TARGET_CPU, TARGET_GPU = 1, 2
# How far past its output a callback's stray write is still caught (a guard area).
GUARD_BYTES = 64
GUARD_BYTE = 0xA5
_GUARD = bytes([GUARD_BYTE]) * GUARD_BYTES


@dataclass
class NodeInstance:
    """One custom node of a model, as a context runs it."""

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, np.ndarray]
    internal_id: int = 0
    state: object = None  # the adapter's per-node data (its rknn_custom_op_context)
    builtin: BuiltinOp | None = None  # set when init asked for the built-in implementation
    generation: int = 0  # bumped when the context gives the node new buffers
    proto: onnx.NodeProto | None = None  # the stored node (a Python op's compute gets it)


class OpCallbacks(Protocol):
    """A registered operator. Each call returns the callback's int status."""

    op_type: str
    target: int
    has_prepare: bool
    has_compute: bool
    has_compute_native: bool

    def init(self, node: NodeInstance, ins: list[np.ndarray], outs: list[np.ndarray]) -> int: ...
    def prepare(self, node: NodeInstance, ins: list[np.ndarray], outs: list[np.ndarray]) -> int: ...
    def compute(self, node: NodeInstance, ins: list[np.ndarray], outs: list[np.ndarray]) -> int: ...
    def destroy(self, node: NodeInstance) -> int: ...


# internal_ctx value -> node, for rknn_custom_op_get_op_attr (which gets only the op context)
_nodes: dict[int, NodeInstance] = {}
_next_id = itertools.count(0x10000)
_nodes_lock = threading.Lock()


def node_attrs(node: onnx.NodeProto) -> dict[str, np.ndarray]:
    """The attributes a callback can ask for: the stored ones plus "name" (UINT8 bytes of the
    node name, NUL-terminated in memory; n_elems counts the characters)."""
    from ...model.custom_ops import attribute_value  # imports onnx: not at `import rknnrt`

    attrs: dict[str, np.ndarray] = {}
    for attr in node.attribute:
        value = attribute_value(attr)
        if isinstance(value, bytes):
            value = np.frombuffer(value + b"\0", np.uint8)[:-1]
        attrs[attr.name] = value
    name = node.name.encode()
    attrs.setdefault("name", np.frombuffer(name + b"\0", np.uint8)[:-1])
    return attrs


def lookup_node(internal_id: int) -> NodeInstance | None:
    """The node behind an op context's internal_ctx (None once destroyed or never made)."""
    return _nodes.get(internal_id)


def lookup_attr(internal_id: int, attr_name: str) -> np.ndarray | None:
    """The attribute `attr_name` of the node behind an op context (None if absent)."""
    node = _nodes.get(internal_id)
    return None if node is None else node.attrs.get(attr_name)


class BuiltinOp:
    """rknnrt's own implementation of an op type (RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE): the
    standard ONNX operator of that name ("cstSigmoid" -> Sigmoid), run by onnxruntime."""

    def __init__(self, node: NodeInstance, types: dict[str, int]) -> None:
        op = next((t for t in (node.op_type, node.op_type[3:]) if _is_onnx_op(t)), None)
        if op is None:
            raise RknnError(
                FAIL,
                f"custom op {node.op_type} at node '{node.name}': init returned "
                "RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE but rknnrt has no built-in implementation "
                "of this op type; implement compute",
            )
        schema = onnx.defs.get_schema(op)
        proto = onnx.helper.make_node(op, node.inputs, node.outputs, name=node.name)
        for key, value in node.attrs.items():
            if key in schema.attributes and key != "name":
                proto.attribute.append(onnx.helper.make_attribute(key, value.tolist()))
        graph = onnx.helper.make_graph(
            [proto],
            "builtin",
            [onnx.helper.make_tensor_value_info(n, types[n], None) for n in node.inputs],
            [onnx.helper.make_tensor_value_info(n, types[n], None) for n in node.outputs],
        )
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
        # inside rknn_run: one thread, no pool of its own to wake or keep spinning
        self.session = factory.create(model, policies.HELPER)
        self.inputs, self.outputs = node.inputs, node.outputs

    def run(self, ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        results = self.session.run(self.outputs, dict(zip(self.inputs, ins)))
        for out, value in zip(outs, results):
            out[...] = value


def _is_onnx_op(op_type: str) -> bool:
    try:
        return bool(op_type) and onnx.defs.has(op_type)
    except Exception:  # onnx raises for odd names on some versions
        return False


@dataclass
class ContextOps:
    """The custom nodes of one context's model and what runs them."""

    nodes: list[NodeInstance]
    types: dict[str, int] = field(default_factory=dict)  # tensor name -> ONNX elem type
    ops: dict[str, OpCallbacks] = field(default_factory=dict)
    started: bool = False  # a run has happened: registration is closed

    @classmethod
    def of_graph(cls, graph: onnx.GraphProto, types: dict[str, int]) -> ContextOps:
        from ...model.custom_ops import is_custom  # imports onnx: not at `import rknnrt`

        nodes = [
            NodeInstance(
                n.name or f"{n.op_type}_{i}",
                n.op_type,
                list(n.input),
                list(n.output),
                node_attrs(n),
                proto=n,
            )
            for i, n in enumerate(graph.node)
            if is_custom(n)
        ]
        return cls(nodes, types)

    def op_types(self) -> set[str]:
        return {n.op_type for n in self.nodes}

    def register(self, ops: list[OpCallbacks], buffers: dict[str, np.ndarray]) -> None:
        """rknn_register_custom_ops: all of the model's op types in one call, then init."""
        wanted = self.op_types()
        if self.ops:
            raise RknnError(
                PARAM_INVALID,
                "custom ops are already registered on this context "
                "(register all of the model's custom ops in one call)",
            )
        if self.started:
            raise RknnError(FAIL, "register custom ops after rknn_init and before rknn_run")
        given: dict[str, OpCallbacks] = {}
        for op in ops:
            if op.op_type in given:
                raise RknnError(PARAM_INVALID, f"op_type '{op.op_type}' is given twice")
            if op.op_type not in wanted:
                have = ", ".join(sorted(wanted)) or "none"
                raise RknnError(
                    PARAM_INVALID,
                    f"op_type '{op.op_type}' is not a custom op of "
                    f"this model (its custom ops: {have})",
                )
            if not op.has_compute or op.has_compute_native:
                raise RknnError(
                    PARAM_INVALID,
                    f"op_type '{op.op_type}': compute is required and compute_native must be NULL",
                )
            if op.target not in (TARGET_CPU, TARGET_GPU):
                raise RknnError(
                    PARAM_INVALID,
                    f"op_type '{op.op_type}': target {op.target} "
                    "is neither RKNN_TARGET_TYPE_CPU (1) nor _GPU (2)",
                )
            given[op.op_type] = op
        missing = wanted - set(given)
        if missing:
            raise RknnError(
                PARAM_INVALID,
                "the model's custom ops must all be registered in one "
                f"call; missing: {', '.join(sorted(missing))}",
            )
        for op in given.values():
            if op.target == TARGET_GPU:
                log.warning(
                    f"custom op {op.op_type}: no GPU (OpenCL) device in rknnrt; its "
                    "callbacks run on the CPU target"
                )
        done: list[NodeInstance] = []
        inited: list[NodeInstance] = []  # init succeeded: destroy pairs with it on failure
        try:
            for node in self.nodes:
                with _nodes_lock:
                    node.internal_id = next(_next_id)
                    _nodes[node.internal_id] = node
                done.append(node)
                op = given[node.op_type]
                status = guarded(op.init, node, _ins(node, buffers), _outs(node, buffers))
                if status in (0, SKIP_COMPUTE):
                    inited.append(node)
                if status == SKIP_COMPUTE:
                    node.builtin = BuiltinOp(node, self.types)
                elif status != 0:
                    raise RknnError(
                        FAIL,
                        f"custom op {node.op_type} at node '{node.name}': init {outcome(status)}",
                    )
        except BaseException:
            for node in inited:  # what the application allocated in init is released
                guarded(given[node.op_type].destroy, node)
            for node in done:  # the context stays as it was before the call
                _forget(node)
            raise
        self.ops = given

    def run_node(self, node: NodeInstance, ins: list[np.ndarray], outs: list[np.ndarray],
                 guards: list[np.ndarray], shared: list[np.ndarray] = ()) -> None:  # type: ignore[assignment]  # fmt: skip
        """prepare then compute of one node on the context's buffers (`guards`: the bytes after
        each output, see guarded_empty: a change there is a write past the output; `shared`:
        those of them in internal memory, filled with the pattern for the call, then restored)."""
        if node.builtin is not None:
            node.builtin.run(ins, outs)
            return
        op = self.ops.get(node.op_type)
        if op is None:
            raise RknnError(
                FAIL,
                f"custom op {node.op_type} at node '{node.name}' is not "
                "registered: call rknn_register_custom_ops before rknn_run",
            )
        if shared:  # guards in internal memory hold other tensors' bytes: kept aside
            before = [g.tobytes() for g in shared]
            for guard in shared:
                guard[...] = GUARD_BYTE
        status = guarded(op.prepare, node, ins, outs) if op.has_prepare else 0
        if status == 0:
            status = guarded(op.compute, node, ins, outs)
        overrun = -1
        for k, guard in enumerate(guards):
            if guard.tobytes() != _GUARD:
                guard[...] = GUARD_BYTE
                overrun = k
        if shared:
            for guard, saved in zip(shared, before):
                guard[...] = np.frombuffer(saved, np.uint8)
        if status != 0:
            raise RknnError(
                FAIL,
                f"custom op {node.op_type} at node '{node.name}': the callback "
                f"{outcome(status)}; the outputs of this run are not valid",
            )
        if overrun >= 0:
            k = overrun
            raise RknnError(
                FAIL,
                f"custom op {node.op_type} at node '{node.name}' wrote past the end of "
                f"output '{node.outputs[k]}' ({outs[k].nbytes} bytes)",
            )

    def destroy(self) -> None:
        """destroy once per node (rknn_destroy); errors are logged, never raised."""
        for node in self.nodes:
            op = self.ops.get(node.op_type)
            if op is not None and node.internal_id:
                status = guarded(op.destroy, node)
                if status != 0:
                    log.warning(
                        f"custom op {node.op_type} at node '{node.name}': destroy {outcome(status)}"
                    )
            _forget(node)
        self.ops = {}


def _forget(node: NodeInstance) -> None:
    with _nodes_lock:
        _nodes.pop(node.internal_id, None)
    node.internal_id, node.state, node.builtin = 0, None, None


def arrays_of(node: NodeInstance, buffers: dict[str, np.ndarray]) -> tuple[list, list]:
    """(inputs, outputs) of a node among a context's buffers."""
    return _ins(node, buffers), _outs(node, buffers)


def _ins(node: NodeInstance, buffers: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [buffers[n] for n in node.inputs]


def _outs(node: NodeInstance, buffers: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [buffers[n] for n in node.outputs]


# -- callback errors ------------------------------------------------------------------------
# A Python function behind a ctypes callback cannot raise through C: ctypes reports it to
# sys.unraisablehook and returns 0. The hook below turns that into a failed status instead.
_errors = threading.local()
_hook_installed = False


def _install_hook() -> None:
    global _hook_installed
    import sys

    previous = sys.unraisablehook

    def hook(unraisable: object) -> None:
        seen = getattr(_errors, "seen", None)
        if seen is None:
            previous(unraisable)  # type: ignore[arg-type]
        else:
            seen.append(unraisable.exc_value)  # type: ignore[attr-defined]

    sys.unraisablehook = hook
    _hook_installed = True


def guarded(call: object, *args: object) -> int:
    """`call(*args)` as a status: an exception (direct, or swallowed by ctypes) is -1, and
    `outcome(status)` then names the exception for the caller's one log line."""
    if not _hook_installed:
        _install_hook()
    _errors.seen = seen = []
    _errors.raised = None
    try:
        status = int(call(*args))  # type: ignore[operator]
    except Exception as exc:
        seen.append(exc)
        status = 0
    finally:
        _errors.seen = None
    if seen:
        _errors.raised = f"raised {type(seen[0]).__name__}: {seen[0]}"
        return -1
    return status


def outcome(status: int) -> str:
    """What the last guarded call did, for a message: "returned -5" or "raised E: text"."""
    raised = getattr(_errors, "raised", None)
    return raised if status == -1 and raised else f"returned {status}"


# -- output guards ----------------------------------------------------------------------------
def guarded_empty(shape: list[int], dtype: np.dtype) -> np.ndarray:
    """An output buffer followed by GUARD_BYTES of a known pattern (a stray write shows)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.full(nbytes + GUARD_BYTES + 64, GUARD_BYTE, np.uint8)
    start = -raw.ctypes.data % 64  # 64-byte aligned, as the runtime's tensors are
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def guard_of(array: np.ndarray) -> np.ndarray:
    """The guard area after an array made by guarded_empty."""
    base = array.base
    while base is not None and base.base is not None:
        base = base.base
    assert isinstance(base, np.ndarray)
    offset = array.ctypes.data - base.ctypes.data
    return base[offset + array.nbytes : offset + array.nbytes + GUARD_BYTES]
