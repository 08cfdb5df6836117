"""The fp16 program: every stored tensor rounded to float16."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..passes.fuse_layernorm import fuse_split_layernorms
from .graph import _consumers_rename, _drop_unused_initializers, float_tensors, stored_tensors

# Operators whose float outputs are values of their float inputs (moved, selected or compared,
# never computed): applied to float16 values they give float16 values, so rounding their
# outputs again would change no bit (a Cast pair is idempotent, NaN and inf included).
VALUE_PRESERVING = frozenset({
    "Concat", "DepthToSpace", "Expand", "Flatten", "Gather", "GlobalMaxPool", "Identity",
    "Max", "MaxPool", "Min", "Relu", "Reshape", "Slice", "SpaceToDepth", "Split", "Squeeze",
    "Tile", "Transpose", "Unsqueeze",
})  # fmt: skip


# Inputs that parameterise an operator rather than carry tensor data (the NPU keeps them in its
# registers, not as float16 tensors): a Resize's roi and scales stay float32, so the output
# shape stays what the model states and is known when the model is loaded.
PARAMETER_INPUTS = {"Resize": (1, 2), "Upsample": (1,)}


def _parameters(graph: onnx.GraphProto) -> set[str]:
    """Initializers read only as PARAMETER_INPUTS."""
    params, data = set(), set()
    for node in graph.node:
        slots = PARAMETER_INPUTS.get(node.op_type, ()) if not node.domain else ()
        for k, name in enumerate(node.input):
            (params if k in slots else data).add(name)
    return params - data


def already_half(model: onnx.ModelProto, stored: set[str]) -> set[str]:
    """The stored tensors that are exactly float16 before any rounding: outputs of
    VALUE_PRESERVING operators whose float inputs are all float16 values (the model's inputs,
    its float weights, rounded stored tensors or such outputs themselves). A tensor whose type
    is unknown counts as not float16."""
    graph = model.graph
    infos = [*graph.input, *graph.value_info, *graph.output]
    not_float = {vi.name for vi in infos if vi.type.tensor_type.elem_type != TensorProto.FLOAT}
    not_float |= {t.name for t in graph.initializer if t.data_type != TensorProto.FLOAT}
    half = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    preserved: set[str] = set()
    for node in graph.node:
        floats = [name for name in node.input if name and name not in not_float]
        keeps = node.op_type in VALUE_PRESERVING and not node.domain and bool(floats) \
            and all(name in half for name in floats)  # fmt: skip
        for name in node.output:
            if keeps:
                preserved.add(name)
            if keeps or name in stored:
                half.add(name)
    return preserved & stored


def emulate_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """The fp16 program: float16 inputs, outputs and weights; every stored tensor rounded to
    float16 (computation between stored tensors stays float32, as the NPU accumulates), except
    where it is float16 already (already_half: a MaxPool, Concat, Reshape ... of float16 values):
    each Cast pair costs a pass over the tensor and, on x86, breaks onnxruntime's blocked
    (NCHWc) convolution layout.

    A LayerNorm exported as pieces is one LayerNormalization first (passes/fuse_layernorm), as
    in an int8 build: the vendor's fp16 build fuses it too (rknn-toolkit2 2.5.0 on a DeiT
    block stack: the same exNorm ops, and simulator outputs bit-identical, with LayerNorm
    split or whole), so only its input and output are stored, not each piece."""
    out = onnx.ModelProto()
    out.CopyFrom(fuse_split_layernorms(model))
    graph = out.graph
    floats = float_tensors(out)
    stored = [t for t in stored_tensors(graph) if t in floats]
    graph_inputs = {vi.name for vi in graph.input}
    graph_outputs = {vi.name for vi in graph.output}
    unrounded = already_half(out, set(stored)) - graph_outputs  # rounding them is a no-op
    head: list[onnx.NodeProto] = []
    body = list(graph.node)
    parameters = _parameters(graph)
    for tensor in list(graph.initializer):
        if (tensor.data_type == TensorProto.FLOAT and tensor.name not in graph_inputs
                and tensor.name not in parameters):  # fmt: skip
            half = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16),
                                           f"{tensor.name}__fp16")  # fmt: skip
            graph.initializer.remove(tensor)
            graph.initializer.append(half)
            head.append(helper.make_node("Cast", [half.name], [tensor.name], to=TensorProto.FLOAT))
    for vi in graph.input:
        if vi.name in floats:
            _consumers_rename(body, vi.name, f"{vi.name}__f32")
            head.append(helper.make_node("Cast", [vi.name], [f"{vi.name}__f32"],
                                         to=TensorProto.FLOAT))  # fmt: skip
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    rewritten: list[onnx.NodeProto] = []
    stored_set = set(stored) - graph_inputs - unrounded
    for index, node in enumerate(body):
        rewritten.append(node)
        for k, name in enumerate(node.output):
            if name not in stored_set:
                continue
            if name in graph_outputs:
                node.output[k] = f"{name}__f"
                rewritten.append(helper.make_node("Cast", [f"{name}__f"], [name],
                                                  to=TensorProto.FLOAT16))  # fmt: skip
                rewritten.append(helper.make_node("Cast", [name], [f"{name}__r"],
                                                  to=TensorProto.FLOAT))  # fmt: skip
            else:
                node.output[k] = f"{name}__f"
                rewritten.append(helper.make_node("Cast", [f"{name}__f"], [f"{name}__h"],
                                                  to=TensorProto.FLOAT16))  # fmt: skip
                rewritten.append(helper.make_node("Cast", [f"{name}__h"], [f"{name}__r"],
                                                  to=TensorProto.FLOAT))  # fmt: skip
            _consumers_rename(body[index + 1 :], name, f"{name}__r")
    for vi in graph.output:
        if vi.name in stored_set:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    del graph.node[:]
    graph.node.extend(head + rewritten)
    _drop_unused_initializers(graph)
    return out
