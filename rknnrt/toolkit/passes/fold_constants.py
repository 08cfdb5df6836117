"""Constant folding: evaluate constant-only nodes once with onnxruntime, store the results.

Initializers count as constants even when (old IR style) they are also graph inputs: the
converter freezes weights, so afterwards the graph inputs are only the real inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from rknnrt.toolkit.passes import _graph

from ...sessions import factory, policies

# Folding these would freeze one random draw into the model.
NONDETERMINISTIC = frozenset(
    "RandomNormal RandomUniform RandomNormalLike RandomUniformLike Multinomial Bernoulli".split()
)
# Their outputs are sequences/optionals, which an initializer cannot hold.
_NON_TENSOR = frozenset(
    "SequenceConstruct SequenceEmpty SequenceInsert SequenceErase SplitToSequence Optional".split()
)
_FOLD_DOMAINS = (*_graph.DEFAULT_DOMAINS, "ai.onnx.ml")


def _inferred_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Tensor name -> inferred type; empty if inference fails (it only enables extras)."""
    try:
        graph = _graph.infer_shapes(model)
    except Exception:  # any inference failure only means less folding
        return {}
    return {v.name: v.type for v in (*graph.input, *graph.value_info, *graph.output)}


def _static_shape(tp: onnx.TypeProto | None) -> list[int] | None:
    """Dims of a tensor type when every one is a known number, else None."""
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    dims = tp.tensor_type.shape.dim
    return [d.dim_value for d in dims] if all(d.HasField("dim_value") for d in dims) else None


def _shape_of(node: onnx.NodeProto, dims: list[int]) -> np.ndarray:
    """Value of `Shape` (opset 15 start/end follow Python slice clamping rules)."""
    attrs = {a.name: a.i for a in node.attribute}
    return np.array(dims[attrs.get("start", 0) : attrs.get("end", None)], dtype=np.int64)


def _foldable(node: onnx.NodeProto, const: set[str], types: dict) -> bool:
    if node.op_type in NONDETERMINISTIC | _NON_TENSOR or node.domain not in _FOLD_DOMAINS:
        return False
    if any(True for _ in _graph.subgraphs(node)):  # bodies may read non-constant outer values
        return False
    if any(n in types and not types[n].HasField("tensor_type") for n in node.output):
        return False
    return all(not name or name in const for name in node.input)


def _evaluate(model, nodes, outputs, extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the foldable nodes as one no-input model and return the requested tensors."""
    needed = {name for node in nodes for name in node.input}
    inits = [t for t in model.graph.initializer if t.name in needed]
    inits += [numpy_helper.from_array(v, k) for k, v in extra.items() if k in needed]
    # Outputs carry no type: onnxruntime infers them, and they may be of any dtype.
    graph = onnx.helper.make_graph(
        nodes, "fold", [], [onnx.ValueInfoProto(name=o) for o in outputs]
    )
    graph.initializer.extend(inits)
    sub = onnx.helper.make_model(graph, opset_imports=model.opset_import)
    sub.ir_version = max(model.ir_version, 4)  # initializers are not graph inputs here
    sess = factory.create(sub, policies.FOLDING)
    return dict(zip(outputs, sess.run(outputs, {}), strict=True))


def run(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of `model` with every deterministic constant subgraph folded."""
    model = _graph.copy(model)
    graph = model.graph
    types = _inferred_types(model)
    init_names = {t.name for t in graph.initializer}
    const, to_run, direct, removed = set(init_names), [], {}, set()
    for idx, node in enumerate(graph.node):
        if _foldable(node, const, types):
            to_run.append(node)
        elif node.op_type == "Shape" and node.domain in _graph.DEFAULT_DOMAINS:
            dims = _static_shape(types.get(node.input[0]))
            if dims is None:
                continue
            direct[node.output[0]] = _shape_of(node, dims)
        else:
            continue
        removed.add(idx)
        const.update(name for name in node.output if name)

    kept = [node for idx, node in enumerate(graph.node) if idx not in removed]
    needed = {o.name for o in graph.output}.union(*map(_graph.node_inputs, kept))
    outputs = [name for node in to_run for name in node.output if name in needed]
    values = _evaluate(model, to_run, outputs, direct) if outputs else {}
    values.update((k, v) for k, v in direct.items() if k in needed)

    _graph.remove_where(graph.node, lambda i, _: i in removed)
    graph.initializer.extend(numpy_helper.from_array(np.asarray(v), k) for k, v in values.items())
    _graph.remove_where(graph.input, lambda _, v: v.name in init_names)
    _graph.drop_unused_initializers(graph)
    model.ir_version = max(model.ir_version, 4)  # IR 3 required initializers in graph.input
    return model
