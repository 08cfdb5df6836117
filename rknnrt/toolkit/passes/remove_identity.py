"""Remove pass-through nodes: `Identity`, and `Dropout` in inference mode (output = input)."""

from __future__ import annotations

import onnx
from onnx import numpy_helper

from rknnrt.toolkit.passes import _graph


def _is_false(graph: onnx.GraphProto, name: str) -> bool:
    """Whether `name` is an initializer holding False (Dropout's training_mode)."""
    for tensor in graph.initializer:
        if tensor.name == name:
            return not numpy_helper.to_array(tensor).any()
    return False


def _removable(node: onnx.NodeProto, graph: onnx.GraphProto, used: set[str]) -> bool:
    if node.domain not in _graph.DEFAULT_DOMAINS or not node.input or not node.input[0]:
        return False
    if node.op_type == "Identity":
        return True
    if node.op_type != "Dropout":
        return False
    if len(node.output) > 1 and node.output[1] in used:  # the mask is only produced here
        return False
    # opset 12+: a training_mode that is not constant False makes the node random.
    return len(node.input) < 3 or not node.input[2] or _is_false(graph, node.input[2])


def run(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of `model` without Identity / inference Dropout nodes.

    Graph output names never change: when the removed node writes a graph output, its
    producer is renamed to write it instead, or, if there is no producer (the input is a
    graph input, initializer or another graph output), the node is kept.
    """
    model = _graph.copy(model)
    graph = model.graph
    outputs = {o.name for o in graph.output}
    sources = {v.name for v in graph.input} | {t.name for t in graph.initializer} | outputs
    used = _graph.used(graph)
    removed = set()
    for idx, node in enumerate(graph.node):
        if not _removable(node, graph, used):
            continue
        src, dst = node.input[0], node.output[0]
        if dst not in outputs:
            _graph.rename(graph, dst, src)  # consumers read the input directly
        elif src not in sources:
            _graph.rename(graph, src, dst, outputs=True)  # producer writes the output name
        else:
            continue
        removed.add(idx)
    _graph.remove_where(graph.node, lambda i, _: i in removed)
    return model
