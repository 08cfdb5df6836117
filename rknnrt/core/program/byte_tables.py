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
list below (Clip's bounds constant), per-tensor parameters with finite positive scales, and
intermediate tensors with that one reader; byte_maps.py owns the pairs with nothing between.
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
    if not any(n.op_type in ACTIVATIONS and n.input and n.input[0] in dequantised
               for n in model.graph.node):  # fmt: skip
        return graph, set()
    g = _Lookup(model.graph, weights)
    chains = [c for c in (_chain(g, n) for n in model.graph.node) if c is not None]
    if not chains or not dw_kernel.library_ready():
        return graph, set()
    shapes = graph_edit.StaticShapes(model, g.shapes, g.producer)
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
        if dims is None or len(dims) != 4:
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


def _chain(g: _Lookup, dq) -> tuple | None:
    """(DequantizeLinear, [activations], QuantizeLinear) of a quantised activation chain
    starting at `dq`, or None."""
    if dq.op_type != "DequantizeLinear" or dq.domain not in ("", "ai.onnx") or len(dq.input) != 3:
        return None
    steps, node = [], g.only_reader(dq.output[0])
    while node is not None and node.op_type in ACTIVATIONS and node.domain in ("", "ai.onnx"):
        if node.input[0] != (steps[-1].output[0] if steps else dq.output[0]) or \
                len(node.output) != 1 or \
                any(name and g.const(name) is None for name in node.input[1:]):  # fmt: skip
            return None
        steps.append(node)
        node = g.only_reader(node.output[0])
    if not steps or node is None or node.op_type != "QuantizeLinear" or \
            node.domain not in ("", "ai.onnx") or len(node.input) != 3 or \
            not _per_tensor(g, dq) or not _per_tensor(g, node):  # fmt: skip
        return None
    return dq, steps, node


def tables(g: _Lookup, chains: list, opset: int) -> list[np.ndarray | None]:
    """Each chain's 256 output bytes as onnxruntime computes them under the program's policy,
    indexed by the input byte; None where they depend on the byte's position. One session for
    all of them (a session each was ~1.5 ms of rknn_init per chain)."""
    nodes, inputs, outputs, names = [], [], [], set()
    for k, (dq, steps, quant) in enumerate(chains):
        rename = {dq.input[0]: f"x{k}", quant.output[0]: f"y{k}"}
        for i, node in enumerate((dq, *steps, quant)):
            copied = onnx.NodeProto()
            copied.CopyFrom(node)
            copied.name = f"{k}_{i}"
            for j, name in enumerate(copied.input):
                if j == 0:
                    copied.input[j] = rename.get(name, f"{k}_{name}")
                elif name:
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
