"""The node-list edits the runtime's rewrites share (fast_graph, int8_depthwise, int8_islands,
fp16_layout, fp16_round, channel_muls, byte_tables): splice replacements in place of nodes,
drop what nothing reads any more, read a Cast's target type, and the static shapes of a
graph's tensors."""

from __future__ import annotations

from typing import Any


def cast_to(node: Any) -> int | None:
    """The target type (onnx.TensorProto number) of a standard-domain Cast, else None."""
    if node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
        return None
    return next((a.i for a in node.attribute if a.name == "to"), None)


def splice(graph: Any, replace: dict[int, list], removed: set[int]) -> list:
    """The graph's nodes in order, each node whose id is in `replace` swapped for its list and
    those in `removed` left out."""
    nodes: list = []
    for node in graph.node:
        if id(node) in replace:
            nodes.extend(replace[id(node)])
        elif id(node) not in removed:
            nodes.append(node)
    return nodes


def live_nodes(graph: Any, nodes: list) -> list:
    """`nodes` without those whose outputs nothing (no later node, no graph output) reads,
    repeated until none is left to drop."""
    while True:
        used = {o.name for o in graph.output} | {n for node in nodes for n in node.input}
        live = [node for node in nodes if any(out in used for out in node.output)]
        if len(live) == len(nodes):
            return nodes
        nodes = live


def set_nodes(graph: Any, nodes: list) -> None:
    del graph.node[:]
    graph.node.extend(nodes)


def apply(graph: Any, replace: dict[int, list], removed: set[int], added: list) -> None:
    """Splice `replace` in and `removed` out, drop the nodes nothing reads any more (the weight
    and bias DequantizeLinear of rewritten ops), add the `added` initializers and drop the
    inline ones nothing reads (weights-section ones stay: the caller reports those)."""
    from ..lazy_imports import onnx

    nodes = live_nodes(graph, splice(graph, replace, removed))
    set_nodes(graph, nodes)
    graph.initializer.extend(added)
    used = {n for node in nodes for n in node.input}
    keep = [t for t in graph.initializer
            if t.name in used or t.data_location == onnx.TensorProto.EXTERNAL]  # fmt: skip
    del graph.initializer[:]
    graph.initializer.extend(keep)


def drop_unused_weights(model: Any, weights: Any) -> set[str]:
    """Remove from `model` the weights-section initializers (names in `weights`) no node reads;
    returns their names."""
    used = {name for node in model.graph.node for name in node.input}
    unused = {name for name in weights if name not in used}
    keep = [t for t in model.graph.initializer if t.name not in unused]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    return unused


# ops whose output has their first input's shape
_SAME_SHAPE = ("QuantizeLinear", "DequantizeLinear", "Cast", "Relu", "Clip", "LeakyRelu",
               "HardSigmoid", "HardSwish", "Sigmoid", "Tanh")  # fmt: skip


class StaticShapes:
    """Static tensor shapes of `model`: as its graph records them (`recorded`: name ->
    TensorShapeProto), or traced back through Transposes and shape-keeping ops to a recorded
    one (`producer`: name -> node; the NHWC kernels record their own outputs), else as onnx
    infers them (once, when first asked: ~6 ms of a MobileNetV3's rknn_init; nothing where
    inference fails)."""

    def __init__(self, model: Any, recorded: dict[str, Any],
                 producer: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.model, self.recorded, self.producer = model, recorded, producer or {}
        self.inferred: dict[str, list[int]] | None = None

    def of(self, name: str) -> list[int] | None:
        found = self._traced(name, 4)
        if found is not None:
            return found
        if self.inferred is None:
            self.inferred = self._infer()
        return self.inferred.get(name)

    def _traced(self, name: str, depth: int) -> list[int] | None:
        """`name`'s recorded shape, or that of what a Transpose (permuted) or a shape-keeping
        op (quantisation, activation, Cast) made it from, up to `depth` nodes back."""
        recorded = self._dims(self.recorded.get(name))
        node = self.producer.get(name)
        if recorded is not None or depth == 0 or node is None or not node.input or \
                node.domain not in ("", "ai.onnx"):  # fmt: skip
            return recorded
        below = self._traced(node.input[0], depth - 1)
        if below is None:
            return None
        if node.op_type in _SAME_SHAPE:
            return below
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
        if node.op_type == "Transpose" and perm is not None and \
                sorted(perm) == list(range(len(below))):  # fmt: skip
            return [below[i] for i in perm]
        return None

    def _infer(self) -> dict[str, list[int]]:
        from ..lazy_imports import onnx

        try:
            graph = onnx.shape_inference.infer_shapes(self.model).graph
        except Exception:  # onnx's inference raises several types: then nothing is known
            return {}
        found = {}
        for v in (*graph.input, *graph.value_info, *graph.output):
            if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
                dims = self._dims(v.type.tensor_type.shape)
                if dims is not None:
                    found[v.name] = dims
        return found

    @staticmethod
    def _dims(shape: Any) -> list[int] | None:
        if shape is None or any(not d.HasField("dim_value") or d.dim_value <= 0
                                for d in shape.dim):  # fmt: skip
            return None
        return [d.dim_value for d in shape.dim]
