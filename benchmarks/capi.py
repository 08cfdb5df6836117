"""The C library (librknnrt.so from `rknnrt sdk`) against the Python C-shaped API, one run.

    python benchmarks/capi.py [--models squeezenet,shufflenet] [--calls 100000] [--runs 30]
                              [--first-runs 9] [--thread-model inception_v1] [--thread-runs 4]

Prints, each with its baseline measured in the same run:
  1. per-call cost of rknn_query(RKNN_QUERY_IN_OUT_NUM) from C (median of --calls, each call
     timed), against the same call made from Python and a plain C call;      target <= 2 us
  2. inference through the C API against the same sequence through the Python API, on the
     onnx package's light models converted float32 (median per run);         target ratio <= 1.05
  3. the first call of a fresh C process (interpreter start + import + bind);  target <= 200 ms
  4. 4 C threads with rknn_dup_context against 1 thread doing the same frames, one onnxruntime
     thread per context (RKNNRT_NUM_THREADS=1), on a model of >= 10 ms;       target >= 1.6x
It ends with the machine's load average at start and end (a shared machine skews 3 and 4).
The struct layouts the C compiler sees are checked against the Python structs by
tests/capi/test_capi_library.py (not timed here).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

import rknnrt as rk
from rknnrt.capi.sdk import write_sdk
from rknnrt.toolkit import RKNN

HERE = Path(__file__).parent
THREADS_C = HERE.parent / "tests" / "capi" / "c" / "threads.c"
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"


def light(name: str) -> onnx.ModelProto:
    return onnx.load(str(Path(onnx.__file__).parent / f"backend/test/data/light/light_{name}.onnx"))


def convert(name: str, folder: Path) -> Path:
    target = folder / f"{name}.rknnrt"
    if not target.exists():
        rknn = RKNN()
        assert rknn.config(target_platform="rk3588", float_dtype="float32") == 0
        assert rknn.load_onnx(light(name)) == 0, rknn.last_error
        assert rknn.build(do_quantization=False) == 0, rknn.last_error
        target.write_bytes(rknn.model_bytes())
    return target


def compile_c(sdk: Path, source: Path, out: Path) -> Path:
    binary = out / source.stem
    subprocess.run(["gcc", "-O2", "-std=c99", "-D_GNU_SOURCE", "-I", str(sdk / "include"),
                    "-I", str(source.parent), str(source), "-o", str(binary),
                    "-L", str(sdk / "lib"), "-lrknnrt", "-lpthread"], check=True)  # fmt: skip
    return binary


def run_c(sdk: Path, *args: object, **env: str) -> dict[str, float]:
    environment = {"PATH": CLEAN_PATH, "LD_LIBRARY_PATH": str(sdk / "lib"), **env}
    for key in ("RKNNRT_KEEP_PRIORITY", "HOME"):
        if key in os.environ:
            environment.setdefault(key, os.environ[key])
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=environment)
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    values = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        for key, value in zip(parts[::2], parts[1::2]):
            try:
                values[key] = float(value)
            except ValueError:
                pass
    return values


def python_query_median_us(model: Path, calls: int) -> float:
    data = model.read_bytes()
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, data, len(data), 0, None) == 0
    num = rk.rknn_input_output_num()
    handle, address, clock = ctx.value, ctypes.addressof(num), time.perf_counter
    times = []
    for _ in range(calls):
        t0 = clock()
        rk.rknn_query(handle, rk.RKNN_QUERY_IN_OUT_NUM, address, 8)
        times.append(clock() - t0)
    assert rk.rknn_destroy(ctx) == 0
    return statistics.median(times) * 1e6


def python_infer_median_us(model: Path, runs: int) -> float:
    """The same sequence as capi_bench.c's infer mode, through the Python API."""
    data = model.read_bytes()
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, data, len(data), 0, None) == 0
    attr = rk.rknn_tensor_attr()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, attr, ctypes.sizeof(attr)) == 0
    buf = np.random.default_rng(1).random(attr.n_elems, dtype=np.float32)
    inputs = (rk.rknn_input * 1)()
    inputs[0].buf, inputs[0].size, inputs[0].type = buf.ctypes.data, buf.nbytes, 0
    inputs[0].fmt = rk.RKNN_TENSOR_NCHW if attr.n_dims == 4 else rk.RKNN_TENSOR_UNDEFINED
    outputs = (rk.rknn_output * 1)()
    times = []
    for i in range(-3, runs):
        t0 = time.perf_counter()
        outputs[0].want_float, outputs[0].is_prealloc = 1, 0
        rk.rknn_inputs_set(ctx, 1, inputs)
        rk.rknn_run(ctx, None)
        rk.rknn_outputs_get(ctx, 1, outputs, None)
        rk.rknn_outputs_release(ctx, 1, outputs)
        if i >= 0:
            times.append(time.perf_counter() - t0)
    assert rk.rknn_destroy(ctx) == 0
    return statistics.median(times) * 1e6


def python_side(mode: str, model: Path, count: int) -> float:
    """The Python measurement in a fresh process, as the C one is (no converter sessions or
    other contexts of this process competing with it)."""
    done = subprocess.run(
        [sys.executable, __file__, "--python-side", mode, str(model), str(count)],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )  # fmt: skip
    return float(done.stdout.split()[-1])


def ort_thread_ceiling(name: str, threads: int, runs: int) -> float:
    """Throughput of `threads` plain onnxruntime sessions (one intra-op thread each) in as many
    threads against one session doing all the frames: what the machine allows right now."""
    import threading

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    model = light(name).SerializeToString()
    sessions = [ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
                for _ in range(threads)]  # fmt: skip
    feed_name = sessions[0].get_inputs()[0].name
    shape = [d if isinstance(d, int) else 1 for d in sessions[0].get_inputs()[0].shape]
    feed = {feed_name: np.random.default_rng(3).random(shape, dtype=np.float32)}

    def work(session, n: int) -> None:
        for _ in range(n):
            session.run(None, feed)

    for s in sessions:
        work(s, 1)
    t0 = time.perf_counter()
    work(sessions[0], runs * threads)
    one = time.perf_counter() - t0
    workers = [threading.Thread(target=work, args=(s, runs)) for s in sessions]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return one / (time.perf_counter() - t0)


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--python-side":
        mode, model, count = sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
        measure = python_query_median_us if mode == "query" else python_infer_median_us
        print(measure(model, count))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet,shufflenet,inception_v1")
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5, help="C/Python alternations per model")
    parser.add_argument("--first-runs", type=int, default=9, help="fresh C processes timed")
    parser.add_argument("--thread-model", default="inception_v1")
    parser.add_argument("--thread-runs", type=int, default=4, help="frames per thread")
    args = parser.parse_args()
    os.environ.setdefault("RKNNRT_KEEP_PRIORITY", "1")
    load_at_start = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="rknnrt-capi-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        sdk = write_sdk(work / "sdk")
        print(f"rknnrt sdk: {time.perf_counter() - t0:.2f} s (cached library after the first)")
        bench = compile_c(sdk, HERE / "capi_bench.c", work)
        threads = compile_c(sdk, THREADS_C, work)
        names = args.models.split(",")
        models = {name: convert(name, work) for name in {*names, args.thread_model}}
        first_model = models[names[0]]

        print("\n1. rknn_query(RKNN_QUERY_IN_OUT_NUM), per call (median)")
        c = run_c(sdk, bench, "query", first_model, args.calls)
        py = python_side("query", first_model, args.calls)
        c_us, plain_ns = c["query_median_us"], c["plain_c_call_median_us"] * 1000
        print(f"   C -> librknnrt.so : {c_us:.3f} us   (target <= 2 us)")
        print(f"   Python API        : {py:.3f} us   (C / Python = {c_us / py:.2f})")
        print(f"   plain C call      : {plain_ns:.0f} ns (timer included)")

        print("\n2. inference, C API vs Python API (median per run, float32 NCHW input)")
        for name in names:
            c_runs, py_runs = [], []
            for _ in range(args.rounds):  # alternate, so machine noise hits both alike
                c = run_c(sdk, bench, "infer", models[name], args.runs)
                c_runs.append(c["infer_median_us"])
                py_runs.append(python_side("infer", models[name], args.runs))
            c_us, py_us = statistics.median(c_runs), statistics.median(py_runs)
            # each round's two measurements are neighbours in time: their ratio is the figure
            ratio = statistics.median(c / p for c, p in zip(c_runs, py_runs))
            print(f"   {name:14s} C {c_us / 1000:8.2f} ms   Python {py_us / 1000:8.2f} ms   "
                  f"C / Python = {ratio:.3f} (per-round median; target <= 1.05)")  # fmt: skip

        print("\n3. first call of a fresh C process (start Python, import rknnrt, bind)")
        firsts = [run_c(sdk, bench, "first", first_model) for _ in range(args.first_runs)]
        first = statistics.median(f["first_call_us"] for f in firsts) / 1000
        init = statistics.median(f["init_us"] for f in firsts) / 1000
        imports = []
        for _ in range(args.first_runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import rknnrt"], check=True,
                           env={**os.environ, "PYTHONPATH": str(HERE.parent)})  # fmt: skip
            imports.append((time.perf_counter() - t0) * 1000)
        baseline = statistics.median(imports)
        fastest = min(f["first_call_us"] for f in firsts) / 1000
        print(f"   first call {first:.0f} ms, median of {len(firsts)} (fastest {fastest:.0f} ms; "
              f"target <= 200 ms); then rknn_init {init:.0f} ms")  # fmt: skip
        print(f"   baseline: `python -c 'import rknnrt'` as a process, median: {baseline:.0f} ms")

        print(f"\n4. rknn_dup_context threads ({args.thread_model}, RKNNRT_NUM_THREADS=1)")
        size = 1
        data = models[args.thread_model].read_bytes()
        ctx = rk.rknn_context()
        assert rk.rknn_init(ctx, data, len(data), 0, None) == 0
        attr = rk.rknn_tensor_attr()
        assert rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, attr, ctypes.sizeof(attr)) == 0
        size = attr.n_elems
        assert rk.rknn_destroy(ctx) == 0
        image = work / "image.u8"
        image.write_bytes(np.random.default_rng(2).integers(0, 256, size, np.uint8).tobytes())
        for n in (2, 4):
            r = run_c(sdk, threads, models[args.thread_model], image, n, args.thread_runs,
                      RKNNRT_NUM_THREADS="1")  # fmt: skip
            per_frame = r["seconds_1_thread"] / r["frames"] * 1000
            ceiling = ort_thread_ceiling(args.thread_model, n, args.thread_runs)
            print(f"   {n} threads vs 1: {r['speedup']:.2f}x throughput, results identical: "
                  f"{bool(r['identical'])}; one thread {per_frame:.1f} ms per frame  "
                  f"(target >= 1.6x for 4 threads on 2 cores)")  # fmt: skip
            print(
                f"      baseline, plain onnxruntime in {n} Python threads: {ceiling:.2f}x "
                f"-> C threads reach {r['speedup'] / ceiling:.0%} of what this machine gives"
            )
        print(f"   cores available to this process: {len(os.sched_getaffinity(0))}")
    # the machine may be shared: the figures above only mean something next to its load
    start, end = (" ".join(f"{x:.2f}" for x in load) for load in (load_at_start, os.getloadavg()))
    print(f"\nload average (1, 5, 15 min): {start} at start, {end} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
