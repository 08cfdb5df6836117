"""A float16 program's element-wise chains as one table pass each: exact.

Between two roundings a float16 program often runs a chain of element-wise ops on one tensor
and scalar constants: GELU (DeiT) is Div, Erf, Add, Mul, Mul with a rounding after each; SiLU
one QuickGelu (onnxruntime's fusion of Sigmoid and Mul) and its rounding, HardSwish one op and
its rounding. The chain's input is a rounded tensor, a float16 value, so its output is a function
of 65536 inputs: onnxruntime computes that function once, on every float16 value, with the
chain's own nodes (its roundings included), and the program then runs
`rknnrt.kernels::HalfTable` (sessions/kernels/f16ops.c) in the chain's place: one pass that
rounds the input (RoundFloat16's rounding: the identity on a rounded tensor) and looks its
float16 bits up. Where the chain's input rounding has no other reader, that rounding is the
table pass's too. The ops are those whose onnxruntime kernels give an element the same bits
wherever it lies in a tensor (tests/perf/test_fp16_tables.py checks each on every float16
value, tails included), so the outputs are bit-identical to the chain's.

fp16_round.rewrite applies `rewrite` once the roundings are RoundFloat16 nodes. A chain's
constants must be scalars stored in the graph (a per-channel constant makes each channel
another function); chains of the same ops and constants share one table, and all of a
program's tables come from one helper session run. RKNNRT_FP16_TABLES=0 keeps the chains.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ...sessions import factory, kernels, policies
from ..lazy_imports import onnx
from . import graph_edit

OP = "HalfTable"
TABLE_SIZE = 65536
_FLOAT = 1  # onnx.TensorProto.FLOAT

# Element-wise ops of one value and scalar constants whose onnxruntime kernels give the same
# bits at any position of a tensor: the test module checks each one.
ELEMENTWISE = frozenset({
    "Abs", "Add", "Clip", "Div", "Erf", "Exp", "HardSigmoid", "HardSwish", "LeakyRelu", "Mul",
    "Neg", "Relu", "Sigmoid", "Sub", "Tanh",
})  # fmt: skip
# onnxruntime's own fusions of such chains (its layout session makes SiLU's Sigmoid and Mul one
# QuickGelu, x * sigmoid(alpha * x)), checked alike
FUSED_ELEMENTWISE = frozenset({"QuickGelu"})
_MS_DOMAIN = "com.microsoft"
_ROUND = "RoundFloat16"
# rknnrt's ops whose outputs are float16 values: a chain may start at one
_ROUNDED = frozenset({_ROUND, "AddRoundFloat16", "MulRoundBlocked"})


class Chain(NamedTuple):
    """Nodes (in graph order) from the rounded tensor `start` to the rounding writing `end`;
    `fused`: the RoundFloat16 writing `start`, which the table pass takes over, or None."""

    start: str
    end: str
    nodes: list
    fused: Any


def _is_kernel(node: Any, names: frozenset[str]) -> bool:
    return node.domain == kernels.DOMAIN and node.op_type in names


def _scalar_constants(graph: Any) -> dict[str, np.ndarray]:
    """The graph's one-value float constants stored in it (initializers with their data and
    Constant nodes): the only constants a chain may read."""
    found: dict[str, np.ndarray] = {}
    for tensor in graph.initializer:
        if tensor.data_type == _FLOAT and tensor.data_location != onnx.TensorProto.EXTERNAL \
                and len(tensor.dims) <= 1 and int(np.prod(tensor.dims)) == 1:  # fmt: skip
            found[tensor.name] = onnx.numpy_helper.to_array(tensor)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and value.data_type == _FLOAT and len(value.dims) <= 1 \
                    and int(np.prod(value.dims)) == 1:  # fmt: skip
                found[node.output[0]] = onnx.numpy_helper.to_array(value)
    return found


def find_chains(graph: Any) -> list[Chain]:
    """The chains of `graph` (RoundFloat16 nodes in place), none sharing a node: from each
    rounded tensor, the longest run of element-wise ops and roundings reading only it, each
    other and scalar constants, that ends in a rounding and whose other tensors only the run
    reads."""
    constants = _scalar_constants(graph)
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    producer = {out: node for node in graph.node for out in node.output}
    outputs = {o.name for o in graph.output}
    order = {id(node): k for k, node in enumerate(graph.node)}
    taken: set[int] = set()
    chains = []
    for head in graph.node:
        if not _is_kernel(head, _ROUNDED) or id(head) in taken:
            continue
        start = head.output[0]
        inside = _closure(start, readers, constants, taken)
        chain = _longest(start, inside, readers, producer, outputs, order)
        if chain is None:
            continue
        ids = {id(n) for n in chain}
        start_readers = readers.get(start, [])
        fused = head if (head.op_type == _ROUND and start not in outputs
                         and all(id(n) in ids for n in start_readers)) else None  # fmt: skip
        taken |= ids | ({id(head)} if fused is not None else set())
        chains.append(Chain(start, chain[-1].output[0], chain, fused))
    return chains


def _allowed(node: Any) -> bool:
    if len(node.output) != 1:
        return False
    if node.domain in ("", "ai.onnx"):
        return node.op_type in ELEMENTWISE
    if node.domain == _MS_DOMAIN:
        return node.op_type in FUSED_ELEMENTWISE
    return _is_kernel(node, frozenset({_ROUND}))


def _closure(start: str, readers: dict[str, list], constants: dict[str, np.ndarray],
             taken: set[int]) -> list:  # fmt: skip
    """Every node reachable from `start` through allowed nodes whose inputs are `start`, such
    nodes' outputs or scalar constants."""
    known, inside, pending = {start}, [], list(readers.get(start, []))
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if id(node) in seen or id(node) in taken or not _allowed(node):
            continue
        if not all(name in known or name in constants for name in node.input if name):
            continue  # perhaps once another of its inputs is known
        seen.add(id(node))
        inside.append(node)
        for out in node.output:  # (a reader skipped for want of this input comes back)
            known.add(out)
            pending.extend(readers.get(out, []))
    return inside


def _longest(start: str, inside: list, readers: dict[str, list], producer: dict[str, Any],
             outputs: set[str], order: dict[int, int]) -> list | None:  # fmt: skip
    """The largest chain among `inside` ending at one of its roundings (graph order), or None:
    a rounding's ancestors up to `start`, with at least one op that is not a rounding, whose
    tensors but the last only they read."""
    ids = {id(n) for n in inside}
    best: list | None = None
    for end in inside:
        if not _is_kernel(end, frozenset({_ROUND})):
            continue
        chain, stack = {id(end): end}, [end]
        while stack:
            for name in stack.pop().input:
                node = producer.get(name)
                if name != start and node is not None and id(node) in ids \
                        and id(node) not in chain:  # fmt: skip
                    chain[id(node)] = node
                    stack.append(node)
        nodes = sorted(chain.values(), key=lambda n: order[id(n)])
        if all(_is_kernel(n, frozenset({_ROUND})) for n in nodes):
            continue
        if any(n.output[0] in outputs or any(id(r) not in chain for r in readers.get(
                n.output[0], [])) for n in nodes if n is not end):  # fmt: skip
            continue
        if best is None or len(nodes) > len(best):
            best = nodes
    return best


def _signature(chain: Chain, constants: dict[str, np.ndarray]) -> bytes:
    """What makes a chain's function: its ops, attributes and constants, wired as they are."""
    local = {chain.start: "x"}
    parts = []
    for k, node in enumerate(chain.nodes):
        args = [
            local.get(name) or (constants[name].tobytes().hex() if name else "")
            for name in node.input
        ]
        attrs = sorted(a.SerializeToString().hex() for a in node.attribute)
        parts.append(f"{node.domain}:{node.op_type}({','.join(args)}){attrs}")
        local[node.output[0]] = f"t{k}"
    return "|".join(parts).encode()


def _tables(chains: list[Chain], constants: dict[str, np.ndarray], opset: int
            ) -> tuple[list[int], list]:  # fmt: skip
    """Each chain's table number, and the tables (float32, TABLE_SIZE values each): every
    distinct chain's nodes run once, in one helper session of the program's `opset`, on every
    float16 value."""
    numbers: dict[bytes, int] = {}
    index = []
    nodes, outputs, initializers = [], [], []
    for chain in chains:
        key = _signature(chain, constants)
        if key not in numbers:
            numbers[key] = k = len(numbers)
            rename = {chain.start: "x"}
            for name in {n for node in chain.nodes for n in node.input} - {chain.start}:
                if name in constants and name not in rename:
                    rename[name] = f"c{k}_{len(rename)}"
                    initializers.append(onnx.numpy_helper.from_array(constants[name],
                                                                     rename[name]))  # fmt: skip
            for j, node in enumerate(chain.nodes):
                copy = onnx.NodeProto()
                copy.CopyFrom(node)
                copy.name = f"n{k}_{j}"
                for slot, name in enumerate(node.input):
                    copy.input[slot] = rename.get(name, name)
                rename[node.output[0]] = copy.output[0] = f"t{k}_{j}"
                nodes.append(copy)
            outputs.append(rename[chain.end])
        index.append(numbers[key])
    h = onnx.helper
    graph = h.make_graph(nodes, "fp16_tables", [h.make_tensor_value_info("x", _FLOAT, [None])],
                         [h.make_tensor_value_info(o, _FLOAT, [None]) for o in outputs],
                         initializers)  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset), h.make_opsetid(
        kernels.DOMAIN, 1), h.make_opsetid(_MS_DOMAIN, 1)])  # fmt: skip
    session = factory.create(model.SerializeToString(), policies.HELPER)
    every_half = np.arange(TABLE_SIZE, dtype=np.uint32).astype(np.uint16).view(np.float16)
    tables = session.run(outputs, {"x": every_half.astype(np.float32)})
    return index, tables


def rewrite(model: Any) -> int:
    """Each chain of `model` (its roundings RoundFloat16 nodes) as one HalfTable node reading
    the chain's input (or, where fused, its rounding's input) and its table, an initializer.
    Returns how many chains were replaced."""
    graph = model.graph
    chains = find_chains(graph)
    if not chains:
        return 0
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    try:
        index, tables = _tables(chains, _scalar_constants(graph), opset)
    except Exception:  # onnxruntime refusing the helper graph raises several types: the
        return 0  # chains stay, exact
    names = [f"rknnrt_fp16_table_{k}" for k in range(len(tables))]
    for name, table in zip(names, tables):
        graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(table, np.float32),
                                                              name))  # fmt: skip
    replace, removed = {}, set()
    for chain, k in zip(chains, index):
        source = chain.fused.input[0] if chain.fused is not None else chain.start
        replace[id(chain.nodes[-1])] = [onnx.helper.make_node(
            OP, [source, names[k]], [chain.end], name=f"{chain.end}__table16",
            domain=kernels.DOMAIN)]  # fmt: skip
        removed |= {id(n) for n in chain.nodes[:-1]}
        if chain.fused is not None:
            removed.add(id(chain.fused))
    gone = {out for chain in chains for n in chain.nodes[:-1] for out in n.output}
    gone |= {chain.start for chain in chains if chain.fused is not None}
    graph_edit.set_nodes(graph, graph_edit.splice(graph, replace, removed))
    kept = [v for v in graph.value_info if v.name not in gone]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    return len(chains)
