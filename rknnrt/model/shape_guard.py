"""ONNX shape inference that a hostile graph cannot abort the process with.

onnx's C++ shape inference for `Slice` clamps its bounds with `std::clamp(x, 0, dim)`; the
onnx wheels are built with libstdc++ assertions, so a data input with a negative dimension
(which other operators' inference produces without complaint: a Conv whose kernel is wider than
its input, a negative Pad) aborts the whole process (SIGABRT) instead of raising. A negative
dimension is never valid, so it is refused before any Slice sees it: Slices are first replaced
by a stand-in that inference skips, and put back, level by level, once their data input is
known to have no negative dimension. A graph without Slice costs one inference, as before;
one with Slices one more per level of Slices that feed one another.
"""

from __future__ import annotations

import onnx
from onnx import helper

from .errors import ModelFormatError

_GUARD_DOMAIN = "rknnrt.shape_guard"  # no schema: onnx leaves such a node's outputs untyped
_SLICES = ("Slice",)


def _check(inferred: onnx.ModelProto) -> None:
    """ModelFormatError when a typed tensor or an initializer has a negative dimension."""
    graph = inferred.graph
    for vi in (*graph.input, *graph.value_info, *graph.output):
        t = vi.type.tensor_type
        dims = [d.dim_value for d in t.shape.dim] if t.HasField("shape") else []
        if any(d < 0 for d in dims):
            raise ModelFormatError(f"tensor '{vi.name}' has a negative dimension: {dims}")
    for tensor in graph.initializer:
        if any(d < 0 for d in tensor.dims):
            raise ModelFormatError(
                f"initializer '{tensor.name}' has a negative dimension: {list(tensor.dims)}"
            )


def _downstream(nodes: list[onnx.NodeProto], pending: set[int]) -> set[str]:
    """The tensors that depend on a node in `pending` (graph order need not be sorted)."""
    tainted: set[str] = set()
    changed = True
    while changed:
        changed = False
        for k, node in enumerate(nodes):
            if k in pending or any(i in tainted for i in node.input if i):
                new = {o for o in node.output if o and o not in tainted}
                if new:
                    tainted |= new
                    changed = True
    return tainted


def infer_shapes(model: onnx.ModelProto, strict_mode: bool = False,
                 data_prop: bool = False) -> onnx.ModelProto:  # fmt: skip
    """onnx.shape_inference.infer_shapes, refusing (ModelFormatError) a graph in which a tensor
    has a negative dimension instead of letting onnx abort on it. onnx's own errors are raised
    as onnx raises them."""
    nodes = model.graph.node
    pending = {k for k, n in enumerate(nodes)
               if n.op_type in _SLICES and n.domain in ("", "ai.onnx")}  # fmt: skip
    if pending:
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        probe.opset_import.append(helper.make_opsetid(_GUARD_DOMAIN, 1))
        for k in pending:
            probe.graph.node[k].domain = _GUARD_DOMAIN
        while pending:
            _check(onnx.shape_inference.infer_shapes(probe, strict_mode=False,
                                                     data_prop=data_prop))  # fmt: skip
            # a Slice whose data input no stand-in decides any more got its final input
            # shape in this inference, and it has just been checked: it may be inferred now
            tainted = _downstream(list(probe.graph.node), pending)
            ready = {k for k in pending if not nodes[k].input or nodes[k].input[0] not in tainted}
            if not ready:  # only a cycle leaves none
                raise ModelFormatError("the graph's Slice nodes depend on one another in a cycle")
            for k in ready:
                probe.graph.node[k].domain = nodes[k].domain
            pending -= ready
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=strict_mode,
                                                 data_prop=data_prop)  # fmt: skip
    _check(inferred)
    return inferred
