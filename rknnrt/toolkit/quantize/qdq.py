"""The w8a8 program: QuantizeLinear/DequantizeLinear around every stored tensor, int8 weights
and int32 biases."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ...model import numerics
from .calibrate import QParams
from .graph import (
    _QUANT_WEIGHT_OPS,
    _consumers_rename,
    _drop_unused_initializers,
    float_output_tails,
    propagate,
)
from .rules import quantize_weight, weight_qparams


def _weight_axis(node: onnx.NodeProto, weight: np.ndarray) -> int | None:
    if node.op_type == "Conv":
        return 0
    if node.op_type == "ConvTranspose":
        return 1
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    if node.op_type == "MatMul" and weight.ndim == 2:
        return 1
    return None


def insert_qdq(
    model: onnx.ModelProto, qparams: dict[str, QParams], per_channel: bool,
    float_nodes: Collection[str] = (), symmetric_weights: bool = False,
) -> tuple[onnx.ModelProto, dict[str, QParams], set[str]]:  # fmt: skip
    """The w8a8 program: int8 inputs and outputs (float16 for outputs of FLOAT_OUTPUT_OPS),
    QDQ around every stored tensor, int8 weights and int32 biases. Nodes named in
    `float_nodes` (hybrid quantisation) keep float16 weights and float16 outputs.
    Returns (model, parameters of the graph's int8 inputs and outputs, float16 output names)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    propagate(graph, qparams)
    inits = {t.name: t for t in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    graph_outputs = {o.name for o in graph.output}
    float_outputs, _ = float_output_tails(graph)
    float_nodes = set(float_nodes)
    float_outputs |= {o for o in graph_outputs if o in producers
                      and producers[o].name in float_nodes and o not in qparams}  # fmt: skip
    head: list[onnx.NodeProto] = []
    body: list[onnx.NodeProto] = list(graph.node)
    new_inits: list[onnx.TensorProto] = []

    def const(name: str, array: np.ndarray) -> str:
        new_inits.append(numpy_helper.from_array(array, name))
        return name

    def qdq_params(name: str, unsigned: bool = False) -> tuple[str, str]:
        """Scale and zero point; `unsigned`: the same grid as uint8 with zp + 128, which
        onnxruntime's x86 QDQ fusion takes (it leaves int8-activation convs unfused, as
        DequantizeLinear -> float Conv -> QuantizeLinear: 2x slower). q_u8 = q_s8 + 128
        exactly, so the values are the vendor's int8 ones."""
        qp = qparams[name]
        scale = f"{name}__scale"
        if scale not in seen:
            seen.add(scale)
            const(scale, np.array(qp.scale, np.float32))
        zp = f"{name}_u8__zp" if unsigned else f"{name}__zp"
        if zp not in seen:
            seen.add(zp)
            const(zp, np.array(qp.zp + 128, np.uint8) if unsigned else np.array(qp.zp, np.int8))
        return scale, zp

    seen: set[str] = set()

    io_params: dict[str, QParams] = {}
    for vi in graph.input:  # int8 inputs, dequantised for their consumers
        if vi.name in qparams:
            scale, zp = qdq_params(vi.name)
            _, uzp = qdq_params(vi.name, unsigned=True)
            _consumers_rename(body, vi.name, f"{vi.name}__dq")
            head.append(helper.make_node("DequantizeLinear", [vi.name, scale, zp],
                                         [f"{vi.name}__in"]))  # fmt: skip
            head.append(helper.make_node("QuantizeLinear", [f"{vi.name}__in", scale, uzp],
                                         [f"{vi.name}__q"]))  # fmt: skip
            head.append(helper.make_node("DequantizeLinear", [f"{vi.name}__q", scale, uzp],
                                         [f"{vi.name}__dq"]))  # fmt: skip
            vi.type.tensor_type.elem_type = TensorProto.INT8
            io_params[vi.name] = qparams[vi.name]
    rewritten: list[onnx.NodeProto] = []
    for index, node in enumerate(body):
        later = body[index + 1 :]
        if node.name in float_nodes:
            _half_weights(node, inits, const)
        else:
            _quantize_weights(node, inits, qparams, per_channel, const, head, symmetric_weights)
        rewritten.append(node)
        for k, name in enumerate(node.output):
            if node.name in float_nodes and name not in qparams and name not in graph_outputs:
                node.output[k] = f"{name}__f"  # a float16 tensor between float16 layers
                rewritten.append(helper.make_node("Cast", [f"{name}__f"], [f"{name}__h"],
                                                  to=TensorProto.FLOAT16))  # fmt: skip
                rewritten.append(helper.make_node("Cast", [f"{name}__h"], [f"{name}__dq"],
                                                  to=TensorProto.FLOAT))  # fmt: skip
                _consumers_rename(later, name, f"{name}__dq")
                continue
            if name in float_outputs:
                node.output[k] = f"{name}__f"
                rewritten.append(helper.make_node("Cast", [f"{name}__f"], [name],
                                                  to=TensorProto.FLOAT16))  # fmt: skip
                continue
            if name not in qparams:
                continue
            scale, zp = qdq_params(name, unsigned=name not in graph_outputs)
            stored = name if name in graph_outputs else f"{name}__q"
            if name in graph_outputs:
                node.output[k] = f"{name}__f"
                io_params[name] = qparams[name]
            source = node.output[k]
            rewritten.append(helper.make_node("QuantizeLinear", [source, scale, zp], [stored]))
            rewritten.append(helper.make_node("DequantizeLinear", [stored, scale, zp],
                                              [f"{name}__dq"]))  # fmt: skip
            _consumers_rename(later, name, f"{name}__dq")
    for vi in graph.output:
        if vi.name in io_params:
            vi.type.tensor_type.elem_type = TensorProto.INT8
        elif vi.name in float_outputs:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    del graph.node[:]
    graph.node.extend(head + rewritten)
    graph.initializer.extend(new_inits)
    _drop_unused_initializers(graph)
    return out, io_params, float_outputs


def _half_weights(node: onnx.NodeProto, inits: dict, const) -> None:
    """A float16 layer's float constants, rounded to float16 (stored as such on the NPU)."""
    for k, name in enumerate(node.input):
        tensor = inits.get(name)
        if tensor is not None and tensor.data_type == TensorProto.FLOAT:
            array = numpy_helper.to_array(tensor)
            node.input[k] = const(f"{name}__fp16w", array.astype(np.float16).astype(np.float32))


def _quantize_weights(node, inits, qparams, per_channel, const, head, symmetric=False) -> None:
    """int8 weights (rules.weight_qparams) and int32 biases at s_in * s_w."""
    if node.op_type not in _QUANT_WEIGHT_OPS or len(node.input) < 2:
        return
    weight = inits.get(node.input[1])
    if weight is None or weight.data_type != TensorProto.FLOAT:
        return
    w = numpy_helper.to_array(weight).astype(np.float64)
    axis = _weight_axis(node, w)
    if axis is None:
        return
    source = node.input[0]
    if source.endswith("__dq"):
        source = source[: -len("__dq")]
    in_qp = qparams.get(source)
    scale, zp = weight_qparams(w, axis, per_channel, symmetric)
    q = quantize_weight(w, scale, zp, axis)
    name = node.input[1]
    if not any(f"{name}__dq" in n.output for n in head):  # a weight shared by several nodes
        s = const(f"{name}__wscale", scale if per_channel else np.array(scale[0], np.float32))
        z = const(f"{name}__wzp", zp if per_channel else np.array(zp[0], np.int8))
        qname = const(f"{name}__q", q)
        attrs = {"axis": axis} if per_channel else {}
        head.append(helper.make_node("DequantizeLinear", [qname, s, z], [f"{name}__dq"],
                                     **attrs))  # fmt: skip
    node.input[1] = f"{name}__dq"
    if len(node.input) > 2 and node.input[2] in inits and in_qp is not None:
        # one int32 bias per consumer: its scale depends on that consumer's input
        bias_name = f"{node.input[2]}__{node.output[0]}"
        bias = numpy_helper.to_array(inits[node.input[2]]).astype(np.float64)
        bias_scale = (in_qp.scale * scale).astype(np.float32)
        if not per_channel:
            bias_scale = np.full(bias.shape, bias_scale[0], np.float32)
        bq = numerics.quantize(bias, bias_scale, division=numerics.FLOAT64_DIVISION,
                               dtype=np.int32)  # fmt: skip
        bs = const(f"{bias_name}__bscale", bias_scale)
        bz = const(f"{bias_name}__bzp", np.zeros(bias.shape, np.int32))
        bqn = const(f"{bias_name}__q", bq)
        head.append(helper.make_node("DequantizeLinear", [bqn, bs, bz], [f"{bias_name}__dq"],
                                     axis=0))  # fmt: skip
        node.input[2] = f"{bias_name}__dq"
