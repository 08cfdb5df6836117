"""The vendor's layers of a model: the converted ONNX graph grouped as the board runs it.

rknnrt's converted graph computes what the NPU would with ONNX ops: int8 models carry
QuantizeLinear/DequantizeLinear pairs around every stored tensor, fp16 models Casts that round
them, and activations or residual Adds are separate nodes. A board's runtime lists one layer per
NPU task after the vendor compiler's fusions instead. `vendor_layers` rebuilds that list:

- Q/DQ and Cast nodes are number-format bookkeeping: their output is their input.
- A Conv (a Gemm is a 1x1 Conv; GlobalAveragePool, a global AveragePool and a channel
  ReduceSum become Convs) absorbs what follows it while the tensor between has one reader:
  an Add of another feature map (when the Conv is the later of the Add's two producers), then an
  activation (Relu, Clip, Sigmoid, LeakyRelu, HardSwish, or Sigmoid+Mul = SiLU as `ExSwish`),
  and after a Relu/Clip one more Add: `ConvRelu`, `ConvAdd`, `ConvAddRelu`, `ConvReluAdd`,
  `ConvExSwish`, ... A standalone BatchNormalization absorbs a Relu the same way.
- The Flatten/Reshape in front of a Gemm disappears (the vendor runs the Gemm as a 1x1 Conv on
  the 4-D tensor); a model output of rank < 4 gets a CPU `Reshape` layer; Softmax is
  `exSoftmax13`, a standalone SiLU `exSwish`.
- A KxK (K > 1) Conv whose kernel holds more than `TILE_BYTES` bytes per output channel is split
  over input channels: a `Split`, one Conv per tile, and the last tile adds the others
  (`ConvAdd...`).

Sources: the vendor toolkit 2.5.0's verbose build logs of ResNet-50 (onnx light model and
ResNet-50 v2), MobileNetV2, YOLOv5s, YOLOv8n and DeepLabV3 (docs/performance.md, "Layers").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil, prod

from ..lazy_imports import onnx

BOOKKEEPING = frozenset({"QuantizeLinear", "DequantizeLinear", "Cast", "Identity", "Dropout"})
_ACT_NAMES = {"Relu": "Relu", "Clip": "Clip", "Sigmoid": "Sigmoid", "LeakyRelu": "LeakyRelu",
              "HardSwish": "HardSwish", "PRelu": "PRelu", "Tanh": "Tanh"}  # fmt: skip
_CONV_LIKE = frozenset({"Conv", "Gemm", "MatMul", "ConvTranspose"})
# Ops the NPU does not run (the runtime runs them on the CPU): data-dependent or index ops.
CPU_OPS = frozenset(
    {"TopK", "NonZero", "ScatterND", "ScatterElements", "GatherND", "GatherElements", "CumSum",
     "Range", "Shape", "Size", "ConstantOfShape", "ArgMin", "ArgMax", "Einsum", "Mod", "Round",
     "Sign", "Sin", "Cos", "Log", "Erf", "RoiAlign", "MaxRoiPool", "LpPool", "NonMaxSuppression"}
)  # fmt: skip
_RENAMED = {"Softmax": "exSoftmax13", "Sum": "Add", "Upsample": "Resize"}
GAP_KERNEL = 7  # largest window of one global-pooling Conv (DeepLabV3 log: 65 -> 10 -> 2 -> 1)
# Kernel bytes per output channel one Conv task holds on RK3588/RK3576 (ResNet-50 logs)
TILE_BYTES = 4096


@dataclass
class Layer:
    """One row of the vendor's table."""

    op: str  # vendor op name (ConvRelu, MaxPool, ...)
    onnx_op: str  # the first ONNX node's op type (FullName prefix)
    name: str  # the first node's name (+ the vendor's suffixes)
    target: str  # NPU or CPU
    ins: list[list[int]]  # input shapes, weights included
    outs: list[list[int]]
    kind: str = "eltwise"  # conv, dwconv, eltwise, cpu, io
    kernel: list[int] = field(default_factory=lambda: [1, 1])
    groups: int = 1
    weight_elems: int = 0  # weights + bias elements this layer reads
    feature_ins: list[str] = field(default_factory=list)  # tensors read (for memory planning)
    feature_outs: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)  # converted-graph nodes it covers

    @property
    def full_name(self) -> str:
        return f"{self.onnx_op}:{self.name}"


class _Graph:
    """The converted graph with bookkeeping nodes bypassed."""

    def __init__(self, graph: onnx.GraphProto, shapes: dict[str, list[int]]) -> None:
        self.shapes = shapes
        self.constants = {t.name for t in graph.initializer}
        self.alias: dict[str, str] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.owner: dict[str, list[str]] = {}  # real node name -> bookkeeping nodes it absorbs
        for i, node in enumerate(graph.node):
            if not node.name:
                node.name = f"{node.op_type}_{i}"
            constant_made = node.op_type == "Constant" or (
                node.op_type == "ConstantOfShape" and all(i in self.constants for i in node.input)
            )
            if node.op_type in BOOKKEEPING or constant_made:
                if constant_made:
                    self.constants.update(node.output)
                elif node.input:
                    self.alias[node.output[0]] = self.root(node.input[0])
                continue
            self.nodes.append(node)
        self.producer = {self.root(o): n for n in self.nodes for o in n.output}
        self.readers: dict[str, int] = {}
        for n in self.nodes:
            for name in n.input:
                if name:
                    key = self.root(name)
                    self.readers[key] = self.readers.get(key, 0) + 1
        self.outputs = {self.root(o.name) for o in graph.output}
        for name in self.outputs:
            self.readers[name] = self.readers.get(name, 0) + 1
        self.index = {n.name: i for i, n in enumerate(self.nodes)}

    def root(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def is_const(self, name: str) -> bool:
        return self.root(name) in self.constants

    def shape(self, name: str) -> list[int]:
        name = self.root(name)
        return list(self.shapes.get(name, []))

    def features(self, node: onnx.NodeProto) -> list[str]:
        return [self.root(i) for i in node.input if i and not self.is_const(i)]

    def consts(self, node: onnx.NodeProto) -> list[str]:
        return [self.root(i) for i in node.input if i and self.is_const(i)]

    def single_reader(self, tensor: str) -> onnx.NodeProto | None:
        """The node reading `tensor` if it is its only reader and it is not a model output."""
        if self.readers.get(tensor, 0) != 1 or tensor in self.outputs:
            return None
        return next((n for n in self.nodes if tensor in map(self.root, n.input)), None)


def _as4d(shape: list[int]) -> list[int]:
    return shape + [1] * (4 - len(shape)) if len(shape) < 4 else shape


def _attr(node: onnx.NodeProto, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _silu_mul(g: _Graph, sig: onnx.NodeProto, src: str) -> onnx.NodeProto | None:
    """The Mul of x * Sigmoid(x) when `sig` is Sigmoid(src)."""
    for n in g.nodes:
        if n.op_type == "Mul" and {g.root(i) for i in n.input} == {src, g.root(sig.output[0])}:
            return n
    return None


def _silu_of(g: _Graph, tensor: str) -> onnx.NodeProto | None:
    """The Mul of tensor * Sigmoid(tensor) when those two are the tensor's only readers."""
    if g.readers.get(tensor) != 2 or tensor in g.outputs:
        return None
    sig = next((n for n in g.nodes if n.op_type == "Sigmoid" and g.root(n.input[0]) == tensor),
               None)  # fmt: skip
    mul = _silu_mul(g, sig, tensor) if sig is not None else None
    if mul is None or g.readers.get(g.root(sig.output[0])) != 1:
        return None
    return mul


def _conv_layer(g: _Graph, node: onnx.NodeProto, used: set[str]) -> Layer:
    x = g.features(node)
    ins = [g.shape(t) for t in x[:1]] + [g.shape(c) for c in g.consts(node)]
    out = g.root(node.output[0])
    weight = g.shape(node.input[1]) if len(node.input) > 1 else []
    weight_elems = sum(prod(g.shape(c)) for c in g.consts(node))
    kernel, groups, kind = [1, 1], 1, "conv"
    if node.op_type == "Conv":
        kernel = list(weight[2:]) or [1, 1]
        groups = int(_attr(node, "group", 1))
        cin = g.shape(x[0])[1] if x and len(g.shape(x[0])) > 1 else 0
        if groups > 1 and groups == cin:
            kind = "dwconv"
    elif node.op_type in ("Gemm", "MatMul") and x:
        ins[0] = _as4d(g.shape(x[0]))
        if len(ins) > 1 and len(ins[1]) == 2:
            transposed = node.op_type == "Gemm" and _attr(node, "transB", 0)
            k, n = ins[1][::-1] if transposed else ins[1]
            ins[1] = [n, k, 1, 1]
    layer = Layer("Conv", node.op_type, node.name, "NPU", ins, [_as4d(g.shape(out))], kind,
                  kernel, groups, weight_elems, x[:1], [out], [node.name])  # fmt: skip
    _absorb_tail(g, layer, out, used)
    return layer


def _absorb_tail(g: _Graph, layer: Layer, out: str, used: set[str]) -> None:
    """Fold the Add / activation chain that follows a Conv or BatchNormalization into it."""
    suffix, seen_add, seen_act = "", False, False
    while True:
        swish = _silu_of(g, out)
        nxt = swish or g.single_reader(out)
        if nxt is None or nxt.name in used:
            break
        if nxt.op_type == "BatchNormalization" and layer.kind != "eltwise" and not suffix:
            pass  # folded into the Conv's weights by the converter
        elif nxt.op_type in ("Add", "Sum") and not seen_add and len(g.features(nxt)) == 2:
            other = next(t for t in g.features(nxt) if t != out)
            src = g.producer.get(other)
            if src is not None and g.index.get(src.name, -1) > g.index[layer.nodes[0]]:
                break  # the Add fuses into the later producer
            if layer.kind == "eltwise" or (seen_act and not suffix.endswith(("Relu", "Clip"))):
                break
            layer.ins.append(g.shape(other))
            layer.feature_ins.append(other)
            suffix += "Add"
            seen_add = True
        elif (
            nxt.op_type in _ACT_NAMES
            and not seen_act
            and not (nxt.op_type == "Sigmoid" and _silu_mul(g, nxt, out))
        ):
            suffix += _ACT_NAMES[nxt.op_type]
            seen_act = True
        elif swish is not None and not seen_act:
            sig = next(n for n in g.nodes if n.op_type == "Sigmoid" and g.root(n.input[0]) == out)
            used.add(sig.name)
            layer.nodes.append(sig.name)
            suffix += "ExSwish"
            seen_act = True
        else:
            break
        used.add(nxt.name)
        layer.nodes.append(nxt.name)
        out = g.root(nxt.output[0])
        layer.outs = [_as4d(g.shape(out))]
        layer.feature_outs = [out]
        if suffix.endswith("ExSwish") or (seen_add and seen_act):
            break
    layer.op += suffix
    if suffix:
        layer.name += f"_{layer.op}" if "Add" in suffix else ""


def _tiles(layer: Layer, elem: int, tile_bytes: int | None) -> list[Layer]:
    """Split a Conv whose kernel per output channel exceeds `tile_bytes` (see module doc)."""
    if not tile_bytes or layer.kind != "conv" or layer.onnx_op != "Conv":
        return [layer]
    if prod(layer.kernel) <= 1 or len(layer.ins[0]) < 4 or len(layer.ins) < 2:
        return [layer]
    cin = layer.ins[0][1] // max(1, layer.groups)
    count = -(-cin * prod(layer.kernel) * elem // tile_bytes)
    if count <= 1 or layer.groups != 1:
        return [layer]
    part = -(-cin // count)
    src = layer.ins[0]
    tile_in = [src[0], part, *src[2:]]
    split = Layer("Split", "Split", f"{layer.name}_split", "NPU", [src, [count]],
                  [tile_in] * count, "eltwise", feature_ins=layer.feature_ins[:1],
                  feature_outs=[f"{layer.name}_tile{i}_in" for i in range(count)])  # fmt: skip
    weight = layer.ins[1]
    result = [split]
    per_tile = layer.weight_elems // count
    for i in range(count - 1, -1, -1):
        tile = Layer("Conv", "Conv", f"{layer.name}_tile{i}", "NPU",
                     [tile_in, [weight[0], part, *weight[2:]], *layer.ins[2:3]], layer.outs,
                     "conv", layer.kernel, 1, per_tile, [f"{layer.name}_tile{i}_in"],
                     [f"{layer.name}_tile{i}_out"], list(layer.nodes))  # fmt: skip
        if i == 0:  # the last tile adds the others and keeps the fused tail
            tile.op = "ConvAdd" + layer.op[len("Conv") :].replace("Add", "", 1)
            tile.name += f"_{tile.op}"
            tile.ins += [layer.outs[0]] + layer.ins[3:]
            tile.feature_ins += [f"{layer.name}_tile1_out", *layer.feature_ins[1:]]
            tile.feature_outs = layer.feature_outs
        result.append(tile)
    return result


def vendor_layers(graph: onnx.GraphProto, shapes: dict[str, list[int]], elem: int = 1,
                  tile_bytes: int | None = TILE_BYTES) -> list[Layer]:  # fmt: skip
    """The vendor's layers of `graph` (shapes: tensor name -> shape), IO operators included.
    `elem`: bytes per stored element (1 int8, 2 float16); `tile_bytes`: the SoC's Conv kernel
    limit (None: never split; RK3566/RK3562 logs show no split)."""
    g = _Graph(graph, shapes)
    layers: list[Layer] = []
    for inp in graph.input:
        if inp.name in g.constants:
            continue
        shape = g.shape(inp.name)
        layers.append(Layer("InputOperator", "InputOperator", inp.name, "CPU", [], [shape],
                            "io", feature_outs=[inp.name]))  # fmt: skip
    used: set[str] = set()
    for node in g.nodes:
        if node.name in used:
            continue
        used.add(node.name)
        op = node.op_type
        feats = g.features(node)
        out = g.root(node.output[0]) if node.output else ""
        if (
            op in ("Flatten", "Reshape")
            and (reader := g.single_reader(out)) is not None
            and (reader.op_type in ("Gemm", "MatMul"))
        ):
            g.alias[out] = feats[0] if feats else out
            continue  # the Gemm runs as a 1x1 Conv on the 4-D tensor
        if op in _CONV_LIKE and len(node.input) > 1 and g.is_const(node.input[1]):
            layers += _tiles(_conv_layer(g, node, used), elem, tile_bytes)
            continue
        in_shape = g.shape(feats[0]) if feats else []
        global_pool = len(in_shape) == 4 and (
            op == "GlobalAveragePool"
            or (op == "AveragePool" and list(_attr(node, "kernel_shape", [])) == in_shape[2:])
        )
        channel_sum = op == "ReduceSum" and len(in_shape) == 4 and _reduces_channels(g, node)
        if global_pool and max(in_shape[2:], default=0) > GAP_KERNEL:
            layers += _global_pool_convs(node, in_shape, feats[:1])
            in_shape = layers[-1].outs[0]
            feats = layers[-1].feature_outs
        if global_pool or channel_sum:
            c, k = in_shape[1], in_shape[2:]
            weight = [1, c, *k] if global_pool else [1, c, 1, 1]
            layer = Layer("Conv", op, node.name, "NPU", [in_shape, weight, [c]],
                          [_as4d(g.shape(out))], "dwconv" if global_pool else "conv",
                          k if global_pool else [1, 1], c if global_pool else 1,
                          prod(weight) + weight[0] * (c if global_pool else 1), feats[:1], [out],
                          [node.name])  # fmt: skip
            _absorb_tail(g, layer, out, used)
            layers.append(layer)
            continue
        name = _RENAMED.get(op, op)
        target = "CPU" if op in CPU_OPS else "NPU"
        ins = [g.shape(t) for t in feats] + [g.shape(c) for c in g.consts(node)]
        outs = [g.shape(g.root(o)) for o in node.output if o]
        layer = Layer(name, op, node.name, target, ins, outs,
                      "cpu" if target == "CPU" else "eltwise", feature_ins=feats,
                      feature_outs=[g.root(o) for o in node.output if o],
                      nodes=[node.name])  # fmt: skip
        if op == "Sigmoid" and feats and (mul := _silu_mul(g, node, feats[0])) is not None:
            used.add(mul.name)
            layer.op, layer.nodes = "exSwish", [node.name, mul.name]
            layer.feature_outs = [g.root(mul.output[0])]
        elif op == "BatchNormalization":
            _absorb_tail(g, layer, out, used)
            layer.op = "BatchNormalization" + layer.op[len("BatchNormalization") :]
        layers.append(layer)
    for output in graph.output:
        shape = g.shape(output.name)
        root = g.root(output.name)
        if 0 < len(shape) < 4:  # the NPU writes 4-D; the runtime reshapes on the CPU
            layers.append(Layer("Reshape", "Reshape", f"{output.name}-rs", "CPU",
                                [_as4d(shape), [len(shape)]], [shape], "cpu",
                                feature_ins=[root], feature_outs=[f"{root}-rs"]))  # fmt: skip
        layers.append(Layer("OutputOperator", "OutputOperator", output.name, "CPU", [shape], [],
                            "io", feature_ins=[root]))  # fmt: skip
    return layers


def _global_pool_convs(node: onnx.NodeProto, shape: list[int], src: list[str]) -> list[Layer]:
    """The leading 7x7-stride-7 depthwise Convs of a large global pooling (the last one is made
    by the caller and takes the remaining window)."""
    result = []
    n, c, h, w = shape
    while max(h, w) > GAP_KERNEL:
        oh, ow = ceil(h / GAP_KERNEL), ceil(w / GAP_KERNEL)
        out = f"{node.name}_2conv{len(result)}"
        result.append(Layer("Conv", node.op_type, out, "NPU",
                            [[n, c, h, w], [1, c, GAP_KERNEL, GAP_KERNEL], [c]], [[n, c, oh, ow]],
                            "dwconv", [GAP_KERNEL, GAP_KERNEL], c, c * GAP_KERNEL**2 + c, src,
                            [out], [node.name]))  # fmt: skip
        src, h, w = [out], oh, ow
    return result


def _reduces_channels(g: _Graph, node: onnx.NodeProto) -> bool:
    axes = _attr(node, "axes", None)
    if axes is None and len(node.input) > 1:
        shape = g.shape(node.output[0])
        return len(shape) == 4 and shape[1] == 1
    return list(axes or []) == [1]


def static_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Every tensor's shape by ONNX shape inference (constants propagated). Initializers whose
    data is external keep their declared dims."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = inferred.graph
    shapes: dict[str, list[int]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = [d.dim_value for d in t.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes
