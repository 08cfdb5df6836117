"""The ONNX graph a vendor file is rebuilt into, and the rounding rules every decoder uses.

The graph computes what the vendor's simulator computes: every stored tensor is rounded to its
stored type after the op that writes it (fp16 tensors by a Cast round trip, int8 tensors by
QuantizeLinear/DequantizeLinear with the tensor's own scale and zero point), while the ops run
in float32.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as oh

from .. import numerics
from ..errors import VendorFormatError
from . import int8
from .fileformat import CONST_KINDS, Node, Tensor, VendorModel

EXTERNAL_MIN_BYTES = 4096
LAYOUT_NC1HWC2, LAYOUT_PACKED = 64, 65  # tensor field 1


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
        self.outputs = set(model.outputs)
        self.unsigned: set[int] = set()  # int8 tensors held as uint8 (store)
        self.quantized = any(t.qnt_type == "int8" for t in model.tensors)
        self.regs = int8.RegisterFile(model) if self.quantized else None
        self._registers = self.regs
        self._n = 0

    def registers(self) -> int8.RegisterFile:
        """The ops' register values (read on first use in a float model)."""
        if self._registers is None:
            self._registers = int8.RegisterFile(self.m)
        return self._registers

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
        self.nodes.append(make_node(op, inputs, [out], attrs))
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
            array = self.m.const(t)
            if t.layout_tag == LAYOUT_NC1HWC2:
                array = from_nc1hwc2(array, t)
            elif t.layout_tag == LAYOUT_PACKED:
                raise VendorFormatError(
                    f"vendor .rknn model: {t.dtype} constant '{t.name}' in an NPU layout (tag "
                    f"{t.layout_tag}) read by an element-wise op is not decoded"
                )
            array = array.astype(np.float32)
            # a quantised constant: its real values (an int8 NC1HWC2 one, a YOLOv5 head's grid,
            # leaves its quantisation type empty)
            if "int8" in (t.qnt_type, t.dtype) and t.scale:
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
            self.conv_inputs[t.index] = self._dequantize_arith(*self.int8_values[t.index])
        return self.conv_inputs[t.index]

    def _dequantize_arith(self, q: str, scale: str, zp: str) -> str:
        """(q - zp) * scale by Cast, Sub, Mul: DequantizeLinear's float operations, in a form
        onnxruntime's QDQ fusions do not recognise."""
        x = self.add("Cast", [q], "i2f", to=TensorProto.FLOAT)
        zp_f = self.add("Cast", [zp], "zpf", to=TensorProto.FLOAT)
        return self.add("Mul", [self.add("Sub", [x, zp_f], "sub"), scale], "deq")

    def on_grid(self, x: str, scale: float, zp: int, hint: str) -> str:
        """Float value `x` rounded to an int8 grid no tensor stores (an intermediate the vendor's
        simulator rounds): QuantizeLinear, then back arithmetically (`_dequantize_arith`), so
        that onnxruntime never computes the op reading it in integers (QDQ fusion)."""
        s = self.const(np.array(scale, np.float32), hint + "_s")
        z = self.const(np.array(zp, np.int8), hint + "_zp")
        return self._dequantize_arith(self.add("QuantizeLinear", [x, s, z], hint + "_q"), s, z)

    def store(self, raw: str, t: Tensor) -> None:
        """Round op output `raw` to the stored type of tensor `t`, as the NPU stores it."""
        if t.qnt_type == "int8" and t.scale:
            scale = self.const(np.array(t.scale[0], np.float32), "scale")
            zp = t.zp[0] if t.zp else 0
            # an int8 tensor inside the graph is held as uint8 on the same grid (q + 128,
            # zp + 128): onnxruntime's x86 QDQ fusions take uint8 activations only (as
            # rknnrt's converter writes them, toolkit/quantize/qdq.py); outputs stay int8
            unsigned = t.index not in self.outputs
            zp_name = self.const(np.array(zp + 128, np.uint8) if unsigned
                                 else np.array(zp, np.int8), "zp")  # fmt: skip
            q = self.add("QuantizeLinear", [raw, scale, zp_name], "q")
            self.int8_values[t.index] = (q, scale, zp_name)
            if unsigned:
                self.unsigned.add(t.index)
            self.values.pop(t.index, None)
            return
        elif t.dtype == "float16":
            raw = self.to_float16(raw)
        self.values[t.index] = raw

    def to_float16(self, x: str) -> str:
        """Float value `x` rounded to float16 (and held in float32)."""
        half = self.add("Cast", [x], "h", to=TensorProto.FLOAT16)
        return self.add("Cast", [half], "f", to=TensorProto.FLOAT)


def from_nc1hwc2(array: np.ndarray, t: Tensor) -> np.ndarray:
    """Constant `t`'s values, stored NC1HWC2 (native shape [N, C1, H, W, C2], C1 x C2 >= C, the
    padding channels last), in its NCHW shape: a YOLOv5 head's grid ([1, 80, 80, 2] as
    [1, 10, 80, 2, 8]) and anchors, a DeiT's class token and position embedding. Each (n, c1)
    plane of H x W positions of C2 values may be padded at its end (anchors [3, 1, 1, 2]: 4
    positions a plane; a position embedding of 197 tokens: 200): the plane's stride is the
    stored size over N x C1. Refused where the shapes or the size do not fit that layout."""
    native, shape = list(t.native_shape), list(t.shape)
    fits = len(native) == 5 and len(shape) == 4 and native[0] == shape[0] \
        and native[2:4] == shape[2:4] and (native[1] - 1) * native[4] < shape[1] <= \
        native[1] * native[4]  # fmt: skip
    planes = native[0] * native[1] if fits else 0
    stride = array.size // planes if planes else 0
    if not fits or stride * planes != array.size or stride % native[4] \
            or stride < native[2] * native[3] * native[4]:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: constant '{t.name}' in the NC1HWC2 layout (native shape "
            f"{native}, shape {shape}, {array.size} values) is not decoded"
        )
    n, c1, h, w, c2 = native
    plane = array.reshape(n, c1, stride // c2, c2)[:, :, : h * w]
    planar = plane.reshape(n, c1, h, w, c2).transpose(0, 1, 4, 2, 3)
    return planar.reshape(n, c1 * c2, h, w)[:, : shape[1]]


_NODE_FIELDS = frozenset({"name", "doc_string", "domain", "overload"})
_INT, _FLOAT = onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT
_STRING, _INTS, _FLOATS = onnx.AttributeProto.STRING, onnx.AttributeProto.INTS, \
    onnx.AttributeProto.FLOATS


def make_node(op: str, inputs: list[str], outputs: list[str],
              attrs: dict[str, object]) -> onnx.NodeProto:  # fmt: skip
    """onnx.helper.make_node(op, inputs, outputs, **attrs), the same message, with the kinds
    of attribute the decoders pass (Python ints, floats, strings and non-empty lists of ints
    or of floats) set directly: the helper's type inference was a tenth of a vendor file's
    load. Any other value goes through the helper."""
    if _NODE_FIELDS.intersection(attrs):
        return oh.make_node(op, inputs, outputs, **attrs)
    node = onnx.NodeProto(op_type=op, input=inputs, output=outputs)
    for key in sorted(attrs):
        value = attrs[key]
        if value is None:
            continue
        kind = type(value)
        if kind is int:
            node.attribute.add(name=key, i=value, type=_INT)
        elif kind is float:
            node.attribute.add(name=key, f=value, type=_FLOAT)
        elif kind is str:
            node.attribute.add(name=key, s=value.encode("utf-8"), type=_STRING)
        elif kind in (list, tuple) and value and all(type(v) is int for v in value):
            node.attribute.add(name=key, ints=value, type=_INTS)
        elif kind in (list, tuple) and value and all(type(v) is float for v in value):
            node.attribute.add(name=key, floats=value, type=_FLOATS)
        else:
            node.attribute.append(oh.make_attribute(key, value))
    return node


def single(b: GraphBuilder, n: Node) -> Tensor:
    """The first input of `n` (every op has one)."""
    if not n.inputs:
        raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' has no input")
    return b.m.tensors[n.inputs[0]]


def operands(b: GraphBuilder, n: Node) -> list[Tensor]:
    """The inputs of `n` less the compiler's helpers."""
    return [t for t in (b.m.tensors[i] for i in n.inputs) if not is_helper(t)]


def output(b: GraphBuilder, n: Node) -> Tensor:
    """The first output of `n` (rebuild.py checks every op has one)."""
    return b.m.tensors[n.outputs[0]]
