"""LayerNorm exported as pieces becomes one LayerNormalization op, as the vendor fuses it.

Older exporters and onnxslim write LayerNorm over the last axis as ReduceMean -> Sub -> Pow(2)
(or Mul by itself) -> ReduceMean -> Add(eps) -> Sqrt -> Div -> [Mul(gamma)] -> [Add(beta)],
the ReduceMeans' axes an attribute or (opset 18) a constant input; without gamma and beta the
width comes from the input's shape. Measured with tools/vendor_diff/real_arch.py on DeiT-tiny:
the vendor fuses each of these forms (cosine 0.9927, 0.9927 at opset 18, 0.9915 unscaled).
The vendor's toolkit fuses the chain into one layer-norm op, so only its input and output are
stored; quantised piece by piece (the centred values, their squares, the variance, ... each
rounded to int8) a DeiT-tiny fell from cosine 0.9935 to 0.78 against float32
(tools/real_arch, benchmarks and tests/quant/test_real_arch.py). The fused op computes the
same function (onnxruntime's LayerNormalization: mean, then the mean of the squared centred
values, then (x - mean) / sqrt(var + eps) * gamma + beta). The model's opset is raised to 17
(LayerNormalization's) when it is older.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rknnrt.toolkit.passes import _graph

_LAYER_NORM_OPSET = 17


class _Graph:
    def __init__(self, graph: onnx.GraphProto) -> None:
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in dict.fromkeys(node.input):  # Mul(d, d) reads d once
                self.readers.setdefault(name, []).append(node)
        self.outputs = {o.name for o in graph.output}
        self.consts = {t.name: t for t in graph.initializer}

    def const(self, name: str) -> np.ndarray | None:
        tensor = self.consts.get(name)
        return None if tensor is None else numpy_helper.to_array(tensor)

    def users(self, name: str) -> list[onnx.NodeProto]:
        return [] if name in self.outputs else self.readers.get(name, [])

    def only(self, name: str, op: str) -> onnx.NodeProto | None:
        users = self.users(name)
        if len(users) == 1 and users[0].op_type == op and users[0].domain in _graph.DEFAULT_DOMAINS:
            return users[0]
        return None

    def other(self, node: onnx.NodeProto, name: str) -> str:
        return node.input[1] if node.input[0] == name else node.input[0]


def _last_axis_mean(g: _Graph, node: onnx.NodeProto, rank: int | None) -> bool:
    """A ReduceMean over the last axis only, keeping it: its axes an attribute (opset < 18)
    or a constant second input (opset 18, as onnxslim and opset-18 exporters write it)."""
    attr = [a for a in node.attribute if a.name == "axes"]
    keep = next((a.i for a in node.attribute if a.name == "keepdims"), 1)
    if attr and len(node.input) == 1:
        axes = list(attr[0].ints)
    elif not attr and len(node.input) == 2 and node.input[1]:
        value = g.const(node.input[1])
        axes = [] if value is None else [int(a) for a in value.reshape(-1)]
    else:
        return False
    if keep != 1 or len(axes) != 1:
        return False
    return axes[0] == -1 or (rank is not None and axes[0] == rank - 1)


def _chain(g: _Graph, mean: onnx.NodeProto, rank: int | None) -> tuple[list, dict] | None:
    """The nodes of one split LayerNorm starting at its first ReduceMean, and its parts."""
    if not _last_axis_mean(g, mean, rank):
        return None
    x = mean.input[0]
    subs = [u for u in g.users(mean.output[0]) if u.op_type == "Sub"]
    if len(g.users(mean.output[0])) != 1 or len(subs) != 1 or subs[0].input != [x, mean.output[0]]:
        return None
    sub = subs[0]
    centred = sub.output[0]
    users = g.users(centred)
    square = next((u for u in users if u.op_type == "Pow"), None) or \
        next((u for u in users if u.op_type == "Mul" and list(u.input) == [centred, centred]),
             None)  # fmt: skip
    div = next((u for u in users if u.op_type == "Div" and u.input[0] == centred), None)
    if square is None or div is None or len(users) != 2:
        return None
    if square.op_type == "Pow":
        power = g.const(square.input[1])
        if power is None or power.size != 1 or float(power) != 2.0:
            return None
    var = g.only(square.output[0], "ReduceMean")
    if var is None or not _last_axis_mean(g, var, rank):
        return None
    add = g.only(var.output[0], "Add")
    eps = g.const(g.other(add, var.output[0])) if add is not None else None
    if eps is None or eps.size != 1:
        return None
    sqrt = g.only(add.output[0], "Sqrt")
    if sqrt is None or div.input[1] != sqrt.output[0] or len(g.users(sqrt.output[0])) != 1:
        return None
    nodes, out = [mean, sub, square, var, add, sqrt, div], div.output[0]
    parts = {"x": x, "eps": float(eps.reshape(-1)[0]), "gamma": None, "beta": None}
    for op, key in (("Mul", "gamma"), ("Add", "beta")):
        node = g.only(out, op)
        value = g.const(g.other(node, out)) if node is not None else None
        if value is None or value.ndim != 1:
            continue
        parts[key] = value.astype(np.float32)
        nodes.append(node)
        out = node.output[0]
    parts["out"] = out
    return nodes, parts


def fuse_split_layernorms(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with each split LayerNorm (module doc) as one LayerNormalization."""
    if not any(n.op_type == "ReduceMean" for n in model.graph.node):
        return model
    out = _graph.copy(model)
    graph = out.graph
    g = _Graph(graph)
    shapes = {vi.name: [d.dim_value if d.HasField("dim_value") else None
                        for d in vi.type.tensor_type.shape.dim]
              for vi in [*graph.input, *graph.value_info, *graph.output]
              if vi.type.tensor_type.HasField("shape")}  # fmt: skip
    taken = _graph.all_names(graph)
    replace: dict[int, onnx.NodeProto] = {}
    removed: set[int] = set()
    for node in graph.node:
        if node.op_type != "ReduceMean" or id(node) in removed:
            continue
        shape = shapes.get(node.input[0])
        found = _chain(g, node, None if shape is None else len(shape))
        if found is None:
            continue
        nodes, parts = found
        # the width from the affine constants, else (a LayerNorm without them: the vendor
        # fuses it too, tools/vendor_diff/real_arch.py) from the input's last dimension
        dim = next((p.size for p in (parts["gamma"], parts["beta"]) if p is not None),
                   shape[-1] if shape else None)  # fmt: skip
        if not dim:
            continue
        names = [f"{parts['out']}__ln_gamma", f"{parts['out']}__ln_beta"]
        if any(n in taken for n in names):
            continue
        taken.update(names)
        gamma = parts["gamma"] if parts["gamma"] is not None else np.ones(dim, np.float32)
        beta = parts["beta"] if parts["beta"] is not None else np.zeros(dim, np.float32)
        if gamma.size != beta.size:
            continue
        graph.initializer.extend([numpy_helper.from_array(gamma, names[0]),
                                  numpy_helper.from_array(beta, names[1])])  # fmt: skip
        replace[id(nodes[-1])] = helper.make_node(
            "LayerNormalization", [parts["x"], *names], [parts["out"]], axis=-1,
            epsilon=parts["eps"], name=f"{nodes[0].name or parts['out']}_layernorm")  # fmt: skip
        removed |= {id(n) for n in nodes[:-1]}
    if not replace:
        return model
    kept = [replace.get(id(n), n) for n in graph.node if id(n) not in removed]
    del graph.node[:]
    graph.node.extend(kept)
    for opset in graph_opsets(out):
        if opset.version < _LAYER_NORM_OPSET:
            opset.version = _LAYER_NORM_OPSET
    used = _graph.used(graph)
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    return onnx.shape_inference.infer_shapes(out)


def graph_opsets(model: onnx.ModelProto) -> list:
    return [o for o in model.opset_import if o.domain in _graph.DEFAULT_DOMAINS]
