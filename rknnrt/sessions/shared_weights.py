"""One quantised weight, scale and zero point per consumer, where onnxruntime's exact int8
kernels need it.

With the exact-kernel setting, onnxruntime refuses a graph in which one constant of a weight's
DequantizeLinear (its int8 values, its scale or its zero point) reaches two consumers: two
Convs sharing one kernel (TensorFlow exports, hand-made graphs), or two weights sharing one
scale constant. Each fusion stores a transformed constant under the constant's name, and the
second fails with "Attempt to replace the existing tensor". Every weight's DequantizeLinear
gets constants of its own, and each consumer after the first its own DequantizeLinear, so the
values computed are unchanged. A constant given as an external initializer is copied by
name only: both names are bound to the same OrtValue, so no weight memory is duplicated.
"""

from __future__ import annotations

from typing import Any

DEQUANTIZE = "DequantizeLinear"


def _weight_dequantizers(graph: Any, constants: set[str]) -> list[Any]:
    return [n for n in graph.node
            if n.op_type == DEQUANTIZE and n.input and n.input[0] in constants]  # fmt: skip


def is_shared(proto: Any, given_names: list[str] = ()) -> bool:
    """Whether a weight's DequantizeLinear shares a constant with another one, or feeds more
    than one consumer."""
    graph = proto.graph
    constants = {t.name for t in graph.initializer} | set(given_names)
    nodes = _weight_dequantizers(graph, constants)
    read = [name for n in nodes for name in n.input if name in constants]
    if len(read) != len(set(read)):
        return True
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    return any(uses.get(n.output[0], 0) > 1 for n in nodes)


def untie(proto: Any, given: tuple[list[str], list] | None) -> tuple | None:
    """Untie `proto` in place; returns the external initializers `given` with the copies'
    names added (None when none were given)."""
    graph = proto.graph
    initializers = {t.name: t for t in graph.initializer}
    names, values = (list(given[0]), list(given[1])) if given else ([], [])
    external = dict(zip(names, values))
    outputs = {o.name for o in graph.output}
    consumers: dict[str, list[tuple[Any, int]]] = {}
    for node in graph.node:
        for slot, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, slot))
    taken = set(initializers) | set(external) | {o for n in graph.node for o in n.output}
    taken |= {i.name for i in graph.input}

    def fresh(base: str) -> str:
        k = 2
        while f"{base}__{k}" in taken:
            k += 1
        taken.add(f"{base}__{k}")
        return f"{base}__{k}"

    def copy_constant(name: str) -> str:
        copy = fresh(name)
        if name in initializers:
            tensor = graph.initializer.add()
            tensor.CopyFrom(initializers[name])
            tensor.name = copy
        else:
            names.append(copy)
            values.append(external[name])
        return copy

    used: set[str] = set()
    twins: dict[int, list[Any]] = {}
    for at, node in enumerate(graph.node):
        if node.op_type != DEQUANTIZE or not node.input:
            continue
        if node.input[0] not in initializers and node.input[0] not in external:
            continue  # an activation's DequantizeLinear
        constants = [k for k, name in enumerate(node.input)
                     if name in initializers or name in external]  # fmt: skip
        uses = consumers.get(node.output[0], [])
        for k in constants:  # what an earlier weight's DequantizeLinear took is copied
            if node.input[k] in used:
                node.input[k] = copy_constant(node.input[k])
            used.add(node.input[k])
        if node.output[0] in outputs:
            continue
        for consumer, slot in uses[1:]:
            twin = type(node)()
            twin.CopyFrom(node)
            twin.name = fresh(node.name or node.output[0])
            for k in constants:
                twin.input[k] = copy_constant(node.input[k])
            twin.output[0] = fresh(node.output[0])
            consumer.input[slot] = twin.output[0]
            twins.setdefault(at, []).append(twin)
    if twins:  # each twin right after its original, so the order stays topological
        nodes = []
        for at, node in enumerate(graph.node):
            nodes.append(node)
            nodes.extend(twins.get(at, []))
        ordered = [type(n)() for n in nodes]
        for target, node in zip(ordered, nodes):
            target.CopyFrom(node)
        del graph.node[:]
        graph.node.extend(ordered)
    return (names, values) if given else None
