"""rknn_matmul_run against numpy's float32 matmul on the same data, in one process.

For each (M, K, N) and each main rknn_matmul_type, a context is created on the emulated SoC that
has the type (RKNNRT_PLATFORM), A, B and C are bound (NORM layouts, memory the script owns), and
`rknn_matmul_run` is timed against `np.matmul(A32, B32)` where A32 and B32 are the same matrices
as float32 arrays made beforehand. The two are timed alternately, each going first half of the
time, so that machine noise hits both alike; the ratio printed is the median of the ratios of
neighbouring runs (the times printed are each side's median).

    python benchmarks/matmul.py [--repeat N] [--quick] [--threads N]

--threads N sets OPENBLAS_NUM_THREADS/OMP_NUM_THREADS/MKL_NUM_THREADS before numpy loads, for
both sides alike. The default is 1: on small shared machines (2 vCPUs) a multi-threaded BLAS
waits for its threads in timer-sized steps (4-8 ms) that swamp what is measured; 0 keeps
numpy's own choice. --quick skips (256, 4096, 4096).

Targets: ratio <= 1.2 for float types, <= 2.5 for integer types.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

SHAPES = [(1, 4096, 4096), (64, 1024, 1024), (256, 4096, 4096)]
# (type, platform that has it, B quantisation): the types of UG Table 3-6 that users reach for.
TYPES = [
    ("RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32", "rk3588", "PER_LAYER_SYM"),
    ("RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16", "rk3588", "PER_LAYER_SYM"),
    ("RKNN_FLOAT16_MM_INT8_TO_FLOAT32", "rk3576", "PER_CHANNEL_SYM"),
    ("RKNN_FLOAT16_MM_INT4_TO_FLOAT16", "rk3576", "PER_GROUP_SYM"),
    ("RKNN_INT8_MM_INT8_TO_INT32", "rk3588", "PER_LAYER_SYM"),
    ("RKNN_INT8_MM_INT8_TO_INT8", "rk3588", "PER_CHANNEL_SYM"),
    ("RKNN_INT8_MM_INT8_TO_FLOAT32", "rk3588", "PER_GROUP_SYM"),
    ("RKNN_INT4_MM_INT4_TO_INT16", "rk3588", "PER_LAYER_SYM"),
]
FLOAT_TARGET, INT_TARGET = 1.2, 2.5
GROUP_SIZE = 32
BUDGET_S = 2.0  # wanted timed seconds per side and case (9 to 300 runs)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=0, help="timed runs per side (default: auto)")
    parser.add_argument("--quick", action="store_true", help="skip (256, 4096, 4096)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads, both sides (0: auto)")
    return parser.parse_args()


ARGS = parse()
if ARGS.threads:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ctypes  # noqa: E402

import numpy as np  # noqa: E402

import rknnrt as rk  # noqa: E402

RNG = np.random.default_rng(0)


def matrix(dtype: str, shape: tuple[int, int]) -> np.ndarray:
    if dtype == "float16":
        return RNG.uniform(-1, 1, shape).astype(np.float16)
    bound = 8 if dtype == "int4" else 128
    return RNG.integers(-bound, bound, shape).astype(np.int8)


def pack_int4(values: np.ndarray) -> np.ndarray:
    flat = values.reshape(-1).astype(np.uint8) & 0x0F
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


def memory(buf: np.ndarray) -> rk.rknn_tensor_mem:
    mem = rk.rknn_tensor_mem()
    mem.virt_addr, mem.size, mem.fd = buf.ctypes.data, buf.nbytes, -1
    return mem


def set_quant(ctx: rk.rknn_matmul_ctx, name: bytes, scale: np.ndarray) -> None:
    params = rk.rknn_quant_params()
    params.name = name
    scale = np.ascontiguousarray(scale, np.float32)
    params.scale, params.scale_len = (
        scale.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
        scale.size,
    )
    assert rk.rknn_matmul_set_quant_params(ctx, params) == 0


class Case:
    """One bound matmul context and the float32 copies of its A and B."""

    def __init__(self, type_name: str, platform: str, quant: str, shape: tuple[int, int, int]):
        os.environ["RKNNRT_PLATFORM"] = platform
        m, k, n = shape
        a_type, rest = type_name.removeprefix("RKNN_").lower().split("_mm_")
        b_type, c_type = rest.split("_to_")
        info = rk.rknn_matmul_info()
        info.M, info.K, info.N, info.type = m, k, n, getattr(rk, type_name)
        info.B_quant_type = getattr(rk, "RKNN_QUANT_TYPE_" + quant)
        info.group_size = GROUP_SIZE if quant.startswith("PER_GROUP") else 0
        self.ctx, self.io = rk.rknn_matmul_ctx(), rk.rknn_matmul_io_attr()
        assert rk.rknn_matmul_create(self.ctx, info, self.io) == 0
        a, b = matrix(a_type, (m, k)), matrix(b_type, (k, n))
        scales = {"PER_LAYER_SYM": 1, "PER_CHANNEL_SYM": n, "PER_GROUP_SYM": k // GROUP_SIZE * n}
        if a_type != "float16" or b_type != "float16":
            set_quant(self.ctx, b"B", RNG.uniform(0.001, 0.01, scales[quant]))
        if c_type == "int8":
            set_quant(self.ctx, b"C", np.array([500.0]))
        self.buffers = [
            pack_int4(a) if a_type == "int4" else a,
            pack_int4(b) if b_type == "int4" else b,
            np.zeros(self.io.C.size, np.uint8),
        ]
        for buf, attr in zip(self.buffers, (self.io.A, self.io.B, self.io.C)):
            assert rk.rknn_matmul_set_io_mem(self.ctx, memory(buf), attr) == 0
        self.a32, self.b32 = a.astype(np.float32), b.astype(np.float32)
        self.is_float = a_type == "float16"  # float types: fp16 A; integer types: int A

    def ours(self) -> None:
        if rk.rknn_matmul_run(self.ctx) != 0:
            raise RuntimeError("rknn_matmul_run failed")

    def numpy(self) -> None:
        np.matmul(self.a32, self.b32)

    def close(self) -> None:
        rk.rknn_matmul_destroy(self.ctx)


def timed(func) -> float:  # noqa: ANN001
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def measure(case: Case, repeat: int) -> tuple[float, float, float]:
    """(median run time, median numpy time, median of the paired ratios)."""
    for _ in range(2):  # warm up both (caches, BLAS threads, rknnrt's prepared B)
        case.ours()
        case.numpy()
    if not repeat:
        one = timed(case.numpy)
        repeat = int(min(300, max(9, BUDGET_S / max(one, 1e-6))))
    ours, base = [], []
    for i in range(repeat):  # ABBA: each side goes first half of the time
        if i % 2 == 0:
            ours.append(timed(case.ours))
            base.append(timed(case.numpy))
        else:
            base.append(timed(case.numpy))
            ours.append(timed(case.ours))
    ratios = [o / b for o, b in zip(ours, base)]  # neighbours in time share the machine's mood
    return statistics.median(ours), statistics.median(base), statistics.median(ratios)


def main() -> int:
    shapes = SHAPES[:2] if ARGS.quick else SHAPES
    print(
        f"numpy {np.__version__}; BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}"
    )
    header = (
        f"{'type':36} {'platform':8} {'M,K,N':16} {'run ms':>9} {'numpy ms':>9} {'ratio':>6} target"
    )
    print(header)
    print("-" * len(header))
    failures = 0
    for shape in shapes:
        for type_name, platform, quant in TYPES:
            case = Case(type_name, platform, quant, shape)
            try:
                ours, base, ratio = measure(case, ARGS.repeat)
            finally:
                case.close()
            target = FLOAT_TARGET if case.is_float else INT_TARGET
            ok = ratio <= target
            failures += not ok
            mkn = ",".join(map(str, shape))
            name = type_name.removeprefix("RKNN_")
            verdict = "ok" if ok else "MISSED"
            print(f"{name:36} {platform:8} {mkn:16} {ours * 1e3:9.3f} {base * 1e3:9.3f} "
                  f"{ratio:6.2f} <= {target} {verdict}")  # fmt: skip
    print(f"{failures} of {len(shapes) * len(TYPES)} over target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
