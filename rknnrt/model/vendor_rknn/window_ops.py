"""Window ops of a vendor file (MaxPool, AveragePool, LRN): their ONNX attributes from the
node's attribute table.

The attribute tables hold the ONNX attributes in alphabetical order; a field equal to the
ONNX default is not stored (FlatBuffers omits default scalars), so an absent field reads as
the ONNX default.

AveragePool is rebuilt as the simulator computes it (measured on ShuffleNet's 3x3 stride-2
pools, int8): the window's values summed in float32 in row-major order, then divided by the
count of values in the window. onnxruntime's own AveragePool accumulates in another order, which
flips the int8 rounding of exact ties (a value like -70.5 steps) in 0.5% of the outputs. The
runtime runs the Slices, Adds and Div written here as one kernel pass (core/program/
window_means.py).
"""

from __future__ import annotations

import numpy as np

from ..errors import VendorFormatError
from .decoders import OpTable
from .fileformat import Node, Tensor
from .graph import GraphBuilder, output, single

# MaxPool: auto_pad 0, ceil_mode 1, dilations 2, kernel_shape 3, pads 4, storage_order 5,
# strides 6. AveragePool: auto_pad 0, ceil_mode 1, count_include_pad 2, kernel_shape 3,
# pads 4, strides 5. LRN: alpha 0, beta 1, bias 2, size 3.
MAXPOOL_SLOTS = dict(ceil_mode=1, kernel_shape=3, pads=4, strides=6)
AVGPOOL_SLOTS = dict(ceil_mode=1, count_include_pad=2, kernel_shape=3, pads=4, strides=5)
AUTO_PAD = 0
LRN_ALPHA, LRN_BETA, LRN_BIAS, LRN_SIZE = 0, 1, 2, 3
LRN_DEFAULTS = (1e-4, 0.75, 1.0)
OPS = OpTable()


def pool_attrs(n: Node) -> dict[str, object]:
    """ONNX attributes of a MaxPool or AveragePool node."""
    slots = MAXPOOL_SLOTS if n.op_type == "MaxPool" else AVGPOOL_SLOTS
    auto_pad = n.attrs.string(AUTO_PAD) if n.attrs is not None else None
    if auto_pad not in (None, "", "NOTSET"):
        raise VendorFormatError(
            f"vendor .rknn model: {n.op_type} '{n.name}' with auto_pad {auto_pad!r} is not "
            "supported"
        )
    attrs: dict[str, object] = {}
    for key, slot in slots.items():
        if key in ("ceil_mode", "count_include_pad"):
            value = n.attr_int(slot, 0)
            if value not in (0, 1):
                raise VendorFormatError(
                    f"vendor .rknn model: {n.op_type} '{n.name}' has an invalid {key} {value}"
                )
            attrs[key] = value
        elif n.attr_ints(slot):
            attrs[key] = n.attr_ints(slot)
    kernel = attrs.get("kernel_shape")
    if not kernel or min(kernel) <= 0:  # type: ignore[call-overload]
        raise VendorFormatError(f"vendor .rknn model: {n.op_type} '{n.name}' has no kernel shape")
    return attrs


def lrn_attrs(n: Node) -> dict[str, object]:
    """ONNX attributes of an LRN node (alpha, beta, bias as float32, size)."""
    if n.attrs is None:
        raise VendorFormatError(f"vendor .rknn model: LRN '{n.name}' has no attributes")
    size = int(n.attrs.scalar(LRN_SIZE, "<i", 0))
    alpha, beta, bias = (float(n.attrs.scalar(slot, "<f", default))
                         for slot, default in zip((LRN_ALPHA, LRN_BETA, LRN_BIAS),
                                                  LRN_DEFAULTS))  # fmt: skip
    if not 0 < size <= 1024 or not bias > 0:
        raise VendorFormatError(
            f"vendor .rknn model: LRN '{n.name}' has invalid attributes (size {size}, bias {bias})"
        )
    return dict(size=size, alpha=alpha, beta=beta, bias=bias)


def average_pool(b: GraphBuilder, x: str, n: Node, src: Tensor, out: Tensor) -> str:
    """AveragePool as a row-major float32 sum of strided slices divided by the per-position
    count (pads excluded unless count_include_pad)."""
    attrs = pool_attrs(n)
    kernel = list(attrs["kernel_shape"])  # type: ignore[call-overload]
    rank = len(kernel)
    strides = list(attrs.get("strides") or [1] * rank)  # type: ignore[call-overload]
    pads = list(attrs.get("pads") or [0] * (2 * rank))  # type: ignore[call-overload]
    if (rank != 2 or len(src.shape) != 4 or len(out.shape) != 4 or len(strides) != 2
            or len(pads) != 4 or min(strides) <= 0 or min(pads) < 0
            or max(pads[0], pads[2]) >= kernel[0] or max(pads[1], pads[3]) >= kernel[1]
            or kernel[0] * kernel[1] > 1024 or out.shape[:2] != src.shape[:2]):  # fmt: skip
        raise VendorFormatError(
            f"vendor .rknn model: AveragePool '{n.name}' ({attrs}, input {src.shape}, output "
            f"{out.shape}) is not supported"
        )
    size_in, size_out = src.shape[2:], out.shape[2:]
    extra = []
    for d in range(2):
        span = size_in[d] + pads[d] + pads[d + 2] - kernel[d]
        expected = {span // strides[d] + 1}
        if attrs["ceil_mode"]:
            expected.add(-(-span // strides[d]) + 1)
        if span < 0 or size_out[d] not in expected:
            raise VendorFormatError(
                f"vendor .rknn model: AveragePool '{n.name}' output {out.shape} does not fit "
                f"its input {src.shape} and attributes {attrs}"
            )
        # ceil_mode's last window may reach past the end padding: zeros, not counted
        extra.append(max(0, (size_out[d] - 1) * strides[d] + kernel[d] - span - kernel[d]))
    begin = [pads[0], pads[1]]
    end = [pads[2] + extra[0], pads[3] + extra[1]]
    if any(begin + end):
        pad_sizes = np.array([0, 0, *begin, 0, 0, *end], np.int64)
        x = b.add("Pad", [x, b.const(pad_sizes, "pads")], "pad")
    # the count per output position, from a mask of the values the mean includes
    mask = np.zeros([size_in[d] + begin[d] + end[d] for d in range(2)], np.float32)
    if attrs["count_include_pad"]:
        mask[: mask.shape[0] - extra[0], : mask.shape[1] - extra[1]] = 1
    else:
        mask[begin[0] : begin[0] + size_in[0], begin[1] : begin[1] + size_in[1]] = 1
    counts = np.zeros(size_out, np.float32)
    total = None
    axes = b.const(np.array([2, 3], np.int64), "axes")
    steps = b.const(np.array(strides, np.int64), "steps")
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            stop = [i + (size_out[0] - 1) * strides[0] + 1, j + (size_out[1] - 1) * strides[1] + 1]
            counts += mask[i : stop[0] : strides[0], j : stop[1] : strides[1]]
            part = b.add("Slice", [x, b.const(np.array([i, j], np.int64), "starts"),
                                   b.const(np.array(stop, np.int64), "ends"), axes, steps],
                         "window")  # fmt: skip
            total = part if total is None else b.add("Add", [total, part], "wsum")
    if counts.min() <= 0:
        raise VendorFormatError(f"vendor .rknn model: AveragePool '{n.name}' has an empty window")
    return b.add("Div", [total, b.const(counts.reshape(1, 1, *size_out), "count")], "avgpool")


@OPS.register("MaxPool", shape_free=True)
def max_pool(b: GraphBuilder, n: Node) -> str:
    return b.add("MaxPool", [b.value(single(b, n))], "maxpool", **pool_attrs(n))


@OPS.register("AveragePool")
def average_pool_op(b: GraphBuilder, n: Node) -> str:
    return average_pool(b, b.value(single(b, n)), n, single(b, n), output(b, n))


@OPS.register("LRN", shape_free=True)
def lrn(b: GraphBuilder, n: Node) -> str:
    return b.add("LRN", [b.value(single(b, n))], "lrn", **lrn_attrs(n))
