"""Give every weight-taking node its own copy of a weight that several nodes share.

A TensorFlow graph that applies one variable to several inputs (the vendor's multi_input
example: three Convs, one kernel) gives one initializer to several Conv nodes. Quantised, the
shared weight's DequantizeLinear feeds them all, and onnxruntime's QDQ optimisation then fails
to load the program ("Attempt to replace the existing tensor"). Each node quantises its own
copy instead, as per-layer quantisation means anyway.
"""

from __future__ import annotations

import onnx

WEIGHT_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul"}


def run(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    seen: dict[str, int] = {}
    taken = {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    for node in graph.node:
        if node.op_type not in WEIGHT_OPS:
            continue
        for slot in range(1, len(node.input)):
            name = node.input[slot]
            if name not in inits or name in outputs:
                continue
            seen[name] = seen.get(name, 0) + 1
            if seen[name] == 1:
                continue
            copy_name, k = f"{name}__{seen[name]}", seen[name]
            while copy_name in taken:
                k += 1
                copy_name = f"{name}__{k}"
            taken.add(copy_name)
            copy = graph.initializer.add()
            copy.CopyFrom(inits[name])
            copy.name = copy_name
            node.input[slot] = copy_name
    return out
