"""The fp16 program: every stored tensor rounded to float16."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .graph import _consumers_rename, _drop_unused_initializers, float_tensors, stored_tensors


def emulate_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """The fp16 program: float16 inputs, outputs and weights; every stored tensor rounded to
    float16 (computation between stored tensors stays float32, as the NPU accumulates)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    floats = float_tensors(out)
    stored = [t for t in stored_tensors(graph) if t in floats]
    graph_inputs = {vi.name for vi in graph.input}
    graph_outputs = {vi.name for vi in graph.output}
    head: list[onnx.NodeProto] = []
    body = list(graph.node)
    for tensor in list(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT and tensor.name not in graph_inputs:
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
    stored_set = set(stored) - graph_inputs
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
