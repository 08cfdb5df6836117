"""Checks a vendor .rknn file op by op against the vendor simulator's own tensors: each op of
DIR/model.rknn is rebuilt alone (rknnrt's decoder), fed the simulator's values of its inputs
(DIR/dumps.npz, written by vendor_side.py in the vendor's environment from the same build) and
its int8 output compared with the simulator's, in output steps. A differing element whose exact
value (before rounding) lies more than 0.02 steps from a .5 tie is "off tie": a weight, scale
or rule difference, not a rounding tie (tools/vendor_diff's metric). Then the whole rebuilt
graph on the test input against the simulator's outputs.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as oh

from rknnrt.model.vendor_rknn import fileformat, rebuild, registry
from rknnrt.model.vendor_rknn.fileformat import CONST_KINDS
from rknnrt.model.vendor_rknn.graph import GraphBuilder, is_helper

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


def _feed(m: fileformat.VendorModel, n: fileformat.Node, dumps: dict,
          b: GraphBuilder) -> tuple[list, dict] | list[dict]:  # fmt: skip
    """Graph inputs for op `n`'s inputs, fed the simulator's values (or an error row)."""
    ins, feeds = [], {}
    for i in n.inputs:
        t = m.tensors[i]
        if t.kind in CONST_KINDS or is_helper(t) or t.index in b.values or t.index in b.int8_values:
            continue
        value = _dump(dumps, t.name)
        if value is None:
            return [{"tensor": t.name, "error": "input not dumped"}]
        if t.qnt_type == "int8" and t.scale:
            q = np.clip(np.round(value / t.scale[0] + t.zp[0]), -128, 127).astype(np.int8)
            q = q.reshape(t.shape) if q.size == int(np.prod(t.shape)) else q
            ins.append(oh.make_tensor_value_info(t.name, TensorProto.INT8, list(q.shape)))
            scale = b.const(np.array(t.scale[0], np.float32), "scale")
            zp = b.const(np.array(t.zp[0], np.int8), "zp")
            b.int8_values[t.index] = (t.name, scale, zp)
            feeds[t.name] = q
        else:
            ins.append(oh.make_tensor_value_info(t.name, TensorProto.FLOAT, list(value.shape)))
            b.values[t.index] = b.add("Identity", [t.name], "in")
            feeds[t.name] = value.astype(np.float32)
    return ins, feeds


def pre_activation(m: fileformat.VendorModel, n: fileformat.Node, dumps: dict) -> np.ndarray:
    """rknnrt's value of a fused convolution's result before the steps fused after it (the
    output of the Conv its decoder writes), fed the simulator's inputs."""
    b = GraphBuilder(m)
    fed = _feed(m, n, dumps, b)
    if isinstance(fed, list):
        raise ValueError(fed[0]["error"])
    ins, feeds = fed
    registry.lookup(n).decode(b, n)
    conv = [x for x in b.nodes if x.op_type == "Conv"][-1].output[0]
    out = oh.make_tensor_value_info(conv, TensorProto.FLOAT, None)
    return np.asarray(_run(_finish(b, ins, [out]), feeds)[0], np.float64)


def single_op(m: fileformat.VendorModel, n: fileformat.Node, dumps: dict) -> list[dict] | None:
    """Op `n` fed the simulator's values of its inputs: per int8 output, its statistics."""
    b = GraphBuilder(m)
    fed = _feed(m, n, dumps, b)
    if isinstance(fed, list):
        return fed
    ins, feeds = fed
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


def record(entries: list[tuple[str, str, str]], out: str) -> None:
    """Write the simulator's values of the IO tensors of the ops `entries` ((dir, stem, op
    name, or '=TENSOR': that dump as it is) into `out`, keyed '<stem>/<tensor>' (int8 where
    the value lies on its grid)."""
    arrays = {}
    for directory, stem, op in entries:
        m = fileformat.parse(memoryview(open(os.path.join(directory, "model.rknn"), "rb").read()))
        with np.load(os.path.join(directory, "dumps.npz"), allow_pickle=False) as d:
            dumps = {k: d[k] for k in d.files}
        if op.startswith("="):  # a tensor the file does not store (a fused pre-activation)
            arrays[f"{stem}/{op[1:]}"] = dumps[op[1:]]
            continue
        n = next(n for n in m.nodes if n.name == op)
        for i in list(n.inputs) + list(n.outputs):
            t = m.tensors[i]
            if t.kind in CONST_KINDS or is_helper(t):
                continue
            key = next(k for k in (f"{t.name}_int8", t.name) if k in dumps)
            value = dumps[key]
            if t.qnt_type == "int8" and t.scale:
                q = value / t.scale[0] + t.zp[0]
                if np.abs(q - np.round(q)).max() < 1e-3:
                    value = np.round(q).astype(np.int8)
            arrays[f"{stem}/{t.name}"] = value
    np.savez_compressed(out, **arrays)


def recorded(path: str, stem: str, m: fileformat.VendorModel) -> dict[str, np.ndarray]:
    """The dumps of `stem` in a file written by record(), as float values by tensor name."""
    scales = {t.name: t for t in m.tensors}
    out = {}
    with np.load(path, allow_pickle=False) as d:
        for key in d.files:
            prefix, name = key.split("/", 1)
            if prefix != stem:
                continue
            v = d[key]
            if v.dtype == np.int8 and name in scales:
                t = scales[name]
                v = ((v.astype(np.float64) - t.zp[0]) * t.scale[0]).astype(np.float32)
            out[name] = v
    return out


