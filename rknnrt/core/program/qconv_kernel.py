"""Dense int8 convs, Gemms and MatMuls on rknnrt's compiled VNNI kernel (sessions/kernels,
qconv.c), for int8_islands.py: an output requantised (QLinearConv's arithmetic) or kept in
float32 (y = float32(acc) * m).

The vendor's weights are asymmetric per output channel. onnxruntime's int8 kernels take
per-channel weight zero points on a slower path (benchmarks/int8_kernels.py on an AVX-512
VNNI CPU: 0.64x its float32 conv with them, 0.49x with zero points 0), and a conv whose
output is not stored (a float island) runs as a float conv on integers. The kernel sums
u8 x s8 products with VPDPBUSD and corrects for the weight zero point once per pixel:

    acc = sum x s - z[c] sum x + (bias[c] - xz sum s + K xz z[c])

the same int32 as QLinearConv's sum (x - xz)(w - wz[c]) + bias[c] (weights written as
s - z = w - wz, s int8), then the same float32 requantisation. A conv runs as

    Transpose(NHWC) -> rknnrt.kernels::ConvInt8_u8<y>(packed s, -z and corrections, m)
        -> Transpose(NCHW)

(a Gemm or MatMul reads its rows as they are, no Transposes): the Transposes cancel against
those onnxruntime puts around its NHWC int8 ops, and between two such convs. Outputs are
bit-identical to the paths they replace (tests/perf/test_qconv_kernel.py).

It runs only where it is faster: on a CPU with AVX-512 VNNI, or AVX-VNNI (its 256-bit form:
Intel's client CPUs from Alder Lake on have it without AVX-512; on this AVX-512 machine that
path runs MobileNetV2 int8 at 0.97x onnxruntime's AVX-512 float32, the 512-bit one at 0.72x,
without the kernel 1.36x: benchmarks/real_arch.py --kinds int8v,int8a,int8); without VNNI
onnxruntime's exact u8u8 kernels and the float islands are as fast as an exact int8 kernel can
be (stop 33's note). uint8 activations,
and every |acc| below 2^31. `available()`: RKNNRT_INT8_CONV_KERNEL, the library built
(dw_kernel.library_ready) and the CPU's VNNI.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

from ...sessions import kernels
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel

_UINT8, _INT8, _FLOAT = 2, 3, 1  # onnx.TensorProto.UINT8, INT8, FLOAT
_SHORT = {_UINT8: "u8", _INT8: "s8", _FLOAT: "f"}
_INT32_LIMIT = 2**31
# The most products per sum of a conv onnxruntime fuses into QLinearConv the kernel takes where
# onnxruntime's int8 GEMMs run on AMX (`fused_depth`): MobileNets' expansions fall below it.
SHALLOW = 128
_facts: dict[tuple[str, str], bool] = {}  # (library path, function) -> its answer on this CPU


def available() -> bool:
    """Whether dense int8 convs go on the compiled kernel here (the switch, the library, and
    AVX-512 VNNI or AVX-VNNI: the only CPUs where it is faster than onnxruntime's own
    kernels)."""
    if not switches.int8_conv_kernel() or not dw_kernel.library_ready():
        return False
    return _cpu_fact("rknnrt_qconv_vnni")


def fused_depth() -> float:
    """The most products per sum of a dense uint8 conv onnxruntime would fuse into QLinearConv
    that the kernel takes instead: 0 where the kernel is not `available`; SHALLOW where
    onnxruntime's int8 GEMMs run on AMX (a 2-core AMX Xeon, one thread, 1x1 convs: the
    kernel took 0.61-0.89x QLinearConv's time up to 96 input channels, 1.01-1.14x at 160,
    1.2-1.75x for the deep projections); every depth elsewhere (a 2-core Zen 5 with AVX-512
    VNNI and no AMX, two threads, all fused convs on the kernel instead of the shallow ones,
    int8 / onnxruntime float32 in one alternating run: MobileNetV3-small 1.055 -> 0.948,
    EfficientNet-B0 0.81 -> 0.77, ResNet-18 0.42 -> 0.35, SqueezeNet 0.61 -> 0.52)."""
    if not available():
        return 0
    return SHALLOW if _cpu_fact("rknnrt_cpu_amx_int8") else math.inf


def _cpu_fact(function: str) -> bool:
    """A yes/no CPU fact of the loaded library (its cpu_facts.c or qconv.c), asked once."""
    path = kernels.loaded()
    if path is None:
        return False
    key = (str(path), function)
    if key not in _facts:
        _facts[key] = bool(getattr(ctypes.CDLL(key[0]), function)())
    return _facts[key]


def pack(centred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(packed int8 weights [OCB, K4, 16, 4], z [OC]) for `centred` weights (OC, K) in the
    kernel's K order: s = centred + z within int8 for each channel (z as near 0 as allowed)."""
    oc, k = centred.shape
    low, high = centred.min(axis=1, initial=0), centred.max(axis=1, initial=0)
    z = np.clip(0, -128 - low, 127 - high).astype(np.int64)
    s = (centred + z[:, None]).astype(np.int8)
    blocks, quads = -(-oc // 16), -(-k // 4)
    padded = np.zeros((blocks * 16, quads * 4), np.int8)
    padded[:oc, :k] = s
    packed = padded.reshape(blocks, 16, quads, 4).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(packed), z


def takes(centred: np.ndarray, bias: np.ndarray | None, reach: int,
          stored_int8: bool = False) -> bool:  # fmt: skip
    """Whether the kernel takes weights `centred` (OC, ...): every accumulator within int32
    for inputs at most `reach` steps from their zero point (its sums wrap otherwise), and not
    a windowed conv of fewer than 8 input channels (a stem) unless its output is stored in
    int8 (`stored_int8`), and each channel's weights within 255 of each other (pack's int8 s).
    A stem's windows of 3 bytes cost more to gather than onnxruntime's float conv of such a
    depth takes (0.38 vs 0.28 ms at 224x224x3 with a float output), but its float path then
    also runs the activation and QuantizeLinear as passes over the float tensor, which the
    kernel does in its own pass (HardSwish stems: 0.53-0.93x the float chain's time), and
    onnxruntime's QLinearConv of a Relu stem is slower still (3 -> 32 channels, 3x3 stride 2
    at 224x224, both with their Transposes: 0.17 vs 0.30 ms at one thread, 0.13 vs 0.20 at
    two)."""
    if centred.ndim == 4 and centred.shape[1] < 8 and centred.shape[2] * centred.shape[3] > 1 \
            and not stored_int8:  # fmt: skip
        return False
    flat = centred.reshape(centred.shape[0], -1)
    if (flat.max(axis=1, initial=0) - flat.min(axis=1, initial=0)).max(initial=0) > 255:
        return False  # no int8 s with one z per channel (w - wz of 8-bit weights never is)
    total = np.abs(flat).sum(axis=1) * reach
    if bias is not None:
        total = total + np.abs(bias.astype(np.int64))
    return bool(total.max(initial=0) < _INT32_LIMIT)


def nodes(node: Any, x: str, xz: int, out: str, y_type: int, yz: int, centred: np.ndarray,
          bias: np.ndarray | None, m: np.ndarray, base: str, taken: set[str],
          act: dict | None = None,
          skip: str | None = None) -> tuple[list, list] | None:  # fmt: skip
    """(nodes, initializers) computing the int8 `node` (Conv with group 1 and 2-D geometry, or
    Gemm/MatMul with weights `centred` as (N, K)) of the uint8 tensor `x` into `out`, or None
    when the kernel does not take it. `centred`: the weights minus their zero points, (OC,
    C, KH, KW) for a Conv; `m` per channel: (xs * ws) / ys for an int8 `y_type`, xs * ws for
    FLOAT (then `yz` is unused) or with `act` (hardswish 1, alpha, beta, y_scale: the conv's
    HardSwish and QuantizeLinear, fused). With `skip`, a uint8 tensor shaped as the output
    (NCHW for a Conv), `act` holds a residual's attributes (conv_epilogue.residual_after) and
    the op is ConvInt8Add: the conv's value plus the dequantised `skip`, clipped, quantised."""
    if y_type not in _SHORT:
        return None
    conv = node.op_type == "Conv"
    if conv:
        geometry = dw_kernel.attributes(node, centred.ndim)
        if geometry is None:
            return None
        oc, _, kh, kw = centred.shape
        flat = centred.transpose(0, 2, 3, 1).reshape(oc, -1)  # K in (kh, kw, c) order
    else:
        geometry, flat, (kh, kw) = {}, centred.reshape(centred.shape[0], -1), (1, 1)
        oc = flat.shape[0]
    names = [f"{base}_{k}" for k in ("nhwc", "qw", "qq", "qm", "knhwc", "snhwc")]
    if any(n in taken for n in names):
        return None
    taken.update(names)
    x_nhwc, w_n, q_n, m_n, y_nhwc, skip_nhwc = names
    packed, z = pack(flat)
    blocks = packed.shape[0]
    s_sum = (flat + z[:, None]).sum(axis=1)
    b = bias.astype(np.int64) if bias is not None else np.zeros(oc, np.int64)
    corr = b - xz * s_sum + flat.shape[1] * xz * z
    q = np.zeros((2, blocks * 16), np.int64)
    q[0, :oc], q[1, :oc] = -z, corr
    scale = np.zeros(blocks * 16, np.float32)
    scale[:oc] = np.asarray(m, np.float32).reshape(-1)
    inits = [onnx.numpy_helper.from_array(packed, w_n),
             onnx.numpy_helper.from_array(q.astype(np.int32), q_n),  # wraps as the kernel sums
             onnx.numpy_helper.from_array(scale, m_n)]  # fmt: skip
    make = onnx.helper.make_node
    zero = {} if y_type == _FLOAT else {"y_zero_point": int(yz)}
    kernel_out = y_nhwc if conv else out
    inputs = [x_nhwc if conv else x, w_n, q_n, m_n]
    if skip is not None:
        inputs.append(skip_nhwc if conv else skip)
    kind = "ConvInt8Add" if skip is not None else "ConvInt8"
    op = make(f"{kind}_u8{_SHORT[y_type]}", inputs, [kernel_out], name=f"{base}_kernel",
              domain=kernels.DOMAIN, kernel_h=int(kh), kernel_w=int(kw), channels=int(oc),
              x_zero_point=int(xz), **zero, **geometry, **(act or {}))  # fmt: skip
    if not conv:
        return [op], inits
    into = [make("Transpose", [x], [x_nhwc], perm=[0, 2, 3, 1], name=f"{x_nhwc}_t")]
    if skip is not None:
        into.append(make("Transpose", [skip], [skip_nhwc], perm=[0, 2, 3, 1],
                         name=f"{skip_nhwc}_t"))  # fmt: skip
    return [*into, op,
            make("Transpose", [y_nhwc], [out], perm=[0, 3, 1, 2], name=f"{y_nhwc}_t")], inits
