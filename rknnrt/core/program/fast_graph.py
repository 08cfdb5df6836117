"""Execution-only rewrites of a program's graph that onnxruntime runs faster, each exact.

The model file keeps the program as the toolkit wrote it; the runtime hands onnxruntime an
equivalent graph. Every rewrite here moves the same values to the same places (no arithmetic
changes), so outputs are bit-identical (tests/perf/test_fast_graph.py).

Channel shuffle (ShuffleNet): Reshape to (N, G, K, H, W), Transpose (0, 2, 1, 3, 4), Reshape
back to (N, G*K, H, W). With int8 convolutions onnxruntime's x86 layout transformer turns this
into a 5-D Transpose (0, 4, 3, 1, 2) of channels-last uint8 data, which its generic
element-by-element transpose runs about 50x slower than a 4-D one: 16 of them took more time
than ShuffleNet's 49 convolutions. The same permutation as one Gather of channels along axis 1
keeps to the fast paths (int8 ShuffleNet: 1.9x -> 1.0x onnxruntime float32,
benchmarks/quantized.py).

MaxPool between a DequantizeLinear and a QuantizeLinear on the same grid (an int8 program's
pooled tensor keeps its input's parameters): onnxruntime drops the pair and pools the integers
only when the DequantizeLinear has no other reader; YOLO's SPPF also concatenates the pool's
input, so its three 5x5 pools ran in float32 on dequantised maps (about 5 % of YOLOv8n's int8
time). The maximum of the integers is the integer of the maximum (dequantisation is monotone,
and a value of the grid quantises back to itself), so the pool reads the integers directly.

A float16 rounding (Cast to float16 and back) of a value that is already a float16 value: a
vendor file's program rounds every stored tensor, also the output of a Reshape, Transpose or
Concat of rounded tensors, which moves values without computing any (a transformer's layer:
9 of its 20 pairs), and of an op computed in float16 (its LayerNorm) moved back. Such a pair
gives back its input bit for bit, so its reader reads the input.
"""

from __future__ import annotations

import numpy as np

from ..lazy_imports import onnx
from . import graph_edit

_SHUFFLE_PERM = [0, 2, 1, 3, 4]


def rewrite(graph: bytes) -> bytes:
    """`graph` with its channel shuffles as Gathers, its int8 max pools on the integers and
    its float16 roundings of float16 values dropped; the same bytes when there is none."""
    if b"Transpose" not in graph and b"MaxPool" not in graph and b"Cast" not in graph:
        return graph  # nothing to rewrite
    model = onnx.load_model_from_string(bytes(graph))
    changed = channel_shuffles_as_gathers(model.graph)
    changed += pools_on_the_grid(model.graph)
    changed += roundings_of_rounded_values(model.graph)
    if not changed:
        return graph
    return model.SerializeToString()


def pools_on_the_grid(graph) -> int:
    """Replace DequantizeLinear -> MaxPool -> QuantizeLinear on one per-tensor grid by a
    MaxPool of the integers (module doc); returns how many were replaced."""
    g = _Graph(graph)
    replacement: dict[int, list] = {}
    removed: set[int] = set()
    for pool in graph.node:
        if pool.op_type != "MaxPool" or pool.domain or len(pool.output) != 1:
            continue
        dequant = g.producer.get(pool.input[0])
        quant = g.only_reader(pool.output[0])
        if dequant is None or dequant.op_type != "DequantizeLinear" or quant is None \
                or quant.op_type != "QuantizeLinear" or dequant.domain or quant.domain:  # fmt: skip
            continue
        grid = g.grid(dequant)
        if grid is None or g.grid(quant) != grid or not g.const(dequant.input[1]) > 0:
            continue  # another grid, or one a negative scale would turn upside down
        node = onnx.helper.make_node("MaxPool", [dequant.input[0]], [quant.output[0]],
                                     name=f"{pool.name or quant.output[0]}__on_grid")  # fmt: skip
        node.attribute.extend(pool.attribute)
        replacement[id(quant)] = [node]
        removed.add(id(pool))
    if not replacement:
        return 0
    nodes = graph_edit.live_nodes(graph, graph_edit.splice(graph, replacement, removed))
    graph_edit.set_nodes(graph, nodes)
    return len(replacement)


class _Graph:
    """Producer, consumer and inline-constant lookups of one graph."""

    def __init__(self, graph) -> None:
        self.producer = {out: node for node in graph.node for out in node.output}
        self.readers: dict[str, int] = {}
        for node in graph.node:
            for name in node.input:
                self.readers[name] = self.readers.get(name, 0) + 1
        self.consumer = {name: node for node in graph.node for name in node.input}
        self.outputs = {o.name for o in graph.output}
        self.constants = {
            t.name: t for t in graph.initializer
            if t.data_location != onnx.TensorProto.EXTERNAL
        }  # fmt: skip

    def const(self, name: str) -> np.ndarray | None:
        tensor = self.constants.get(name)
        return None if tensor is None else onnx.numpy_helper.to_array(tensor)

    def only_reader(self, name: str):
        """The one node reading `name`, if it is read once and is not a graph output."""
        if self.readers.get(name) != 1 or name in self.outputs:
            return None
        return self.consumer[name]

    def grid(self, node) -> tuple | None:
        """(scale, zero point) of a per-tensor QuantizeLinear/DequantizeLinear, as values."""
        if len(node.input) != 3 or any(a.name == "axis" for a in node.attribute):
            return None
        scale, zp = self.const(node.input[1]), self.const(node.input[2])
        if scale is None or zp is None or scale.size != 1 or zp.size != 1:
            return None
        return scale.dtype.str, scale.tobytes(), zp.dtype.str, zp.tobytes()


def _past_requantisation(g: _Graph, name: str, grid: tuple | None) -> tuple[str, list] | None:
    """Follow `name` through a QuantizeLinear -> DequantizeLinear pair on `grid` (the grid its
    values already lie on, so the pair changes nothing). Returns (the tensor after, the nodes
    passed), or (name, []) where no such pair follows, or None where a pair on another grid
    (a real requantisation) follows."""
    quant = g.only_reader(name)
    if quant is None or quant.op_type != "QuantizeLinear":
        return name, []
    dequant = g.only_reader(quant.output[0])
    if dequant is None or dequant.op_type != "DequantizeLinear" or grid is None:
        return None
    if g.grid(quant) != grid or g.grid(dequant) != grid:
        return None
    return dequant.output[0], [quant, dequant]


def _shuffle(g: _Graph, transpose) -> tuple[list, object, int, int] | None:
    """(nodes to remove, the final Reshape, G, K) of the channel shuffle around `transpose`."""
    perm = next((list(a.ints) for a in transpose.attribute if a.name == "perm"), None)
    if perm != _SHUFFLE_PERM:
        return None
    removed = [transpose]
    source = transpose.input[0]
    node = g.producer.get(source)
    if node is not None and node.op_type == "DequantizeLinear":  # requantised reshape output
        quant = g.producer.get(node.input[0])
        if quant is None or quant.op_type != "QuantizeLinear":
            return None
        removed += [node, quant]
        source = quant.input[0]
        node = g.producer.get(source)
    first = node
    if first is None or first.op_type != "Reshape" or g.only_reader(first.output[0]) is None:
        return None
    removed.append(first)
    shape5 = g.const(first.input[1])
    if shape5 is None or shape5.shape != (5,) or (shape5 <= 0).any():
        return None
    before = g.producer.get(first.input[0])
    grid = g.grid(before) if before is not None and before.op_type == "DequantizeLinear" \
        else None  # fmt: skip
    if len(removed) > 2 and (grid is None or g.grid(removed[1]) != grid
                             or g.grid(removed[2]) != grid):  # fmt: skip
        return None
    for name in (first.output[0], *(n.output[0] for n in removed[1:-1])):
        if g.only_reader(name) is None:
            return None
    after = _past_requantisation(g, transpose.output[0], grid)
    if after is None:
        return None
    name, passed = after
    removed += passed
    last = g.only_reader(name)
    if last is None or last.op_type != "Reshape":
        return None
    shape4 = g.const(last.input[1])
    n, groups, per_group, h, w = (int(v) for v in shape5)
    if shape4 is None or shape4.tolist() != [n, groups * per_group, h, w]:
        return None
    return removed, last, groups, per_group


def channel_shuffles_as_gathers(graph) -> int:
    """Replace each channel shuffle by Reshape(input, (N, C, H, W)) and a Gather of channels
    (an exact rewrite, see the module doc). Returns how many were replaced."""
    g = _Graph(graph)
    removed: set[int] = set()
    replacement: dict[int, list] = {}
    taken = {t.name for t in graph.initializer} | set(g.producer)
    for node in graph.node:
        if node.op_type != "Transpose" or node.domain or id(node) in removed:
            continue
        found = _shuffle(g, node)
        if found is None:
            continue
        nodes, last, groups, per_group = found
        out = last.output[0]
        flat, indices = f"{out}__channels", f"{out}__shuffle_indices"
        if flat in taken or indices in taken:
            continue
        taken |= {flat, indices}
        # output channel k*G + g is input channel g*K + k
        order = np.arange(groups * per_group).reshape(groups, per_group).T.reshape(-1)
        graph.initializer.append(onnx.numpy_helper.from_array(order.astype(np.int64), indices))
        first = next(n for n in nodes if n.op_type == "Reshape")
        replacement[id(last)] = [
            onnx.helper.make_node("Reshape", [first.input[0], last.input[1]], [flat],
                                  name=f"{out}__reshape"),  # fmt: skip
            onnx.helper.make_node("Gather", [flat, indices], [out], axis=1,
                                  name=f"{out}__shuffle"),  # fmt: skip
        ]
        removed |= {id(n) for n in [*nodes, last]}
    if not replacement:
        return 0
    graph_edit.set_nodes(graph, graph_edit.splice(graph, replacement, removed))
    return len(replacement)


_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16
# Ops whose outputs hold only values of their data inputs (which inputs: None = all).
_MOVES = {"Reshape": (0,), "Transpose": None, "Flatten": None, "Squeeze": (0,),
          "Unsqueeze": (0,), "Identity": None, "Concat": None, "Slice": (0,), "Split": (0,),
          "Gather": (0,), "Expand": (0,), "Tile": (0,), "DepthToSpace": None,
          "SpaceToDepth": None}  # fmt: skip
# Ops whose output has their first input's type: computed on float16 inputs, float16 values.
_SAME_TYPE = ("LayerNormalization", "Softmax", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid",
              "Tanh", "Erf", "MatMul", "Gemm", *_MOVES)  # fmt: skip


def roundings_of_rounded_values(graph) -> int:
    """Drop each Cast pair (float32 -> float16 -> float32) whose input already holds float16
    values (module doc); its reader reads the input. Returns how many were dropped."""
    halves = {t.name for t in graph.initializer if t.data_type == _FLOAT16}
    halves |= {i.name for i in graph.input if i.type.tensor_type.elem_type == _FLOAT16}
    exact: set[str] = set()  # float32 values that are float16 values
    for node in graph.node:
        to = graph_edit.cast_to(node)
        if to == _FLOAT16:
            halves.update(node.output)
        elif to == _FLOAT and node.input[0] in halves:
            exact.update(node.output)
        elif node.op_type in _SAME_TYPE and not node.domain and node.input[0] in halves:
            halves.update(node.output)
        elif node.op_type in _MOVES and not node.domain:
            data = _MOVES[node.op_type]
            inputs = [n for k, n in enumerate(node.input) if data is None or k in data]
            if inputs and all(n in exact for n in inputs):
                exact.update(node.output)
    g = _Graph(graph)
    back: dict[str, str] = {}
    removed: set[int] = set()
    for node in graph.node:
        if graph_edit.cast_to(node) != _FLOAT16 or node.input[0] not in exact:
            continue
        second = g.only_reader(node.output[0])
        if second is None or graph_edit.cast_to(second) != _FLOAT or second.output[0] in g.outputs:
            continue
        back[second.output[0]] = node.input[0]
        removed |= {id(node), id(second)}
    if not back:
        return 0
    for name in back:  # a pair after a dropped pair: its input is the first one's
        while back[name] in back:
            back[name] = back[back[name]]
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in back:
                node.input[k] = back[name]
    graph_edit.set_nodes(graph, graph_edit.splice(graph, {}, removed))
    return len(back)
