"""Float16 roundings in one pass: each Cast(float16) -> Cast(float32) pair of a program as
one node of rknnrt's compiled kernels (sessions/kernels, f16ops.c), exact.

A float16 program rounds every tensor the NPU stores to float16 by casting it to float16 and
back. onnxruntime runs that as two passes over the tensor and a float16 intermediate;
`rknnrt.kernels::RoundFloat16` writes the same float32 values in one pass (F16C's conversions,
or a scalar path computing the same bits; a NaN stays a NaN, its payload as F16C leaves it,
where onnxruntime's Cast sometimes returns the canonical NaN). MobileNetV3-small fp16: 164
Casts took ~2.4 ms of ~12 ms of kernel time, the 81 nodes in their place ~1.1 ms
(benchmarks/real_arch.py --kinds fp16c,fp16 shows the run times in one run).

whole.open_program applies `rewrite` to every graph it opens but the one fp16_layout has
onnxruntime lay out (that layout is cached whether or not a later init can build the kernel): the
laid-out program, which onnxruntime runs node for node, and a plain (optimised) one, for which
the rounded tensors' shapes are recorded first. Without them onnxruntime's optimiser cannot
infer shapes through the opaque node and picked other kernels and sums (plain ResNet-18 fp16:
627 values differed); with them the 17 real-architecture networks (fp16, plain and laid out)
and 204 vendor files give the same bytes as with the pairs. The rounded tensor keeps its name.
Where the library cannot be built the pairs stay, with the one W line of
dw_kernel.library_ready; RKNNRT_FP16_ROUND_KERNEL=0 keeps them too. With the roundings in
place, fp16_tables turns the element-wise chains between them into table passes.
"""

from __future__ import annotations

from ...sessions import kernels
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, fp16_tables, graph_edit
from .graph_edit import cast_to

_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16
OP = "RoundFloat16"


def pairs(graph) -> list[tuple]:
    """(first Cast, second Cast) of each float32 -> float16 -> float32 rounding whose float16
    value only the second Cast reads and is not a graph output, and whose source is not
    recorded as another type than float32 (the kernel takes float32 only; where a type is not
    recorded and onnxruntime refuses the node, whole.open_program opens the pairs' graph)."""
    readers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    typed_other = {v.name for v in (*graph.input, *graph.value_info)
                   if v.type.tensor_type.elem_type not in (0, _FLOAT)}  # fmt: skip
    found = []
    for node in graph.node:
        if cast_to(node) != _FLOAT16 or len(node.input) != 1 or node.input[0] in typed_other:
            continue
        after = readers.get(node.output[0], [])
        if node.output[0] not in outputs and len(after) == 1 and cast_to(after[0]) == _FLOAT:
            found.append((node, after[0]))
    return found


def rewrite(graph: bytes, record_shapes: bool = False) -> bytes:
    """`graph` with its rounding pairs as RoundFloat16 nodes; the same bytes when it has none,
    when the kernels are switched off or cannot be built here. `record_shapes`: first record
    the rounded tensors' shapes (onnx's inference), which onnxruntime's optimiser cannot infer
    through the node."""
    if b"Cast" not in graph or not switches.fp16_round_kernel():
        return graph
    model = onnx.load_model_from_string(bytes(graph))
    found = pairs(model.graph)
    if not found or not dw_kernel.library_ready():
        return graph
    if record_shapes:
        try:
            _record_shapes(model, {second.output[0] for _, second in found})
        except Exception:  # onnx's inference raises several types: the pairs stay, exact
            return graph
    replace, removed = {}, set()
    for first, second in found:
        replace[id(first)] = [onnx.helper.make_node(
            OP, [first.input[0]], [second.output[0]], name=f"{second.output[0]}__round16",
            domain=kernels.DOMAIN)]  # fmt: skip
        removed.add(id(second))
    graph_edit.set_nodes(model.graph, graph_edit.splice(model.graph, replace, removed))
    half = {first.output[0] for first, _ in found}  # the float16 values no longer exist
    kept = [v for v in model.graph.value_info if v.name not in half]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    if switches.fp16_tables():
        fp16_tables.rewrite(model)
    dw_kernel.import_domain(model)
    return model.SerializeToString()


def _record_shapes(model, names: set[str]) -> None:
    """Adds the inferred type and shape of each tensor in `names` that has none recorded."""
    recorded = {v.name for v in (*model.graph.value_info, *model.graph.output)}
    inferred = onnx.shape_inference.infer_shapes(model)
    model.graph.value_info.extend(v for v in inferred.graph.value_info
                                  if v.name in names and v.name not in recorded)  # fmt: skip
