"""Depthwise int8 convs on rknnrt's compiled kernel (sessions/kernels, dwconv.c), for the two
rewrites that meet them: int8_depthwise.py (a stored output, requantised) and int8_islands.py
(an output kept in float32: y = float32(acc) * m, or stored in the other int8 type).

A conv runs as

    Transpose(NHWC) -> rknnrt.kernels::DepthwiseConvInt8_<x><y>(w - wz, bias, m) -> Transpose(NCHW)

on the int8 tensor: the integer sum and the float32 product of the float chains it replaces
(whose every step is exact or the same float32 operation), so the values are the same bit for
bit (tests/perf/test_dw_kernel.py). The Transposes cancel against the NHWC ones onnxruntime
puts around its neighbouring int8 ops, which needs the shapes: onnxruntime infers none through
a custom op, so the conv's recorded output shape is declared for both new tensors.

`available()` builds or finds the library once per call site (RKNNRT_INT8_DW_KERNEL=0: never);
where it cannot be built (no C compiler, a failed compile, an unwritable cache) the float
chains stay, and one W line per process says why (`library_ready`, which fp16_round.py's
rounding kernel shares).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...sessions import kernels
from .. import log, switches
from ..lazy_imports import onnx

_SHORT = {2: "u8", 3: "s8", 1: "f"}  # onnx.TensorProto.UINT8, INT8, FLOAT
_warned = False


def available() -> bool:
    """Whether the compiled depthwise kernel can run here (RKNNRT_INT8_DW_KERNEL, and the
    library built or found in the cache now)."""
    return switches.int8_dw_kernel() and library_ready()


def library_ready() -> bool:
    """Whether rknnrt's compiled kernel library is built or found in the cache now; where it
    cannot be, one W line per process says why (its users then keep their exact, slower
    graphs: this module's float chains, fp16_round's Cast pairs)."""
    global _warned
    try:
        kernels.library(switches.cache_root())
    except kernels.KernelsUnavailable as exc:
        if not _warned:
            _warned = True
            log.warning(f"int8 depthwise convs run as float convs and float16 roundings as "
                        f"Cast pairs (slower): {exc}")  # fmt: skip
        return False
    return True


def import_domain(model: Any) -> None:
    """Declare the kernels' domain in `model` when a node uses it."""
    if any(node.domain == kernels.DOMAIN for node in model.graph.node) and not any(
        o.domain == kernels.DOMAIN for o in model.opset_import
    ):
        model.opset_import.append(onnx.helper.make_opsetid(kernels.DOMAIN, 1))


def _attr(node: Any, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def attributes(conv: Any, rank: int) -> dict | None:
    """The kernel's geometry for a 2-D conv with explicit (or VALID) padding, else None."""
    if rank != 4 or _attr(conv, "auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID"):
        return None
    strides = list(_attr(conv, "strides", [1, 1]))
    dilations = list(_attr(conv, "dilations", [1, 1]))
    pads = list(_attr(conv, "pads", [0, 0, 0, 0]))
    if len(strides) != 2 or len(dilations) != 2 or len(pads) != 4:
        return None
    if min(strides + dilations) < 1 or min(pads) < 0:
        return None
    return {"stride_h": strides[0], "stride_w": strides[1], "dilation_h": dilations[0],
            "dilation_w": dilations[1], "pad_top": pads[0], "pad_left": pads[1],
            "pad_bottom": pads[2], "pad_right": pads[3]}  # fmt: skip


def nodes(conv: Any, x: str, x_type: int, xz: int, out: str, y_type: int, yz: int,
          centred: np.ndarray, bias: np.ndarray | None, m: np.ndarray, base: str,
          taken: set[str], act: dict | None = None) -> tuple[list, list] | None:  # fmt: skip
    """(nodes, initializers) computing the depthwise `conv` of the int8 tensor `x` into `out`
    (NCHW) on the kernel, or None when the kernel does not take it (or a name is taken).
    `centred`: the weights minus their zero points, (C, 1, KH, KW); `m`: per channel,
    (xs * ws) / ys for an int8 `y_type`, xs * ws for FLOAT (then `yz` is unused) or with `act`
    (hardswish 1, alpha, beta, y_scale: the conv's HardSwish and QuantizeLinear, fused)."""
    geometry = attributes(conv, centred.ndim)
    if geometry is None or x_type not in (2, 3) or y_type not in _SHORT:
        return None
    names = [f"{base}_{k}" for k in ("nhwc", "kw", "kb", "km", "knhwc")]
    if any(n in taken for n in names):
        return None
    taken.update(names)
    x_nhwc, w_n, b_n, m_n, y_nhwc = names
    channels = centred.shape[0]
    bias = bias if bias is not None else np.zeros(channels, np.int64)
    inits = [
        onnx.numpy_helper.from_array(
            np.ascontiguousarray(centred[:, 0].transpose(1, 2, 0)).astype(np.int32), w_n),
        onnx.numpy_helper.from_array(np.asarray(bias).astype(np.int32).reshape(-1), b_n),
        onnx.numpy_helper.from_array(np.asarray(m, np.float32).reshape(-1), m_n),
    ]  # fmt: skip
    make = onnx.helper.make_node
    op = f"DepthwiseConvInt8_{_SHORT[x_type]}{_SHORT[y_type]}"
    zero = {} if y_type == 1 else {"y_zero_point": int(yz)}
    made = [
        make("Transpose", [x], [x_nhwc], perm=[0, 2, 3, 1], name=f"{x_nhwc}_t"),
        make(op, [x_nhwc, w_n, b_n, m_n], [y_nhwc], name=f"{y_nhwc}_k", domain=kernels.DOMAIN,
             x_zero_point=int(xz), **zero, **geometry, **(act or {})),  # fmt: skip
        make("Transpose", [y_nhwc], [out], perm=[0, 3, 1, 2], name=f"{y_nhwc}_t"),
    ]
    return made, inits


def shapes(conv_shape: Any, base: str, out: str, y_type: int) -> list:
    """The value_info of the kernel's NHWC output and of `out`, from the conv's recorded output
    shape (a TensorShapeProto or None): without them onnxruntime keeps the next int8 conv in
    NCHW between two more Transposes."""
    if conv_shape is None or len(conv_shape.dim) != 4:
        return []
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in conv_shape.dim]  # fmt: skip
    nhwc = [dims[i] for i in (0, 2, 3, 1)]
    return [onnx.helper.make_tensor_value_info(f"{base}_knhwc", y_type, nhwc),
            onnx.helper.make_tensor_value_info(out, y_type, dims)]
