"""rknnrt's general API against plain onnxruntime, in one process, on the same inputs.

For each "light" model in the onnx package's backend test data, convert it with
``rknnrt.toolkit.RKNN``, ``rknn_init`` the blob and time one inference through the general API
(rknn_inputs_set FLOAT32 NCHW + rknn_run + rknn_outputs_get(want_float=1) +
rknn_outputs_release) against ``onnxruntime.InferenceSession(original.onnx).run``. The two are
timed alternately, iteration by iteration (in ABBA order), so that machine noise hits both
alike; each timed call follows an untimed one of the same runtime (see `interleave`). A one-op
model then measures the fixed per-inference overhead and where it goes.

    python benchmarks/overhead.py [--repeat N] [--models a,b] [--quick] [--threads N]
                                  [--no-settle] [--no-one-op]

--threads N sets onnxruntime's intra_op_num_threads and RKNNRT_NUM_THREADS (read at rknn_init)
alike; by default both use onnxruntime's default. --quick skips vgg19, alexnet and zfnet512
(vgg19 alone takes ~20 s and ~2 GB to convert).

Targets: rknnrt/ORT median ratio <= 1.10 per model; fixed overhead <= 50 us per inference.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

MODELS = [
    "light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
    "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512",
]  # fmt: skip
HEAVY = {"light_vgg19", "light_bvlc_alexnet", "light_zfnet512"}  # skipped by --quick
RATIO_TARGET = 1.10
OVERHEAD_TARGET_US = 50.0
MIN_REPEAT, MAX_REPEAT = 30, 200  # per side, per model
BUDGET_S = 3.0  # wanted timed seconds per side and model, within the bounds above
ONE_OP_REPEAT = 5000
ONE_OP_WARMUP = 200


def light_dir() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers (IR < 4 lists every initializer as an input)."""
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def np_dtype(vi: onnx.ValueInfoProto) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))


def ort_options(threads: int | None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.log_severity_level = 3  # old-IR "initializer is also an input" warnings
    if threads is not None:
        options.intra_op_num_threads = threads
    return options


def check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} returned {status}")


class RknnRunner:
    """One rknn context plus the C structs of the general API, made once and reused."""

    def __init__(self, rk, blob: bytes, feeds: list[np.ndarray]) -> None:
        self.rk = rk
        self.ctx = rk.rknn_context(0)
        check(rk.rknn_init(ctypes.byref(self.ctx), blob, len(blob), 0, None), "rknn_init")
        io_num = rk.rknn_input_output_num()
        check(
            rk.rknn_query(
                self.ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(io_num), ctypes.sizeof(io_num)
            ),
            "rknn_query(IN_OUT_NUM)",
        )
        if io_num.n_input != len(feeds):
            raise RuntimeError(f"model has {io_num.n_input} inputs, {len(feeds)} fed")
        self.feeds = feeds  # keeps the buffers alive
        self.n_in, self.n_out = io_num.n_input, io_num.n_output
        self.inputs = (rk.rknn_input * self.n_in)()
        for i, x in enumerate(feeds):
            inp = self.inputs[i]
            inp.index, inp.buf, inp.size = i, x.ctypes.data, x.nbytes
            inp.pass_through = 0
            inp.type, inp.fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
        # want_float/is_prealloc are set once: rknn_outputs_get only writes index, buf and size
        self.outputs = (rk.rknn_output * self.n_out)()
        for i in range(self.n_out):
            self.outputs[i].index, self.outputs[i].want_float, self.outputs[i].is_prealloc = i, 1, 0

    def infer(self) -> None:
        """One inference exactly as a C program does it (outputs read, then released)."""
        rk, ctx = self.rk, self.ctx
        check(rk.rknn_inputs_set(ctx, self.n_in, self.inputs), "rknn_inputs_set")
        check(rk.rknn_run(ctx, None), "rknn_run")
        check(rk.rknn_outputs_get(ctx, self.n_out, self.outputs, None), "rknn_outputs_get")
        check(rk.rknn_outputs_release(ctx, self.n_out, self.outputs), "rknn_outputs_release")

    def infer_steps(self, stamps: list[list[int]]) -> None:
        """infer(), with a perf_counter_ns stamp around each of the four calls."""
        rk, ctx, clock = self.rk, self.ctx, time.perf_counter_ns
        t0 = clock()
        check(rk.rknn_inputs_set(ctx, self.n_in, self.inputs), "rknn_inputs_set")
        t1 = clock()
        check(rk.rknn_run(ctx, None), "rknn_run")
        t2 = clock()
        check(rk.rknn_outputs_get(ctx, self.n_out, self.outputs, None), "rknn_outputs_get")
        t3 = clock()
        check(rk.rknn_outputs_release(ctx, self.n_out, self.outputs), "rknn_outputs_release")
        t4 = clock()
        stamps.append([t0, t1, t2, t3, t4])

    def outputs_copy(self) -> list[np.ndarray]:
        """The float32 outputs of one inference, copied out before release."""
        rk, ctx = self.rk, self.ctx
        check(rk.rknn_inputs_set(ctx, self.n_in, self.inputs), "rknn_inputs_set")
        check(rk.rknn_run(ctx, None), "rknn_run")
        check(rk.rknn_outputs_get(ctx, self.n_out, self.outputs, None), "rknn_outputs_get")
        arrays = []
        for i in range(self.n_out):
            out = self.outputs[i]
            raw = (ctypes.c_char * out.size).from_address(out.buf)
            arrays.append(np.frombuffer(raw, np.float32).copy())
        check(rk.rknn_outputs_release(ctx, self.n_out, self.outputs), "rknn_outputs_release")
        return arrays

    def destroy(self) -> None:
        check(self.rk.rknn_destroy(self.ctx), "rknn_destroy")


def convert(model: str | onnx.ModelProto) -> bytes:
    from rknnrt.toolkit import RKNN

    rknn = RKNN()
    try:
        for what, status in (
            # float32: the same arithmetic as onnxruntime on the original, so only overhead differs
            ("config", lambda: rknn.config(target_platform="rk3588", float_dtype="float32")),
            ("load_onnx", lambda: rknn.load_onnx(model)),
            ("build", lambda: rknn.build(do_quantization=False)),
        ):
            if status() != 0:
                raise RuntimeError(f"RKNN.{what} failed: {rknn.last_error}")
        return rknn.model_bytes()
    finally:
        rknn.release()


@dataclass
class Timing:
    ort_ns: list[int] = field(default_factory=list)
    rk_ns: list[int] = field(default_factory=list)

    def ort_ms(self) -> float:
        return statistics.median(self.ort_ns) / 1e6

    def rk_ms(self) -> float:
        return statistics.median(self.rk_ns) / 1e6

    def paired_ratio_ci(self) -> tuple[float, float]:
        """~95% interval of the median of per-iteration rknnrt/ORT ratios (order statistics).
        Each pair ran back to back, so load that drifts between iterations cancels out."""
        ratios = sorted(r / o for o, r in zip(self.ort_ns, self.rk_ns))
        n = len(ratios)
        half = 0.98 * n**0.5
        lo, hi = max(0, int(n / 2 - half)), min(n - 1, int(n / 2 + half + 0.999))
        return ratios[lo], ratios[hi]


def interleave(
    ort_call: Callable[[], object], rk_call: Callable[[], None], n: int, settle: bool = True
) -> Timing:
    """n timed calls of each, alternating A/B and which goes first (ABBA ...).

    With `settle`, each timed call follows an untimed call of the same runtime. Each runtime
    has its own onnxruntime thread pool whose workers spin for a while after a run; on a
    machine with fewer cores than the two pools have threads, a call right after the *other*
    runtime's call shares the cores with those spinning workers and runs up to ~2x slower,
    which splits the samples into two modes and makes their medians meaningless.
    """
    clock = time.perf_counter_ns
    timing = Timing()
    for i in range(n):
        order = ((ort_call, timing.ort_ns), (rk_call, timing.rk_ns))
        for call, sink in order if i % 2 == 0 else order[::-1]:
            if settle:
                call()
            t0 = clock()
            call()
            sink.append(clock() - t0)
    return timing


def pick_repeat(first_s: float, forced: int | None) -> int:
    if forced is not None:
        return forced
    return max(MIN_REPEAT, min(MAX_REPEAT, int(BUDGET_S / max(first_s, 1e-9))))


@dataclass
class Row:
    model: str
    ort_ms: float
    rk_ms: float
    ci: tuple[float, float]
    repeat: int
    max_diff: float
    convert_s: float

    @property
    def ratio(self) -> float:
        return self.rk_ms / self.ort_ms


def bench_model(rk, name: str, threads: int | None, forced_repeat: int | None, settle: bool) -> Row:
    path = light_dir() / f"{name}.onnx"
    proto = onnx.load(str(path))
    rng = np.random.default_rng(0)
    feeds, feed_names = [], []
    for vi in real_inputs(proto):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds.append(rng.random(shape, dtype=np.float32).astype(np_dtype(vi)))
        feed_names.append(vi.name)
    if any(x.dtype != np.float32 for x in feeds):
        raise RuntimeError(f"{name}: only float32 inputs are benchmarked")
    del proto

    t0 = time.perf_counter()
    blob = convert(str(path))
    convert_s = time.perf_counter() - t0
    runner = RknnRunner(rk, blob, feeds)
    del blob
    session = ort.InferenceSession(
        str(path), ort_options(threads), providers=["CPUExecutionProvider"]
    )
    feed = dict(zip(feed_names, feeds))
    try:
        expected = [np.asarray(a, np.float32).reshape(-1) for a in session.run(None, feed)]
        got = runner.outputs_copy()
        max_diff = max(float(np.max(np.abs(e - g))) for e, g in zip(expected, got))

        def ort_call() -> object:
            return session.run(None, feed)

        # warm-up (the first runs allocate arenas), then one timing to size the repeats
        warm = interleave(ort_call, runner.infer, 3, settle)
        first_s = max(statistics.median(warm.ort_ns), statistics.median(warm.rk_ns)) / 1e9
        repeat = pick_repeat(first_s, forced_repeat)
        timing = interleave(ort_call, runner.infer, repeat, settle)
    finally:
        runner.destroy()
    return Row(
        name, timing.ort_ms(), timing.rk_ms(), timing.paired_ratio_ci(), repeat, max_diff, convert_s
    )


def one_op_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one_relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@dataclass
class OneOp:
    ort_us: float
    rk_us: float
    steps_us: dict[str, float]
    repeat: int

    @property
    def diff_us(self) -> float:
        return self.rk_us - self.ort_us


STEPS = ("rknn_inputs_set", "rknn_run", "rknn_outputs_get", "rknn_outputs_release")


def bench_one_op(rk, threads: int | None, settle: bool, repeat: int = ONE_OP_REPEAT) -> OneOp:
    model = one_op_model()
    blob = convert(model)
    x = np.random.default_rng(0).random((1, 3, 8, 8), dtype=np.float32)
    runner = RknnRunner(rk, blob, [x])
    session = ort.InferenceSession(
        model.SerializeToString(), ort_options(threads), providers=["CPUExecutionProvider"]
    )
    feed = {"x": x}
    try:
        got = runner.outputs_copy()[0]
        if not np.array_equal(got, np.maximum(x, 0).reshape(-1)):
            raise RuntimeError("one-op model: rknnrt output differs from Relu(x)")
        stamps: list[list[int]] = []

        def ort_call() -> object:
            return session.run(None, feed)

        def rk_steps() -> None:
            runner.infer_steps(stamps)

        interleave(ort_call, rk_steps, ONE_OP_WARMUP, settle)
        stamps.clear()
        # one pass for total and breakdown (the 5 clock reads add well under 1 us)
        timing = interleave(ort_call, rk_steps, repeat, settle)
        if settle:  # keep only the timed calls' stamps, not the settling calls'
            stamps = stamps[1::2]
    finally:
        runner.destroy()
    steps = {
        step: statistics.median(s[k + 1] - s[k] for s in stamps) / 1e3
        for k, step in enumerate(STEPS)
    }
    return OneOp(timing.ort_ms() * 1e3, timing.rk_ms() * 1e3, steps, repeat)


def verdict(value: float, target: float, interval: tuple[float, float] | None = None) -> str:
    """PASS/FAIL against target; '?' when the interval straddles the target (noise decides)."""
    text = "PASS" if value <= target else "FAIL"
    if interval is not None and interval[0] <= target < interval[1]:
        text += "?"
    return text


def print_table(rows: list[Row]) -> None:
    header = (
        f"{'model':<20} {'ORT ms':>9} {'rknnrt ms':>10} {'ratio':>6} {'paired 95% CI':>14} "
        f"{'verdict':>7} {'n':>4} {'max|diff|':>9} {'convert s':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        ci = f"{r.ci[0]:.3f}-{r.ci[1]:.3f}"
        print(
            f"{r.model:<20} {r.ort_ms:>9.3f} {r.rk_ms:>10.3f} {r.ratio:>6.3f} {ci:>14} "
            f"{verdict(r.ratio, RATIO_TARGET, r.ci):>7} {r.repeat:>4} {r.max_diff:>9.1e} "
            f"{r.convert_s:>9.1f}"
        )
    if rows:
        geo = float(np.exp(np.mean([np.log(r.ratio) for r in rows])))
        passed = sum(r.ratio <= RATIO_TARGET for r in rows)
        print(
            f"target ratio (rknnrt/ORT medians) <= {RATIO_TARGET:.2f}: {passed}/{len(rows)} "
            f"models; geometric mean ratio {geo:.3f}"
        )
        print(
            "paired 95% CI: of the median per-iteration ratio; '?' = the CI contains the target. "
            "n: timed calls per side"
        )


def print_one_op(res: OneOp) -> None:
    print(f"one-op model (Relu on float32 [1,3,8,8]), {res.repeat} interleaved timed calls each:")
    print(f"  ORT median          {res.ort_us:9.1f} us")
    print(f"  rknnrt median       {res.rk_us:9.1f} us")
    print(
        f"  overhead (rk - ORT) {res.diff_us:9.1f} us   target <= {OVERHEAD_TARGET_US:.0f} us: "
        f"{verdict(res.diff_us, OVERHEAD_TARGET_US)}"
    )
    print("  rknnrt per-call medians:")
    for step, us in res.steps_us.items():
        print(f"    {step:<22} {us:8.1f} us")
    print(f"    {'sum':<22} {sum(res.steps_us.values()):8.1f} us")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat",
        type=int,
        help="timed calls per side and model (default: 30-200 by a first timing)",
    )
    parser.add_argument(
        "--models", help="comma-separated names or unique parts of them (e.g. vgg19,resnet50)"
    )
    parser.add_argument("--quick", action="store_true", help="skip vgg19, alexnet, zfnet512")
    parser.add_argument(
        "--threads", type=int, help="ORT intra_op_num_threads and RKNNRT_NUM_THREADS"
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="time every call, not only those that follow an untimed call of the same runtime",
    )
    parser.add_argument("--no-one-op", action="store_true", help="skip the one-op model")
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be >= 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    return args


def select_models(args: argparse.Namespace) -> list[str]:
    names = MODELS
    if args.models:
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        names = []
        for m in wanted:
            hits = [n for n in MODELS if n == m] or [n for n in MODELS if m in n]
            if len(hits) != 1:
                raise SystemExit(f"unknown model {m!r}; choose from {', '.join(MODELS)}")
            names.append(hits[0])
    if args.quick:
        names = [m for m in names if m not in HEAVY]
    return names


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    inherited = os.environ.get("RKNNRT_NUM_THREADS", "")
    if args.threads is None and inherited.isdigit() and int(inherited) > 0:
        args.threads = int(inherited)  # give onnxruntime the same setting rknnrt will read
    if args.threads is not None:
        os.environ["RKNNRT_NUM_THREADS"] = str(args.threads)  # read at rknn_init
    import rknnrt as rk

    names = select_models(args)
    start = time.perf_counter()
    threads = args.threads if args.threads is not None else "default"
    print(
        f"rknnrt {rk.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}, "
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, threads: {threads}, "
        f"settle: {'off' if args.no_settle else 'on'}, load average "
        f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}",
        flush=True,
    )
    rows = []
    for name in names:
        print(f"  {name} ...", end="", flush=True)
        row = bench_model(rk, name, args.threads, args.repeat, not args.no_settle)
        gc.collect()  # the converted weights of the last model (vgg19: ~2 GB)
        print(f" {row.ratio:.3f}", flush=True)
        rows.append(row)
    print()
    print_table(rows)
    if not args.no_one_op:
        print()
        print_one_op(bench_one_op(rk, args.threads, not args.no_settle))
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\ntotal time {time.perf_counter() - start:.1f} s; load average now {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
