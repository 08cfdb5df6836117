"""Rebuild an executable ONNX graph from a vendor file's compiled ops and unpacked weights.

The graph computes what the vendor's simulator computes: every stored tensor is rounded to its
stored type after the op that writes it (fp16 tensors by a Cast round trip, int8 tensors by
QuantizeLinear/DequantizeLinear with the tensor's own scale and zero point), while the ops run
in float32. Graph inputs and outputs carry the file's IO types. An op, attribute or packing this
module cannot decode raises VendorFormatError naming it; nothing is approximated silently.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as oh

from .. import dtypes, numerics
from . import int8, weights, window_ops
from .fileformat import CONST_KINDS, Node, Tensor, VendorModel
from .flatbuf import VendorFormatError

OPSET = 13
EXTERNAL_MIN_BYTES = 4096
# NPU formats whose weight packing was checked against the vendor simulator (fixtures).
VERIFIED_PACKINGS = ("RKNPU v2", "RKNPU lite", "RKNPU f2")
WEIGHT_LOCATION = "@weights"  # as rknnrt's converter names its weights section
# IO types a rebuilt graph may have (model/dtypes.py: their ONNX numbers).
_IO_TYPES = ("float32", "float16", "int8", "uint8", "int16", "int32", "int64")
_ONNX_TYPES = {t.name: t.onnx for t in dtypes.named(*_IO_TYPES)}
# Conv attribute slots (ONNX names in alphabetical order; pooling: window_ops.py).
CONV_DILATIONS, CONV_GROUP, CONV_KERNEL, CONV_PADS, CONV_STRIDES = 1, 2, 3, 4, 5
AXIS = 0  # Concat, Split, exSoftmax13
LAYOUT_NC1HWC2, LAYOUT_PACKED = 64, 65  # tensor field 1
PERM = 0  # Transpose
PASS_THROUGH = ("exDataConvert",)


def is_helper(t: Tensor) -> bool:
    """`*_exSecondary` inputs are the compiler's layout/requantisation helpers."""
    return t.name.endswith("_exSecondary")


class GraphBuilder:
    def __init__(self, model: VendorModel) -> None:
        self.m = model
        self.nodes: list[onnx.NodeProto] = []
        # initializers are written straight into the graph (one copy of each weight)
        self.model = onnx.ModelProto(ir_version=8, producer_name="rknnrt-vendor-rknn")
        self.graph = self.model.graph
        self.external: list[tuple[onnx.TensorProto, np.ndarray]] = []
        self.values: dict[int, str] = {}  # tensor index -> float32 value name
        # int8 tensors: tensor index -> (int8 value, scale, zero point) names
        self.int8_values: dict[int, tuple[str, str, str]] = {}
        self.conv_inputs: dict[int, str] = {}  # int8 tensor index -> its value for a Conv
        self.quantized = any(t.qnt_type == "int8" for t in model.tensors)
        self.regs = int8.RegisterFile(model) if self.quantized else None
        self._n = 0

    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"v{self._n}_{hint}"

    def const(self, array: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        tensor = self.graph.initializer.add()
        tensor.name = name
        tensor.data_type = oh.np_dtype_to_tensor_dtype(array.dtype)
        tensor.dims.extend(array.shape)
        tensor.raw_data = np.ascontiguousarray(array).tobytes()
        return name

    def weight(self, array: np.ndarray, hint: str) -> str:
        """A large constant: placed in the weights section by the caller of rebuild() when
        it fits (the graph then names it EXTERNAL, as rknnrt's own models do), else inlined."""
        if array.nbytes < EXTERNAL_MIN_BYTES:
            return self.const(array, hint)
        name = self.fresh(hint)
        tensor = self.graph.initializer.add()
        tensor.name = name
        tensor.data_type = oh.np_dtype_to_tensor_dtype(array.dtype)
        tensor.dims.extend(array.shape)
        self.external.append((tensor, np.ascontiguousarray(array)))
        return name

    def add(self, op: str, inputs: list[str], hint: str, **attrs: object) -> str:
        out = self.fresh(hint)
        self.nodes.append(oh.make_node(op, inputs, [out], **attrs))
        return out

    def value(self, t: Tensor) -> str:
        """The float32 value of tensor `t` (constants become initializers on first use;
        an int8 tensor's DequantizeLinear is made when first needed)."""
        if t.index not in self.values and t.index in self.int8_values:
            q, scale, zp = self.int8_values[t.index]
            self.values[t.index] = self.add("DequantizeLinear", [q, scale, zp], "dq")
        if t.index not in self.values:
            if t.kind not in CONST_KINDS:
                raise VendorFormatError(
                    f"vendor .rknn model: tensor '{t.name}' is used before any op writes it"
                )
            if t.layout_tag in (LAYOUT_NC1HWC2, LAYOUT_PACKED):
                raise VendorFormatError(
                    f"vendor .rknn model: constant '{t.name}' in an NPU layout (tag "
                    f"{t.layout_tag}) read by an element-wise op is not decoded"
                )
            array = self.m.const(t).astype(np.float32)
            if t.qnt_type == "int8" and t.scale:  # a quantised constant: its real values
                array = numerics.dequantize(array, t.scale[0], t.zp[0] if t.zp else 0)
            if t.shape and array.size >= int(np.prod(t.shape)):
                array = array[: int(np.prod(t.shape))].reshape(t.shape)
            self.values[t.index] = self.const(array, "const")
        return self.values[t.index]

    def conv_input(self, t: Tensor) -> str:
        """The float value of `t` for a Conv. An int8 tensor is dequantised arithmetically
        (Cast, Sub, Mul: the same float operations as DequantizeLinear) so that onnxruntime does
        not see the DequantizeLinear -> Conv pattern it would rewrite by quantising the float
        weights per tensor (its WeightBiasQuantization), which changes results."""
        if t.index not in self.int8_values:
            return self.value(t)
        if t.index not in self.conv_inputs:  # one dequantisation however many convs read it
            q, scale, zp = self.int8_values[t.index]
            x = self.add("Cast", [q], "i2f", to=TensorProto.FLOAT)
            zp_f = self.add("Cast", [zp], "zpf", to=TensorProto.FLOAT)
            deq = self.add("Mul", [self.add("Sub", [x, zp_f], "sub"), scale], "deq")
            self.conv_inputs[t.index] = deq
        return self.conv_inputs[t.index]

    def store(self, raw: str, t: Tensor) -> None:
        """Round op output `raw` to the stored type of tensor `t`, as the NPU stores it."""
        if t.qnt_type == "int8" and t.scale:
            scale = self.const(np.array(t.scale[0], np.float32), "scale")
            zp = self.const(np.array(t.zp[0] if t.zp else 0, np.int8), "zp")
            q = self.add("QuantizeLinear", [raw, scale, zp], "q")
            self.int8_values[t.index] = (q, scale, zp)
            self.values.pop(t.index, None)
            return
        elif t.dtype == "float16":
            half = self.add("Cast", [raw], "h", to=TensorProto.FLOAT16)
            raw = self.add("Cast", [half], "f", to=TensorProto.FLOAT)
        self.values[t.index] = raw


def _io_dtype(m: VendorModel, t: Tensor) -> str:
    dtype = m.io_types.get(t.name, {}).get("dtype") or t.dtype
    if dtype not in _ONNX_TYPES:
        raise VendorFormatError(
            f"vendor .rknn model: IO tensor '{t.name}' has unsupported type {dtype}"
        )
    return dtype


def _conv(b: GraphBuilder, n: Node) -> str:
    m = b.m
    ins = [m.tensors[i] for i in n.inputs]
    if len(ins) < 2:
        raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' lacks its weight")
    x, w = ins[:2]
    if m.npu_format not in VERIFIED_PACKINGS:
        raise VendorFormatError(
            f"vendor .rknn model: weight packing of NPU format '{m.npu_format}' "
            f"({m.platform}; op '{n.name}') is not verified"
        )
    # A convolution the compiler tiled (`*_tile1`) may come without a bias.
    bias = ins[2] if len(ins) > 2 and ins[2].kind in CONST_KINDS else None
    rest = ins[3:] if bias is not None else ins[2:]
    group = n.attr_int(CONV_GROUP, 1) or 1
    kernel = n.attr_ints(CONV_KERNEL)
    if len(w.shape) != 4 or not kernel:
        raise VendorFormatError(
            f"vendor .rknn model: op '{n.name}' has an undecodable weight shape"
        )
    oc, ic, kh, kw = w.shape
    depthwise = group > 1 and oc == 1 and ic == group
    if group > 1 and not depthwise:
        raise VendorFormatError(
            f"vendor .rknn model: grouped convolution '{n.name}' is not supported"
        )
    # The weights stay in their stored type inside the graph (half or a quarter of float32
    # bytes to serialise and load); onnxruntime folds the conversion once at session creation.
    if w.dtype == "float16":
        w16 = weights.unpack(m.data(w), "float16", w.native_shape, oc, ic, kh, kw, w.name)
        if depthwise:
            w16 = w16.reshape(ic, 1, kh, kw)
        weight = b.add("Cast", [b.weight(w16, "w")], "wf", to=TensorProto.FLOAT)
        channels = ic if depthwise else oc
        # (the compiler's depthwise convs for AveragePools come without a bias)
        bf = m.const(bias, "<f4") if bias is not None else np.zeros(channels, np.float32)
        if bf.size < channels:
            raise VendorFormatError(f"vendor .rknn model: the bias of '{n.name}' is too short")
        bf = bf[:channels]
    elif w.dtype == "int8":
        if bias is None:  # the scales are recovered from the bias blob
            raise VendorFormatError(f"vendor .rknn model: int8 op '{n.name}' without a bias blob")
        steps = _fusion_steps(n.op_type)
        operands = [t for t in rest if not is_helper(t)]
        mul_operand = operands[0] if steps == ["Mul"] and len(operands) == 1 else None
        conv = int8.conv_weights(b.regs, n, x, w, bias, m.tensors[n.outputs[0]], depthwise,
                                 _lut_activation(steps), mul_operand)  # fmt: skip
        per_channel = (-1, 1, 1, 1)
        q = b.add("Cast", [b.weight(conv.q, "wq")], "wqf", to=TensorProto.FLOAT)
        centred = b.add("Sub", [q, b.const(conv.zw.reshape(per_channel), "wzp")], "wc")
        weight = b.add("Mul", [centred, b.const(conv.scale.reshape(per_channel), "ws")], "wf")
        bf = conv.bias
    else:
        raise VendorFormatError(f"vendor .rknn model: conv weight type {w.dtype} is not supported")
    attrs = dict(kernel_shape=kernel, group=group)
    for key, slot in (("dilations", CONV_DILATIONS), ("pads", CONV_PADS),
                      ("strides", CONV_STRIDES)):  # fmt: skip
        value = n.attr_ints(slot)
        if value:
            attrs[key] = value
    y = b.add("Conv", [b.conv_input(x), weight, b.const(bf.astype(np.float32), "b")],
              "conv", **attrs)  # fmt: skip
    extra = [t for t in rest if not is_helper(t)]
    steps = _fusion_steps(n.op_type)
    for step in steps:
        if step in ("Add", "Mul"):
            if len(extra) != 1:
                raise VendorFormatError(
                    f"vendor .rknn model: {n.op_type} '{n.name}' needs one operand"
                )
            y = b.add(step, [y, b.value(extra[0])], "fused")
        elif step == "Relu":
            y = b.add("Relu", [y], "relu")
        elif b.quantized and _lut_activation(steps) is None:  # a table after other steps
            raise VendorFormatError(
                f"vendor .rknn model: int8 op {n.op_type} '{n.name}' (its pre-activation "
                "scale is not decoded) is not supported"
            )
        elif step == "Sigmoid":
            y = b.add("Sigmoid", [y], "sigmoid")
        else:  # ExSwish
            y = b.add("Mul", [y, b.add("Sigmoid", [y], "sigmoid")], "swish")
    return y


def _lut_activation(steps: list[str]) -> str | None:
    """The lookup-table activation whose table sets the conv's int8 scale (int8.py), if any."""
    return steps[0] if steps in (["Sigmoid"], ["ExSwish"]) else None


def _fusion_steps(op_type: str) -> list[str]:
    """'ConvAddRelu' -> ['Add', 'Relu']: what the compiler fused after the convolution."""
    steps = re.findall(r"Add|Mul|Relu|Sigmoid|ExSwish", op_type[4:])
    if "".join(steps) != op_type[4:]:
        raise VendorFormatError(f"vendor .rknn model: op {op_type} is not supported")
    return steps


def _elementwise(b: GraphBuilder, n: Node) -> str:
    real = [b.m.tensors[i] for i in n.inputs if not is_helper(b.m.tensors[i])]
    if len(real) != 2:
        raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' needs two operands")
    op = n.op_type.removesuffix("Relu")  # AddRelu: the compiler fused a Relu after the Add
    y = b.add(op, [b.value(real[0]), b.value(real[1])], op.lower())
    return b.add("Relu", [y], "relu") if op != n.op_type else y


def _split(b: GraphBuilder, n: Node) -> None:
    """Split (the compiler cuts wide convolutions along the channels): the parts' sizes are
    their stored shapes along the axis (attribute slot 0)."""
    x = _single(b, n)
    outs = [b.m.tensors[i] for i in n.outputs]
    axis = n.attr_int(AXIS, 1)
    if not 0 <= axis < len(x.shape) or any(len(t.shape) != len(x.shape) for t in outs):
        raise VendorFormatError(f"vendor .rknn model: Split '{n.name}' has an invalid axis")
    sizes = [t.shape[axis] for t in outs]
    if sum(sizes) != x.shape[axis]:
        raise VendorFormatError(f"vendor .rknn model: Split '{n.name}' parts do not add up")
    names = [b.fresh("split") for _ in outs]
    sizes_name = b.const(np.array(sizes, np.int64), "sizes")
    b.nodes.append(oh.make_node("Split", [b.value(x), sizes_name], names, axis=axis))
    for t, name in zip(outs, names):
        b.store(name, t)


def _single(b: GraphBuilder, n: Node) -> Tensor:
    if not n.inputs:
        raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' has no input")
    return b.m.tensors[n.inputs[0]]


def _op(b: GraphBuilder, n: Node, out: Tensor) -> str:
    kind = n.op_type
    if kind.startswith("Conv") and kind[4:5] in ("", "A", "M", "R", "S", "E"):
        return _conv(b, n)
    if kind in ("Add", "Mul", "Sub", "AddRelu"):
        return _elementwise(b, n)
    x = b.value(_single(b, n))
    if kind in ("Relu", "Sigmoid"):
        return b.add(kind, [x], kind.lower())
    if kind in PASS_THROUGH:
        return b.add("Identity", [x], "cvt")
    if kind == "Reshape":
        return b.add("Reshape", [x, b.const(np.array(out.shape, np.int64), "shape")], "reshape")
    if kind == "Transpose":
        perm = n.attr_ints(PERM)
        if not perm or sorted(perm) != list(range(len(out.shape))):
            raise VendorFormatError(f"vendor .rknn model: Transpose '{n.name}' has no valid perm")
        return b.add("Transpose", [x], "transpose", perm=perm)
    if kind == "Concat":
        real = [
            t
            for t in (b.m.tensors[i] for i in n.inputs)
            if not is_helper(t) and t.kind not in CONST_KINDS
        ]
        return b.add("Concat", [b.value(t) for t in real], "concat", axis=n.attr_int(AXIS, 1))
    if kind == "exSoftmax13":
        return b.add("Softmax", [x], "softmax", axis=n.attr_int(AXIS, -1))
    if kind == "MaxPool":
        return b.add(kind, [x], "maxpool", **window_ops.pool_attrs(n))
    if kind == "AveragePool":
        return window_ops.average_pool(b, x, n, _single(b, n), out)
    if kind == "LRN":
        return b.add("LRN", [x], "lrn", **window_ops.lrn_attrs(n))
    raise VendorFormatError(f"vendor .rknn model: op {kind} ('{n.name}') is not supported")


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


# Ops whose rebuilt form holds no shape (a dynamic-shape file's first graph serves every set).
SHAPE_FREE = ("InputOperator", "OutputOperator", "Add", "Mul", "Sub", "AddRelu", "Relu",
              "Sigmoid", "MaxPool", "LRN", *PASS_THROUGH)  # fmt: skip


def shape_free(op_type: str) -> bool:
    return op_type in SHAPE_FREE or (op_type.startswith("Conv") and op_type[4:5] in
                                     ("", "A", "M", "R", "S", "E"))  # fmt: skip


def _io_dims(m: VendorModel, t: Tensor, k: int, sets: list[list[list[int]]]) -> list:
    """Tensor t's dims, symbolic where the shape sets differ (dynamic-shape files)."""
    if m.shape_mode == "static_shape" or not sets:
        return list(t.shape)
    return [f"{t.name}_d{d}" if len({s[k][d] for s in sets}) > 1 else v
            for d, v in enumerate(t.shape)]  # fmt: skip


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
        elif dtype != "float32":
            b.values[t.index] = b.add("Cast", [t.name], "in", to=TensorProto.FLOAT)
        else:
            b.values[t.index] = b.add("Identity", [t.name], "in")
    for n in m.nodes:
        if n.op_type in ("InputOperator", "OutputOperator"):
            continue
        if not n.outputs:
            raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' has no output")
        if n.op_type == "Split":
            _split(b, n)
            continue
        out = m.tensors[n.outputs[0]]
        b.store(_op(b, n, out), out)
    graph_out = []
    for k, t in enumerate(outs):
        dtype = _io_dtype(m, t)
        dims = _io_dims(m, t, k, m.output_shape_sets)
        if t.index not in b.values and t.index not in b.int8_values:
            raise VendorFormatError(f"vendor .rknn model: no op writes output '{t.name}'")
        if dtype == "int8" and t.index in b.int8_values:  # already quantised with its own
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
    b.graph.name = m.model_name or "vendor"
    b.graph.node.extend(b.nodes)
    b.graph.input.extend(graph_in)
    b.graph.output.extend(graph_out)
    return b, ins, outs
