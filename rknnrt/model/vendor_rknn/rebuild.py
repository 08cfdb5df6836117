"""Rebuild an executable ONNX graph from a vendor file's compiled ops and unpacked weights.

The graph computes what the vendor's simulator computes: every stored tensor is rounded to its
stored type after the op that writes it (fp16 tensors by a Cast round trip, int8 tensors by
QuantizeLinear/DequantizeLinear with the tensor's own scale and zero point), while the ops run
in float32 (graph.py). Each op is decoded by the decoder registered for its type (registry.py);
graph inputs and outputs carry the file's IO types. An op, attribute or packing rknnrt cannot
decode raises VendorFormatError naming it; nothing is approximated silently.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto
from onnx import helper as oh

from .. import dtypes
from ..custom_ops import CUSTOM_DOMAIN
from ..errors import VendorFormatError
from . import registry
from .fileformat import Tensor, VendorModel
from .graph import GraphBuilder

OPSET = 17  # (LayerNormalization: a float16 exNorm, act_ops._float16_layer_norm)
WEIGHT_LOCATION = "@weights"  # as rknnrt's converter names its weights section
# IO types a rebuilt graph may have (model/dtypes.py: their ONNX numbers).
_IO_TYPES = ("float32", "float16", "int8", "uint8", "int16", "int32", "int64")
_ONNX_TYPES = {t.name: t.onnx for t in dtypes.named(*_IO_TYPES)}
shape_free = registry.shape_free


def _io_dtype(m: VendorModel, t: Tensor) -> str:
    dtype = m.io_types.get(t.name, {}).get("dtype") or t.dtype
    if dtype not in _ONNX_TYPES:
        raise VendorFormatError(
            f"vendor .rknn model: IO tensor '{t.name}' has unsupported type {dtype}"
        )
    return dtype


def place_weights(b: GraphBuilder, section: bytearray, align: int = 64) -> list[tuple]:
    """Put the large weights into `section` (the weights section) when they all fit, and
    name them EXTERNAL in the graph; otherwise inline them. Returns (name, dtype, shape,
    offset, nbytes) per placed weight."""
    offsets, end = [], 0
    for _, array in b.external:
        end += -end % align
        offsets.append(end)
        end += array.nbytes
    if end > len(section):
        for tensor, array in b.external:
            tensor.raw_data = array.tobytes()
        return []
    placed = []
    view = np.frombuffer(section, np.uint8)
    for (tensor, array), offset in zip(b.external, offsets):
        view[offset : offset + array.nbytes] = array.reshape(-1).view(np.uint8)
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", WEIGHT_LOCATION), ("offset", str(offset)),
                           ("length", str(array.nbytes))):  # fmt: skip
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        placed.append((tensor.name, array.dtype.name, list(array.shape), offset, array.nbytes))
    return placed


def _io_dims(m: VendorModel, t: Tensor, k: int, sets: list[list[list[int]]]) -> list:
    """Tensor t's dims, symbolic where the shape sets differ (dynamic-shape files)."""
    if m.shape_mode == "static_shape" or not sets:
        return list(t.shape)
    return [f"{t.name}_d{d}" if len({s[k][d] for s in sets}) > 1 else v
            for d, v in enumerate(t.shape)]  # fmt: skip


# NPU formats whose compiler splits a convolution from the lookup-table activation the others
# fuse into it (rv1106b: Conv then exSwish where rv1106 has ConvExSwish), and those
# activations. The simulator computes the fused op: the convolution's output, stored by the
# board, is not rounded in the simulator (toolkit 2.5.0: swish 96.3% -> 99.5% bit-equal).
SPLIT_FORMATS = ("RKNPU w1",)
SPLIT_ACTIVATIONS = ("exSwish", "Sigmoid", "HardSwish", "HardSigmoid", "exGelu")


def split_activation_inputs(m: VendorModel) -> set[int]:
    """The tensors that a plain Conv writes and only split activations read (not outputs)."""
    if m.npu_format not in SPLIT_FORMATS:
        return set()
    readers: dict[int, list[str]] = {}
    for n in m.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n.op_type)
    return {i for n in m.nodes if n.op_type == "Conv" for i in n.outputs
            if i not in m.outputs and readers.get(i)
            and all(r in SPLIT_ACTIVATIONS for r in readers[i])}  # fmt: skip


def rebuild(m: VendorModel) -> tuple[GraphBuilder, list[Tensor], list[Tensor]]:
    """(graph builder holding the ONNX model, input tensors, output tensors) for a parsed
    vendor model; place_weights() then finishes the model."""
    b = GraphBuilder(m)
    ins = [m.tensors[i] for i in m.inputs]
    outs = [m.tensors[i] for i in m.outputs]
    graph_in = []
    for k, t in enumerate(ins):
        dtype = _io_dtype(m, t)
        dims = _io_dims(m, t, k, m.input_shape_sets)
        graph_in.append(oh.make_tensor_value_info(t.name, _ONNX_TYPES[dtype], dims))
        if dtype == "int8":
            scale = b.const(np.array(t.scale[0] if t.scale else 1.0, np.float32), "scale")
            zp = b.const(np.array(t.zp[0] if t.zp else 0, np.int8), "zp")
            b.int8_values[t.index] = (t.name, scale, zp)
            if t.index not in b.outputs:  # held as uint8 inside (GraphBuilder.store)
                b.store(b.value(t), t)
        elif dtype != "float32":
            b.values[t.index] = b.add("Cast", [t.name], "in", to=TensorProto.FLOAT)
        else:
            b.values[t.index] = b.add("Identity", [t.name], "in")
    unrounded = split_activation_inputs(m)
    for n in m.nodes:
        if n.op_type in registry.BOUNDARY:
            continue
        if not n.outputs:
            raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' has no output")
        decoder = registry.lookup(n, m.custom_op_types)
        raw = decoder.decode(b, n)
        for i, value in zip(n.outputs, [raw] if isinstance(raw, str) else raw):
            if i in unrounded:
                b.values[i] = value
            else:
                b.store(value, m.tensors[i])
    graph_out = []
    for k, t in enumerate(outs):
        dtype = _io_dtype(m, t)
        dims = _io_dims(m, t, k, m.output_shape_sets)
        if t.index not in b.values and t.index not in b.int8_values:
            raise VendorFormatError(f"vendor .rknn model: no op writes output '{t.name}'")
        if dtype == "int8" and t.index in b.int8_values and t.index not in b.unsigned:
            # already quantised with its own parameters
            b.nodes.append(oh.make_node("Identity", [b.int8_values[t.index][0]], [t.name]))
            graph_out.append(oh.make_tensor_value_info(t.name, _ONNX_TYPES[dtype], dims))
            continue
        src = b.value(t)
        if dtype == "int8":
            scale = b.const(np.array(t.scale[0] if t.scale else 1.0, np.float32), "scale")
            zp = b.const(np.array(t.zp[0] if t.zp else 0, np.int8), "zp")
            b.nodes.append(oh.make_node("QuantizeLinear", [src, scale, zp], [t.name]))
        elif dtype != "float32":
            b.nodes.append(oh.make_node("Cast", [src], [t.name], to=_ONNX_TYPES[dtype]))
        else:
            b.nodes.append(oh.make_node("Identity", [src], [t.name]))
        graph_out.append(oh.make_tensor_value_info(t.name, _ONNX_TYPES[dtype], dims))
    b.model.opset_import.add(domain="", version=OPSET)
    if m.custom_op_types:  # custom nodes (custom_nodes.py) are in rknnrt's custom domain
        b.model.opset_import.add(domain=CUSTOM_DOMAIN, version=1)
    b.graph.name = m.model_name or "vendor"
    b.graph.node.extend(b.nodes)
    b.graph.input.extend(graph_in)
    b.graph.output.extend(graph_out)
    return b, ins, outs
