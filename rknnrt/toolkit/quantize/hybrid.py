"""Hybrid quantisation's automatic choice: which layers to keep in float16.

Every int8 tensor's "entire" cosine (float model vs the w8a8 program, both run on the
calibration samples) is measured; a layer's drop is how much its output's cosine falls below
the worst of its inputs' (1.0 for graph inputs). The layers with the largest drops are the
ones float16 helps most. toolkit2's auto_hybrid and hybrid_quantization_step1 call
`choose_float_layers` / `rank_layers`; `quantize_model(float_layers=...)` applies the choice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import onnx

from ...model import numerics
from ..probe import cosine, probe_session
from .graph import at_least_opset
from .program import QuantizedProgram

_ACTIVATIONS = frozenset({"Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "HardSwish"})


def tensor_cosines(
    model: onnx.ModelProto, samples: Sequence[list[np.ndarray]], quantized: QuantizedProgram
) -> dict[str, float]:
    """Mean cosine, over the samples, of every int8 intermediate tensor against float."""
    model = quantized.source if quantized.source is not None else at_least_opset(model, 13)
    inputs = [vi.name for vi in model.graph.input]
    program_outputs = {o.name for o in quantized.program.graph.output}
    names = [t for t in quantized.tensor_qparams if t not in inputs]
    in_program = [t if t in program_outputs else f"{t}__dq" for t in names]
    float_run, quant_run = probe_session(model, names), probe_session(quantized.program, in_program)
    program_inputs = {
        vi.name: vi.type.tensor_type.elem_type for vi in quantized.program.graph.input
    }
    sums = dict.fromkeys(names, 0.0)
    for sample in samples:
        feed = dict(zip(inputs, sample))
        qfeed = {}
        for name, x in feed.items():
            if program_inputs.get(name) == onnx.TensorProto.INT8:
                scale, zp = quantized.io_qparams[name]
                x = numerics.quantize(x, scale, zp)
            qfeed[name] = x
        for name, f, q in zip(names, float_run.run(names, feed), quant_run.run(in_program, qfeed)):
            if q.dtype == np.int8:
                scale, zp = quantized.tensor_qparams[name]
                q = numerics.dequantize(q, scale, zp)
            sums[name] += cosine(f, q)
    return {name: total / len(samples) for name, total in sums.items()}


def rank_layers(
    model: onnx.ModelProto, samples: Sequence[list[np.ndarray]], quantized: QuantizedProgram
) -> list[tuple[list[str], float, float]]:
    """(node names of one NPU layer, cosine drop, output cosine), worst drop first. A layer
    is the node writing an int8 tensor, with the Conv/Gemm whose activation it fuses. Nodes
    made by the vendor's rewrites (split convs) are named after the node they replace."""
    given = at_least_opset(model, 13)
    original = {node.name for node in given.graph.node}
    original_producer = {out: node.name for node in given.graph.node for out in node.output}
    model = quantized.source if quantized.source is not None else given

    def named(node: onnx.NodeProto) -> str:
        if node.name in original:
            return node.name
        match = re.fullmatch(r"(.*)_part\d+", node.name)
        if match and match.group(1) in original:
            return match.group(1)
        return original_producer.get(node.output[0], "")

    cosines = tensor_cosines(model, samples, quantized)
    producers = {out: node for node in model.graph.node for out in node.output}
    ranked = []
    for tensor, cos in cosines.items():
        node = producers.get(tensor)
        if node is None:
            continue
        group = [named(node)]
        source = node.input[0] if node.input else ""
        if node.op_type in _ACTIVATIONS and source not in cosines and source in producers:
            group.insert(0, named(producers[source]))  # the fused Conv + activation
            node = producers[source]
        before = [cosines.get(i, 1.0) for i in node.input if i in cosines or i in producers]
        drop = (min(before) if before else 1.0) - cos
        if any(group):
            ranked.append(([g for g in group if g], drop, cos))
    ranked.sort(key=lambda item: -item[1])
    return ranked


def choose_float_layers(
    model: onnx.ModelProto, samples: Sequence[list[np.ndarray]], quantized: QuantizedProgram,
    *, count: int | None = None, min_drop: float = 1e-4,
) -> list[str]:  # fmt: skip
    """Node names to keep in float16: the `count` layers with the largest cosine drops
    (default: a tenth of the layers, at least one), ignoring drops below `min_drop`."""
    ranked = rank_layers(model, samples, quantized)
    count = max(1, len(ranked) // 10) if count is None else count
    chosen: list[str] = []
    for group, drop, _ in ranked[:count]:
        if drop >= min_drop:
            chosen.extend(g for g in group if g not in chosen)
    return chosen
