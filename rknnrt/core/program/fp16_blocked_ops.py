"""A float16 program's squeeze-and-excitation blocks and residual adds inside onnxruntime's
blocked layout, on rknnrt's compiled kernels: exact.

In MobileNetV3's and EfficientNet's SE blocks a tensor feeds a GlobalAveragePool and a Mul by
the per-channel gate computed from that pool. fp16_layout keeps a pool on its plain input,
because onnxruntime's blocked pool sums in another order than its plain one (other float32
bits). So the tensor left the blocked layout and came back at every block: a ReorderOutput, a
rounding, the plain Mul, another rounding and a ReorderInput, five passes over the block's
largest tensor (MobileNetV3-small fp16: ~54 us a block, 9 blocks, one thread).

With rknnrt's kernels (sessions/kernels/blocked.c, f16ops.c) they stay blocked:
- a blocked GlobalAveragePool runs as `GlobalMeanBlocked`, which sums in the plain pool's order
  (the pool's pair then moves into the layout with the others), and rounds its means in the
  same op where that rounding pair alone reads them (attribute round; MobileNetV3-small's nine
  pools each one node fewer);
- a plain Mul of two ReorderOutputs of the same channels, rounded and reordered back in, runs
  as `MulRoundBlocked` on the two blocked tensors: the same products, rounded in the same pass;
- an Add of two blocked tensors (onnxruntime keeps an Add blocked without reshaping it only
  where it has proven both shapes equal) and the rounding after it run as `AddRoundFloat16`:
  the same sums, rounded in the same pass, in place of either input where onnxruntime allows;
  with a Relu between them (a residual block's end: ResNet's, RegNet's, whose last conv the
  vendor rounds only after its Add and Relu) as `AddReluRoundFloat16`, the Relu onnxruntime's
  (max(0, s), s kept where it is not below 0) in the same pass (RegNetX-400MF fp16: 22 Adds
  and 22 Relus, 0.27 ms of a 3.5 ms kernel sum at two threads).

The laid-out graph (and its cache entry, layout_cache's key) depends on `enabled()`; where it
is off the pools stay plain as before. The outputs are the plain program's bytes
(tests/perf/test_fp16_blocked_ops.py, test_fp16_layout_arch.py). RKNNRT_FP16_BLOCKED_OPS=0
turns it off.
"""

from __future__ import annotations

from ...sessions import kernels, nchwc
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, graph_edit

_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16
_NCHWC = "com.microsoft.nchwc"
MEAN_OP, MUL_OP, ADD_OP = "GlobalMeanBlocked", "MulRoundBlocked", "AddRoundFloat16"
ADD_RELU_OP = "AddReluRoundFloat16"


def enabled() -> bool:
    """Whether a float16 program's pools and gates may be laid out blocked here: the switch,
    rknnrt's kernels built, and a blocked layout known (its block)."""
    return switches.fp16_blocked_ops() and nchwc.block() > 0 and dw_kernel.library_ready()


def _int_attr(node, name: str, default: int) -> int:
    return next((a.i for a in node.attribute if a.name == name), default)


def _plain_reorder(node, op_type: str) -> bool:
    return node.op_type == op_type and node.domain == _NCHWC and \
        _int_attr(node, "channels_last", 0) == 0  # fmt: skip


def rewrite(model) -> int:
    """In a laid-out graph (fp16_layout's, its rounding pairs as Cast pairs): each blocked
    GlobalAveragePool as GlobalMeanBlocked, each gate Mul between reorders as MulRoundBlocked,
    each rounded Add of blocked tensors as AddRoundFloat16. Returns how many nodes were
    replaced."""
    graph, block = model.graph, nchwc.block()
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    blocked = _blocked_tensors(graph)
    replace: dict[int, list] = {}
    removed: set[int] = set()
    for node in graph.node:
        if node.op_type == "Add" and node.domain in ("", "ai.onnx") and len(node.input) == 2 \
                and all(name in blocked for name in node.input):  # fmt: skip
            op, chain = ADD_OP, _rounding_after(node.output[0], readers, outputs)
            relu = _relu_after(node.output[0], readers, outputs)
            if chain is None and relu is not None:
                pair = _rounding_after(relu.output[0], readers, outputs)
                op, chain = ADD_RELU_OP, None if pair is None else (relu, *pair)
            if chain is not None:
                replace[id(node)] = [onnx.helper.make_node(
                    op, list(node.input), [chain[-1].output[0]],
                    name=f"{chain[-1].output[0]}__add", domain=kernels.DOMAIN)]  # fmt: skip
                removed.update(id(n) for n in chain)
            continue
        if node.op_type == "GlobalAveragePool" and node.domain == _NCHWC:
            pair = _rounding_after(node.output[0], readers, outputs)  # rounded in its pass
            out = pair[1].output[0] if pair is not None else node.output[0]
            replace[id(node)] = [onnx.helper.make_node(
                MEAN_OP, list(node.input), [out], name=f"{out}__mean", domain=kernels.DOMAIN,
                block=block, round=int(pair is not None))]  # fmt: skip
            removed.update(id(n) for n in pair or ())
            continue
        found = _gate_mul(node, producer, readers, outputs)
        if found is not None:
            (first, second, reorder), (a, b), channels = found
            replace[id(node)] = [onnx.helper.make_node(
                MUL_OP, [a, b], list(reorder.output), name=f"{reorder.output[0]}__mul",
                domain=kernels.DOMAIN, block=block, channels=channels)]  # fmt: skip
            removed.update((id(first), id(second), id(reorder)))
    if not replace:
        return 0
    # the ReorderOutputs only the Muls read go too
    graph_edit.set_nodes(graph, graph_edit.live_nodes(graph, graph_edit.splice(
        graph, replace, removed)))  # fmt: skip
    dw_kernel.import_domain(model)
    return len(replace)


def _gate_mul(node, producer: dict, readers: dict, outputs: set) -> tuple | None:
    """((first Cast, second Cast, ReorderInput), (blocked a, blocked b), channels) where `node`
    is a plain Mul of two plain ReorderOutputs of the same channels whose product only a
    rounding pair reads and whose rounded value only a plain ReorderInput reads; else None."""
    if node.op_type != "Mul" or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
        return None
    sources = [producer.get(name) for name in node.input]
    if any(s is None or not _plain_reorder(s, "ReorderOutput") for s in sources):
        return None
    channels = {_int_attr(s, "channels", 0) for s in sources}
    if len(channels) != 1 or min(channels) < 1:
        return None
    pair = _rounding_after(node.output[0], readers, outputs)
    if pair is None:
        return None
    name = pair[1].output[0]
    after = readers.get(name, [])
    if name in outputs or len(after) != 1 or not _plain_reorder(after[0], "ReorderInput"):
        return None
    return (pair[0], pair[1], after[0]), (sources[0].input[0], sources[1].input[0]), \
        channels.pop()  # fmt: skip


def _rounding_after(name: str, readers: dict, outputs: set) -> tuple | None:
    """(first Cast, second Cast) of the rounding pair that alone reads `name`, neither value a
    graph output; else None. (Not fp16_layout.rounding_pairs: the rounded value may be a graph
    output here, since the fused op writes it under its name; the layout must leave such a
    pair where it is.)"""
    chain = []
    for want in (_FLOAT16, _FLOAT):
        after = readers.get(name, [])
        if name in outputs or len(after) != 1 or graph_edit.cast_to(after[0]) != want:
            return None
        chain.append(after[0])
        name = after[0].output[0]
    return chain[0], chain[1]


def _relu_after(name: str, readers: dict, outputs: set):
    """The plain Relu that alone reads `name` (not a graph output), else None."""
    after = readers.get(name, [])
    if name in outputs or len(after) != 1 or after[0].op_type != "Relu" \
            or after[0].domain not in ("", "ai.onnx"):  # fmt: skip
        return None
    return after[0]


def _blocked_tensors(graph) -> set[str]:
    """Tensors in the blocked layout: written by a node of onnxruntime's layout (but a
    ReorderOutput) or by this module's ops, or by a Cast, an Add or a Relu of such tensors only."""
    found: set[str] = set()
    for node in graph.node:
        if (node.domain == _NCHWC and node.op_type != "ReorderOutput") or (
                node.domain == kernels.DOMAIN
                and node.op_type in (MEAN_OP, MUL_OP, ADD_OP, ADD_RELU_OP)) or (
                node.domain in ("", "ai.onnx") and node.op_type in ("Cast", "Add", "Relu")
                and node.input and all(name in found for name in node.input)):  # fmt: skip
            found.update(node.output)
    return found
