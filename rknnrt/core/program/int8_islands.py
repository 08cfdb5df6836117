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

Where rknnrt's compiled kernels are there, a depthwise conv runs on dw_kernel.py's, and on a
CPU with AVX-512 VNNI a dense conv, Gemm or MatMul of uint8 on qconv_kernel.py's: the same
integers and float32 products, fewer passes; a HardSwish or SiLU and the QuantizeLinear after
it in the kernel's pass too (conv_epilogue.py). That kernel also takes the dense convs
onnxruntime would fuse into QLinearConv (all of them, or only the shallow ones where
onnxruntime's int8 GEMMs run on AMX: qconv_kernel.fused_depth says where it measured faster),
requantised as QLinearConv does (tests/perf/test_qconv_kernel.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import switches
from ..lazy_imports import onnx
from . import conv_epilogue, dw_kernel, graph_edit, qconv_kernel
from .int8_depthwise import (
    _EXACT,
    _RANGES,
    _UINT8,
    _attr,
    _dq,
    _Lookup,
    _quantize_after,
    _scalar,
)

_FLOAT, _INT32 = 1, 6  # onnx.TensorProto.FLOAT, INT32


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray],
            limit: float = _EXACT) -> tuple[bytes, set[str]]:  # fmt: skip
    """(`graph` with its float-island convs accumulated in integers, the names of the weights
    it no longer reads); the same bytes when there is none. `weights`: the weights-section
    tensors by name. `limit`: the bound a part's sum must stay below (tests lower it)."""
    if b"DequantizeLinear" not in graph or b"Conv" not in graph:
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    if not model.graph.value_info and (dw_kernel.available() or qconv_kernel.available()):
        # a graph recording no shapes (a vendor file's): the kernels' Transposes need them to
        # cancel (without, a vendor EfficientNet kept 16 Transposes and ran 1.5x slower)
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except Exception:  # onnx raises several types; the kernels then run between Transposes
            pass
    if not islands_as_integers(model.graph, weights, limit):
        return graph, set()
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


def _weights(g: _Lookup, node, w_dq) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`node`'s int8 weights as (output channel, reduced axes...) with per-channel scales and
    zero points (a per-tensor pair repeated), or None outside the forms handled: Conv (any
    group), Gemm (transA 0, alpha = beta = 1), MatMul with a constant 2-D right side."""
    w, ws, wz = (g.const(n) for n in w_dq.input)
    if w is None or ws is None or wz is None or w.dtype not in (np.int8, np.uint8) \
            or ws.dtype != np.float32:  # fmt: skip
        return None
    if node.op_type == "Conv":
        if w.ndim < 3:
            return None
        axis = 0
    elif node.op_type == "Gemm":
        if w.ndim != 2 or _attr(node, "transA", 0) or _attr(node, "alpha", 1.0) != 1.0 \
                or _attr(node, "beta", 1.0) != 1.0:  # fmt: skip
            return None
        axis = 0 if _attr(node, "transB", 0) else 1
    elif node.op_type == "MatMul":
        if w.ndim != 2:
            return None
        axis = 1
    else:
        return None
    channels = w.shape[axis]
    if ws.size == 1 and wz.size == 1:
        ws, wz = np.full(channels, ws.reshape(-1)[0]), np.full(channels, wz.reshape(-1)[0])
    elif _attr(w_dq, "axis", 1) != axis or ws.size != channels or wz.size != channels:
        return None
    w = w if axis == 0 else w.T
    centred = w.astype(np.int64) - wz.astype(np.int64).reshape(-1, *[1] * (w.ndim - 1))
    return centred, ws.astype(np.float32).reshape(-1), wz


def _stored_after(g: _Lookup, node, x_type: int) -> tuple[object, list] | None:
    """(the QuantizeLinear storing `node`'s output, the Relu/Clip it makes redundant) where
    onnxruntime would not fuse them (its integer kernels give the output the input's type);
    None where it would, or where no such QuantizeLinear follows."""
    found = _quantize_after(g, node)
    if found is None or g.elem_type(found[0].input[2]) == x_type:
        return None
    return found


def _candidate(g: _Lookup, node, fused_depth: float = 0) -> dict | None:
    """The parts of an int8 Conv/Gemm/MatMul onnxruntime would run in float, or None; also
    those of a dense uint8 conv it would fuse into QLinearConv whose sums have at most
    `fused_depth` products (qconv_kernel.fused_depth; marked "fused": only that kernel takes
    them)."""
    if node.op_type not in ("Conv", "Gemm", "MatMul") or node.domain or len(node.input) < 2 \
            or len(node.output) != 1:  # fmt: skip
        return None
    x_dq, w_dq = _dq(g, node.input[0]), _dq(g, node.input[1])
    if x_dq is None or w_dq is None:
        return None
    xs, xz = _scalar(g, x_dq.input[1]), _scalar(g, x_dq.input[2])
    x_type = g.elem_type(x_dq.input[2])
    if xs is None or xz is None or x_type not in _RANGES or xs.dtype != np.float32:
        return None
    weights = _weights(g, node, w_dq)
    if weights is None:
        return None
    centred, ws, _ = weights
    channels = centred.shape[0]
    stored, fused = _stored_after(g, node, x_type), False
    if stored is None and _quantize_after(g, node) is not None:
        if not (node.op_type == "Conv" and x_type == _UINT8
                and int(_attr(node, "group", 1)) == 1 and centred.ndim == 4
                and centred[0].size <= fused_depth):  # fmt: skip
            return None  # onnxruntime fuses it into an integer kernel already
        stored, fused = _quantize_after(g, node), True
    m = (np.float32(xs) * ws).astype(np.float32)
    bias = None
    if len(node.input) > 2 and node.input[2]:
        b_dq = _dq(g, node.input[2])
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
    lo, hi = _RANGES[x_type]
    reach = max(int(xz) - lo, hi - int(xz))
    return {"x_dq": x_dq, "xz": x_dq.input[2], "w": centred, "m": m, "bias": bias,
            "reach": reach, "group": int(_attr(node, "group", 1)), "stored": stored,
            "fused": fused,
            "ys": None if stored is None else _scalar(g, stored[0].input[1])}  # fmt: skip


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

    removed: set[int] = set()
    shapes: list = []
    compiled = (dw_kernel.available(), qconv_kernel.available())
    residuals = compiled[1] and switches.int8_residual_kernel()
    depth = qconv_kernel.fused_depth()
    for node in graph.node:
        found = _candidate(g, node, depth)
        if found is None:
            continue
        tail = None if found["stored"] else conv_epilogue.tail_after(g, node)
        if tail is None and not found["stored"] and residuals and found["group"] == 1:
            tail = conv_epilogue.residual_after(g, node)
        made = _on_kernel(g, node, found, taken, *compiled, tail) if any(compiled) else None
        if made is None and found["fused"]:
            continue  # onnxruntime's QLinearConv then, as without the kernel
        if made is not None:
            nodes, inits, target, out, y_type = made
            added += inits
            replace[id(target)] = nodes
            stored = found["stored"] or tail
            if stored:
                removed |= {id(node), *(id(a) for a in stored[1])}
            base = f"{out}__int"
            shapes += dw_kernel.shapes(g.shapes.get(node.output[0]), base, out, y_type)
            continue
        ranges = parts(found["w"], found["bias"], found["reach"], found["group"], limit)
        if ranges is None:
            continue
        stored = found["stored"]
        out = stored[0].output[0] if stored else node.output[0]
        try:
            nodes, centred = _integer_nodes(node, found, ranges, f"{out}__int", fresh, const,
                                            centred_inputs)  # fmt: skip
        except ValueError:  # a name the graph already uses: leave this node
            continue
        if stored:  # in the QuantizeLinear's place; its centred input is not shared
            replace[id(stored[0])] = nodes
            removed |= {id(node), *(id(a) for a in stored[1])}
        else:
            centred_inputs.update(centred)
            replace[id(node)] = nodes
    if not replace:
        return 0
    graph_edit.apply(graph, replace, removed, added)
    known = {v.name for v in graph.value_info}
    graph.value_info.extend(v for v in shapes if v.name not in known)
    return len(replace)


def _on_kernel(g: _Lookup, node, found: dict, taken: set[str], depthwise_on: bool,
               dense_on: bool, tail: tuple | None = None) -> tuple | None:  # fmt: skip
    """A 2-D depthwise conv on the compiled depthwise kernel (core/program/dw_kernel.py), a
    dense conv, Gemm or MatMul on uint8 on the VNNI one (qconv_kernel.py) where they are on:
    (nodes, initializers, the node they replace, their output, its type), or None. Kept in float32
    it is float32(acc) * m as the Conv -> Mul(m) chain gives; stored, it is requantised as
    that chain's Mul(m / ys) -> QuantizeLinear(1, yz); with its activation `tail`
    (conv_epilogue.tail_after), that activation and QuantizeLinear in the same pass; with a
    residual `tail` (conv_epilogue.residual_after, dense only), its Add, Clip and
    QuantizeLinear."""
    w = found["w"]
    skip = tail[3] if tail is not None else None  # a residual's addend: the dense kernel's
    depthwise = depthwise_on and node.op_type == "Conv" and w.ndim == 4 and w.shape[1] == 1 \
        and found["group"] == w.shape[0] and skip is None  # fmt: skip
    dense = dense_on and found["group"] == 1 and (node.op_type != "Conv" or w.ndim == 4)
    if not depthwise and not dense:
        return None
    x_type, xz = g.elem_type(found["xz"]), _scalar(g, found["xz"])
    stored, m = found["stored"], found["m"]
    if stored:
        quant = stored[0]
        yz = _scalar(g, quant.input[2])
        y_type = g.elem_type(quant.input[2])
        if yz is None or found["ys"] is None:
            return None
        m = (m / np.float32(found["ys"])).astype(np.float32)
        target, out, zero = quant, quant.output[0], int(yz)
    elif tail is not None:  # m stays xs * ws: the kernel's HardSwish reads the conv's value
        target, out = tail[0], tail[0].output[0]
        y_type, zero = g.elem_type(target.input[2]), int(_scalar(g, target.input[2]))
    else:
        target, out, y_type, zero = node, node.output[0], _FLOAT, 0
    if xz is None:
        return None
    act = {} if stored or tail is None else tail[2]
    if depthwise:
        made = dw_kernel.nodes(node, found["x_dq"].input[0], x_type, int(xz), out, y_type, zero,
                               w, found["bias"], m, f"{out}__int", taken, act)  # fmt: skip
    elif x_type != _UINT8 or not qconv_kernel.takes(
            w, found["bias"], found["reach"], y_type != _FLOAT) or (
            node.op_type == "MatMul" and _rank(g, node.output[0]) < 2):  # fmt: skip
        return None  # (the kernel's rows need a MatMul's input of rank 2 or more)
    else:
        made = qconv_kernel.nodes(node, found["x_dq"].input[0], int(xz), out, y_type, zero, w,
                                  found["bias"], m, f"{out}__int", taken, act, skip)  # fmt: skip
    return None if made is None else (*made, target, out, y_type)


def _rank(g: _Lookup, name: str) -> int:
    """The recorded rank of tensor `name`, 0 when none is recorded."""
    shape = g.shapes.get(name)
    return len(shape.dim) if shape is not None else 0


def _integer_nodes(node, found: dict, ranges: list[tuple[int, int]], base: str, fresh, const,
                   centred_inputs: dict) -> tuple[list, dict]:  # fmt: skip
    """The nodes computing `node`'s output as float32(acc) * m (module doc), or for a stored
    output its QuantizeLinear's as onnxruntime's integer kernels do, and the centred input
    they made (to be shared by later nodes)."""
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
    op = node.op_type
    sums = []
    for k, (a, b) in enumerate(ranges):
        inputs = [x]
        if len(ranges) > 1:
            part = fresh(f"{base}_x{k}")
            axis = -1 if op == "MatMul" else 1
            nodes.append(make("Slice", [x, const(f"{base}_from{k}", np.array([a], np.int64)),
                                        const(f"{base}_to{k}", np.array([b], np.int64)),
                                        const(f"{base}_axis{k}", np.array([axis], np.int64))],
                              [part], name=f"{base}_slice{k}"))  # fmt: skip
            inputs = [part]
        piece = w[:, a:b].astype(np.float32)
        inputs.append(const(f"{base}_w{k}", piece.T.copy() if op == "MatMul" else piece))
        if bias is not None and k == 0:
            inputs.append(const(f"{base}_b", bias.astype(np.float32)))
        acc = fresh(f"{base}_acc{k}")
        if op == "Conv":
            made_node = make("Conv", inputs, [acc], name=f"{base}_conv{k}")
            made_node.attribute.extend(node.attribute)
        elif op == "Gemm":  # weights as (N, K)
            made_node = make("Gemm", inputs, [acc], transB=1, name=f"{base}_gemm{k}")
        else:
            made_node = make("MatMul", inputs, [acc], name=f"{base}_matmul{k}")
        nodes.append(made_node)
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
    stored = found["stored"]
    if stored:  # QLinearConv's requantisation: float32(acc) * (xs * ws / ys), one rounding
        ys = np.float32(found["ys"])
        m = (m / ys).astype(np.float32)
    shape = m.reshape(-1, *[1] * (w.ndim - 2)) if op == "Conv" else m
    # m first: onnxruntime's ConvMulFusion folds only Mul(conv, constant) into the weights
    scaled = fresh(f"{base}_real") if stored else node.output[0]
    nodes.append(make("Mul", [const(f"{base}_m", shape), acc], [scaled], name=f"{base}_scale"))
    if stored:
        one = const(f"{base}_unit", np.array(1.0, np.float32))
        nodes.append(make("QuantizeLinear", [scaled, one, stored[0].input[2]],
                          [stored[0].output[0]], name=f"{base}_round"))  # fmt: skip
    return nodes, made
