"""Per-channel int8 multiplies (squeeze-and-excitation gates) in one pass of rknnrt's compiled
kernels.

An int8 program's squeeze-and-excitation block (MobileNetV3, EfficientNet, RegNetY: every such
block's last step) multiplies a feature map by a per-channel gate:

    DequantizeLinear(x) [N, C, H, W] * DequantizeLinear(gate) [N, C, 1, 1] -> QuantizeLinear

onnxruntime fuses it into QLinearMul and runs that in NHWC after its layout pass, where the
broadcast calls MLAS once per pixel for C values: 1.5-2 ns an element, 0.17 ms of a ~1.5 ms
MobileNetV3-small int8 run, 0.84 of EfficientNet-B0's ~10 ms. `rknnrt.kernels::ChannelMul_<t>`
(sessions/kernels/chanmul.c) computes what QLinearMul computes on x86, the integer product in
float32 times xs * gs / ys plus zy, rounded half to even and saturated, over the channels-last
tensor in one pass; the bytes are the same (tests/perf/test_channel_muls.py, over all 65536
byte pairs). It runs between a Transpose to channels-last and one back, which cancel against
the NHWC conv kernels' own (int8_islands.py) in onnxruntime's layout pass.

A multiply is rewritten only where onnxruntime fuses it so: both operands and the result
quantised per tensor with one type (uint8 or int8), finite positive scales, the product
nowhere else read, and the gate's shape [1 or N, C, 1, ...] against x's static [N, C, ...]
with more than one element per channel; the ratio must keep every product * ratio + zy within
int32 and normal (no conversion overflows: always, at real scales). A DequantizeLinear stays
where something else reads it. Without the kernel library (no C compiler) the nodes stay, with
dw_kernel's one W line; RKNNRT_INT8_CHANNEL_MUL_KERNEL=0 keeps them too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...sessions import kernels
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, graph_edit
from .int8_depthwise import _BYTE_NAMES, _dq, _Lookup, _per_tensor, _scalar

# the largest |(x - zx)(g - zg)| is 255^2; with zy it must stay below 2^31 once scaled
_MOST_RATIO = float((2**31 - 2**9) / 255**2)
_LEAST_RATIO = float(np.finfo(np.float32).tiny)


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with its per-channel int8 multiplies as one kernel node each, the names of the
    weights it no longer reads); the same bytes when there is none."""
    if b"Mul" not in graph or b"QuantizeLinear" not in graph or \
            not switches.int8_channel_mul_kernel():  # fmt: skip
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    # Muls of two dequantised tensors first: the lookup tables cost more than the scan
    # (~0.3 ms of every int8 rknn_init for a graph that has none)
    dequantised = {n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}
    muls = [n for n in model.graph.node if n.op_type == "Mul" and len(n.input) == 2 and
            n.input[0] in dequantised and n.input[1] in dequantised]  # fmt: skip
    if not muls:
        return graph, set()
    g = _Lookup(model.graph, weights)
    shapes = graph_edit.StaticShapes(model, g.shapes, g.producer)
    found = [m for m in (_multiply(g, shapes, n) for n in muls) if m is not None]
    if not found or not dw_kernel.library_ready():
        return graph, set()
    replace, removed = {}, set()
    recorded = {v.name for v in (*model.graph.value_info, *model.graph.output)}
    for k, (mul, x_dq, gate_dq, quant, params, t, x_dims, gate_dims) in enumerate(found):
        stem, rank = f"{quant.output[0]}__chmul{k}", len(x_dims)
        model.graph.initializer.append(onnx.numpy_helper.from_array(params, f"{stem}_p"))
        last = [0, *range(2, rank), 1]
        back = [0, rank - 1, *range(1, rank - 1)]
        # the shapes onnxruntime's layout pass needs to cancel the Transposes (without, a
        # QLinearConv reading the result stayed in NCHW between two more of them)
        nhwc, gate_nhwc = [x_dims[i] for i in last], [gate_dims[i] for i in last]
        typed = [(f"{stem}_x", nhwc), (f"{stem}_g", gate_nhwc), (f"{stem}_y", nhwc),
                 (quant.output[0], x_dims)]  # fmt: skip
        model.graph.value_info.extend(onnx.helper.make_tensor_value_info(n, t, dims)
                                      for n, dims in typed if n not in recorded)  # fmt: skip
        # the gate's bytes are the same in either order; its Transpose lets onnxruntime's
        # layout pass cancel the one after the NHWC conv kernel that made it
        replace[id(mul)] = [
            onnx.helper.make_node("Transpose", [x_dq.input[0]], [f"{stem}_x"], perm=last,
                                  name=f"{stem}_t"),  # fmt: skip
            onnx.helper.make_node("Transpose", [gate_dq.input[0]], [f"{stem}_g"], perm=last,
                                  name=f"{stem}_tg"),  # fmt: skip
            onnx.helper.make_node(f"ChannelMul_{_BYTE_NAMES[t]}", [f"{stem}_x", f"{stem}_g",
                                  f"{stem}_p"], [f"{stem}_y"], name=stem,
                                  domain=kernels.DOMAIN),  # fmt: skip
            onnx.helper.make_node("Transpose", [f"{stem}_y"], [quant.output[0]], perm=back,
                                  name=f"{stem}_tb"),  # fmt: skip
        ]
        removed.add(id(quant))
        removed |= {id(dq) for dq in (x_dq, gate_dq) if g.only_reader(dq.output[0]) is mul}
    graph_edit.set_nodes(model.graph, graph_edit.splice(model.graph, replace, removed))
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


def ratio(x_scale: float, gate_scale: float, y_scale: float) -> np.float32:
    """QLinearMul's factor on x86 (MLAS): xs * gs, then / ys, each in float32."""
    product = np.float32(np.float32(x_scale) * np.float32(gate_scale))
    return np.float32(product / np.float32(y_scale))


def _multiply(g: _Lookup, shapes: graph_edit.StaticShapes, mul) -> tuple | None:
    """(Mul, x's DequantizeLinear, the gate's, the QuantizeLinear, the op's parameters, the
    byte type, x's dims, the gate's) of a fusable per-channel int8 multiply at `mul`, either
    operand the gate, or None."""
    if mul.op_type != "Mul" or mul.domain not in ("", "ai.onnx") or len(mul.input) != 2:
        return None
    dqs = [_dq(g, name) for name in mul.input]
    quant = g.only_reader(mul.output[0])
    if any(d is None for d in dqs) or quant is None or quant.op_type != "QuantizeLinear" or \
            quant.domain not in ("", "ai.onnx") or len(quant.input) != 3:  # fmt: skip
        return None
    nodes = (*dqs, quant)
    types = {g.elem_type(n.input[2]) for n in nodes}
    if len(types) != 1 or not all(_per_tensor(g, n) for n in nodes):
        return None
    scales = [_scalar(g, n.input[1]) for n in nodes]
    zps = [_scalar(g, n.input[2]) for n in nodes]
    r = ratio(*(float(s.reshape(())) for s in scales))
    if not _LEAST_RATIO <= r <= _MOST_RATIO:
        return None
    a, b = (shapes.of(d.input[0]) or shapes.of(d.output[0]) for d in dqs)
    if _gate_of(b, a):  # the gate first
        dqs, zps, a, b = dqs[::-1], [zps[1], zps[0], zps[2]], b, a
    elif not _gate_of(a, b):
        return None
    zx, zg, zy = (float(z.reshape(())) for z in zps)
    params = np.array([r, zx, zg, zy], np.float32)
    return mul, dqs[0], dqs[1], quant, params, next(iter(types)), a, b


def _gate_of(x: list[int] | None, gate: list[int] | None) -> bool:
    """Whether `gate` is a per-channel gate of `x`: [1 or N, C, 1, ...] against [N, C, ...]
    with more than one element per channel."""
    return (x is not None and gate is not None and len(x) >= 3 and len(gate) == len(x)
            and gate[0] in (1, x[0]) and gate[1] == x[1] and all(d == 1 for d in gate[2:])
            and int(np.prod(x[2:])) > 1)  # fmt: skip
