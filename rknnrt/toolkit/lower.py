"""Lowering a prepared ONNX model to the three sections of an rknnrt model file.

The graph keeps every constant as an EXTERNAL tensor pointing at location "@weights" (offset,
length), and the weights section holds their bytes, each 64-byte aligned. The metadata records
what a board reports (IO specs) and the internal-memory plan of the intermediate tensors.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from math import prod

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ..model.meta import MemoryPlan, ModelMeta, PlannedTensor, TensorSpec, WeightSpec
from ..sessions import factory, policies
from . import memplan
from .errors import ConversionError, engine_words

WEIGHT_LOCATION = "@weights"
_ALIGN = 64
# Constants that go to the weights section; integer shapes/axes and small tensors (quantisation
# parameters) stay in the graph, where onnxruntime reads them while it prepares the graph.
_WEIGHT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16,
                 TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32)  # fmt: skip
# Quantisation parameters stay inline: onnxruntime fuses QDQ into integer kernels only when
# it sees them as constants.
_INLINE_SUFFIXES = ("__scale", "__zp", "__wscale", "__wzp", "__bscale", "__bzp")


@dataclass
class InputConfig:
    mean: list[float] | None
    std: list[float] | None


def _dtype_name(elem_type: int) -> str:
    if elem_type == TensorProto.BOOL:
        return "bool"
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name


def _known_shapes(model: onnx.ModelProto) -> dict[str, tuple[list[int], int]]:
    """name -> (shape, elem type) for every tensor whose static shape inference knows."""
    shapes = {}
    graph = model.graph
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.dim_value > 0 for d in t.shape.dim) and t.elem_type:
            shapes[vi.name] = ([d.dim_value for d in t.shape.dim], t.elem_type)
    return shapes


def _run_for_shapes(
    model: onnx.ModelProto, names: list[str], input_shapes: list[list[int]] | None = None
) -> dict[str, tuple[list[int], int]]:
    """Shapes inference could not give: run the graph once on zeros and look."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    session = factory.create(probe, policies.FOLDING)
    feed = {}
    for k, vi in enumerate(model.graph.input):
        t = vi.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        shape = input_shapes[k] if input_shapes else [d.dim_value for d in t.shape.dim]
        feed[vi.name] = np.zeros(shape, dtype)
    values = session.run(names, feed)
    return {
        n: (list(v.shape), onnx.helper.np_dtype_to_tensor_dtype(v.dtype))
        for n, v in zip(names, values)
    }


# Operands onnxruntime must read at load time for shape inference (Resize scales, Reshape
# shape, ...): by op type, the input positions that stay inline in the graph.
_SHAPE_OPERANDS = {"Resize": (1, 2, 3), "Upsample": (1,), "Reshape": (1,), "Expand": (1,),
                   "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3), "Split": (1,),
                   "Squeeze": (1,), "Unsqueeze": (1,), "ConstantOfShape": (0,), "TopK": (1,),
                   "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,)}


def _shape_operands(model: onnx.ModelProto) -> set[str]:
    return {node.input[k] for node in model.graph.node
            for k in _SHAPE_OPERANDS.get(node.op_type, ()) if k < len(node.input)}  # fmt: skip


def _externalize(model: onnx.ModelProto) -> tuple[bytes, list[WeightSpec]]:
    """Move the weights (float, int8 and int32 constants) into the blob."""
    blob = bytearray()
    specs = []
    inline = _shape_operands(model)
    for tensor in model.graph.initializer:
        if tensor.data_type not in _WEIGHT_TYPES:
            continue
        if tensor.name.endswith(_INLINE_SUFFIXES) or tensor.name in inline:
            continue
        array = numpy_helper.to_array(tensor)
        data = np.ascontiguousarray(array).tobytes()
        blob += bytes(-len(blob) % _ALIGN)
        offset = len(blob)
        blob += data
        specs.append(WeightSpec(tensor.name, _dtype_name(tensor.data_type),
                                list(array.shape), offset, len(data)))  # fmt: skip
        for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data",
                      "uint64_data", "string_data"):  # fmt: skip
            tensor.ClearField(field)
        tensor.data_location = TensorProto.EXTERNAL
        del tensor.external_data[:]
        for key, value in (("location", WEIGHT_LOCATION), ("offset", str(offset)),
                           ("length", str(len(data)))):  # fmt: skip
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    return bytes(blob), specs


def _memory_plan(
    model: onnx.ModelProto,
    shapes: dict[str, tuple[list[int], int]],
    weight_size: int,
    stored_types: frozenset[int] | None = None,
) -> MemoryPlan:
    """Greedy lifetime plan of the intermediate tensors (graph IO and constants excluded).
    `stored_types`: only tensors of these types are stored (int8 or float16 programs compute
    in float between stored tensors, and those float values never reach memory)."""
    graph = model.graph
    io = {i.name for i in graph.input} | {o.name for o in graph.output}
    constants = {t.name for t in graph.initializer}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for step, node in enumerate(graph.node):
        for name in node.input:
            if name in first:
                last[name] = step
        for name in node.output:
            if name and name not in io and name not in constants:
                if stored_types is None or shapes.get(name, ([], 0))[1] in stored_types:
                    first[name] = last[name] = step
    names = list(first)
    sizes = []
    for name in names:
        shape, elem = shapes.get(name, ([0], TensorProto.FLOAT))
        itemsize = (
            1
            if elem == TensorProto.BOOL
            else np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).itemsize
        )
        sizes.append(prod(shape) * itemsize)
    reqs = [memplan.BufferReq(s, first[n], last[n]) for n, s in zip(names, sizes)]
    plan = memplan.plan_greedy(reqs)
    return MemoryPlan(
        weight_size=weight_size,
        internal_size=plan.total,
        tensors=[PlannedTensor(n, o, s) for n, o, s in zip(names, plan.offsets, sizes)],
    )


def _spec(
    name: str,
    shape: list[int],
    elem: int,
    config: InputConfig | None = None,
    qparams: dict[str, tuple[float, int]] | None = None,
) -> TensorSpec:
    spec = TensorSpec(name, shape, _dtype_name(elem), "NCHW" if len(shape) == 4 else "UNDEFINED")
    if config is not None and len(shape) == 4:
        spec.mean, spec.std = config.mean, config.std
    if qparams and name in qparams:
        spec.qnt_type = "AFFINE"
        spec.scale, spec.zp = float(qparams[name][0]), int(qparams[name][1])
    return spec


def lower(
    model: onnx.ModelProto,
    inputs: dict[str, InputConfig],
    *,
    target_platform: str,
    float_dtype: str,
    custom_string: str,
    model_name: str,
    toolkit_version: str,
    remove_weight: bool,
    shape_sets: list[list[list[int]]] | None = None,
    io_qparams: dict[str, tuple[float, int]] | None = None,
    stored_types: frozenset[int] | None = None,
    rknn_batch_size: int = 1,
) -> tuple[ModelMeta, bytes, bytes]:
    """(metadata, graph bytes, weights bytes) for an ONNX model the passes have prepared.

    With `shape_sets` (dynamic shapes) the graph's varying input dims are symbolic; every
    set is run once to record its output shapes, and the memory plan uses the largest set.
    """
    wanted = [o.name for o in model.graph.output] + [
        o for n in model.graph.node for o in n.output if o
    ]
    wanted = list(dict.fromkeys(wanted))
    output_sets: list[list[list[int]]] = []
    try:
        if shape_sets:
            largest = max(shape_sets, key=lambda shapes: sum(prod(s) for s in shapes))
            shapes = _run_for_shapes(model, wanted, largest)
            for k, vi in enumerate(model.graph.input):
                shapes[vi.name] = (largest[k], vi.type.tensor_type.elem_type)
            outs = [o.name for o in model.graph.output]
            for shape_set in shape_sets:
                found = _run_for_shapes(model, outs, shape_set)
                output_sets.append([found[n][0] for n in outs])
        else:
            shapes = _known_shapes(model)
            missing = [n for n in wanted if n not in shapes]
            if missing:
                shapes.update(_run_for_shapes(model, missing))
    except Exception as exc:  # onnxruntime rejects graphs in several ways
        raise ConversionError(f"cannot determine tensor shapes: {engine_words(exc)}") from None
    in_specs = [
        _spec(i.name, *shapes[i.name], config=inputs.get(i.name), qparams=io_qparams)
        for i in model.graph.input
    ]
    out_specs = [_spec(o.name, *shapes[o.name], qparams=io_qparams) for o in model.graph.output]
    for k, o in enumerate(model.graph.output):  # the runtime's graph carries its output types
        shape, elem = shapes[o.name]
        if output_sets:  # dims that differ between sets are symbolic
            varying = {d for d in range(len(shape)) if len({s[k][d] for s in output_sets}) > 1}
            shape = [f"{o.name}_d{d}" if d in varying else v for d, v in enumerate(shape)]
        o.CopyFrom(onnx.helper.make_tensor_value_info(o.name, elem, shape))
    weights, weight_specs = _externalize(model)
    meta = ModelMeta(
        target_platform=target_platform,
        inputs=in_specs,
        outputs=out_specs,
        weights=weight_specs,
        memory=_memory_plan(model, shapes, len(weights), stored_types),
        float_dtype=float_dtype,
        custom_string=custom_string,
        model_name=model_name,
        toolkit_version=toolkit_version,
        remove_weight=remove_weight,
        weights_sha256=hashlib.sha256(weights).hexdigest(),
        input_shape_sets=[list(map(list, shapes)) for shapes in shape_sets or []],
        output_shape_sets=output_sets,
        rknn_batch_size=rknn_batch_size,
    )
    if remove_weight:
        weights = b""
    return meta, model.SerializeToString(), weights
