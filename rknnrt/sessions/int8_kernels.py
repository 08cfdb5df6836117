"""Whether onnxruntime's fast x86 int8 kernels are exact on this CPU: a one-off probe.

onnxruntime multiplies uint8 activations by int8 weights (u8s8). On x86 CPUs without VNNI its
kernels add each pair of neighbouring products in saturating 16-bit arithmetic (PMADDUBSW):
255 x 127 x 2 = 64770 is clamped to 32767, which the NPU never does. Its
`session.x64quantprecision` setting rewrites every int8 weight tensor holding a value beyond
+-64 as uint8 so that exact (slower) u8u8 kernels run. With VNNI (or AMX) the u8s8 kernels add
products in 32 bits and are exact already; the setting then only costs time (int8 ShuffleNet
1.05x -> 0.81x, SqueezeNet 0.84x -> 0.48x onnxruntime float32, one thread).

The probe runs, once per process, the kernels an int8 program uses -- a 1x1 convolution with
per-channel weight zero points (im2col + GEMM), one with zero points 0 (the symmetric-conv
kernels), a depthwise convolution, a 3x3 convolution and a one-row matrix product -- on inputs
at 255 and weights at 127 and -128 everywhere: every pair of products then lies beyond the
16-bit range whichever pairs a kernel forms, so a saturating kernel gives another result
(tests/perf/test_int8_kernels.py checks that the probe's exact and clamped results differ).
Only when all of them equal the exact kernels' results, bit for bit, are the fast kernels
used; any error keeps the exact ones.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .policies import KERNEL_PROBE, open_session, session_options

_lock = threading.Lock()
_verdict: list[bool] = []  # [] until probed

# (name, input shape, weight shape, group, per-channel weight zero points?)
CASES = (
    ("pointwise", [1, 32, 3, 3], [8, 32, 1, 1], 1, True),
    ("symmetric", [1, 32, 3, 3], [8, 32, 1, 1], 1, False),
    ("depthwise", [1, 16, 4, 4], [16, 1, 3, 3], 16, True),
    ("kernel3x3", [1, 16, 5, 5], [8, 16, 3, 3], 1, True),
)
GEMM_CASE = ("one_row", [1, 64], [64, 8])


def out_scale(depth: int) -> float:
    """An output grid on which the exact sums of `depth` products (at most 255 x 128 x depth)
    span about 100 steps: neither clipped nor rounded together with the clamped ones."""
    return float(255 * 128 * depth // 100)


def probe_weights(shape: list[int]) -> np.ndarray:
    """127 in even output channels, -128 in odd ones: every product pair saturates."""
    w = np.full(shape, 127, np.int8)
    w[1::2] = -128
    return w


def _probe_model() -> Any:
    import onnx  # not at `import rknnrt`

    h = onnx.helper
    nodes, inits, inputs, outputs = [], [], [], []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(onnx.numpy_helper.from_array(value, name))
        return name

    def activation(name: str, shape: list[int]) -> str:
        """A uint8 activation (a graph input: constants would be folded before any kernel
        ran), dequantised with scale 1 and zero point 0."""
        q = f"{name}_x"
        inputs.append(h.make_tensor_value_info(q, onnx.TensorProto.UINT8, shape))
        scale = const(f"{name}_s", np.array(1.0, np.float32))
        zero = const(f"{name}_z", np.array(0, np.uint8))
        nodes.append(h.make_node("DequantizeLinear", [q, scale, zero], [f"{name}_dq"]))
        return f"{name}_dq"

    def weight(name: str, w: np.ndarray, per_channel_zp: bool, axis: int) -> str:
        channels = w.shape[axis]
        zp = np.arange(channels, dtype=np.int8) % 3 - 1 if per_channel_zp else \
            np.zeros(channels, np.int8)  # fmt: skip
        nodes.append(h.make_node(
            "DequantizeLinear", [const(f"{name}_w", w),
                                 const(f"{name}_ws", np.ones(channels, np.float32)),
                                 const(f"{name}_wz", zp)], [f"{name}_wdq"], axis=axis))  # fmt: skip
        return f"{name}_wdq"

    def requantise(name: str, source: str, depth: int) -> None:
        s = const(f"{name}_os", np.array(out_scale(depth), np.float32))
        z = const(f"{name}_oz", np.array(128, np.uint8))
        nodes.append(h.make_node("QuantizeLinear", [source, s, z], [f"{name}_q"]))
        nodes.append(h.make_node("DequantizeLinear", [f"{name}_q", s, z], [name]))
        outputs.append(h.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))

    for name, x_shape, w_shape, group, per_channel in CASES:
        x = activation(name, x_shape)
        w = weight(name, probe_weights(w_shape), per_channel, 0)
        k = w_shape[2]
        nodes.append(h.make_node("Conv", [x, w], [f"{name}_acc"], group=group,
                                 kernel_shape=[k, k], pads=[k // 2] * 4))  # fmt: skip
        requantise(name, f"{name}_acc", w_shape[1] * k * k)
    name, x_shape, w_shape = GEMM_CASE
    x = activation(name, x_shape)
    w = weight(name, probe_weights(w_shape[::-1]).T.copy(), True, 1)
    nodes.append(h.make_node("MatMul", [x, w], [f"{name}_acc"]))
    requantise(name, f"{name}_acc", w_shape[0])
    graph = h.make_graph(nodes, "u8s8_probe", inputs, outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


def probe_outputs(exact: bool) -> list[np.ndarray]:
    """The probe's outputs with the exact kernels (`exact`) or the fast ones."""
    options = session_options(KERNEL_PROBE, None, exact)
    session = open_session(_probe_model().SerializeToString(), options)
    feed = {i.name: np.full(i.shape, 255, np.uint8) for i in session.get_inputs()}
    return session.run(None, feed)


def fast_kernels_exact() -> bool:
    """True when onnxruntime's u8s8 kernels gave the exact kernels' results on the probe
    (probed once per process; False on any error)."""
    with _lock:
        if not _verdict:
            try:
                exact, fast = probe_outputs(True), probe_outputs(False)
                _verdict.append(all(a.tobytes() == b.tobytes() for a, b in zip(exact, fast)))
            except Exception:  # a probe that cannot run proves nothing: keep exact kernels
                _verdict.append(False)
        return _verdict[0]
