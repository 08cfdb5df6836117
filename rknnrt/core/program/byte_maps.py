"""Requantisations of one byte tensor to another as one table pass of rknnrt's compiled kernels.

An int8 program reads its int8 input and computes in uint8 (the converter's and a vendor
file's programs alike), so its first nodes are

    DequantizeLinear(x, s1, z1) -> QuantizeLinear(s2, z2) -> Transpose to NHWC

with per-tensor parameters, the Transpose there when the first conv runs on rknnrt's NHWC
kernels (int8_islands.py). Each output byte depends on one input byte only: a 256-entry table.
`rknnrt.kernels::ByteMap_<x><y>` (sessions/kernels/bytemap.c) applies it in one pass and
writes the NHWC layout itself (a 1x3x224x224 image input: three onnxruntime passes, 0.12 ms,
into one, 0.026 ms). A pair without that Transpose stays: onnxruntime's layout optimiser moves
its own Transposes through DequantizeLinear and QuantizeLinear to the input, and a table node
in their place stopped them (SqueezeNet int8, its stem and max pool left in NCHW: 2.5x slower).

The table holds what those two operators compute (onnx's definitions, onnxruntime's
arithmetic): float32(x - z1) * s1, then / s2 in float32, clamped to the output type's range
less z2 (integer bounds: clamping first rounds the same), rounded half to even, + z2; the bytes
are the same (tests/perf/test_byte_maps.py). A pair is rewritten only where its scales are
finite and positive, its zero points scalar and the intermediate tensors have no other reader
and are no graph output. Without the kernel library (no C compiler) the nodes stay, with
dw_kernel's one W line; RKNNRT_INT8_BYTE_MAP_KERNEL=0 keeps them too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...sessions import kernels
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, graph_edit
from .int8_depthwise import _BYTE_NAMES, _BYTE_NUMPY, _RANGES, _attr, _Lookup, _scalar

_NHWC = [0, 2, 3, 1]


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with its byte requantisations as one table node each, the names of the weights
    it no longer reads); the same bytes when there is none."""
    if b"QuantizeLinear" not in graph or not switches.int8_byte_map_kernel():
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    # a DequantizeLinear read by a QuantizeLinear first: the lookup tables cost more than the
    # scan (~0.3 ms of every int8 rknn_init for a graph that has none)
    quantised = {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    starts = [n for n in model.graph.node
              if n.op_type == "DequantizeLinear" and n.output[0] in quantised]  # fmt: skip
    if not starts:
        return graph, set()
    g = _Lookup(model.graph, weights)
    found = [p for p in (_pair(g, node) for node in starts) if p is not None]
    if not found or not dw_kernel.library_ready():
        return graph, set()
    replace, removed = {}, set()
    for k, (dq, quant, transpose, values, x_type, y_type) in enumerate(found):
        stem = f"{transpose.output[0]}__bytemap{k}"
        model.graph.initializer.append(onnx.numpy_helper.from_array(values, f"{stem}_table"))
        replace[id(dq)] = [onnx.helper.make_node(
            f"ByteMap_{_BYTE_NAMES[x_type]}{_BYTE_NAMES[y_type]}", [dq.input[0], f"{stem}_table"],
            [transpose.output[0]], name=stem, domain=kernels.DOMAIN)]  # fmt: skip
        removed |= {id(quant), id(transpose)}
    graph_edit.set_nodes(model.graph, graph_edit.splice(model.graph, replace, removed))
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


def table(x_type: int, s1: float, z1: int, y_type: int, s2: float, z2: int) -> np.ndarray:
    """The 256 output bytes of DequantizeLinear(s1, z1) -> QuantizeLinear(s2, z2), indexed by
    the input byte (x_type, y_type: onnx's UINT8 or INT8)."""
    x = np.arange(256, dtype=np.uint8).view(_BYTE_NUMPY[x_type]).astype(np.float32)
    v = (x - np.float32(z1)) * np.float32(s1)  # (x - z1) is exact in float32
    t = v / np.float32(s2)
    lo, hi = _RANGES[y_type]
    t = np.clip(t, np.float32(lo - z2), np.float32(hi - z2))
    return (np.rint(t) + np.float32(z2)).astype(_BYTE_NUMPY[y_type]).view(np.uint8)


def _pair(g: _Lookup, dq) -> tuple | None:
    """(DequantizeLinear, QuantizeLinear, the Transpose to NHWC after it, the table, x's type,
    y's type) of the requantisation starting at `dq`, or None."""
    if dq.op_type != "DequantizeLinear" or dq.domain not in ("", "ai.onnx") or len(dq.input) != 3:
        return None
    quant = g.only_reader(dq.output[0])
    if quant is None or quant.op_type != "QuantizeLinear" or quant.domain not in ("", "ai.onnx") \
            or len(quant.input) != 3 or quant.input[0] != dq.output[0] \
            or any(a.name != "axis" for a in quant.attribute):  # fmt: skip
        return None
    x_type, y_type = g.elem_type(dq.input[2]), g.elem_type(quant.input[2])
    params = [_scalar(g, name) for name in (*dq.input[1:], *quant.input[1:])]
    if x_type not in _BYTE_NAMES or y_type not in _BYTE_NAMES or any(p is None for p in params):
        return None
    s1, z1, s2, z2 = (p.reshape(()) for p in params)
    if not all(np.isfinite(s) and s > 0 for s in (s1, s2)):
        return None
    after = g.only_reader(quant.output[0])
    nhwc = after is not None and after.op_type == "Transpose" and \
        after.domain in ("", "ai.onnx") and list(_attr(after, "perm", [])) == _NHWC  # fmt: skip
    if not nhwc:  # alone, the pair stays (the module's docstring says why)
        return None
    values = table(x_type, float(s1), int(z1), y_type, float(s2), int(z2))
    return dq, quant, after, values, x_type, y_type
