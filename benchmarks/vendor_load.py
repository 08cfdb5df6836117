"""Load and run time of a ResNet-50 vendor .rknn against the same model in rknnrt's format.

ResNet-50 comes from the onnx package's light backend models with its weights redrawn from a
seed (He-normal convolutions and Gemm, unit BatchNorm), in a temporary folder. The vendor's
rknn-toolkit2 (its own environment, a subprocess; never a dependency) exports it for rk3588 and
runs its simulator on one input; `rknnrt.toolkit.RKNN` converts the same ONNX with the same
settings. Both files are then loaded (rknn_init + rknn_destroy) and run (rknn_inputs_set +
rknn_run + rknn_outputs_get) alternately in this process; the medians and their ratios are
printed, with the vendor file's agreement with the simulator. Nothing is written outside the
temporary folder: the vendor file (~50 MB) is never committed.

    python benchmarks/vendor_load.py [--dtype fp16|i8|both] [--repeat N]
                                     [--vendor-python /work/vendor_env/bin/python]

With `--fixtures DIR` (e.g. tests/vendor/fixtures_arch; no vendor toolkit needed), every vendor
file of the set that loads is timed instead against the same network converted by rknnrt: the
fixture's ONNX is regenerated (make_arch_fixtures.make_onnx, seeded) and converted for the
file's platform and dtype (int8: calibrated on the fixture's stored inputs); per file and in
total (sums of the medians), load and run ratios are printed.

    python benchmarks/vendor_load.py --fixtures tests/vendor/fixtures_arch [--only mbv2 ...]

Targets (issue 14, issue 24): load <= 2x, run <= 1.2x the rknnrt-format model.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rknnrt as rk  # noqa: E402
from rknnrt.toolkit import RKNN  # noqa: E402

LOAD_TARGET, RUN_TARGET = 2.0, 1.2  # per file and in total (issue 24)
LIGHT = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"

VENDOR_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np
    from rknn.api import RKNN
    onnx_path, dtype, dataset, sample, out_rknn, out_npy = sys.argv[1:7]
    r = RKNN(verbose=False)
    r.config(target_platform="rk3588")
    assert r.load_onnx(onnx_path) == 0
    assert r.build(do_quantization=dtype == "i8", dataset=dataset) == 0
    assert r.export_rknn(out_rknn) == 0
    assert r.init_runtime() == 0
    image = np.load(sample, allow_pickle=False)
    np.save(out_npy, r.inference(inputs=[image], data_format=["nchw"])[0])
    r.release()
    """
)


def resnet50(seed: int = 0) -> onnx.ModelProto:
    """The light ResNet-50 with its ConstantOfShape weights replaced by seeded initializers."""
    model = onnx.load(str(LIGHT))
    rng = np.random.default_rng(seed)
    shapes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    roles = {}
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            for name, role in zip(node.input[1:], ("scale", "bias", "mean", "var")):
                roles[name] = role
    wanted = {}  # weight name -> shape: ConstantOfShape outputs, initializers, bare inputs
    nodes = [n for n in model.graph.node if n.op_type != "ConstantOfShape"]
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape":
            wanted[node.output[0]] = [int(d) for d in shapes[node.input[0]]]
    for name, value in shapes.items():
        if not name.endswith("__SHAPE"):
            wanted[name] = list(value.shape)
    for vi in model.graph.input[1:]:
        wanted.setdefault(vi.name, [d.dim_value for d in vi.type.tensor_type.shape.dim])
    inits = [numpy_helper.from_array(v, n) for n, v in shapes.items()
             if v.dtype != np.float32 and not n.endswith("__SHAPE")]  # fmt: skip
    for name, shape in wanted.items():
        if name in shapes and shapes[name].dtype != np.float32:
            continue  # e.g. a Reshape's target shape: kept as it is
        role = roles.get(name)
        if role in ("scale", "var"):
            value = np.ones(shape, np.float32)
        elif role in ("bias", "mean"):
            value = np.zeros(shape, np.float32)
        else:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            value = rng.standard_normal(shape).astype(np.float32) * np.sqrt(2.0 / fan_in)
            if len(shape) == 2:  # the classifier: logits of std ~3
                value *= 0.5
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
    used = {i for n in nodes for i in n.input}
    inits = [t for t in inits if t.name in used]
    graph = onnx.helper.make_graph(nodes, "resnet50", [model.graph.input[0]],
                                   list(model.graph.output), inits)  # fmt: skip
    out = onnx.helper.make_model(graph, opset_imports=list(model.opset_import))
    # IR >= 4: initializers need not be graph inputs (the light model is IR 3, whose version
    # converter then finds the weights undefined)
    out.ir_version = max(model.ir_version, 4)
    # logits of std ~3, so that the softmax is not one-hot and outputs can be compared
    gemm = next(n for n in out.graph.node if n.op_type == "Gemm")
    probe = onnx.ModelProto()
    probe.CopyFrom(out)
    probe.graph.output.append(onnx.helper.make_tensor_value_info(gemm.output[0], 1, None))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    factor = 3.0 / float(np.std(session.run([gemm.output[0]], {"gpu_0/data_0": x})[0]))
    for init in out.graph.initializer:
        if init.name in gemm.input[1:]:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * factor, init.name))
    return out


def _init(blob: bytes) -> rk.rknn_context:
    ctx = rk.rknn_context()
    assert rk.rknn_init(ctx, blob, len(blob), 0, None) == rk.RKNN_SUCC
    return ctx


def _run(ctx: rk.rknn_context, image: np.ndarray) -> np.ndarray:
    inp = (rk.rknn_input * 1)()
    inp[0].index, inp[0].buf, inp[0].size = 0, image.ctypes.data, image.nbytes
    inp[0].type, inp[0].fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
    assert rk.rknn_inputs_set(ctx, 1, inp) == rk.RKNN_SUCC
    assert rk.rknn_run(ctx, None) == rk.RKNN_SUCC
    out = (rk.rknn_output * 1)()
    out[0].want_float = 1
    assert rk.rknn_outputs_get(ctx, 1, out, None) == rk.RKNN_SUCC
    ptr = ctypes.cast(out[0].buf, ctypes.POINTER(ctypes.c_float))
    result = np.ctypeslib.as_array(ptr, (out[0].size // 4,)).copy()
    assert rk.rknn_outputs_release(ctx, 1, out) == rk.RKNN_SUCC
    return result


def _median_pair(fa, fb, repeat: int) -> tuple[float, float]:
    """Medians of fa and fb timed alternately (ABBA), so machine noise hits both alike."""
    ta, tb = [], []
    for k in range(repeat):
        for f, times in ((fa, ta), (fb, tb)) if k % 2 == 0 else ((fb, tb), (fa, ta)):
            start = time.perf_counter()
            f()
            times.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb)


def bench(dtype: str, work: Path, vendor_python: str, repeat: int) -> None:
    model = resnet50()
    onnx_path = work / "resnet50.onnx"
    onnx.save(model, str(onnx_path))
    rng = np.random.default_rng(1)
    calib = []
    for k in range(4):
        path = work / f"calib{k}.npy"
        np.save(path, rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
        calib.append(str(path))
    (work / "dataset.txt").write_text("\n".join(calib) + "\n")
    vendor_path, sim_path = work / f"resnet50_{dtype}.rknn", work / f"sim_{dtype}.npy"
    start = time.perf_counter()
    done = subprocess.run(
        [vendor_python, "-c", VENDOR_SCRIPT, str(onnx_path), dtype, str(work / "dataset.txt"),
         calib[0], str(vendor_path), str(sim_path)],
        cwd=work, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the vendor toolkit failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    print(f"[{dtype}] vendor toolkit build + export + simulate: "
          f"{time.perf_counter() - start:.1f} s")  # fmt: skip
    rknn = RKNN()
    assert rknn.config(target_platform="rk3588", float_dtype="float16") == 0
    assert rknn.load_onnx(str(onnx_path)) == 0
    assert rknn.build(do_quantization=dtype == "i8", dataset=str(work / "dataset.txt")) == 0
    own = rknn.model_bytes()
    vendor = vendor_path.read_bytes()
    sizes = f"vendor {len(vendor) / 1e6:.1f} MB, rknnrt {len(own) / 1e6:.1f} MB"
    print(f"[{dtype}] file sizes: {sizes}")

    load_v, load_o = _median_pair(
        lambda: rk.rknn_destroy(_init(vendor)), lambda: rk.rknn_destroy(_init(own)),
        max(3, repeat // 4),
    )  # fmt: skip
    image = np.load(calib[0], allow_pickle=False)
    ctx_v, ctx_o = _init(vendor), _init(own)
    out_v, out_o = _run(ctx_v, image), _run(ctx_o, image)
    run_v, run_o = _median_pair(lambda: _run(ctx_v, image), lambda: _run(ctx_o, image), repeat)
    rk.rknn_destroy(ctx_v)
    rk.rknn_destroy(ctx_o)
    sim = np.load(sim_path, allow_pickle=False).astype(np.float64).ravel()
    cosine = float(out_v @ sim / (np.linalg.norm(out_v) * np.linalg.norm(sim)))
    print(f"[{dtype}] load: vendor {load_v * 1e3:.0f} ms, rknnrt {load_o * 1e3:.0f} ms, "
          f"ratio {load_v / load_o:.2f} (target <= 2)")  # fmt: skip
    print(f"[{dtype}] run:  vendor {run_v * 1e3:.1f} ms, rknnrt {run_o * 1e3:.1f} ms, "
          f"ratio {run_v / run_o:.2f} (target <= 1.2)")  # fmt: skip
    print(f"[{dtype}] vendor file vs vendor simulator: cosine {cosine:.6f}, max abs diff "
          f"{np.abs(out_v - sim).max():.3g}; argmax equal: {out_v.argmax() == sim.argmax()}")
    own_cos = float(out_o @ sim / (np.linalg.norm(out_o) * np.linalg.norm(sim)))
    print(f"[{dtype}] (rknnrt's own conversion vs vendor simulator: cosine {own_cos:.6f})")


def _run_all(ctx: rk.rknn_context, xs: list[np.ndarray], n_out: int) -> None:
    """inputs_set (float32 NCHW) + run + outputs_get of every output (as the model stores it)."""
    ins = (rk.rknn_input * len(xs))()
    for i, x in enumerate(xs):
        ins[i].index, ins[i].buf, ins[i].size = i, x.ctypes.data, x.nbytes
        ins[i].type, ins[i].fmt = rk.RKNN_TENSOR_FLOAT32, rk.RKNN_TENSOR_NCHW
    assert rk.rknn_inputs_set(ctx, len(xs), ins) == rk.RKNN_SUCC
    assert rk.rknn_run(ctx, None) == rk.RKNN_SUCC
    outs = (rk.rknn_output * n_out)()
    for i in range(n_out):
        outs[i].index = i
    assert rk.rknn_outputs_get(ctx, n_out, outs, None) == rk.RKNN_SUCC
    assert rk.rknn_outputs_release(ctx, n_out, outs) == rk.RKNN_SUCC


def bench_fixtures(folder: Path, repeat: int, only: list[str] | None) -> int:
    """Load and run ratios of every loading vendor fixture against rknnrt's conversion."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "vendor"))
    import make_arch_fixtures  # noqa: PLC0415 - the fixtures' seeded ONNX models

    from rknnrt.model import container  # noqa: PLC0415
    from rknnrt.model.errors import ModelFormatError  # noqa: PLC0415

    reported = json.loads((folder / "reported.json").read_text())
    totals = dict(load_v=0.0, load_o=0.0, run_v=0.0, run_o=0.0)
    worst = dict(load=(0.0, ""), run=(0.0, ""))
    ratios: dict[str, dict[str, float]] = {"load": {}, "run": {}}
    print(f"{'fixture':28s} {'load v/o ms':>15s} {'ratio':>6s} {'run v/o ms':>15s} {'ratio':>6s}")
    for stem in sorted(reported):
        rep = reported[stem]
        if only and rep["model"] not in only:
            continue
        vendor = (folder / f"{stem}.rknn").read_bytes()
        try:
            container.read(memoryview(vendor))
        except ModelFormatError:
            continue  # refused by name: tests/vendor/test_vendor_arch.py lists these
        with np.load(folder / f"{stem}.npz", allow_pickle=False) as data:
            xs = [np.ascontiguousarray(data[f"in{i}"][0]) for i in range(len(rep["inputs"]))]
            calib = [[data[f"in{i}"][s] for i in range(len(xs))] for s in range(len(data["in0"]))]
        rknn = RKNN()
        assert rknn.config(target_platform=rep["platform"], float_dtype="float16") == 0
        assert rknn.load_onnx(make_arch_fixtures.make_onnx(rep["model"])) == 0
        if rknn.build(do_quantization=rep["dtype"] == "i8", dataset=calib) != 0:
            print(f"{stem:28s} rknnrt's converter refuses it: {rknn.last_error}")
            continue
        own = rknn.model_bytes()
        load_v, load_o = _median_pair(lambda v=vendor: rk.rknn_destroy(_init(v)),
                                      lambda o=own: rk.rknn_destroy(_init(o)), repeat)  # fmt: skip
        ctx_v, ctx_o = _init(vendor), _init(own)
        n_out = len(rep["outputs"])
        run_v, run_o = _median_pair(lambda c=ctx_v, x=xs, n=n_out: _run_all(c, x, n),
                                    lambda c=ctx_o, x=xs, n=n_out: _run_all(c, x, n),
                                    repeat * 4)  # fmt: skip
        rk.rknn_destroy(ctx_v)
        rk.rknn_destroy(ctx_o)
        for key, value in zip(totals, (load_v, load_o, run_v, run_o)):
            totals[key] += value
        for kind, ratio in (("load", load_v / load_o), ("run", run_v / run_o)):
            worst[kind] = max(worst[kind], (ratio, stem))
            ratios[kind][stem] = ratio
        print(f"{stem:28s} {load_v * 1e3:7.1f}/{load_o * 1e3:<7.1f} {load_v / load_o:6.2f} "
              f"{run_v * 1e3:7.2f}/{run_o * 1e3:<7.2f} {run_v / run_o:6.2f}", flush=True)
    if not totals["load_o"]:
        print("no fixture loads")
        return 1
    load = totals["load_v"] / totals["load_o"]
    run = totals["run_v"] / totals["run_o"]
    print(f"all (sums of medians): load ratio {load:.2f} (target <= {LOAD_TARGET:g}), "
          f"run ratio {run:.2f} (target <= {RUN_TARGET:g})")  # fmt: skip
    print(f"worst file: load {worst['load'][0]:.2f} ({worst['load'][1]}), "
          f"run {worst['run'][0]:.2f} ({worst['run'][1]})")  # fmt: skip
    for kind, target in (("load", LOAD_TARGET), ("run", RUN_TARGET)):
        over = sorted(((r, stem) for stem, r in ratios[kind].items() if r > target), reverse=True)
        listed = ", ".join(f"{stem} {r:.2f}" for r, stem in over)
        print(f"{kind} over {target}: {len(over)} of {len(ratios[kind])} files"
              + (f" ({listed})" if over else ""))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=("fp16", "i8", "both"), default="both")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--vendor-python", default="/work/vendor_env/bin/python")
    ap.add_argument("--fixtures", type=Path, help="time a fixture set instead (no toolkit)")
    ap.add_argument("--only", nargs="*", help="with --fixtures: these models only")
    args = ap.parse_args()
    if args.fixtures:
        return bench_fixtures(args.fixtures, max(3, args.repeat // 2), args.only)
    if not os.path.exists(args.vendor_python):
        print(f"the vendor toolkit's python ({args.vendor_python}) is missing: nothing to compare")
        return 1
    for dtype in ("fp16", "i8") if args.dtype == "both" else (args.dtype,):
        with tempfile.TemporaryDirectory(prefix="rknnrt_vendor_bench_") as tmp:
            bench(dtype, Path(tmp), args.vendor_python, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
