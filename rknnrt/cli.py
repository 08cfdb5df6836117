"""`rknnrt` command line: convert, info, run, bench, perf, eval, sweep, sdk, compat.

Models given as .onnx are converted on the fly (float, for the default platform unless --target
says otherwise); `rknnrt run` with no model converts and runs the bundled default CNN.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence

import numpy as np

from . import api as rk
from . import perf_cli
from .capi import sdk as capi_sdk
from .client import Client, ClientError, ZeroCopyIO
from .compat import command as compat_command
from .core import registry, switches
from .evaluation import commands as evaluation_commands
from .model import dtypes, files
from .model.targets import DEFAULT_PLATFORM
from .toolkit import RKNN, convert_cmd, samples

# rknn_tensor_type -> numpy dtype of the types the CLI feeds
_NP_TYPES = {t.rknn: t.numpy for t in dtypes.named(
    "float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")}  # fmt: skip


def _floats(text: str | None) -> list[list[float]] | None:
    """'0,0,0' or '0,0,0;1,1,1' (one group per input) -> [[...], ...]."""
    if not text:
        return None
    return [[float(v) for v in group.split(",")] for group in text.split(";")]


def _convert(onnx_model: object, target: str, mean: str | None = None, std: str | None = None,
             custom_string: str | None = None, float_dtype: str = "float16",
             dataset: str | None = None, algorithm: str = "normal") -> bytes:  # fmt: skip
    rknn = RKNN()
    steps = (
        lambda: rknn.config(
            mean_values=_floats(mean),
            std_values=_floats(std),
            target_platform=target,
            custom_string=custom_string,
            float_dtype=float_dtype,
            quantized_algorithm=algorithm,
        ),  # fmt: skip
        lambda: rknn.load_onnx(onnx_model),
        lambda: rknn.build(do_quantization=dataset is not None, dataset=dataset),
    )
    for step in steps:
        if step() != 0:
            raise SystemExit(f"conversion failed: {rknn.last_error}")
    return rknn.model_bytes()


def _load(path: str | None, target: str) -> tuple[bytes, str]:
    if path is None:
        model = samples.default_model()
        return _convert(model, target, "123.675,116.28,103.53", "58.395,57.12,57.375",
                        "RGB"), "bundled default CNN"  # fmt: skip
    if path.lower().endswith(".onnx"):
        return _convert(path, target), f"{path} (converted for {target})"
    return files.read_bytes(path), path


class Session(Client):
    """A context as the command line drives it: inputs in the model's formats, float outputs;
    through rknn_inputs_set/rknn_outputs_get, or zero-copy memory on a platform whose runtime
    has neither (rv1103/rv1106)."""

    io: ZeroCopyIO | None = None

    def feed(self, arrays: Sequence[np.ndarray]) -> None:
        """The inputs with each array's own type and the input attribute's format."""
        types = [next(k for k, v in _NP_TYPES.items() if np.dtype(v) == x.dtype) for x in arrays]
        if self.general_api:
            self.set_inputs(arrays, types, [a.fmt for a in self.inputs])
            return
        if self.io is None:  # bound once, written before each run
            self.io = ZeroCopyIO(self, arrays, types)
        self.io.write(arrays)

    def infer(self) -> list[np.ndarray]:
        self.run()
        return self.get_outputs() if self.io is None else self.io.read()

    def supports_query(self, name: str) -> bool:
        return name in registry.get(self.ctx.value).platform.queries

    def close(self) -> None:
        if self.io is not None and self.alive:
            self.io.close()
            self.io = None
        super().close()

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.RandomState(seed)
        arrays = []
        for a in self.inputs:
            dims = list(a.dims[: a.n_dims])
            if a.type in (rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_FLOAT16):
                arrays.append(rng.randint(0, 256, dims).astype(np.uint8))
            elif a.type == rk.RKNN_TENSOR_INT8:  # (rv1106's quantised inputs)
                arrays.append(rng.randint(-128, 128, dims).astype(np.int8))
            else:
                arrays.append(np.zeros(dims, _NP_TYPES.get(a.type, np.float32)))
        return arrays


def _attr_line(a: rk.rknn_tensor_attr) -> str:
    return (
        f"index={a.index}, name={a.name.decode()}, n_dims={a.n_dims}, "
        f"dims=[{', '.join(str(d) for d in a.dims[: a.n_dims])}], n_elems={a.n_elems}, "
        f"size={a.size}, w_stride = {a.w_stride}, size_with_stride={a.size_with_stride}, "
        f"fmt={rk.get_format_string(a.fmt)}, type={rk.get_type_string(a.type)}, "
        f"qnt_type={rk.get_qnt_type_string(a.qnt_type)}, zp={a.zp}, scale={a.scale:f}"
    )


def cmd_info(args: argparse.Namespace) -> int:
    blob, name = _load(args.model, args.target)
    s = Session(blob, int(args.flag, 0))
    print(f"model: {name}")
    flags = registry.get(s.ctx.value).flags
    print(f"init flags: {', '.join(sorted(flags)) or 'none'}")
    placement = registry.get(s.ctx.value).placement()
    print("placement: " + ", ".join(f"{op} -> {device}" for op, device in placement))
    version = rk.rknn_sdk_version()
    s.status(rk.RKNN_QUERY_SDK_VERSION, version)
    print(f"sdk api version: {version.api_version.decode()}, driver version: "
          f"{version.drv_version.decode()}")  # fmt: skip
    print(f"model input num: {len(s.inputs)}, output num: {len(s.outputs)}")
    for title, cmd, count in (
        ("input tensors", rk.RKNN_QUERY_INPUT_ATTR, len(s.inputs)),
        ("output tensors", rk.RKNN_QUERY_OUTPUT_ATTR, len(s.outputs)),
        ("native input tensors", rk.RKNN_QUERY_NATIVE_INPUT_ATTR, len(s.inputs)),
        ("native output tensors", rk.RKNN_QUERY_NATIVE_OUTPUT_ATTR, len(s.outputs)),
        ("native NHWC output tensors", rk.RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR, len(s.outputs)),
    ):
        print(f"{title}:")
        for i in range(count):
            print("  " + _attr_line(s.attr(cmd, i)))
    mem = rk.rknn_mem_size()
    s.status(rk.RKNN_QUERY_MEM_SIZE, mem)
    fields = ", ".join(f"{name}={getattr(mem, name)}" for name, _ in mem._fields_[:5])
    print(f"memory: {fields}")
    custom = rk.rknn_custom_string()
    s.status(rk.RKNN_QUERY_CUSTOM_STRING, custom)
    print(f"custom string: {custom.string.decode()!r}")
    s.close()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    blob, name = _load(args.model, args.target)
    s = Session(blob)
    if args.input:
        arrays = []
        for p in args.input:
            with files.open_regular(p) as f:
                arrays.append(np.ascontiguousarray(np.load(f, allow_pickle=False)))
    elif args.model is None:
        arrays = [samples.default_input()]
    else:
        arrays = s.random_inputs()
    start = time.perf_counter()
    s.feed(arrays)
    outputs = s.infer()
    first = (time.perf_counter() - start) * 1e3
    perf = None
    if s.supports_query("RKNN_QUERY_PERF_RUN"):  # (not a query of the mini runtime)
        perf = rk.rknn_perf_run()
        s.status(rk.RKNN_QUERY_PERF_RUN, perf)
    warm = []
    while len(warm) < WARM_RUNS and sum(warm) < WARM_BUDGET_MS:  # a warm figure, kept short
        start = time.perf_counter()
        s.feed(arrays)
        s.infer()
        warm.append((time.perf_counter() - start) * 1e3)
    print(f"model: {name}")
    for i, out in enumerate(outputs):
        line = (f"output {i} {s.outputs[i].name.decode()}: shape {list(out.shape)}, min "
                f"{out.min():.6g}, max {out.max():.6g}, mean {out.mean():.6g}")  # fmt: skip
        if out.ndim == 2 and out.shape[0] == 1:
            top = np.argsort(out[0])[::-1][:5]
            line += ", top-5 " + ", ".join(f"{k}:{out[0, k]:.4f}" for k in top)
        print(line)
    calls = "inputs_set + run + outputs_get" if s.general_api else \
        "set_io_mem + copy in + run + copy out; zero-copy: the platform has no rknn_inputs_set"
    print(f"first run: {first:.3f} ms on this PC ({calls}; includes the one-time set-up of "
          "the first run: onnxruntime's session warm-up and buffers)")
    print(f"warm run: {float(np.median(warm)):.3f} ms on this PC (median of {len(warm)})")
    if perf is None:
        print("rknn_run: not reported (this platform's runtime has no RKNN_QUERY_PERF_RUN)")
    else:
        print(f"rknn_run: {perf.run_duration} us (RKNN_QUERY_PERF_RUN of the first run: "
              f"{_perf_run_kind()})")  # fmt: skip
    s.close()
    return 0


WARM_RUNS, WARM_BUDGET_MS = 5, 2000.0


def _perf_run_kind() -> str:
    if switches.raw(switches.PERF_HOST) == "1":
        return "this PC's time, RKNNRT_PERF_HOST=1"
    return "the estimated board time; RKNNRT_PERF_HOST=1 for this PC's"


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty() or done == total:
        filled = done * 30 // max(total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")


def cmd_bench(args: argparse.Namespace) -> int:
    if args.threads < 1:
        raise SystemExit("--threads must be >= 1")
    blob, name = _load(args.model, args.target)
    s = Session(blob)
    mask = int(args.core_mask, 0)
    if args.threads > 1 or mask:
        return _bench_threads(s, name, args.threads, mask, args.runs, args.warmup)
    arrays = s.random_inputs()
    for _ in range(args.warmup):
        s.feed(arrays)
        s.infer()
    times = []
    for k in range(args.runs):
        start = time.perf_counter()
        s.feed(arrays)
        s.infer()
        times.append((time.perf_counter() - start) * 1e3)
        _progress(k + 1, args.runs)
    sys.stderr.write("\n")
    p50, p90, p99 = np.percentile(times, [50, 90, 99])
    print(f"model: {name}")
    print(f"runs: {args.runs}, latency ms: min {min(times):.3f}, p50 {p50:.3f}, p90 {p90:.3f}, "
          f"p99 {p99:.3f}, max {max(times):.3f}; {1000 / p50:.1f} FPS at p50")  # fmt: skip
    s.close()
    return 0


def _bench_threads(s: Session, name: str, threads: int, mask: int, runs: int,
                   warmup: int) -> int:  # fmt: skip
    """`threads` duplicated contexts, one per thread, `runs` frames each: frames per second."""
    sessions = [s] + [s.dup() for _ in range(threads - 1)]
    for session in sessions:
        if mask:
            session.set_core_mask(mask)
    total = threads * runs
    done = [0]
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(session: Session, seed: int) -> None:
        arrays = session.random_inputs(seed)
        try:
            for _ in range(warmup):
                session.feed(arrays)
                session.infer()
            ready.wait()
            for _ in range(runs):
                start = time.perf_counter()
                session.feed(arrays)
                session.infer()
                elapsed = (time.perf_counter() - start) * 1e3
                with lock:
                    latencies.append(elapsed)
                    done[0] += 1
        except BaseException as exc:  # ClientError from a failed call, reported below
            errors.append(exc)
            ready.abort()

    dev = registry.get(s.ctx.value).device
    before: list = []
    # Every thread warms up; then the per-core counts are read and the clock starts.
    ready = threading.Barrier(threads + 1, action=lambda: before.extend(dev.stats))
    workers = [threading.Thread(target=work, args=(x, i)) for i, x in enumerate(sessions)]
    for w in workers:
        w.start()
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        pass
    start = time.perf_counter()
    while any(w.is_alive() for w in workers):
        _progress(done[0], total)
        workers[0].join(0.1)
    wall = time.perf_counter() - start
    _progress(done[0], total)
    sys.stderr.write("\n")
    for w in workers:
        w.join()
    for session in sessions[1:]:
        session.close()
    if errors:
        raise SystemExit(f"bench failed: {errors[0]}")
    p50, p90, p99 = np.percentile(latencies, [50, 90, 99])
    print(f"model: {name}")
    print(f"threads: {threads} (duplicated contexts), core mask: {mask:#x}, frames: {total}, "
          f"{wall:.3f} s: {total / wall:.1f} FPS")  # fmt: skip
    print(f"latency ms: p50 {p50:.3f}, p90 {p90:.3f}, p99 {p99:.3f}")
    after = dev.stats
    jobs = ", ".join(
        f"core {i}: {a.jobs - b.jobs} jobs" for i, (a, b) in enumerate(zip(after, before))
    )
    print(f"NPU cores of {dev.name}: {jobs}")
    s.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rknnrt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    target = {"default": DEFAULT_PLATFORM, "help": f"target platform (default {DEFAULT_PLATFORM})"}

    convert_cmd.add_parser(sub)

    p = sub.add_parser("info", help="print what every query returns, as a board would")
    p.add_argument("model", help="rknnrt model file or ONNX model")
    p.add_argument("--flag", default="0", help="rknn_init flags, e.g. 0x400")
    p.add_argument("--target", **target)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("run", help="run a model once (no model: the bundled default CNN)")
    p.add_argument("model", nargs="?", help="rknnrt model file or ONNX model")
    p.add_argument("--input", action="append", help=".npy file per input (NHWC for 4-D)")
    p.add_argument("--target", **target)
    p.set_defaults(func=cmd_run)

    mask = {"default": "0", "help": "rknn_core_mask, e.g. 0x7 = CORE_0_1_2 (default 0: AUTO)"}
    p = sub.add_parser("bench", help="latency percentiles and frames per second")
    p.add_argument("model", nargs="?", help="rknnrt model file or ONNX model")
    p.add_argument("--runs", type=int, default=100, help="frames per thread")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1,
                   help="duplicated contexts, one per thread (rknn_dup_context)")  # fmt: skip
    p.add_argument("--core-mask", **mask)
    p.add_argument("--target", **target)
    p.set_defaults(func=cmd_bench)

    perf_cli.add_parser(sub, _load)  # `perf`: rknnrt/perf_cli.py
    capi_sdk.register(sub)
    compat_command.add_parser(sub)  # `compat`: rknnrt/compat/
    evaluation_commands.add_parsers(sub)  # eval, sweep
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ClientError as exc:  # the runtime printed its E RKNN: line
        raise SystemExit(str(exc)) from None


if __name__ == "__main__":
    sys.exit(main())
