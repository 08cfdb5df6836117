"""Replay vendor files of the real-architecture set at its real input size: the files a user's
toolkit exports for each platform and dtype (built by the vendor's toolkit in its own python,
real_size_vendor.py; never committed: ResNet-18 alone is 12 MB a file), loaded and run by rknnrt
through the C-shaped API, against the vendor's simulator on the same input.

    PYTHONPATH=. python3 -m tools.vendor_diff.real_size OUT [--vendor-python PY]
        [--platforms rk3588,...] [--dtypes i8,fp16] [NAME ...]

Writes OUT/onnx/NAME.onnx, each network's calibration samples (2 of uniform[0,1), seed 0) and
input, runs the vendor side (files already built are kept), then prints one row per file:
whether rknn_init accepts it (else its E line), the cosine of rknnrt's outputs against the
simulator's and, for int8 outputs, the share within one step of the output's quantisation
(RKNN_QUERY_OUTPUT_ATTR's scale) and the largest step; beside them each side's cosine against
onnxruntime float32 on the original model, which tells a chaotically sensitive network (both
sides equally far from float32, further from each other) from a rule difference.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import rknnrt as rk
from tools.real_arch import catalog

from .real_arch import cosine

VENDOR_SCRIPT = Path(__file__).with_name("real_size_vendor.py")
PLATFORMS = ("rk3588", "rk3576", "rk3566", "rk3562", "rv1126b")
BUILD_TIMEOUT_S = 3600  # one file's build and simulation (DeepLabV3 at 513 x 513: ~10 min)


@dataclass
class Row:
    stem: str
    init: int  # rknn_init's status
    error: str = ""  # its E line where it fails
    cos: float = float("nan")  # rknnrt vs the simulator (the first output)
    within_one: float = float("nan")  # int8 outputs: share within one step
    max_steps: float = float("nan")
    cos_float: float = float("nan")  # rknnrt vs onnxruntime float32
    sim_cos_float: float = float("nan")  # the simulator vs onnxruntime float32


def prepare(root: Path, names: list[str], test: bool = False, calib: int = 2) -> None:
    """Each network's ONNX (`test`: at its reduced size), `calib` calibration samples and test
    input (seeded uniform[0, 1); written once)."""
    (root / "onnx").mkdir(parents=True, exist_ok=True)
    for name in names:
        folder = root / name
        if (folder / "input.npy").exists():
            continue
        folder.mkdir(exist_ok=True)
        onnx.save(catalog.build(name, test=test), str(root / "onnx" / f"{name}.onnx"))
        shape = catalog.input_shape(name, test)
        rng = np.random.RandomState(0)
        paths = []
        for k in range(calib):
            paths.append(str(folder / f"calib{k}.npy"))
            np.save(paths[-1], rng.rand(*shape).astype(np.float32))
        (folder / "dataset.txt").write_text("\n".join(paths) + "\n")
        np.save(folder / "input.npy", rng.rand(*shape).astype(np.float32))


def build_vendor(python: str, root: Path, names: list[str], platforms: list[str],
                 dtypes: list[str]) -> None:  # fmt: skip
    """The vendor's files and simulator outputs of what prepare() wrote (real_size_vendor.py
    in the vendor's python, one process a file: the toolkit's compiler can abort the process,
    rv1106's on YOLOv5s with "Squeezed bytes overflow!"). A failed build leaves its reason,
    which vendor_outputs reports."""
    for name in names:
        for platform in platforms:
            for dtype in dtypes:
                stem = root / name / f"{name}_{platform}_{dtype}"
                failed = stem.with_name(stem.name + "_failed.txt")
                try:
                    done = subprocess.run([python, str(VENDOR_SCRIPT), str(root), platform,
                                           dtype, name], capture_output=True, text=True,
                                          timeout=BUILD_TIMEOUT_S)  # fmt: skip
                except subprocess.TimeoutExpired:
                    failed.write_text(f"the toolkit took more than {BUILD_TIMEOUT_S} s\n")
                    continue
                if done.returncode != 0 and not failed.exists():
                    errors = [line for line in (done.stdout + done.stderr).splitlines()
                              if line.startswith("E ") or "\x1b[1;31mE" in line]  # fmt: skip
                    failed.write_text(f"the toolkit's process ended with {done.returncode}: "
                                      + (errors[-1] if errors else "no error line") + "\n")


def vendor_outputs(root: Path, name: str, platform: str,
                   dtype: str) -> tuple[Path, list[np.ndarray]] | str:  # fmt: skip
    """(the vendor's file, its simulator's outputs on the input), or why there are none."""
    stem = root / name / f"{name}_{platform}_{dtype}"
    sim = stem.with_name(stem.name + "_sim.npz")
    if not sim.exists():
        failed = stem.with_name(stem.name + "_failed.txt")
        why = failed.read_text().strip().splitlines()[-1] if failed.exists() else "not built"
        return f"the vendor's build failed: {why}"
    with np.load(sim, allow_pickle=False) as data:
        return stem.with_suffix(".rknn"), [data[f"arr_{i}"] for i in range(len(data.files))]


def query_attr(ctx: rk.rknn_context, cmd: int, index: int) -> rk.rknn_tensor_attr:
    """Tensor `index`'s attributes by query `cmd` (an input's or an output's)."""
    attr = rk.rknn_tensor_attr(index=index)
    if rk.rknn_query(ctx, cmd, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        raise RuntimeError(f"rknn_query {cmd} of tensor {index} failed")
    return attr


def run_zero_copy(ctx: rk.rknn_context,
                  inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list]:  # fmt: skip
    """One run with float32 NCHW inputs and float32 outputs bound as zero-copy memory (the one
    IO path every platform's runtime has: rv1106's has no rknn_inputs_set), and the outputs'
    RKNN_QUERY_OUTPUT_ATTR attributes."""
    num = rk.rknn_input_output_num()
    if rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num), ctypes.sizeof(num)):
        raise RuntimeError("RKNN_QUERY_IN_OUT_NUM failed")
    mems, outs, attrs = [], [], []
    try:
        for i, x in enumerate(inputs):
            attr = query_attr(ctx, rk.RKNN_QUERY_INPUT_ATTR, i)
            x = np.ascontiguousarray(x, np.float32)
            attr.type = rk.RKNN_TENSOR_FLOAT32
            attr.fmt = rk.RKNN_TENSOR_NCHW if x.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED
            mems.append(rk.rknn_create_mem(ctx, x.nbytes))
            ctypes.memmove(mems[-1].contents.virt_addr, x.ctypes.data, x.nbytes)
            if rk.rknn_set_io_mem(ctx, mems[-1], attr) != 0:
                raise RuntimeError(f"rknn_set_io_mem of input {i} failed")
        for i in range(num.n_output):
            attr = query_attr(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, i)
            attrs.append(query_attr(ctx, rk.RKNN_QUERY_OUTPUT_ATTR, i))
            attr.type = rk.RKNN_TENSOR_FLOAT32
            mems.append(rk.rknn_create_mem(ctx, attr.n_elems * 4))
            if rk.rknn_set_io_mem(ctx, mems[-1], attr) != 0:
                raise RuntimeError(f"rknn_set_io_mem of output {i} failed")
            outs.append((mems[-1], list(attr.dims[: attr.n_dims])))
        if rk.rknn_run(ctx, None) != 0:
            raise RuntimeError("rknn_run failed")
        result = [np.frombuffer((ctypes.c_char * (4 * int(np.prod(dims))))
                                .from_address(mem.contents.virt_addr), np.float32)
                  .reshape(dims).copy() for mem, dims in outs]  # fmt: skip
    finally:
        for mem in mems:
            rk.rknn_destroy_mem(ctx, mem)
    return result, attrs


def replay(rknn_path: Path, x: np.ndarray, sim: list[np.ndarray],
           reference: np.ndarray | None = None) -> Row:  # fmt: skip
    """One vendor file against its simulator outputs `sim` (and float32 `reference`)."""
    data = rknn_path.read_bytes()
    ctx = rk.rknn_context()
    lines = io.StringIO()
    with contextlib.redirect_stderr(lines):
        status = rk.rknn_init(ctypes.byref(ctx), data, len(data), 0, None)
    stem = rknn_path.stem
    if status != 0:
        errors = [line for line in lines.getvalue().splitlines() if line.startswith("E")]
        return Row(stem, status, errors[-1] if errors else "")
    try:
        got, attrs = run_zero_copy(ctx, [x])
    finally:
        rk.rknn_destroy(ctx)
    ours, want = got[0].astype(np.float64).ravel(), np.ravel(sim[0]).astype(np.float64)
    row = Row(stem, 0, cos=cosine(ours, want))
    if attrs[0].type == rk.RKNN_TENSOR_INT8 and attrs[0].scale > 0:
        steps = np.abs(ours - want) / attrs[0].scale
        row.within_one, row.max_steps = float(np.mean(steps <= 1 + 1e-3)), float(steps.max())
    if reference is not None:
        row.cos_float, row.sim_cos_float = cosine(ours, reference), cosine(want, reference)
    return row


def table(root: Path, names: list[str], platforms: list[str], dtypes: list[str]) -> list[Row]:
    rows = []
    for name in names:
        folder = root / name
        x = np.load(folder / "input.npy", allow_pickle=False)
        session = ort.InferenceSession(str(root / "onnx" / f"{name}.onnx"),
                                       providers=["CPUExecutionProvider"])  # fmt: skip
        reference = np.ravel(session.run(None, {session.get_inputs()[0].name: x})[0])
        for platform in platforms:
            for dtype in dtypes:
                found = vendor_outputs(root, name, platform, dtype)
                if isinstance(found, str):
                    rows.append(Row(f"{name}_{platform}_{dtype}", -1, f"({found})"))
                else:
                    rows.append(replay(found[0], x, found[1], reference))
                print(_line(rows[-1]), flush=True)
    return rows


def _line(r: Row) -> str:
    if r.init != 0:
        return f"| {r.stem} | refused ({r.init}) | {r.error} | | | |"
    steps = f"{r.within_one:.4f} (max {r.max_steps:.0f})" if r.within_one == r.within_one else ""
    return (f"| {r.stem} | {r.cos:.6f} | {steps} | {r.cos_float:.6f} | {r.sim_cos_float:.6f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--vendor-python", default="/work/vendor_env/bin/python")
    ap.add_argument("--platforms", default=",".join(PLATFORMS))
    ap.add_argument("--dtypes", default="i8,fp16")
    ap.add_argument("names", nargs="*", default=list(catalog.NETWORKS))
    args = ap.parse_intermixed_args()
    prepare(args.out, args.names)
    if os.path.exists(args.vendor_python):
        build_vendor(args.vendor_python, args.out, args.names, args.platforms.split(","),
                     args.dtypes.split(","))  # fmt: skip
    print("| file | cosine vs simulator | int8 within one step | rknnrt vs float32 | "
          "simulator vs float32 |\n|---|---|---|---|---|")
    table(args.out, args.names, args.platforms.split(","), args.dtypes.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
