"""onnxruntime's int8 convolution kernels against its float32 ones on this CPU, in one run.

What an int8 program can gain here depends on the CPU: onnxruntime multiplies uint8 activations
by int8 weights (u8s8), exactly where the CPU adds products in 32 bits (VNNI, AMX) and in
saturating 16-bit pairs otherwise (AVX2's PMADDUBSW), where rknnrt runs the exact u8u8 kernels
instead (sessions/int8_kernels.py). For conv shapes of the real-architecture set (MobileNet
expansions and projections, a 3x3 stem-like conv, a wide 3x3, a classifier-side 1x1), each as
one QDQ Conv that onnxruntime fuses into QLinearConv, this times, alternating:

    float     Conv on float32 (onnxruntime's float kernels, the baseline)
    fast0     u8s8, weight zero points 0          (fast kernels; exact only with VNNI/AMX)
    fast      u8s8, per-channel weight zero points (as the vendor's and rknnrt's weights are)
    exact     u8u8 (session.x64quantprecision), per-channel weight zero points

one thread, and prints the medians with their ratios to float, the probe's verdict and the CPU's
int8 features. On the 2-core AMD EPYC of 2026-12-03 (AVX2, no VNNI; --repeat 20) the geometric
means were fast0 1.03, fast 1.10, exact 1.12 (per shape 0.86-1.34): here onnxruntime's int8
convolutions are no faster than its float32 ones, even the saturating kernels, so an int8
program cannot beat float32 by its convolutions on such a CPU (issue 25's closing note).

    python benchmarks/int8_kernels.py [--repeat N]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.runtimes import alternate  # noqa: E402
from rknnrt.sessions import int8_kernels  # noqa: E402

# (input channels, output channels, kernel, spatial size)
SHAPES = [(16, 72, 1, 56), (72, 24, 1, 28), (32, 192, 1, 56), (192, 32, 1, 56),
          (16, 16, 3, 112), (64, 64, 3, 56), (96, 576, 1, 7)]  # fmt: skip
KINDS = ("fast0", "fast", "exact")


def _qdq_conv(cin: int, cout: int, k: int, size: int, zero_points: np.ndarray) -> bytes:
    rng = np.random.RandomState(0)
    consts = {
        "w": rng.randint(-128, 128, (cout, cin, k, k)).astype(np.int8),
        "ws": (rng.rand(cout) * 0.01 + 0.001).astype(np.float32), "wz": zero_points,
        "xs": np.array(0.02, np.float32), "xz": np.array(10, np.uint8),
        "ys": np.array(0.05, np.float32), "yz": np.array(128, np.uint8),
    }  # fmt: skip
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("Conv", ["xf", "wf"], ["yf"], pads=[k // 2] * 4),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"])]  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, cin, size, size])
    graph = helper.make_graph(
        nodes, "qconv", [x],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        [numpy_helper.from_array(v, n) for n, v in consts.items()])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _float_conv(cin: int, cout: int, k: int, size: int) -> bytes:
    w = np.random.RandomState(0).randn(cout, cin, k, k).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[k // 2] * 4)], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _session(model: bytes, exact: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.add_session_config_entry("session.force_spinning_stop", "1")
    if exact:
        options.add_session_config_entry("session.x64quantprecision", "1")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return "unknown"
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
    return " ".join(f for f in wanted if f in flags) or "none of avx2/avx512/vnni/amx"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    exact_fast = int8_kernels.fast_kernels_exact()
    print(f"CPU int8 features: {_cpu_flags()}; probe: fast u8s8 kernels "
          f"{'exact' if exact_fast else 'saturate (rknnrt runs exact u8u8)'}")  # fmt: skip
    print(f"{'conv (cin cout k size)':24s} {'float ms':>9s} "
          + " ".join(f"{k + '/float':>12s}" for k in KINDS))  # fmt: skip
    ratios: dict[str, list[float]] = {k: [] for k in KINDS}
    for cin, cout, k, size in SHAPES:
        zero = np.zeros(cout, np.int8)
        varying = np.random.RandomState(2).randint(-40, 40, cout).astype(np.int8)
        x8 = np.random.RandomState(1).randint(0, 256, (1, cin, size, size)).astype(np.uint8)
        xf = x8.astype(np.float32)
        sessions = {"float": (_session(_float_conv(cin, cout, k, size), False), xf),
                    "fast0": (_session(_qdq_conv(cin, cout, k, size, zero), False), x8),
                    "fast": (_session(_qdq_conv(cin, cout, k, size, varying), False), x8),
                    "exact": (_session(_qdq_conv(cin, cout, k, size, varying), True), x8)}
        runs = {name: (lambda s=s, x=x: s.run(None, {"x": x})) for name, (s, x) in sessions.items()}
        med = alternate(runs, args.repeat)
        cells = []
        for kind in KINDS:
            ratios[kind].append(med[kind] / med["float"])
            cells.append(f"{med[kind] / med['float']:12.2f}")
        print(f"{f'{cin} {cout} {k} {size}':24s} {med['float']:9.3f} {' '.join(cells)}", flush=True)
    geo = [math.exp(sum(map(math.log, v)) / len(v)) for v in ratios.values()]
    print(f"{'geometric mean':24s} {'':9s} {' '.join(f'{g:12.2f}' for g in geo)}")


if __name__ == "__main__":
    main()
