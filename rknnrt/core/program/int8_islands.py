"""int8 convs whose output is not stored ("float islands") accumulated in integers, as the NPU
does, and fast.

An int8 program's conv whose output the NPU never stores (it is added inside a residual Add,
or computed with its SiLU, Sigmoid, HardSwish, LeakyRelu: the vendor's fusions) reaches
onnxruntime as DequantizeLinear(x) -> Conv(DequantizeLinear(w), DequantizeLinear(bias)) ->
float ops -> QuantizeLinear. onnxruntime cannot fuse that into an integer kernel, so it
dequantised the weights at every run and summed float32 products in its generic kernel's
order. The NPU accumulates int8 x int8 products in int32. This module gives the program that
semantics, per output channel c:

    acc = sum (x - xz)(w - wz[c]) + bias[c]          in integers (exact)
    y   = float32(acc) * m[c],  m[c] = float32(xs * ws[c])

and hands y to the same float ops as before. It runs as

    DequantizeLinear(x, 1, xz) -> Conv(float32 w - wz, float32 bias) -> Mul(m, .)

a float convolution on integer-valued operands with constant weights (onnxruntime's blocked
kernels): every product and partial sum is an integer, exact in float32 in any order while
the sum of |w - wz[c]| * max|x - xz| + |bias[c]| stays below 2^24 (int8_depthwise.py uses the
same bound). A conv beyond it is split along its input channels into parts within it, each
part's exact sum cast to int32 and added in int32: the same acc. Outputs are bit-identical to
the int64 definition above (tests/perf/test_int8_islands.py). A conv is rewritten only where
the program's bias is on the grid xs * ws[c] (the converter's rule, toolkit/quantize/qdq.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..lazy_imports import onnx
from . import graph_edit
from .int8_depthwise import _EXACT, _RANGES, _attr, _dq, _Lookup, _quantize_after, _scalar

_FLOAT, _INT32 = 1, 6  # onnx.TensorProto.FLOAT, INT32


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray],
            limit: float = _EXACT) -> tuple[bytes, set[str]]:  # fmt: skip
    """(`graph` with its float-island convs accumulated in integers, the names of the weights
    it no longer reads); the same bytes when there is none. `weights`: the weights-section
    tensors by name. `limit`: the bound a part's sum must stay below (tests lower it)."""
    if b"DequantizeLinear" not in graph or b"Conv" not in graph:
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    if not islands_as_integers(model.graph, weights, limit):
        return graph, set()
    used = {name for node in model.graph.node for name in node.input}
    unused = {name for name in weights if name not in used}
    keep = [t for t in model.graph.initializer if t.name not in unused]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    return model.SerializeToString(), unused


def _candidate(g: _Lookup, conv) -> dict | None:
    """The parts of an int8 conv onnxruntime would run in float (not fused), or None."""
    if conv.op_type != "Conv" or conv.domain or len(conv.input) < 2 or len(conv.output) != 1:
        return None
    x_dq, w_dq = _dq(g, conv.input[0]), _dq(g, conv.input[1])
    if x_dq is None or w_dq is None:
        return None
    xs, xz = _scalar(g, x_dq.input[1]), _scalar(g, x_dq.input[2])
    w, ws, wz = (g.const(n) for n in w_dq.input)
    if xs is None or xz is None or w is None or ws is None or wz is None:
        return None
    if g.elem_type(x_dq.input[2]) not in _RANGES or w.dtype not in (np.int8, np.uint8) \
            or xs.dtype != np.float32 or ws.dtype != np.float32 or w.ndim < 3:  # fmt: skip
        return None
    channels = w.shape[0]
    if ws.size == 1 and wz.size == 1:
        ws, wz = np.full(channels, ws.reshape(-1)[0]), np.full(channels, wz.reshape(-1)[0])
    elif _attr(w_dq, "axis", 1) != 0 or ws.size != channels or wz.size != channels:
        return None
    if _quantize_after(g, conv) is not None:
        return None  # onnxruntime fuses it into an integer kernel already
    m = (np.float32(xs) * ws.astype(np.float32).reshape(-1)).astype(np.float32)
    bias = None
    if len(conv.input) > 2 and conv.input[2]:
        b_dq = _dq(g, conv.input[2])
        if b_dq is None:
            return None
        bias, bs, bz = (g.const(n) for n in b_dq.input)
        if bias is None or bias.dtype != np.int32 or bias.size != channels or bs is None \
                or bz is None or np.any(bz != 0) or bs.dtype != np.float32:  # fmt: skip
            return None
        if bs.size == 1:
            bs = np.full(channels, bs.reshape(-1)[0])
        if bs.size != channels or bs.reshape(-1).tobytes() != m.tobytes():
            return None  # a bias on another grid: not an integer of the accumulator
        bias = bias.reshape(-1).astype(np.int64)
    centred = w.astype(np.int64) - wz.astype(np.int64).reshape(-1, *[1] * (w.ndim - 1))
    lo, hi = _RANGES[g.elem_type(x_dq.input[2])]
    reach = max(int(xz) - lo, hi - int(xz))
    return {"x_dq": x_dq, "xz": x_dq.input[2], "w": centred, "m": m, "bias": bias,
            "reach": reach, "group": int(_attr(conv, "group", 1))}  # fmt: skip


def parts(w: np.ndarray, bias: np.ndarray | None, reach: int, group: int,
          limit: float = _EXACT) -> list[tuple[int, int]] | None:  # fmt: skip
    """Input-channel ranges [a, b) of `w` (centred, (C_out, C_in / group, ...)) whose exact
    sums stay below `limit` for every output channel (the bias counted in the first); one
    range when the whole conv does; None when a grouped conv would need parts (not done) or
    one input channel alone exceeds the limit."""
    per_input = np.abs(w).reshape(w.shape[0], w.shape[1], -1).sum(axis=2) * reach
    first = np.abs(bias) if bias is not None else np.zeros(w.shape[0], np.int64)
    if (per_input.sum(axis=1) + first).max(initial=0) < limit:
        return [(0, w.shape[1])]
    if group != 1:
        return None
    ranges, start, total = [], 0, first.astype(np.int64).copy()
    for i in range(w.shape[1]):
        if (total + per_input[:, i]).max() >= limit:
            if i == start:
                return None
            ranges.append((start, i))
            start, total = i, np.zeros(w.shape[0], np.int64)
        total = total + per_input[:, i]
    if total.max() >= limit:
        return None
    ranges.append((start, w.shape[1]))
    return ranges


def islands_as_integers(graph, weights: Mapping[str, np.ndarray], limit: float = _EXACT) -> int:
    """Rewrite each float-island int8 conv (see the module doc) in place; returns how many
    were rewritten."""
    g = _Lookup(graph, weights)
    taken = set(g.producer) | set(g.inline) | set(weights) | {i.name for i in graph.input}
    replace: dict[int, list] = {}
    added: list = []
    centred_inputs: dict[tuple[str, str], str] = {}  # (x, zero point) -> x - xz, shared

    def fresh(name: str) -> str:
        if name in taken:
            raise ValueError(name)
        taken.add(name)
        return name

    def const(name: str, value: np.ndarray) -> str:
        added.append(onnx.numpy_helper.from_array(value, fresh(name)))
        return name

    for conv in graph.node:
        found = _candidate(g, conv)
        if found is None:
            continue
        ranges = parts(found["w"], found["bias"], found["reach"], found["group"], limit)
        if ranges is None:
            continue
        out = conv.output[0]
        base = f"{out}__int"
        try:
            nodes, centred = _integer_conv(conv, found, ranges, base, fresh, const,
                                           centred_inputs)  # fmt: skip
        except ValueError:  # a name the graph already uses: leave this conv
            continue
        centred_inputs.update(centred)
        replace[id(conv)] = nodes
    if not replace:
        return 0
    # the weight and bias DequantizeLinear nodes nothing reads any more go too
    nodes = graph_edit.live_nodes(graph, graph_edit.splice(graph, replace, set()))
    graph_edit.set_nodes(graph, nodes)
    graph.initializer.extend(added)
    used = {n for node in nodes for n in node.input}
    keep = [t for t in graph.initializer if t.name in used or t.data_location ==
            onnx.TensorProto.EXTERNAL]  # fmt: skip
    del graph.initializer[:]
    graph.initializer.extend(keep)
    return len(replace)


def _integer_conv(conv, found: dict, ranges: list[tuple[int, int]], base: str, fresh, const,
                  centred_inputs: dict) -> tuple[list, dict]:  # fmt: skip
    """The nodes computing `conv`'s output as float32(acc) * m (module doc), and the centred
    input they made (to be shared by later convs)."""
    make = onnx.helper.make_node
    nodes = []
    x_dq = found["x_dq"]
    key = (x_dq.input[0], found["xz"])
    x, made = centred_inputs.get(key), {}
    if x is None:
        x = fresh(f"{base}_x")
        one = const(f"{base}_one", np.array(1.0, np.float32))
        nodes.append(make("DequantizeLinear", [x_dq.input[0], one, found["xz"]], [x],
                          name=f"{base}_centre"))  # fmt: skip
        made[key] = x
    w, bias, m = found["w"], found["bias"], found["m"]
    attrs = list(conv.attribute)
    sums = []
    for k, (a, b) in enumerate(ranges):
        inputs = [x]
        if len(ranges) > 1:
            part = fresh(f"{base}_x{k}")
            nodes.append(make("Slice", [x, const(f"{base}_from{k}", np.array([a], np.int64)),
                                        const(f"{base}_to{k}", np.array([b], np.int64)),
                                        const(f"{base}_axis{k}", np.array([1], np.int64))],
                              [part], name=f"{base}_slice{k}"))  # fmt: skip
            inputs = [part]
        inputs.append(const(f"{base}_w{k}", w[:, a:b].astype(np.float32)))
        if bias is not None and k == 0:
            inputs.append(const(f"{base}_b", bias.astype(np.float32)))
        acc = fresh(f"{base}_acc{k}")
        node = make("Conv", inputs, [acc], name=f"{base}_conv{k}")
        node.attribute.extend(attrs)
        nodes.append(node)
        sums.append(acc)
    if len(sums) > 1:  # each part exact in float32; their sum in int32
        ints = []
        for k, acc in enumerate(sums):
            ints.append(fresh(f"{base}_i{k}"))
            nodes.append(make("Cast", [acc], [ints[-1]], to=_INT32, name=f"{base}_cast{k}"))
        total = ints[0]
        for k, other in enumerate(ints[1:], 1):
            nxt = fresh(f"{base}_sum{k}")
            nodes.append(make("Add", [total, other], [nxt], name=f"{base}_add{k}"))
            total = nxt
        acc = fresh(f"{base}_acc")
        nodes.append(make("Cast", [total], [acc], to=_FLOAT, name=f"{base}_float"))
    else:
        acc = sums[0]
    shape = m.reshape(-1, *[1] * (w.ndim - 2))
    # m first: onnxruntime's ConvMulFusion folds only Mul(conv, constant) into the weights
    nodes.append(make("Mul", [const(f"{base}_m", shape), acc], [conv.output[0]],
                      name=f"{base}_scale"))  # fmt: skip
    return nodes, made
