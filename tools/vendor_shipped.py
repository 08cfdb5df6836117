"""python3 -m tools.vendor_shipped TOOLKIT_DIR [--json OUT.json]

Replay the `.rknn` files shipped in a snapshot of airockchip/rknn-toolkit2 (issue 24; never
committed): for each file, rknn_init, every query a demo makes (IO numbers and attributes,
native attributes, custom string, memory sizes), then one run. A file with custom ops is run as
its demo runs it: once before registration (must fail with one E line), then with the op
registered, written here from its documented behaviour (below). Inputs are the demo's own where
the snapshot stores them (`<model>_input_<k>_nhwc.npy` beside the model folder), else seeded
random values; a demo's stored outputs (`<model>_output_<k>.bin`, float32) are compared.

Custom ops known here:
- cstDualResidual (rknpu2 rknn_custom_pytorch_op_demo, toolkit examples/functions/custom_op):
  (x alpha - y, y alpha - x), alpha its float attribute.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import numpy as np

import rknnrt as rk
from rknnrt.core import log


def _alpha(op_ctx) -> float:  # type: ignore[no-untyped-def]
    attr = rk.rknn_custom_op_attr()
    rk.rknn_custom_op_get_op_attr(op_ctx, b"alpha", ctypes.byref(attr))
    if attr.n_elems != 1 or attr.dtype != rk.RKNN_TENSOR_FLOAT32:
        raise ValueError("cstDualResidual needs a float32 attribute alpha")
    return float(ctypes.cast(attr.data, ctypes.POINTER(ctypes.c_float))[0])


def _floats(t: rk.rknn_custom_op_tensor) -> np.ndarray:
    pointer = ctypes.cast(t.mem.virt_addr + t.mem.offset, ctypes.POINTER(ctypes.c_float))
    return np.ctypeslib.as_array(pointer, (t.attr.n_elems,))


def _dual_residual(op_ctx, ins, n_in, outs, n_out) -> int:  # type: ignore[no-untyped-def]
    alpha = np.float32(_alpha(op_ctx))
    x, y = _floats(ins[0]), _floats(ins[1])
    _floats(outs[0])[:] = x * alpha - y
    _floats(outs[1])[:] = y * alpha - x
    return 0


KNOWN_OPS = {"cstDualResidual": _dual_residual}
_KEEP: list = []  # the ctypes callbacks live as long as the process


def _op(op_type: str) -> rk.rknn_custom_op:
    op = rk.rknn_custom_op()
    op.version, op.target, op.op_type = 1, rk.RKNN_TARGET_TYPE_CPU, op_type.encode()
    callback = rk.rknn_custom_op_callback(KNOWN_OPS[op_type])
    _KEEP.append(callback)
    op.compute = callback
    return op


def _query(ctx: rk.rknn_context) -> dict:
    io = rk.rknn_input_output_num()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(io), ctypes.sizeof(io)) == 0
    attrs = {}
    for kind, count in (("INPUT", io.n_input), ("OUTPUT", io.n_output)):
        for query in (f"RKNN_QUERY_{kind}_ATTR", f"RKNN_QUERY_NATIVE_{kind}_ATTR"):
            for i in range(count):
                a = rk.rknn_tensor_attr(index=i)
                status = rk.rknn_query(ctx, getattr(rk, query), ctypes.byref(a), ctypes.sizeof(a))
                if status != 0:
                    raise RuntimeError(f"{query} {i}: {status}")
                dims = list(a.dims[: a.n_dims])
                attrs.setdefault(query[11:], []).append(
                    f"{a.name.decode()} {dims} {rk.get_type_string(a.type)} "
                    f"{rk.get_format_string(a.fmt)}")  # fmt: skip
    custom = rk.rknn_custom_string()
    mem = rk.rknn_mem_size()
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_CUSTOM_STRING, ctypes.byref(custom),
                         ctypes.sizeof(custom)) == 0  # fmt: skip
    assert rk.rknn_query(ctx, rk.RKNN_QUERY_MEM_SIZE, ctypes.byref(mem), ctypes.sizeof(mem)) == 0
    return dict(n_input=io.n_input, n_output=io.n_output, attrs=attrs,
                custom_string=custom.string.decode(errors="replace"),
                weight=mem.total_weight_size, internal=mem.total_internal_size)  # fmt: skip


def _inputs(path: Path, ctx: rk.rknn_context, n: int) -> tuple[list[np.ndarray], str]:
    """The demo's stored NHWC inputs if any, else seeded random NCHW float32 inputs."""
    stem = path.stem.replace("_custom", "")
    stored = [path.parent.parent / f"{stem}_input_{k}_nhwc.npy" for k in range(n)]
    if all(p.exists() for p in stored):
        return [np.load(p, allow_pickle=False).astype(np.float32) for p in stored], "NHWC"
    rng = np.random.default_rng(0)
    xs = []
    for i in range(n):
        a = rk.rknn_tensor_attr(index=i)
        rk.rknn_query(ctx, rk.RKNN_QUERY_INPUT_ATTR, ctypes.byref(a), ctypes.sizeof(a))
        dims = list(a.dims[: a.n_dims])
        if a.fmt == rk.RKNN_TENSOR_NHWC:  # queried as NHWC: give NCHW
            dims = [dims[0], dims[3], dims[1], dims[2]]
        xs.append(rng.uniform(0, 1, dims).astype(np.float32))
    return xs, "NCHW"


def _run(ctx: rk.rknn_context, xs: list[np.ndarray], fmt: str, n_out: int) -> tuple[int, list]:
    ins = (rk.rknn_input * len(xs))()
    for i, x in enumerate(xs):
        ins[i].index, ins[i].buf, ins[i].size = i, x.ctypes.data, x.nbytes
        ins[i].type = rk.RKNN_TENSOR_FLOAT32
        ins[i].fmt = rk.RKNN_TENSOR_NHWC if fmt == "NHWC" and x.ndim == 4 else rk.RKNN_TENSOR_NCHW
    assert rk.rknn_inputs_set(ctx, len(xs), ins) == 0
    status = rk.rknn_run(ctx, None)
    if status != 0:
        return status, []
    outs = (rk.rknn_output * n_out)()
    for i in range(n_out):
        outs[i].index, outs[i].want_float = i, 1
    assert rk.rknn_outputs_get(ctx, n_out, outs, None) == 0
    got = [np.frombuffer(ctypes.string_at(o.buf, o.size), np.float32).copy() for o in outs]
    assert rk.rknn_outputs_release(ctx, n_out, outs) == 0
    return 0, got


def replay(path: Path) -> dict:
    """One shipped file's outcome."""
    from rknnrt.model.vendor_rknn import fileformat

    data = path.read_bytes()
    row: dict = dict(file=str(path))
    ctx = rk.rknn_context()
    status = rk.rknn_init(ctypes.byref(ctx), data, len(data), 0, None)
    if status != 0:
        return dict(row, init=status, error=log.last_error() if hasattr(log, "last_error") else "")
    row.update(init=0, **_query(ctx))
    custom = list(fileformat.parse(memoryview(data)).custom_op_types)
    row["custom_ops"] = custom
    xs, fmt = _inputs(path, ctx, row["n_input"])
    row["inputs"] = "the demo's" if fmt == "NHWC" else "random"
    if custom:
        row["run_unregistered"] = _run(ctx, xs, fmt, row["n_output"])[0]
        rk.rknn_destroy(ctx)  # a run closes registration: a fresh context, as a demo has
        ctx = rk.rknn_context()
        assert rk.rknn_init(ctypes.byref(ctx), data, len(data), 0, None) == 0
        unknown = [t for t in custom if t not in KNOWN_OPS]
        if unknown:
            rk.rknn_destroy(ctx)
            return dict(row, run=f"no op written here for {unknown}")
        ops = (rk.rknn_custom_op * len(custom))(*[_op(t) for t in custom])
        row["register"] = rk.rknn_register_custom_ops(ctx, ops, len(custom))
    status, outs = _run(ctx, xs, fmt, row["n_output"])
    row["run"] = status
    if status == 0:
        row["finite"] = bool(all(np.isfinite(o).all() for o in outs))
        stem = path.stem.replace("_custom", "")
        refs = [path.parent.parent / f"{stem}_output_{k}.bin" for k in range(len(outs))]
        if outs and all(p.exists() for p in refs):
            cmp = []
            for got, p in zip(outs, refs):
                want = np.fromfile(p, np.float32)
                cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
                cmp.append(dict(cosine=cos, max_abs=float(np.abs(got - want).max())))
            row["vs_stored_outputs"] = cmp
    rk.rknn_destroy(ctx)
    return row


def _line(row: dict) -> str:
    name = "/".join(Path(row["file"]).parts[-2:])
    if row["init"] != 0:
        return f"{name}: rknn_init {row['init']}"
    text = (f"{name}: loads; {row['n_input']} in / {row['n_output']} out, "
            f"weight {row['weight']} B, internal {row['internal']} B")  # fmt: skip
    if row["custom_ops"]:
        text += (f"; custom {','.join(row['custom_ops'])}: run before registration "
                 f"{row['run_unregistered']}, register {row.get('register')}")  # fmt: skip
    text += f"; run {row['run']} ({row['inputs']} inputs)"
    for k, c in enumerate(row.get("vs_stored_outputs", [])):
        text += f"; output {k} vs stored: cosine {c['cosine']:.7f}, max abs {c['max_abs']:.3g}"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("toolkit", help="a checkout or snapshot of airockchip/rknn-toolkit2")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    files = sorted(Path(args.toolkit).rglob("*.rknn"))
    rows = [replay(p) for p in files]
    for row in rows:
        print(_line(row))
    loads = sum(r["init"] == 0 for r in rows)
    runs = sum(r.get("run") == 0 for r in rows)
    print(f"\n{loads} of {len(rows)} files load, {runs} run")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if loads == runs == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
