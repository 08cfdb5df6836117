"""Activations between two quantisations as one table pass of rknnrt's compiled kernels.

An int8 program's activation that the NPU applies to a stored int8 tensor (a squeeze-and-
excitation gate's HardSigmoid in MobileNetV3, a standalone Sigmoid, HardSwish, LeakyRelu, ...)
reaches onnxruntime as

    DequantizeLinear(x, s1, z1) -> activation(s) -> QuantizeLinear(s2, z2)

three or more nodes over a tensor that is often tiny ([1, C, 1, 1]: a few µs each in node
overhead). Each output byte depends on one input byte: a 256-entry table.
`rknnrt.kernels::ByteTable_<x><y>` (sessions/kernels/bytemap.c) applies it in one pass.

The table is what onnxruntime computes: the same nodes, copied into a session of the program's
policy (the same optimisations and fusions; one session for all the graph's chains), run on all
256 bytes. It is used only where that
session gives each byte the same value wherever the byte lies in a longer tensor (16 copies at
every offset mod 16: a kernel's vector body and its tail must agree), so the bytes are the
nodes' (tests/perf/test_byte_tables.py). A 4-D tensor of known shape runs between a Transpose
to NHWC and one back, with its shapes recorded, which onnxruntime's layout pass cancels against
the NHWC conv kernels' own. A chain is rewritten only through element-wise activations of the
list below (Clip's bounds constant) and element-wise arithmetic on the chain's own tensors and
one-value constants (a GELU as exported: Div, Erf, Add, Mul by x, Mul), per-tensor parameters
with finite positive scales, and intermediate tensors read only inside the chain (so that the
copied nodes meet the same fusions as in the program); byte_maps.py owns the pairs with
nothing between.
Without the kernel library the nodes stay (dw_kernel's one W line); RKNNRT_INT8_BYTE_MAP_KERNEL=0
keeps them too.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np

from ...sessions import factory, kernels, policies
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, graph_edit
from .int8_depthwise import _BYTE_NAMES, _BYTE_NUMPY, _Lookup, _per_tensor

# element-wise activations with no tensor input but x (Clip: its constant bounds)
ACTIVATIONS = ("Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Elu",
               "Selu", "Softplus", "Softsign", "Clip", "Gelu", "Mish")  # fmt: skip
# element-wise arithmetic whose inputs are the chain's tensors or one-value constants (GELU
# as exported: Div, Erf, Add, Mul by x, Mul)
ARITHMETIC = ("Add", "Sub", "Mul", "Div", "Pow", "Erf", "Sqrt", "Exp", "Neg", "Abs",
              "Reciprocal")  # fmt: skip
_OFFSETS = 16  # copies of the 256 bytes at each offset mod 16 in the position check
# tables made in this process by their chains' graph (another rknn_init of the same model, a
# dup'd or second context, reads them here: the session is ~6 ms of a MobileNetV3's init)
_KEPT = 32
_lock = threading.Lock()
_made: dict[bytes, tuple] = {}


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with its quantised activations as one table node each, the names of the
    weights it no longer reads); the same bytes when there is none."""
    if b"QuantizeLinear" not in graph or not switches.int8_byte_map_kernel():
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    # a DequantizeLinear read by an activation first: the lookup tables cost more than the scan
    dequantised = {n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}
    if not any(n.op_type in (*ACTIVATIONS, *ARITHMETIC) and n.input and n.input[0] in dequantised
               for n in model.graph.node):  # fmt: skip
        return graph, set()
    g = _Lookup(model.graph, weights)
    order = {id(n): i for i, n in enumerate(model.graph.node)}
    shapes = graph_edit.StaticShapes(model, g.shapes, g.producer)
    chains = [c for c in (_chain(g, n, order, shapes) for n in model.graph.node)
              if c is not None]  # fmt: skip
    if not chains or not dw_kernel.library_ready():
        return graph, set()
    replace, removed = {}, set()
    recorded = {v.name for v in (*model.graph.value_info, *model.graph.output)}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    for k, ((dq, steps, quant), values) in enumerate(zip(chains, tables(g, chains, opset))):
        if values is None:
            continue
        x_type, y_type = g.elem_type(dq.input[2]), g.elem_type(quant.input[2])
        stem, out = f"{quant.output[0]}__table{k}", quant.output[0]
        model.graph.initializer.append(onnx.numpy_helper.from_array(values, f"{stem}_table"))
        op = f"ByteTable_{_BYTE_NAMES[x_type]}{_BYTE_NAMES[y_type]}"
        dims = shapes.of(dq.input[0])
        # arithmetic chains (a transformer's GELU) sit between ops in their own layout
        if dims is None or len(dims) != 4 or any(n.op_type in ARITHMETIC for n in steps):
            made = [onnx.helper.make_node(op, [dq.input[0], f"{stem}_table"], [out], name=stem,
                                          domain=kernels.DOMAIN)]  # fmt: skip
        else:  # in NHWC between Transposes that onnxruntime cancels (the shapes let it)
            nhwc = [dims[i] for i in (0, 2, 3, 1)]
            made = [
                onnx.helper.make_node("Transpose", [dq.input[0]], [f"{stem}_x"],
                                      perm=[0, 2, 3, 1], name=f"{stem}_t"),  # fmt: skip
                onnx.helper.make_node(op, [f"{stem}_x", f"{stem}_table"], [f"{stem}_y"],
                                      name=stem, domain=kernels.DOMAIN),  # fmt: skip
                onnx.helper.make_node("Transpose", [f"{stem}_y"], [out], perm=[0, 3, 1, 2],
                                      name=f"{stem}_tb"),  # fmt: skip
            ]
            typed = [(f"{stem}_x", x_type, nhwc), (f"{stem}_y", y_type, nhwc), (out, y_type, dims)]
            model.graph.value_info.extend(onnx.helper.make_tensor_value_info(n, t, d)
                                          for n, t, d in typed if n not in recorded)  # fmt: skip
        replace[id(dq)] = made
        removed |= {id(n) for n in (*steps, quant)}
    if not replace:
        return graph, set()
    graph_edit.set_nodes(model.graph, graph_edit.splice(model.graph, replace, removed))
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


def _chain(g: _Lookup, dq, order: dict[int, int],
           shapes: graph_edit.StaticShapes) -> tuple | None:  # fmt: skip
    """(DequantizeLinear, [its steps in graph order], QuantizeLinear) of a quantised chain
    starting at `dq`, or None: every tensor from the DequantizeLinear on read only inside the
    chain, every step an element-wise activation of the chain's tensor or arithmetic on the
    chain's tensors and one-value constants, and one QuantizeLinear reading the last."""
    if dq.op_type != "DequantizeLinear" or dq.domain not in ("", "ai.onnx") or len(dq.input) != 3:
        return None
    inside, steps, quants, pending = {dq.output[0]}, {}, [], [dq.output[0]]
    while pending:  # every reader of the chain's tensors, to the QuantizeLinear
        name = pending.pop()
        if name in g.outputs or not g.readers.get(name):
            return None
        for node in g.readers[name]:
            if node.op_type == "QuantizeLinear" and node.domain in ("", "ai.onnx"):
                quants.append(node)
            elif id(node) not in steps:
                if len(steps) >= _MOST_STEPS or not _step(g, node) or len(node.output) != 1:
                    return None
                steps[id(node)] = node
                inside.add(node.output[0])
                pending.append(node.output[0])
    ordered = sorted(steps.values(), key=lambda n: order[id(n)])
    if not ordered or len(quants) != 1 or len(quants[0].input) != 3 \
            or quants[0].input[0] != ordered[-1].output[0]:  # fmt: skip
        return None
    dims = shapes.of(dq.input[0])
    rank = len(dims) if dims is not None else 0
    if any(name not in inside and not _one_value(g, name, rank) for node in ordered
           for name in node.input if name) or not _per_tensor(g, dq) \
            or not _per_tensor(g, quants[0]):  # fmt: skip
        return None
    return dq, ordered, quants[0]


_MOST_STEPS = 16


def _step(g: _Lookup, node) -> bool:
    """Whether `node` may be a chain's step (its inputs are checked with the whole chain)."""
    if node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type in ACTIVATIONS:
        return all(g.const(name) is not None for name in node.input[1:] if name)
    return node.op_type in ARITHMETIC


def _one_value(g: _Lookup, name: str, rank: int) -> bool:
    """A constant of one value that broadcasts without changing the chain's shape: rank 0, or
    at most the chain tensor's known `rank` (0 where it is not known)."""
    value = g.const(name)
    return value is not None and value.size == 1 and value.ndim <= rank


def tables(g: _Lookup, chains: list, opset: int) -> list[np.ndarray | None]:
    """Each chain's 256 output bytes as onnxruntime computes them under the program's policy,
    indexed by the input byte; None where they depend on the byte's position. One session for
    all of them (a session each was ~1.5 ms of rknn_init per chain)."""
    nodes, inputs, outputs, names = [], [], [], set()
    for k, (dq, steps, quant) in enumerate(chains):
        rename = {dq.input[0]: f"x{k}", quant.output[0]: f"y{k}"}
        tensors = {dq.output[0], *(step.output[0] for step in steps)}
        for i, node in enumerate((dq, *steps, quant)):
            copied = onnx.NodeProto()
            copied.CopyFrom(node)
            copied.name = f"{k}_{i}"
            for j, name in enumerate(copied.input):
                if (i == 0 and j == 0) or name in tensors:  # the chain's own tensors
                    copied.input[j] = rename.get(name, f"{k}_{name}")
                elif name:  # a constant, shared by name
                    names.add(name)
            copied.output[0] = rename.get(copied.output[0], f"{k}_{copied.output[0]}")
            nodes.append(copied)
        inputs.append(onnx.helper.make_tensor_value_info(f"x{k}", g.elem_type(dq.input[2]), [None]))
        outputs.append(onnx.helper.make_tensor_value_info(f"y{k}", g.elem_type(quant.input[2]),
                                                          [None]))  # fmt: skip
    inits = [onnx.numpy_helper.from_array(g.const(n), n) for n in sorted(names)]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "tables", inputs, outputs, inits),
                                   opset_imports=[onnx.helper.make_opsetid("", opset)])  # fmt: skip
    model.ir_version = 8
    # every byte at offset 0, then again after 1, 2, ... 15 fillers: each at every offset mod 16
    feeds = {}
    for k, (dq, _, _) in enumerate(chains):
        every = np.arange(256, dtype=np.uint8).view(_BYTE_NUMPY[g.elem_type(dq.input[2])])
        feeds[f"x{k}"] = np.concatenate([np.concatenate([every[:1].repeat(j), every])
                                         for j in range(_OFFSETS)])  # fmt: skip
    key = model.SerializeToString()
    with _lock:
        known = _made.get(key)
    if known is not None:
        return list(known)
    try:
        session = factory.create(key, policies.PROGRAM, threads=1)
        results = session.run(None, feeds)
    except Exception:  # onnxruntime raises several types: then the nodes stay
        return [None] * len(chains)
    found = []
    for spread in results:
        values, start, same = spread[:256], 0, True
        for j in range(_OFFSETS):
            start += j
            same = same and spread[start : start + 256].tobytes() == values.tobytes()
            start += 256
        found.append(np.ascontiguousarray(values).view(np.uint8) if same else None)
    with _lock:
        if len(_made) >= _KEPT:
            _made.pop(next(iter(_made)))
        _made[key] = tuple(found)
    return found
