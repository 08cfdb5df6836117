"""The node-list edits the runtime's exact rewrites share (fast_graph, int8_depthwise,
fp16_layout): splice replacements in place of nodes, and drop what nothing reads any more."""

from __future__ import annotations

from typing import Any


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
