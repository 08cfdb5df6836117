"""int8 and fp16 speed on the real-architecture set against onnxruntime float32, in one run.

For each network of tools/real_arch (seeded weights, real input size unless --test), build
int8 (--calib uniform[0,1) samples, `normal`/`channel`) and fp16 with rknnrt.toolkit.RKNN,
load each through rknnrt.lite.RKNNLite, and time one inference (inputs set, run, float
outputs) against onnxruntime.InferenceSession(original).run on the same input. The baseline
is fair: the same intra-op threads as the programs (onnxruntime's default unless
RKNNRT_NUM_THREADS), its workers' spinning stopped after each run as rknnrt's sessions do,
and the three runtimes alternate iteration by iteration. Prints medians, the ratios and their
geometric means.

    PYTHONPATH=. python benchmarks/real_arch.py [--repeat N] [--models a,b] [--test] [--calib N]
        [--kinds int8,fp16] [--kinds int8f,int8] [--rounds N]

With --rounds N each network is timed in N rounds of the alternation; the table shows the
medians over the rounds, each round's ratios beside them, and each round's geometric mean
after it (on a shared machine one round's ratio of a ~2 ms network moves by 10-20 %).

Kind `int8f` is the same int8 file initialised with RKNNRT_INT8_DW_KERNEL=0 (depthwise convs as
exact float convs instead of rknnrt's compiled kernel, sessions/kernels): `--kinds int8f,int8`
shows the kernel's before/after in one run, alternating. Kind `int8v` is it with
RKNNRT_INT8_CONV_KERNEL=0 (dense float-island convs as float convs on integers instead of the
compiled VNNI kernel, core/program/qconv_kernel.py; the same file where the CPU has no VNNI).
Kind `int8b` is it with RKNNRT_INT8_BYTE_MAP_KERNEL=0 (the int8 input's DequantizeLinear,
QuantizeLinear and Transpose as onnxruntime's nodes instead of one table pass,
core/program/byte_maps.py). Kind `int8m` is it with RKNNRT_INT8_CHANNEL_MUL_KERNEL=0 (the
squeeze-and-excitation multiplies as onnxruntime's QLinearMul instead of one kernel pass,
core/program/channel_muls.py). Kind `int8s` is it with RKNNRT_INT8_EXACT_SOFTMAX=0
(onnxruntime's QLinearSoftmax fusion, core/program/softmax_quantize.py). Kind `fp16c` is the
fp16 file with
RKNNRT_FP16_ROUND_KERNEL=0 (its float16 roundings as Cast pairs instead of the compiled
one-pass kernel, core/program/fp16_round.py): `--kinds fp16c,fp16`. Kind `fp16p` is it with
RKNNRT_FP16_BLOCKED_OPS=0 (global average pools and squeeze-and-excitation multiplies out of
onnxruntime's blocked layout instead of on rknnrt's kernels, core/program/fp16_blocked_ops.py).
Kind `fp16t` is it with RKNNRT_FP16_TABLES=0 (its element-wise chains between roundings, GELU's
for one, op by op instead of as one table pass each, core/program/fp16_tables.py).
Kind `int8a` is the int8 file with the dense int8 kernel held to its AVX-VNNI path while it runs
(sessions/kernels/qconv_avx.c, the path of CPUs with AVX-VNNI and no AVX-512), on a CPU that
has both: `--kinds int8a,int8`. Kind `int8r` is the int8 file with RKNNRT_INT8_RESIDUAL_KERNEL=0
(a residual's Add, Relu/Clip and QuantizeLinear after a conv on the dense kernel as onnxruntime's
float ops instead of in the kernel's pass, core/program/conv_epilogue.py).

Targets (issue 25): int8 <= 1.0x onnxruntime float32 on every network (geometric mean
<= 0.8x), fp16 <= 1.2x.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Callable

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.runtimes import alternate, baseline_options, build  # noqa: E402
from rknnrt.core import switches  # noqa: E402
from rknnrt.lite import RKNNLite  # noqa: E402
from rknnrt.sessions import int8_kernels, kernels  # noqa: E402
from tools.real_arch import catalog  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--models", default="")
    parser.add_argument("--test", action="store_true", help="reduced input sizes")
    parser.add_argument("--calib", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1,
                        help="time each network in this many rounds of --repeat alternations; "
                             "print each round's ratios and their medians")  # fmt: skip
    parser.add_argument("--kinds", default="int8,fp16",
                        help="programs to time: int8, fp16, int8f (int8 without the compiled "
                             "depthwise kernel), int8v (without the VNNI conv kernel), int8b "
                             "(without the input's table pass), int8m (without the channel "
                             "multiply kernel), int8s (with onnxruntime's QLinearSoftmax), int8a "
                             "(the dense int8 kernel on its AVX-VNNI path), int8r (residual "
                             "Adds as onnxruntime's ops), fp16c "
                             "(fp16 without the compiled rounding kernel), fp16p (fp16 with its "
                             "pools and gates out of the blocked layout), fp16t (fp16 with its "
                             "element-wise chains op by op)")  # fmt: skip
    args = parser.parse_args()
    names = [n for n in catalog.NETWORKS if not args.models or n in args.models.split(",")]
    exact = int8_kernels.fast_kernels_exact()
    print(f"int8 kernels: {'fast u8s8 (probed exact on this CPU)' if exact else 'exact u8u8'}")
    kinds = [k for k in KINDS if k in args.kinds.split(",")]
    if "int8a" in kinds and not _has_avx_vnni():
        print("kind int8a left out: this CPU has no AVX-VNNI")
        kinds.remove("int8a")
    print(f"{'network':24s} {'ort f32 ms':>10s} " + " ".join(f"{k + ' ms':>9s}" for k in kinds)
          + " " + " ".join(f"{k + '/ort':>9s}" for k in kinds), flush=True)  # fmt: skip
    ratios: dict[str, list[float]] = {k: [] for k in kinds}  # per network, over the rounds
    round_ratios: dict[tuple[str, int], list[float]] = {}  # (kind, round) -> per network
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            model = catalog.build(name, test=args.test)
            shape = catalog.input_shape(name, args.test)
            rng = np.random.RandomState(0)
            calib = [[rng.rand(*shape).astype(np.float32)] for _ in range(args.calib)]
            x = rng.rand(*shape).astype(np.float32)
            session = ort.InferenceSession(model.SerializeToString(), baseline_options(),
                                           providers=["CPUExecutionProvider"])  # fmt: skip
            runtimes = _runtimes(model, kinds, calib, os.path.join(folder, name))
            runs: dict[str, Callable[[], object]] = {
                "ort": lambda s=session, x=x: s.run(None, {"images": x})}
            for k, r in runtimes.items():
                runs[k] = lambda r=r, x=x: r.inference([x], data_format="nchw")
            if "int8a" in runs:
                runs["int8a"] = lambda run=runs["int8a"]: _on_avx_vnni(run)
            rounds = [alternate(runs, args.repeat) for _ in range(args.rounds)]
            by_round = [{k: r[k] / r["ort"] for k in kinds} for r in rounds]
            med = {k: statistics.median(r[k] for r in rounds) for k in runs}
            rel = {k: statistics.median(r[k] for r in by_round) for k in kinds}
            for k in kinds:
                ratios[k].append(rel[k])
                for i, r in enumerate(by_round):
                    round_ratios.setdefault((k, i), []).append(r[k])
            cells = [f"{med[k]:9.2f}" for k in kinds] + [f"{rel[k]:9.2f}" for k in kinds]
            each = "" if args.rounds == 1 else "   rounds: " + "; ".join(
                f"{k} " + " ".join(f"{r[k]:.2f}" for r in by_round) for k in kinds)  # fmt: skip
            print(f"{name:24s} {med['ort']:10.2f} {' '.join(cells)}{each}", flush=True)
            for r in runtimes.values():
                r.release()
    geo = {k: _geomean(v) for k, v in ratios.items() if v}
    pad = " ".join(f"{'':9s}" for _ in kinds)
    print(f"{'geometric mean':24s} {'':10s} {pad} {' '.join(f'{geo[k]:9.2f}' for k in kinds)}")
    if args.rounds > 1:  # each round's own geometric mean: what a one-round run would print
        for k in kinds:
            means = [_geomean(round_ratios[k, i]) for i in range(args.rounds)]
            print(f"{k} geometric mean per round: " + " ".join(f"{m:.2f}" for m in means))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


KINDS = ("int8f", "int8v", "int8b", "int8m", "int8s", "int8a", "int8r", "int8", "fp16c", "fp16p",
         "fp16t", "fp16")
# a variant: (the kind whose file it loads, the switch it loads that file with at 0, or None)
VARIANTS = {"int8f": ("int8", switches.INT8_DW_KERNEL),
            "int8v": ("int8", switches.INT8_CONV_KERNEL),
            "int8b": ("int8", switches.INT8_BYTE_MAP_KERNEL),
            "int8m": ("int8", switches.INT8_CHANNEL_MUL_KERNEL),
            "int8s": ("int8", switches.INT8_EXACT_SOFTMAX),
            "int8a": ("int8", None),
            "int8r": ("int8", switches.INT8_RESIDUAL_KERNEL),
            "fp16c": ("fp16", switches.FP16_ROUND_KERNEL),
            "fp16p": ("fp16", switches.FP16_BLOCKED_OPS),
            "fp16t": ("fp16", switches.FP16_TABLES)}


def _runtimes(model, kinds: list[str], calib: list, stem: str) -> dict[str, RKNNLite]:
    """One initialised runtime per kind; a variant shares its kind's file (each built once)."""
    out: dict[str, RKNNLite] = {}
    for kind, quantize in (("int8", True), ("fp16", False)):
        variants = [v for v, (base, _) in VARIANTS.items() if base == kind and v in kinds]
        if kind not in kinds and not variants:
            continue
        path = f"{stem}.{kind}.rknn"
        out[kind] = build(model, quantize, calib if quantize else None, path)
        for variant in variants:
            switch = VARIANTS[variant][1]
            with switches.override(switch, "0") if switch else contextlib.nullcontext():
                out[variant] = _load(path)
        if kind not in kinds:
            out.pop(kind).release()
    return {k: out[k] for k in kinds}


def _has_avx_vnni() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return "avx_vnni" in f.read().split()
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    return ctypes.CDLL(str(kernels.library(switches.cache_root())))


def _on_avx_vnni(run: Callable[[], object]) -> object:
    """run() with the dense int8 kernel's widest path set to AVX-VNNI (the library's test hook,
    process-wide: set back to AVX-512 afterwards; the library looked up once, outside the
    timing's cost)."""
    library = _library()
    library.rknnrt_qconv_max_level(1)
    try:
        return run()
    finally:
        library.rknnrt_qconv_max_level(2)


def _load(path: str) -> RKNNLite:
    lite = RKNNLite()
    lite.load_rknn(path)
    if lite.init_runtime() != 0:
        raise RuntimeError("init_runtime failed")
    return lite


if __name__ == "__main__":
    main()
