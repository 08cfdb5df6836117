"""`rknnrt` command line: convert, info, run, bench, perf, eval, sweep, sdk, compat.

Models given as .onnx are converted on the fly (float, rk3588 unless --target says otherwise);
`rknnrt run` with no model converts and runs the bundled default CNN.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import threading
import time
from collections.abc import Sequence

import numpy as np

from . import api as rk
from . import perf_cli
from .capi import sdk as capi_sdk
from .compat import command as compat_command
from .core import registry, switches
from .evaluation import commands as evaluation_commands
from .toolkit import RKNN, convert_cmd, samples

_NP_TYPES = {
    rk.RKNN_TENSOR_FLOAT32: np.float32, rk.RKNN_TENSOR_FLOAT16: np.float16,
    rk.RKNN_TENSOR_INT8: np.int8, rk.RKNN_TENSOR_UINT8: np.uint8, rk.RKNN_TENSOR_INT16: np.int16,
    rk.RKNN_TENSOR_INT32: np.int32, rk.RKNN_TENSOR_INT64: np.int64, rk.RKNN_TENSOR_BOOL: np.bool_,
}  # fmt: skip


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
    with open(path, "rb") as f:
        return f.read(), path


class Session:
    """A context and its attributes, through the C-shaped API as an application would."""

    def __init__(self, model: bytes, flag: int = 0) -> None:
        self.flag = flag
        self.ctx = rk.rknn_context()
        ret = rk.rknn_init(ctypes.byref(self.ctx), model, len(model), flag, None)
        if ret != rk.RKNN_SUCC:
            raise SystemExit(f"rknn_init failed: {ret}")
        num = rk.rknn_input_output_num()
        self.query(rk.RKNN_QUERY_IN_OUT_NUM, num)
        self.inputs = [self.attr(rk.RKNN_QUERY_INPUT_ATTR, i) for i in range(num.n_input)]
        self.outputs = [self.attr(rk.RKNN_QUERY_OUTPUT_ATTR, i) for i in range(num.n_output)]

    def dup(self) -> Session:
        """A context from rknn_dup_context: same model and weights, its own buffers."""
        other = object.__new__(Session)
        other.flag, other.inputs, other.outputs = self.flag, self.inputs, self.outputs
        other.ctx = rk.rknn_context()
        if rk.rknn_dup_context(ctypes.byref(self.ctx), ctypes.byref(other.ctx)):
            raise SystemExit("rknn_dup_context failed")
        return other

    def set_core_mask(self, mask: int) -> None:
        if mask and rk.rknn_set_core_mask(self.ctx, mask):
            raise SystemExit(f"rknn_set_core_mask({mask:#x}) failed")

    def query(self, cmd: int, info: ctypes.Structure) -> int:
        return rk.rknn_query(self.ctx, cmd, ctypes.byref(info), ctypes.sizeof(info))

    def attr(self, cmd: int, index: int) -> rk.rknn_tensor_attr:
        attr = rk.rknn_tensor_attr(index=index)
        self.query(cmd, attr)
        return attr

    def set_inputs(self, arrays: Sequence[np.ndarray]) -> None:
        c_inputs = (rk.rknn_input * len(arrays))()
        for i, x in enumerate(arrays):
            c_inputs[i].index, c_inputs[i].buf, c_inputs[i].size = i, x.ctypes.data, x.nbytes
            c_inputs[i].type = next(k for k, v in _NP_TYPES.items() if np.dtype(v) == x.dtype)
            c_inputs[i].fmt = self.inputs[i].fmt
        if rk.rknn_inputs_set(self.ctx, len(arrays), c_inputs):
            raise SystemExit("rknn_inputs_set failed")

    def infer(self) -> list[np.ndarray]:
        if rk.rknn_run(self.ctx, None):
            raise SystemExit("rknn_run failed")
        outs = (rk.rknn_output * len(self.outputs))()
        for o in outs:
            o.want_float = 1
        if rk.rknn_outputs_get(self.ctx, len(outs), outs, None):
            raise SystemExit("rknn_outputs_get failed")
        results = [
            np.frombuffer((ctypes.c_char * o.size).from_address(o.buf), np.float32)
            .reshape(list(a.dims[: a.n_dims]))
            .copy()
            for o, a in zip(outs, self.outputs)
        ]
        rk.rknn_outputs_release(self.ctx, len(outs), outs)
        return results

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.RandomState(seed)
        arrays = []
        for a in self.inputs:
            dims = list(a.dims[: a.n_dims])
            if a.type in (rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_FLOAT16):
                arrays.append(rng.randint(0, 256, dims).astype(np.uint8))
            else:
                arrays.append(np.zeros(dims, _NP_TYPES.get(a.type, np.float32)))
        return arrays

    def close(self) -> None:
        rk.rknn_destroy(self.ctx)


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
    s.query(rk.RKNN_QUERY_SDK_VERSION, version)
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
    s.query(rk.RKNN_QUERY_MEM_SIZE, mem)
    fields = ", ".join(f"{name}={getattr(mem, name)}" for name, _ in mem._fields_[:5])
    print(f"memory: {fields}")
    custom = rk.rknn_custom_string()
    s.query(rk.RKNN_QUERY_CUSTOM_STRING, custom)
    print(f"custom string: {custom.string.decode()!r}")
    s.close()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    blob, name = _load(args.model, args.target)
    s = Session(blob)
    if args.input:
        arrays = [np.ascontiguousarray(np.load(p, allow_pickle=False)) for p in args.input]
    elif args.model is None:
        arrays = [samples.default_input()]
    else:
        arrays = s.random_inputs()
    start = time.perf_counter()
    s.set_inputs(arrays)
    outputs = s.infer()
    first = (time.perf_counter() - start) * 1e3
    perf = rk.rknn_perf_run()
    s.query(rk.RKNN_QUERY_PERF_RUN, perf)
    warm = []
    while len(warm) < WARM_RUNS and sum(warm) < WARM_BUDGET_MS:  # a warm figure, kept short
        start = time.perf_counter()
        s.set_inputs(arrays)
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
    print(f"first run: {first:.3f} ms on this PC (inputs_set + run + outputs_get; includes "
          "the one-time set-up of the first run: onnxruntime's session warm-up and buffers)")
    print(f"warm run: {float(np.median(warm)):.3f} ms on this PC (median of {len(warm)})")
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
        s.set_inputs(arrays)
        s.infer()
    times = []
    for k in range(args.runs):
        start = time.perf_counter()
        s.set_inputs(arrays)
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
                session.set_inputs(arrays)
                session.infer()
            ready.wait()
            for _ in range(runs):
                start = time.perf_counter()
                session.set_inputs(arrays)
                session.infer()
                elapsed = (time.perf_counter() - start) * 1e3
                with lock:
                    latencies.append(elapsed)
                    done[0] += 1
        except BaseException as exc:  # SystemExit from a failed call, reported below
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
    target = {"default": "rk3588", "help": "target platform (default rk3588)"}

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
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
