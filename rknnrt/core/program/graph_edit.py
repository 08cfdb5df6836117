"""The node-list edits the runtime's rewrites share (fast_graph, int8_depthwise, int8_islands,
fp16_layout, fp16_round): splice replacements in place of nodes, drop what nothing reads any
more, and read a Cast's target type."""

from __future__ import annotations

from typing import Any


def cast_to(node: Any) -> int | None:
    """The target type (onnx.TensorProto number) of a standard-domain Cast, else None."""
    if node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
        return None
    return next((a.i for a in node.attribute if a.name == "to"), None)


def splice(graph: Any, replace: dict[int, list], removed: set[int]) -> list:
    """The graph's nodes in order, each node whose id is in `replace` swapped for its list and
    those in `removed` left out."""
    nodes: list = []
    for node in graph.node:
        if id(node) in replace:
            nodes.extend(replace[id(node)])
        elif id(node) not in removed:
            nodes.append(node)
    return nodes


def live_nodes(graph: Any, nodes: list) -> list:
    """`nodes` without those whose outputs nothing (no later node, no graph output) reads,
    repeated until none is left to drop."""
    while True:
        used = {o.name for o in graph.output} | {n for node in nodes for n in node.input}
        live = [node for node in nodes if any(out in used for out in node.output)]
        if len(live) == len(nodes):
            return nodes
        nodes = live


def set_nodes(graph: Any, nodes: list) -> None:
    del graph.node[:]
    graph.node.extend(nodes)


def apply(graph: Any, replace: dict[int, list], removed: set[int], added: list) -> None:
    """Splice `replace` in and `removed` out, drop the nodes nothing reads any more (the weight
    and bias DequantizeLinear of rewritten ops), add the `added` initializers and drop the
    inline ones nothing reads (weights-section ones stay: the caller reports those)."""
    from ..lazy_imports import onnx

    nodes = live_nodes(graph, splice(graph, replace, removed))
    set_nodes(graph, nodes)
    graph.initializer.extend(added)
    used = {n for node in nodes for n in node.input}
    keep = [t for t in graph.initializer
            if t.name in used or t.data_location == onnx.TensorProto.EXTERNAL]  # fmt: skip
    del graph.initializer[:]
    graph.initializer.extend(keep)


def drop_unused_weights(model: Any, weights: Any) -> set[str]:
    """Remove from `model` the weights-section initializers (names in `weights`) no node reads;
    returns their names."""
    used = {name for node in model.graph.node for name in node.input}
    unused = {name for name in weights if name not in used}
    keep = [t for t in model.graph.initializer if t.name not in unused]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    return unused
