"""model/numerics.py's hot calls against the inline numpy they replaced, in one run.

The runtime quantises an int8 model's input in place (core/io/plans.py: divide, rint, add zp,
clip, cast) and dequantises its int8 outputs (core/io/conversions.py); both now call
numerics.quantize / numerics.dequantize. This times each against the former inline sequence on
the same arrays, alternating the two, and prints the median ratio. Measured on the shared
2-core machine: 1.0 at 150528 elements, ~1.1 (2-3 us of call overhead) at 1000; dequantise
0.8-0.9 (one copy fewer).

    PYTHONPATH=. python benchmarks/numerics.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from rknnrt.model import numerics

SIZES = (1000, 4095, 150528)  # a small input, the largest numpy converts, 1x3x224x224
SCALE, ZP = 0.0123, 5


def inline_quantize(x: np.ndarray, work: np.ndarray, out: np.ndarray) -> None:
    np.copyto(work, x)
    np.divide(work, SCALE, out=work)
    np.rint(work, out=work)
    work += ZP
    np.clip(work, -128, 127, out=work)
    np.copyto(out, work, casting="unsafe")


def call_quantize(x: np.ndarray, work: np.ndarray, out: np.ndarray) -> None:
    np.copyto(work, x)
    numerics.quantize(work, SCALE, ZP, work=work, out=out)


def inline_dequantize(q: np.ndarray) -> np.ndarray:
    return (q.astype(np.float32) - ZP) * np.float32(SCALE)


def call_dequantize(q: np.ndarray) -> np.ndarray:
    return numerics.dequantize(q, SCALE, ZP)


def median_ratio(a: Callable[[], object], b: Callable[[], object], repeat: int) -> float:
    """median of b's time / a's time, timed alternately (each call repeated to ~1 ms)."""
    start = time.perf_counter()
    a()
    inner = max(1, int(1e-3 / max(time.perf_counter() - start, 1e-7)))
    ratios = []
    for _ in range(repeat):
        times = []
        for f in (a, b):
            start = time.perf_counter()
            for _ in range(inner):
                f()
            times.append(time.perf_counter() - start)
        ratios.append(times[1] / times[0])
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'elements':>9} {'quantize call/inline':>21} {'dequantize call/inline':>23}")
    for n in SIZES:
        x = rng.normal(0, 1, n).astype(np.float32)
        work, out = np.empty(n, np.float32), np.empty(n, np.int8)
        q = rng.integers(-128, 128, n).astype(np.int8)
        inline_quantize(x, work, out)
        expected = out.copy()
        call_quantize(x, work, out)
        assert np.array_equal(out, expected)  # the same values, or the timing means nothing
        assert np.array_equal(call_dequantize(q), inline_dequantize(q))
        qr = median_ratio(lambda x=x, w=work, o=out: inline_quantize(x, w, o),
                          lambda x=x, w=work, o=out: call_quantize(x, w, o),
                          args.repeat)  # fmt: skip
        dr = median_ratio(lambda q=q: inline_dequantize(q), lambda q=q: call_dequantize(q),
                          args.repeat)  # fmt: skip
        print(f"{n:>9} {qr:>21.3f} {dr:>23.3f}")


if __name__ == "__main__":
    main()
