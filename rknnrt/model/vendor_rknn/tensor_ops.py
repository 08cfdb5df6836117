"""Element-wise ops, plain activations and the ops that move or reshape tensors."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto
from onnx import helper as oh

from ..errors import VendorFormatError
from .decoders import OpTable
from .fileformat import CONST_KINDS, Node
from .graph import GraphBuilder, operands, output, single

AXIS = 0  # Concat, Split, exSoftmax13: attribute slot
PERM = 0  # Transpose
OPS = OpTable()


@OPS.register("Add", "Mul", "Sub", "AddRelu", "Pow", shape_free=True)
def elementwise(b: GraphBuilder, n: Node) -> str:
    """A binary op (Pow: a YOLOv5 head's (2 sigmoid)^2, its exponent a float32 constant)."""
    real = operands(b, n)
    if len(real) != 2:
        raise VendorFormatError(f"vendor .rknn model: op {n.op_type} '{n.name}' needs two operands")
    op = n.op_type.removesuffix("Relu")  # AddRelu: the compiler fused a Relu after the Add
    y = b.add(op, [b.value(real[0]), b.value(real[1])], op.lower())
    return b.add("Relu", [y], "relu") if op != n.op_type else y


@OPS.register("Relu", "Sigmoid", shape_free=True)
def activation(b: GraphBuilder, n: Node) -> str:
    return b.add(n.op_type, [b.value(single(b, n))], n.op_type.lower())


@OPS.register("exDataConvert", shape_free=True)
def data_convert(b: GraphBuilder, n: Node) -> str:
    """A layout or type conversion: the value is unchanged (store() rounds it)."""
    return b.add("Identity", [b.value(single(b, n))], "cvt")


@OPS.register("Reshape")
def reshape(b: GraphBuilder, n: Node) -> str:
    x = b.value(single(b, n))
    shape = b.const(np.array(output(b, n).shape, np.int64), "shape")
    return b.add("Reshape", [x, shape], "reshape")


@OPS.register("Transpose")
def transpose(b: GraphBuilder, n: Node) -> str:
    x = b.value(single(b, n))
    perm = n.attr_ints(PERM)
    if not perm or sorted(perm) != list(range(len(output(b, n).shape))):
        raise VendorFormatError(f"vendor .rknn model: Transpose '{n.name}' has no valid perm")
    return b.add("Transpose", [x], "transpose", perm=perm)


@OPS.register("Concat")
def concat(b: GraphBuilder, n: Node) -> str:
    b.value(single(b, n))
    # (an absent axis is 0, FlatBuffers' default: a YOLOv5 head's detections, [48, 20, 20, 85],
    # [12, ...] and [3, ...] joined into [63, 20, 20, 85]; channel concats store their 1)
    axis, out = n.attr_int(AXIS, 0), output(b, n).shape
    real = [t for t in operands(b, n) if t.kind not in CONST_KINDS or _joins(t.shape, out, axis)]
    return b.add("Concat", [b.value(t) for t in real], "concat", axis=axis)


def _joins(shape: list[int], out: list[int], axis: int) -> bool:
    """Whether a constant of `shape` is a part of a Concat's output `out` along `axis` (a
    DeiT's class token, [1, 192, 1, 1] of [1, 192, 1, 197]), not one of the compiler's
    requantising conv weights int8 Concats carry (`<name>_conv_weight`, [24, 32, 1, 1])."""
    return len(shape) == len(out) and all(s == o for k, (s, o) in enumerate(zip(shape, out))
                                          if k != axis % max(len(out), 1))  # fmt: skip


@OPS.register("exSoftmax13")
def softmax(b: GraphBuilder, n: Node) -> str:
    return b.add("Softmax", [b.value(single(b, n))], "softmax", axis=n.attr_int(AXIS, -1))


@OPS.register("Split")
def split(b: GraphBuilder, n: Node) -> list[str]:
    """Split (the compiler cuts wide convolutions along the channels): the parts' sizes are
    their stored shapes along the axis (attribute slot 0; absent, FlatBuffers' 0: YOLOv8's
    head splits its [144, 1, 1, 8400] boxes and classes so)."""
    x = single(b, n)
    outs = [b.m.tensors[i] for i in n.outputs]
    axis = n.attr_int(AXIS, 0)
    if not 0 <= axis < len(x.shape) or any(len(t.shape) != len(x.shape) for t in outs):
        raise VendorFormatError(f"vendor .rknn model: Split '{n.name}' has an invalid axis")
    sizes = [t.shape[axis] for t in outs]
    if sum(sizes) != x.shape[axis]:
        raise VendorFormatError(f"vendor .rknn model: Split '{n.name}' parts do not add up")
    names = [b.fresh("split") for _ in outs]
    sizes_name = b.const(np.array(sizes, np.int64), "sizes")
    b.nodes.append(oh.make_node("Split", [b.value(x), sizes_name], names, axis=axis))
    return names


@OPS.register("Gather")
def gather(b: GraphBuilder, n: Node) -> str:
    """Gather with constant int64 indices along its axis (slot 0, absent 0): the compiler's
    dilated convolution (DeepLabV3's atrous convs: Gather, Pad, Gather of the rows and columns
    around a dense conv)."""
    x = single(b, n)
    consts = [t for t in operands(b, n)[1:] if t.kind in CONST_KINDS]
    axis, out = n.attr_int(AXIS, 0), output(b, n)
    if len(consts) != 1 or consts[0].dtype != "int64" or not 0 <= axis < len(x.shape):
        raise VendorFormatError(f"vendor .rknn model: Gather '{n.name}' is not supported")
    indices = b.m.const(consts[0]).reshape(-1)[: int(np.prod(consts[0].shape or [1]))]
    expected = [*x.shape[:axis], indices.size, *x.shape[axis + 1 :]]
    if out.shape != expected or indices.size == 0 or indices.min() < -x.shape[axis] \
            or indices.max() >= x.shape[axis]:  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: Gather '{n.name}' (axis {axis}, {indices.size} indices of "
            f"{x.shape}, output {out.shape}) is not supported"
        )
    return b.add("Gather", [b.value(x), b.const(indices.astype(np.int64), "idx")], "gather",
                 axis=axis)  # fmt: skip


@OPS.register("Slice")
def slice_op(b: GraphBuilder, n: Node) -> str:
    """Slice with ONNX's inputs (starts, ends, axes, steps: int64 constants)."""
    x = b.value(single(b, n))
    consts = [t for t in operands(b, n)[1:] if t.kind in CONST_KINDS]
    if not 2 <= len(consts) <= 4 or any(t.dtype != "int64" for t in consts):
        raise VendorFormatError(f"vendor .rknn model: Slice '{n.name}' has no int64 bounds")
    arrays = [b.m.const(t).reshape(-1) for t in consts]
    if len({a.size for a in arrays}) != 1 or (len(arrays) == 4 and not arrays[3].all()):
        raise VendorFormatError(f"vendor .rknn model: Slice '{n.name}' has invalid bounds")
    return b.add("Slice", [x, *(b.const(a, "slice") for a in arrays)], "slice")


PAD_MODE = 0  # Pad attribute slot


@OPS.register("Pad")
def pad(b: GraphBuilder, n: Node) -> str:
    """Pad (constant mode) with ONNX's inputs: int64 pads, then the constant value."""
    x = b.value(single(b, n))
    mode = n.attrs.string(PAD_MODE) if n.attrs is not None else None
    consts = [t for t in operands(b, n)[1:] if t.kind in CONST_KINDS]
    if (mode or "constant") != "constant" or not consts or consts[0].dtype != "int64":
        raise VendorFormatError(
            f"vendor .rknn model: Pad '{n.name}' (mode {mode}) is not supported"
        )
    pads = b.m.const(consts[0]).reshape(-1)
    value = b.m.const(consts[1]).astype(np.float32).reshape(-1) if len(consts) > 1 else \
        np.zeros(1, np.float32)  # fmt: skip
    if pads.size != 2 * len(single(b, n).shape) or value.size != 1 or pads.min() < 0:
        raise VendorFormatError(f"vendor .rknn model: Pad '{n.name}' has invalid pads")
    return b.add("Pad", [x, b.const(pads, "pads"), b.const(value.reshape(()), "value")], "pad",
                 mode="constant")  # fmt: skip


ARGMAX_AXIS, ARGMAX_KEEPDIMS, ARGMAX_LAST = 0, 1, 2  # ArgMax attribute slots


@OPS.register("ArgMax")
def argmax(b: GraphBuilder, n: Node) -> str:
    """ArgMax (a segmentation head's); the index is carried as float32 like every value of
    the rebuilt graph (exact below 2^24) and cast to the output's stored type at the end."""
    src = single(b, n)
    x = b.value(src)
    axis, keepdims, last = (n.attr_int(slot, default) for slot, default in
                            ((ARGMAX_AXIS, 0), (ARGMAX_KEEPDIMS, 1), (ARGMAX_LAST, 0)))  # fmt: skip
    if not -len(src.shape) <= axis < len(src.shape) or keepdims not in (0, 1) or \
            last not in (0, 1) or max(src.shape, default=0) >= 1 << 24:  # fmt: skip
        raise VendorFormatError(f"vendor .rknn model: ArgMax '{n.name}' is not supported")
    # named as the file's node: a custom op registered as "ArgMax" replaces it and reads
    # its "name" (docs/vendor-rknn.md, "Custom operators")
    index = b.add("ArgMax", [x], "argmax", name=n.name, axis=axis, keepdims=keepdims,
                  select_last_index=last)  # fmt: skip
    return b.add("Cast", [index], "argf", to=TensorProto.FLOAT)
