"""Depthwise int8 convolutions with per-channel weight zero points, run exactly and fast.

The vendor's weights are asymmetric per output channel (rules.weight_qparams), so each
channel has its own weight zero point. onnxruntime fuses a QDQ Conv into QLinearConv; for a
depthwise one (one input and one output channel per group) whose zero points are not all
equal its kernel takes a path ~250x slower than with one zero point (a 144-channel 56x56 3x3
depthwise conv: 117 ms vs 0.45 ms, onnxruntime 1.32; dense and grouped convs are not
affected). MobileNetV2 int8 spent 950 of its ~1000 ms in 17 such convs.

QLinearConv computes, per output channel c, the int32 sum acc = sum (x - xz)(w - wz[c]) +
bias[c], then y = saturate(round_half_even(float(acc) * m[c]) + yz) with the float32
m[c] = (xs * ws[c]) / ys. For a depthwise kernel every product (x - xz)(w - wz[c]) is an
integer of magnitude <= 255 * 255 and there are kh*kw of them, so the same sum computed in
float32 on integer-valued operands is exact (every partial sum is an integer below 2^24) in
any order. The rewrite therefore runs, in place of the fused op:

    DequantizeLinear(x, 1, xz) -> Conv(float32 w - wz, float32 bias)   exact integers
      -> Cast(int32) -> DequantizeLinear(scale m, axis 1) -> QuantizeLinear(1, yz)

whose steps are onnxruntime's float convolution (blocked layout, fast) and element-wise ops,
and whose arithmetic is QLinearConv's: float(acc) * m[c], then round half to even, add yz and
saturate. The Cast keeps onnxruntime from folding m into the weights (which would round).
A conv is rewritten only where its bound holds (sum of |w - wz[c]| * max|x - xz| + |bias|
below 2^24 for every channel) and where onnxruntime would fuse it into QLinearConv: Conv ->
QuantizeLinear, or through a Relu/Clip that onnxruntime drops before a QuantizeLinear
(ReluQuantFusion: zero point at the type's minimum; ClipQuantFusion: the clip covers the
quantised range within float32 epsilon). Outputs are bit-identical
(tests/perf/test_int8_depthwise.py); MobileNetV2 int8 ~1000 ms -> see benchmarks/real_arch.py.

Where rknnrt's compiled kernels are available (sessions/kernels: a C custom-op library built on
first use; RKNNRT_INT8_DW_KERNEL=0 turns them off) a 2-D conv of the same set runs instead as

    Transpose(NHWC) -> rknnrt.kernels::DepthwiseConvInt8_<x><y>(w - wz, bias, m) -> Transpose(NCHW)

the same integer sum and the same float32 requantisation, on the int8 tensors in NHWC: no
dequantised float tensor, no blocked-layout reorders, and the Transposes cancel against the
NHWC ones onnxruntime puts around its neighbouring QLinearConvs (tests/perf/test_dw_kernel.py:
bit-identical to the float chain). Without a compiler the float chain stays, with one W line.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..lazy_imports import onnx
from . import dw_kernel, graph_edit

_EXACT = float(2**24)  # integers up to this magnitude are exact in float32
_EPSILON = float(np.finfo(np.float32).eps)
_UINT8, _INT8 = 2, 3  # onnx.TensorProto.UINT8, INT8
_RANGES = {_UINT8: (0, 255), _INT8: (-128, 127)}
# the byte types' names in the kernels' op names, and their numpy types
_BYTE_NAMES = {_UINT8: "u8", _INT8: "s8"}
_BYTE_NUMPY = {_UINT8: np.uint8, _INT8: np.int8}

def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with its slow depthwise int8 convs in the exact fast form, the names of the
    weights it no longer reads); the same bytes when there is none. `weights`: the
    weights-section tensors by name (the graph's external constants)."""
    if b"DequantizeLinear" not in graph or b"Conv" not in graph:
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    if not depthwise_as_float(model.graph, weights):
        return graph, set()
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


class _Lookup:
    def __init__(self, graph, weights: Mapping[str, np.ndarray]) -> None:
        self.producer = {out: node for node in graph.node for out in node.output}
        self.readers: dict[str, list] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.outputs = {o.name for o in graph.output}
        self.inline = {t.name: t for t in graph.initializer}
        self.weights = weights
        self.shapes = {v.name: v.type.tensor_type.shape
                       for v in (*graph.value_info, *graph.input, *graph.output)
                       if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}

    def const(self, name: str) -> np.ndarray | None:
        if name in self.weights:
            return np.asarray(self.weights[name])
        tensor = self.inline.get(name)
        if tensor is None or tensor.data_location == onnx.TensorProto.EXTERNAL:
            return None
        return onnx.numpy_helper.to_array(tensor)

    def only_reader(self, name: str):
        users = self.readers.get(name, [])
        return users[0] if len(users) == 1 and name not in self.outputs else None

    def elem_type(self, name: str) -> int | None:
        tensor = self.inline.get(name)
        if tensor is not None:
            return tensor.data_type
        array = self.weights.get(name)
        if array is not None:
            return onnx.helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype)
        return None


def _attr(node, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _dq(g: _Lookup, name: str):
    node = g.producer.get(name)
    if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
        return None
    return node if len(node.input) == 3 else None


def _scalar(g: _Lookup, name: str) -> np.ndarray | None:
    value = g.const(name)
    return value if value is not None and value.size == 1 else None


def _per_tensor(g: _Lookup, node) -> bool:
    """Whether a DequantizeLinear's or QuantizeLinear's scale is one finite positive float32
    and its zero point one uint8 or int8 (the table, multiply and softmax rewrites' rule)."""
    scale, zp = _scalar(g, node.input[1]), _scalar(g, node.input[2])
    return (scale is not None and zp is not None and scale.dtype == np.float32
            and bool(np.isfinite(scale).all()) and float(scale.reshape(())) > 0
            and g.elem_type(node.input[2]) in _BYTE_NAMES)  # fmt: skip


def _quantize_after(g: _Lookup, conv) -> tuple[object, list] | None:
    """(the QuantizeLinear onnxruntime would fuse with `conv`, activations it would drop)."""
    dropped: list = []
    node = g.only_reader(conv.output[0])
    while node is not None and node.op_type in ("Relu", "Clip") and not node.domain:
        dropped.append(node)
        node = g.only_reader(node.output[0])
    if node is None or node.op_type != "QuantizeLinear" or node.domain or len(node.input) != 3:
        return None
    scale, zp = _scalar(g, node.input[1]), _scalar(g, node.input[2])
    if scale is None or zp is None or scale.dtype != np.float32 or scale.ndim != 0 \
            or zp.ndim != 0 or g.elem_type(node.input[2]) not in _RANGES:  # fmt: skip
        return None
    lo, hi = _RANGES[g.elem_type(node.input[2])]
    zero = int(zp)
    s = np.float32(scale)
    for act in dropped:  # onnxruntime's ReluQuantFusion / ClipQuantFusion conditions
        if act.op_type == "Relu":
            if zero != lo:
                return None
            continue
        bounds = [_scalar(g, n) if n else None for n in list(act.input[1:3])]
        if any(b is None for b, n in zip(bounds, act.input[1:3]) if n):
            return None
        low = float(bounds[0]) if len(bounds) > 0 and bounds[0] is not None else -np.inf
        high = float(bounds[1]) if len(bounds) > 1 and bounds[1] is not None else np.inf
        lower = float(np.float32(s * np.float32(lo - zero)))
        upper = float(np.float32(s * np.float32(hi - zero)))
        if _EPSILON < low - lower or _EPSILON < upper - high:
            return None
    return node, dropped


def _candidate(g: _Lookup, conv) -> dict | None:
    """The parts of a depthwise QDQ conv onnxruntime runs slowly, or None."""
    if conv.op_type != "Conv" or conv.domain or len(conv.input) < 2:
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
    group = int(_attr(conv, "group", 1))
    if group != channels or w.shape[1] != 1 or _attr(w_dq, "axis", 1) != 0 \
            or ws.size != channels or wz.size != channels:  # fmt: skip
        return None
    if np.all(wz.reshape(-1) == wz.reshape(-1)[0]):
        return None  # one zero point: onnxruntime's kernel is fast already
    bias = None
    if len(conv.input) > 2 and conv.input[2]:
        b_dq = _dq(g, conv.input[2])
        if b_dq is None:
            return None
        bias, bz = g.const(b_dq.input[0]), g.const(b_dq.input[2])
        if bias is None or bias.dtype != np.int32 or bias.size != channels \
                or bz is None or np.any(bz != 0):  # fmt: skip
            return None
    found = _quantize_after(g, conv)
    if found is None:
        return None
    quant, dropped = found
    centred = w.astype(np.int64) - wz.astype(np.int64).reshape(-1, *[1] * (w.ndim - 1))
    lo, hi = _RANGES[g.elem_type(x_dq.input[2])]
    reach = max(int(xz) - lo, hi - int(xz))
    total = np.abs(centred).reshape(channels, -1).sum(axis=1) * reach
    if bias is not None:
        total = total + np.abs(bias.astype(np.int64))
    if total.max(initial=0) >= _EXACT:
        return None
    return {"x_dq": x_dq, "xs": xs, "xz": xz, "w": centred, "ws": ws, "bias": bias,
            "quant": quant, "dropped": dropped,
            "types": (g.elem_type(x_dq.input[2]), g.elem_type(quant.input[2]))}  # fmt: skip


def depthwise_as_float(graph, weights: Mapping[str, np.ndarray]) -> int:
    """Rewrite each depthwise QDQ conv onnxruntime would run slowly (see the module doc) in
    place; returns how many were rewritten."""
    # grouped convs first: the lookup tables cost more than the scan
    if not any(n.op_type == "Conv" and int(_attr(n, "group", 1)) > 1 for n in graph.node):
        return 0
    g = _Lookup(graph, weights)
    taken = set(g.producer) | set(g.inline) | set(weights) | {i.name for i in graph.input}
    replace: dict[int, list] = {}
    removed: set[int] = set()
    added: list = []
    shapes: list = []
    compiled = dw_kernel.available()
    for conv in graph.node:
        found = _candidate(g, conv)
        if found is None:
            continue
        out = found["quant"].output[0]
        base = f"{out}__dw"
        quant, x_dq = found["quant"], found["x_dq"]
        ys = np.float32(g.const(quant.input[1]))
        m = (np.float32(found["xs"]) * found["ws"].astype(np.float32).reshape(-1)) / ys
        if compiled:
            x_type, y_type = found["types"]
            made = dw_kernel.nodes(conv, x_dq.input[0], x_type, int(found["xz"]), out, y_type,
                                   int(np.asarray(g.const(quant.input[2])).reshape(-1)[0]),
                                   found["w"], found["bias"], m, base, taken)  # fmt: skip
            if made is not None:
                replace[id(quant)], inits = made
                added += inits
                shapes += dw_kernel.shapes(g.shapes.get(conv.output[0]), base, out, y_type)
                removed |= {id(conv), id(quant), *(id(a) for a in found["dropped"])}
                continue
        names = [f"{base}_{k}" for k in ("x", "xs", "w", "b", "acc", "int", "m", "real", "one")]
        if any(n in taken for n in names):
            continue
        taken.update(names)
        x, xs_n, w_n, b_n, acc, integer, m_n, real, one = names
        added += [
            onnx.numpy_helper.from_array(np.array(1.0, np.float32), xs_n),
            onnx.numpy_helper.from_array(found["w"].astype(np.float32), w_n),
            onnx.numpy_helper.from_array(
                m.astype(np.float32).reshape(-1, *[1] * (found["w"].ndim - 2)), m_n
            ),
            onnx.numpy_helper.from_array(np.array(1.0, np.float32), one),
        ]
        conv_inputs = [x, w_n]
        if found["bias"] is not None:
            added.append(onnx.numpy_helper.from_array(
                found["bias"].astype(np.float32).reshape(-1), b_n))  # fmt: skip
            conv_inputs.append(b_n)
        kept = [a for a in conv.attribute]
        new_conv = onnx.helper.make_node("Conv", conv_inputs, [acc], name=f"{base}_conv")
        new_conv.attribute.extend(kept)
        replace[id(quant)] = [
            onnx.helper.make_node(
                "DequantizeLinear", [x_dq.input[0], xs_n, x_dq.input[2]], [x], name=f"{base}_centre"
            ),  # fmt: skip
            new_conv,
            # m first: onnxruntime's ConvMulFusion folds only Mul(conv, constant)
            onnx.helper.make_node("Mul", [m_n, acc], [real], name=f"{base}_scale"),
            onnx.helper.make_node(
                "QuantizeLinear", [real, one, quant.input[2]], [out], name=f"{base}_round"
            ),  # fmt: skip
        ]
        removed |= {id(conv), id(quant), *(id(a) for a in found["dropped"])}
    if not replace:
        return 0
    graph_edit.apply(graph, replace, removed, added)
    known = {v.name for v in graph.value_info}
    graph.value_info.extend(v for v in shapes if v.name not in known)
    return len(replace)
