"""Which operators a model file's graph may use, and how large its tensors may grow.

A model file comes from strangers and onnxruntime runs whatever ONNX it is given: a `Loop`
of 10^15 iterations never returns, and a `ConstantOfShape` fed a constant shape allocates
gigabytes from a 4 KB file. A graph may therefore hold only

- the operators the converter accepts from a source model (`CONVERTER_OPS`, which
  toolkit/op_support.py uses for its build-time check), plus
- the operators the converter's passes and the vendor reader (vendor_rknn/rebuild.py,
  window_ops.py) emit (`EMITTED_OPS`; tests/hardening derives both lists from the code), plus
- custom operators (domain `rknnrt.custom`), which run the application's callbacks under
  their own rules (core/program/custom_ops.py).

Control flow (Loop, If, Scan) is in neither list, and no allowed operator takes a subgraph.
Then, with every input at the model's (largest) declared shape, ONNX shape inference types
every tensor: the output of an operator whose size a value computes (`SIZED_BY_VALUE`:
ConstantOfShape, Expand, Tile, Range, Resize, ...) must come out static, and no static
tensor may exceed `tensor_bound(meta)`, a multiple of what the model declares (its internal
memory and its largest input, output or weight). The sum of all static tensors is what a run
can need at most without reuse; the runtime compares it with its memory budget
(core/switches.py MEMORY_BUDGET_MB).
"""

from __future__ import annotations

import functools
from math import prod
from typing import Any

import onnx

from . import shape_guard
from .custom_ops import is_custom
from .errors import ModelFormatError

CONVERTER_OPS = frozenset(
    {
        # convolution, pooling, normalisation
        "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
        "LpPool", "LRN", "BatchNormalization", "InstanceNormalization", "LayerNormalization",
        "GroupNormalization", "MaxRoiPool", "RoiAlign",
        # matrix
        "Gemm", "MatMul", "Einsum",
        # activations
        "Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Clip",
        "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "Gelu", "Erf", "ThresholdedRelu",
        "Softmax", "LogSoftmax",
        # elementwise
        "Add", "Sub", "Mul", "Div", "Pow", "Sum", "Mean", "Max", "Min", "Abs", "Neg", "Sqrt",
        "Reciprocal", "Exp", "Log", "Floor", "Ceil", "Round", "Sin", "Cos", "Sign", "Mod",
        "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Not", "And", "Or", "Xor",
        "Where", "Cast",
        # reductions
        "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL2",
        "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "TopK",
        # shape and data movement
        "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
        "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Pad", "Tile",
        "Expand", "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "Shape", "Size",
        "Range", "ConstantOfShape", "Identity", "Dropout", "CumSum", "NonZero",
        # recurrent
        "LSTM", "GRU", "RNN",
    }
)  # fmt: skip
# What the quantiser, the float16 program and the vendor reader add to a graph.
EMITTED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "Cast", "Identity"})
ALLOWED_OPS = CONVERTER_OPS | EMITTED_OPS
# Operators whose output size is computed from a tensor's *values*: bounded only when shape
# inference can tell the size at init.
# (Reshape, Slice, Gather, TopK, NonZero, ... never make more elements than their inputs hold.)
SIZED_BY_VALUE = frozenset(
    {"ConstantOfShape", "Expand", "Tile", "Range", "Resize", "Upsample", "Pad"}
)  # fmt: skip
TENSOR_FACTOR = 16  # a float32 program holds int8 tensors as float: 4x, and room for layouts
MIN_TENSOR_BOUND = 64 << 20  # so small models with tiny declared memory keep ordinary shapes
_ITEMSIZE = {onnx.TensorProto.STRING: 8, onnx.TensorProto.BOOL: 1}
_CAST_TYPES = frozenset(
    v for k, v in onnx.TensorProto.DataType.items() if k not in ("UNDEFINED", "STRING")
)
_AXIS_OPS = ("QuantizeLinear", "DequantizeLinear")


def check_ops(model: onnx.ModelProto) -> None:
    """Refuse any node outside the allow-list and any node that carries a subgraph."""
    for index, node in enumerate(model.graph.node):
        where = f"node '{node.name or f'#{index}'}' ({node.op_type})"
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute):  # fmt: skip
            raise ModelFormatError(f"{where} carries a subgraph: a model has no control flow")
        if is_custom(node):
            continue
        if node.domain not in ("", "ai.onnx") or node.op_type not in ALLOWED_OPS:
            domain = f"{node.domain}::" if node.domain not in ("", "ai.onnx") else ""
            raise ModelFormatError(
                f"{where}: operator {domain}{node.op_type} is not one a model may use"
            )
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            if to not in _CAST_TYPES:  # onnxruntime loads Cast to=0 and fails every run
                raise ModelFormatError(f"{where}: 'to' {to} is not a tensor type")


def _itemsize(elem_type: int) -> int:
    if elem_type in _ITEMSIZE:
        return _ITEMSIZE[elem_type]
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    except Exception:  # unknown or undefined element type: count it as the widest
        return 8


def tensor_bound(meta: Any) -> int:
    """The largest tensor a model may hold: TENSOR_FACTOR times what it declares."""
    declared = [meta.memory.internal_size]
    for spec in (*meta.inputs, *meta.outputs):
        declared.append(prod(spec.shape) * 8)
    declared.extend(w.nbytes for w in meta.weights)
    return max(TENSOR_FACTOR * max(declared), MIN_TENSOR_BOUND)


def _fixed_inputs(model: onnx.ModelProto, shapes: list[list[int]]) -> onnx.ModelProto:
    """A copy of the graph (without initializer data) whose inputs have `shapes`."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    # the file's own value_info and output shapes may lie: inference starts from the inputs
    del probe.graph.value_info[:]
    for out in probe.graph.output:
        out.type.tensor_type.ClearField("shape")
    initializers = {t.name for t in probe.graph.initializer}
    real = [vi for vi in probe.graph.input if vi.name not in initializers]
    for vi, shape in zip(real, shapes):
        t = vi.type.tensor_type
        if not t.HasField("shape") or len(t.shape.dim) != len(shape):
            continue  # a layout the metadata states differently: inference keeps the graph's
        for dim, value in zip(t.shape.dim, shape):
            if not dim.HasField("dim_value"):
                dim.Clear()
                dim.dim_value = value
    return probe


def planned_bytes(graph: bytes, shapes: tuple[tuple[int, ...], ...], bound: int) -> int:
    """The sum of every tensor's size with inputs at `shapes`; ModelFormatError when a value-
    sized tensor is not static or a tensor exceeds `bound` bytes. Cached per graph."""
    return _planned(graph, shapes, bound)


@functools.lru_cache(maxsize=16)
def _planned(graph: bytes, shapes: tuple[tuple[int, ...], ...], bound: int) -> int:
    model = onnx.ModelProto()
    model.ParseFromString(graph)  # graph_rules.check_graph parsed these bytes already
    probe = _fixed_inputs(model, [list(s) for s in shapes])
    try:  # strict: a shape that contradicts the graph (a Reshape to a wrong count) is refused
        inferred = shape_guard.infer_shapes(probe, strict_mode=True, data_prop=True)
    except ModelFormatError:
        raise
    except Exception as exc:  # onnx reports inference failures with several types
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc)
        raise ModelFormatError(f"the graph's shapes are inconsistent: {first}") from None
    typed: dict[str, tuple[int, list[int | None]]] = {}
    for vi in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            typed[vi.name] = (t.elem_type, dims)
    constants = {t.name: list(t.dims) for t in model.graph.initializer}
    total = 0
    for index, node in enumerate(model.graph.node):
        if node.op_type in _AXIS_OPS and len(node.input) > 1:
            scale = constants.get(node.input[1], typed.get(node.input[1], (0, None))[1])
            if scale and prod(d or 1 for d in scale) > 1:  # per-axis: the axis is used
                x = node.input[0]
                _check_axis(node, constants.get(x, typed.get(x, (0, None))[1]), index)
        for name in node.output:
            if not name:
                continue
            elem, dims = typed.get(name, (0, None))
            static = dims is not None and all(d is not None and d >= 0 for d in dims)
            where = f"node '{node.name or f'#{index}'}' ({node.op_type}) output '{name}'"
            if not static:
                if node.op_type in SIZED_BY_VALUE and not is_custom(node):
                    raise ModelFormatError(
                        f"{where}: its size comes from values the runtime cannot bound at init"
                    )
                continue
            size = prod(dims) * _itemsize(elem)
            if size > bound:
                raise ModelFormatError(
                    f"{where} {dims} needs {size} bytes, more than the model's memory allows "
                    f"({bound} bytes)"
                )
            total += size
    return total


def _check_axis(node: onnx.NodeProto, dims: list[int | None] | None, index: int) -> None:
    """A per-axis (de)quantisation's axis lies inside its input's rank (onnxruntime loads
    axis -2^62 and fails every run)."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    rank = len(dims) if dims is not None else None
    if rank is not None and rank > 0 and not -rank <= axis < rank:
        raise ModelFormatError(
            f"node '{node.name or f'#{index}'}' ({node.op_type}): axis {axis} is outside the "
            f"input's {rank} dims"
        )
