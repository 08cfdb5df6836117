"""Per-channel affine maps of int8 tensors in one pass of rknnrt's compiled kernels.

An int8 vendor file's standalone BatchNormalization (a DenseNet's, after each Concat:
model/vendor_rknn/act_ops.py) reaches onnxruntime as

    DequantizeLinear(x) -> Mul(a) -> Add(b) [-> Relu] -> QuantizeLinear

on a uint8 tensor with per-channel constants a and b ([1, C, 1, ...]): four or five passes over
the tensor, two of them float32 (a real-size DenseNet-121 int8 file: 62 Muls and 71 Adds,
~12 of its ~28 ms). `rknnrt.kernels::ChannelAffineU8` (sessions/kernels/affine.c) computes the
same float32 operations in one pass from the uint8 tensor to the uint8 one, so the bytes are
the same (tests/perf/test_int8_affine.py). A chain is rewritten only where each intermediate
has that one reader and is no graph output, the constants and scales are finite (the scales
positive), both zero points uint8 and the tensor's rank (recorded or inferred by onnx) that of
the constants, so that their channels are its axis 1; the DequantizeLinear stays where
something else reads it. Without the kernel library (no C compiler) the chain stays, with
dw_kernel's one W line; RKNNRT_INT8_AFFINE_KERNEL=0 keeps it too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...sessions import kernels
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, graph_edit
from .int8_depthwise import _UINT8, _dq, _Lookup, _scalar

OP = "ChannelAffineU8"


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with its per-channel affine int8 chains as one kernel node each, the names of
    the weights it no longer reads); the same bytes when there is none."""
    if b"DequantizeLinear" not in graph or b"Mul" not in graph or \
            not switches.int8_affine_kernel():  # fmt: skip
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    # Muls of a dequantised tensor first: the lookup tables cost more than the scan
    dequantised = {n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}
    muls = [n for n in model.graph.node if n.op_type == "Mul" and n.input and
            n.input[0] in dequantised]  # fmt: skip
    if not muls:
        return graph, set()
    g = _Lookup(model.graph, weights)
    found = [c for c in (_chain(g, node) for node in muls) if c is not None]
    if found:  # (the channel axis is 1 only where x's rank is the constants')
        ranks = _ranks(model)
        found = [c for c in found if ranks.get(c[0].output[0]) == c[-1]]
    if not found or not dw_kernel.library_ready():
        return graph, set()
    replace, removed = {}, set()
    for k, (dq, steps, quant, params, a, b, _) in enumerate(found):
        if g.only_reader(dq.output[0]) is steps[0]:
            removed.add(id(dq))
        stem = f"{quant.output[0]}__affine{k}"
        inits = [onnx.numpy_helper.from_array(v, f"{stem}_{n}")
                 for v, n in ((params, "p"), (a, "a"), (b, "b"))]  # fmt: skip
        model.graph.initializer.extend(inits)
        replace[id(steps[0])] = [onnx.helper.make_node(
            OP, [dq.input[0], *(t.name for t in inits)], [quant.output[0]], name=stem,
            domain=kernels.DOMAIN)]  # fmt: skip
        removed |= {id(n) for n in (*steps[1:], quant)}
    graph_edit.set_nodes(model.graph, graph_edit.splice(model.graph, replace, removed))
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


def _ranks(model) -> dict[str, int]:
    """Tensor name -> rank, as recorded or inferred by onnx (nothing where inference fails)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # onnx's inference raises several types: then no chain is rewritten
        return {}
    return {v.name: len(v.type.tensor_type.shape.dim)
            for v in (*inferred.input, *inferred.value_info, *inferred.output)
            if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}


def _chain(g: _Lookup, mul) -> tuple | None:
    """(DequantizeLinear, [Mul, Add, Relu?], QuantizeLinear, params, a, b, the constants'
    rank) of the chain starting at `mul`, or None (the input's rank is checked by the
    caller)."""
    if mul.op_type != "Mul" or mul.domain or len(mul.input) != 2:
        return None
    dq = _dq(g, mul.input[0])
    if dq is None or g.elem_type(dq.input[0]) not in (None, _UINT8):
        return None
    add = g.only_reader(mul.output[0])
    if add is None or add.op_type != "Add" or add.domain or len(add.input) != 2 or \
            add.input[0] != mul.output[0]:  # fmt: skip
        return None
    steps, node = [mul, add], g.only_reader(add.output[0])
    relu = node is not None and node.op_type == "Relu" and not node.domain
    if relu:
        steps.append(node)
        node = g.only_reader(node.output[0])
    if node is None or node.op_type != "QuantizeLinear" or node.domain or len(node.input) != 3:
        return None
    scales = [_scalar(g, n) for n in (dq.input[1], node.input[1])]
    zps = [_scalar(g, n) for n in (dq.input[2], node.input[2])]
    a, b = (_per_channel(g.const(n)) for n in (mul.input[1], add.input[1]))
    if any(s is None or s.dtype != np.float32 or not np.isfinite(s) or s <= 0 for s in scales) \
            or any(z is None or z.dtype != np.uint8 for z in zps) or a is None or b is None \
            or a[0].size != b[0].size or a[1] != b[1]:  # fmt: skip
        return None
    params = np.array([scales[0], zps[0], scales[1], zps[1], 1 if relu else 0], np.float32)
    return dq, steps, node, params, a[0], b[0], a[1]


def _per_channel(value: np.ndarray | None) -> tuple[np.ndarray, int] | None:
    """(float32 [C], its rank) of a finite float32 constant of shape [1, C, 1, ...]."""
    if value is None or value.dtype != np.float32 or value.ndim < 3 or value.shape[0] != 1 or \
            any(d != 1 for d in value.shape[2:]) or not np.isfinite(value).all():  # fmt: skip
        return None
    return np.ascontiguousarray(value.reshape(-1)), value.ndim
