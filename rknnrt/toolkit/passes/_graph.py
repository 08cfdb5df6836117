"""Small helpers shared by the graph passes (name bookkeeping across nested subgraphs)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import onnx
from onnx.helper import make_tensor_value_info

# Domains whose ops onnxruntime implements and whose semantics the passes know.
DEFAULT_DOMAINS = ("", "ai.onnx")


def copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """Deep copy, so passes never mutate the caller's model."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """Graph-valued attributes of a node (If/Loop/Scan bodies)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def walk(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """All nodes of a graph, including those inside nested subgraphs."""
    for node in graph.node:
        yield node
        for sub in subgraphs(node):
            yield from walk(sub)


def node_inputs(node: onnx.NodeProto) -> set[str]:
    """Names a node reads, counting outer-scope names its subgraphs capture."""
    names = {name for name in node.input if name}
    for sub in subgraphs(node):
        names |= used(sub)
    return names


def used(graph: onnx.GraphProto) -> set[str]:
    """Names read by any node (recursively) or exposed as a graph output.

    Over-approximates for subgraphs (their local names are included), which only makes
    callers keep more, never less.
    """
    names = {out.name for out in graph.output}
    for node in graph.node:
        names |= node_inputs(node)
    return names


def all_names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name in the graph, for picking fresh names."""
    names = {v.name for v in (*graph.input, *graph.output, *graph.value_info)}
    names |= {t.name for t in graph.initializer}
    for node in walk(graph):
        names.update(node.input)
        names.update(node.output)
    return names


def unique_name(taken: set[str], base: str) -> str:
    """`base`, suffixed with a counter if needed; the result is added to `taken`."""
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    return name


def rename(graph: onnx.GraphProto, old: str, new: str, outputs: bool = False) -> None:
    """Replace reads of `old` by `new` everywhere (and writes too when `outputs`).

    ONNX forbids shadowing outer names in subgraphs, so a recursive rename is safe.
    The stale value_info entry is dropped; shape inference rebuilds it.
    """
    for node in walk(graph):
        fields = (node.input, node.output) if outputs else (node.input,)
        for field in fields:
            for i, name in enumerate(field):
                if name == old:
                    field[i] = new
        for sub in subgraphs(node):
            for out in sub.output:
                if out.name == old:
                    out.name = new
    remove_where(graph.value_info, lambda _, v: v.name == old)


def remove_where(field, drop: Callable[[int, Any], bool]) -> None:
    """Delete elements of a repeated field for which `drop(index, item)` holds.

    Deletes in place, back to front, so big tensors are never copied.
    """
    for i in reversed([i for i, item in enumerate(field) if drop(i, item)]):
        del field[i]


def attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    """The value of `node`'s attribute `name`, or `default` when it is not set."""
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def drop_unused_initializers(graph: onnx.GraphProto) -> None:
    """Remove initializers nothing reads, and their (IR < 4 style) graph-input entries."""
    names = used(graph)
    dead = {t.name for t in graph.initializer if t.name not in names}
    remove_where(graph.initializer, lambda _, t: t.name in dead)
    remove_where(graph.input, lambda _, v: v.name in dead)


def infer_shapes(model: onnx.ModelProto, small: int = 1024) -> onnx.GraphProto:
    """`onnx.shape_inference.infer_shapes` (strict off), returning the inferred graph.

    Initializers over `small` elements become typed graph inputs instead: inference only
    needs their shapes, and copying/serializing the weights dominated the run time.
    Small ones keep their values, which e.g. Reshape's shape inference reads.
    """
    g = model.graph
    names = {v.name for v in g.input}
    big = [t for t in g.initializer if math.prod(t.dims) > small]
    typed = [
        make_tensor_value_info(t.name, t.data_type, t.dims) for t in big if t.name not in names
    ]
    graph = onnx.GraphProto(
        name=g.name,
        node=g.node,
        input=[*g.input, *typed],
        output=g.output,
        value_info=g.value_info,
        initializer=[t for t in g.initializer if math.prod(t.dims) <= small],
        sparse_initializer=g.sparse_initializer,
    )
    stub = onnx.ModelProto(
        ir_version=model.ir_version,
        opset_import=model.opset_import,
        functions=model.functions,
        graph=graph,
    )
    return onnx.shape_inference.infer_shapes(stub, strict_mode=False).graph
