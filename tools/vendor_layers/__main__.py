"""python -m tools.vendor_layers DIR [DIR ...]   (or: --build MODEL.onnx PLATFORM DIR
   --vendor-python /work/vendor_env/bin/python)

Checks a vendor .rknn file op by op against the vendor simulator's own tensors: each op of
DIR/model.rknn is rebuilt alone (rknnrt's decoder), fed the simulator's values of its inputs
(DIR/dumps.npz, written by vendor_side.py in the vendor's environment from the same build) and
its int8 output compared with the simulator's, in output steps. A differing element whose exact
value (before rounding) lies more than 0.02 steps from a .5 tie is "off tie": a weight, scale
or rule difference, not a rounding tie (tools/vendor_diff's metric). Then the whole rebuilt
graph on the test input against the simulator's outputs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as oh

from rknnrt.model.vendor_rknn import fileformat, rebuild, registry
from rknnrt.model.vendor_rknn.fileformat import CONST_KINDS
from rknnrt.model.vendor_rknn.graph import GraphBuilder

SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor_side.py")
TIE = 0.02


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _finish(b: GraphBuilder, ins: list, outs: list) -> onnx.ModelProto:
    rebuild.place_weights(b, bytearray(0))  # inline every weight
    b.model.opset_import.add(domain="", version=rebuild.OPSET)
    b.graph.node.extend(b.nodes)
    b.graph.input.extend(ins)
    b.graph.output.extend(outs)
    return b.model


def _dump(dumps: dict, name: str) -> np.ndarray | None:
    for key in (f"{name}_int8", name):
        if key in dumps:
            return dumps[key]
    return None


def single_op(m: fileformat.VendorModel, n: fileformat.Node, dumps: dict) -> list[dict] | None:
    """Op `n` fed the simulator's values of its inputs: per int8 output, its statistics."""
    b = GraphBuilder(m)
    ins, feeds = [], {}
    for i in n.inputs:
        t = m.tensors[i]
        if t.kind in CONST_KINDS or t.index in b.values or t.index in b.int8_values:
            continue
        value = _dump(dumps, t.name)
        if value is None:
            return None
        if t.qnt_type == "int8" and t.scale:
            q = np.clip(np.round(value / t.scale[0] + t.zp[0]), -128, 127).astype(np.int8)
            ins.append(oh.make_tensor_value_info(t.name, TensorProto.INT8, list(q.shape)))
            scale = b.const(np.array(t.scale[0], np.float32), "scale")
            zp = b.const(np.array(t.zp[0], np.int8), "zp")
            b.int8_values[t.index] = (t.name, scale, zp)
            feeds[t.name] = q
        else:
            ins.append(oh.make_tensor_value_info(t.name, TensorProto.FLOAT, list(value.shape)))
            b.values[t.index] = b.add("Identity", [t.name], "in")
            feeds[t.name] = value.astype(np.float32)
    raw = registry.lookup(n).decode(b, n)
    raws = [raw] if isinstance(raw, str) else list(raw)
    outs, wanted = [], []
    for i, r in zip(n.outputs, raws):
        t = m.tensors[i]
        want = _dump(dumps, t.name)
        if not (t.qnt_type == "int8" and t.scale) or want is None:
            continue
        outs.append(oh.make_tensor_value_info(r, TensorProto.FLOAT, None))
        wanted.append((t, want))
    if not outs:
        return None
    got = _run(_finish(b, ins, outs), feeds)
    rows = []
    for (t, want), exact in zip(wanted, got):
        s, zp = float(t.scale[0]), float(t.zp[0])
        e = np.asarray(exact, np.float64).reshape(-1) / s + zp
        q_ours = np.clip(np.round(e), -128, 127)
        q_sim = np.clip(np.round(want.astype(np.float64).reshape(-1) / s + zp), -128, 127)
        if e.size != q_sim.size:
            rows.append({"tensor": t.name, "error": f"size {e.size} vs {q_sim.size}"})
            continue
        differ = q_ours != q_sim
        frac = np.abs(e - np.floor(e) - 0.5)
        off_tie = differ & (frac > TIE) & (np.abs(e) < 128)  # (saturated: no tie)
        rows.append({"tensor": t.name, "size": int(e.size), "equal": float(np.mean(~differ)),
                     "max_steps": float(np.abs(q_ours - q_sim).max()),
                     "differ": int(differ.sum()), "off_tie": int(off_tie.sum())})  # fmt: skip
    return rows


def end_to_end(m: fileformat.VendorModel, dumps: dict) -> list[dict]:
    b, ins, outs = rebuild.rebuild(m)
    rebuild.place_weights(b, bytearray(0))
    feeds = {}
    for k, (t, vi) in enumerate(zip(ins, b.graph.input)):
        x = dumps[f"__input__{k}"]
        if vi.type.tensor_type.elem_type == TensorProto.INT8:
            x = np.clip(np.round(x / t.scale[0] + t.zp[0]), -128, 127).astype(np.int8)
        feeds[vi.name] = x.astype(np.float32) if x.dtype != np.int8 else x
    got = _run(b.model, feeds)
    rows = []
    for k, (t, y) in enumerate(zip(outs, got)):
        want = dumps[f"__output__{k}"].astype(np.float64).reshape(-1)
        y = np.asarray(y, np.float64).reshape(-1)
        if y.dtype != np.float64 or t.scale:
            pass
        if np.asarray(got[k]).dtype == np.int8:
            y = (y - t.zp[0]) * t.scale[0]
        steps = np.abs(y - want) / (t.scale[0] if t.scale else 1.0)
        rows.append({"output": t.name, "within_one": float(np.mean(steps <= 1 + 1e-3)),
                     "max_steps": float(steps.max())})  # fmt: skip
    return rows


def check(directory: str, verbose: bool = True) -> dict:
    m = fileformat.parse(memoryview(open(os.path.join(directory, "model.rknn"), "rb").read()))
    with np.load(os.path.join(directory, "dumps.npz"), allow_pickle=False) as d:
        dumps = {k: d[k] for k in d.files}
    ops = []
    for n in m.nodes:
        if n.op_type in registry.BOUNDARY:
            continue
        try:
            rows = single_op(m, n, dumps)
        except Exception as e:  # noqa: BLE001 - report every op
            rows = [{"tensor": "-", "error": str(e)}]
        for r in rows or []:
            r.update(op=n.op_type, name=n.name)
            ops.append(r)
            if verbose:
                if "error" in r:
                    print(f"  {n.op_type:22s} {n.name:32s} {r['error']}")
                else:
                    print(f"  {n.op_type:22s} {n.name:32s} equal {r['equal']:8.2%} max "
                          f"{r['max_steps']:.0f} differ {r['differ']:5d} off-tie "
                          f"{r['off_tie']:5d}")  # fmt: skip
    try:
        e2e = end_to_end(m, dumps)
    except Exception as e:  # noqa: BLE001
        e2e = [{"output": "-", "error": str(e)}]
    if verbose:
        for r in e2e:
            print(f"  end to end {r}")
    return {"ops": ops, "end_to_end": e2e}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.vendor_layers")
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--build", nargs=3, metavar=("MODEL", "PLATFORM", "DIR"))
    ap.add_argument("--vendor-python", default="/work/vendor_env/bin/python")
    args = ap.parse_args(argv)
    dirs = list(args.dirs)
    if args.build:
        model, platform, out = args.build
        subprocess.run([args.vendor_python, SIDE, model, platform, out], check=True,
                       capture_output=True, timeout=900)  # fmt: skip
        dirs.append(out)
    for d in dirs:
        print(d)
        check(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
