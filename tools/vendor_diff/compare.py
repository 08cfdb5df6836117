"""rknnrt's side of the differential measurement and the comparison itself (no vendor code).

The vendor's side comes from vendor_side.py run under the vendor's python (a subprocess with
its own working folder), or from a recorded JSON fixture (tests/quant/data/), so CI compares
without the vendor package.
"""

from __future__ import annotations

import base64
import ctypes
import os
import tempfile
import zlib

import numpy as np
import onnx

import rknnrt as rk
from rknnrt.core.program import whole
from rknnrt.lite import RKNNLite
from rknnrt.model import numerics
from rknnrt.sessions import factory
from rknnrt.toolkit import RKNN, passes
from rknnrt.toolkit.quantize import quantize_model

# The vendor's renames of tensors rknnrt keeps under the ONNX name: IO copies, the reshape
# wrapped around a final op, a Gemm/MatMul output ('_mm'). Other vendor-only tensors ('_mp',
# '_sw', '_rs', '_exSecondary') are its own intermediates and are reported as such.
VENDOR_SUFFIXES = ("_int8", "-rs", "_mm")
_TYPE = {rk.RKNN_TENSOR_INT8: "int8", rk.RKNN_TENSOR_FLOAT16: "float16",
         rk.RKNN_TENSOR_FLOAT32: "float32", rk.RKNN_TENSOR_UINT8: "uint8"}  # fmt: skip


def samples(model: onnx.ModelProto, count: int, seed: int) -> list[list[np.ndarray]]:
    """uniform[0, 1) inputs in the model's layout, the measurement's fixed dataset."""
    rng = np.random.RandomState(seed)
    shapes = [[d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in model.graph.input]
    return [[rng.rand(*s).astype(np.float32) for s in shapes] for _ in range(count)]


def rknnrt_side(model: onnx.ModelProto, calib: list[list[np.ndarray]], test: list[np.ndarray],
                algorithm: str = "normal", method: str = "channel", values: bool = True,
                **options) -> dict:  # fmt: skip
    """Per-tensor (scale, zp), IO attributes and float outputs of rknnrt's int8 build;
    `values`: also each stored tensor's int8 values on the test input (two extra runs)."""
    prepared = passes.run_all(model)
    quantized = quantize_model(prepared, calib, algorithm=algorithm,
                               per_channel=method == "channel", progress=lambda d, t: None,
                               **options)  # fmt: skip
    tensors = {n: {"scale": s, "zp": z} for n, (s, z) in quantized.tensor_qparams.items()}
    for name, q in (stored_values(quantized, test) if values else {}).items():
        tensors[name]["q"] = q
    for name, q in (stored_values(quantized, test, emulate=True) if values else {}).items():
        tensors[name]["q_emulated"] = q
    rknn = RKNN()
    rknn.config(target_platform="rk3588", quantized_algorithm=algorithm,
                quantized_method=method)  # fmt: skip
    rknn.load_onnx(model)
    if rknn.build(do_quantization=True, dataset=calib) != 0:
        raise RuntimeError("rknnrt build failed")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.rknn")
        with open(path, "wb") as f:
            f.write(rknn.model_bytes())
        runtime = RKNNLite()
        runtime.load_rknn(path)
        runtime.init_runtime()
        outs = runtime.inference(test, data_format="nchw")
        io = _io_attrs(path)
        runtime.release()
    return {"tensors": tensors, "io": io, "outputs": [o.ravel().tolist() for o in outs],
            "quantized": quantized}  # fmt: skip


def stored_values(quantized, test: list[np.ndarray],
                  emulate: bool = False) -> dict[str, np.ndarray]:  # fmt: skip
    """The int8 value of every tensor rknnrt stores, on the test input: the QDQ program run
    with its quantised tensors exposed (onnxruntime, the runtime's exact-integer setting).
    `emulate`: graph optimisation off, so every op runs in float32 between its DequantizeLinear
    and QuantizeLinear, as the vendor's simulator computes (not what the runtime runs)."""
    program = onnx.ModelProto()
    program.CopyFrom(quantized.program)
    produced = {out for node in program.graph.node for out in node.output}
    exposed = {}
    for name in quantized.tensor_qparams:
        for candidate in (f"{name}__q", name):
            if candidate in produced:
                exposed[name] = candidate
                break
    return _run(program, quantized, test, exposed, {}, emulate)


def single_layer_values(quantized, test: list[np.ndarray], vendor_q: dict[str, np.ndarray],
                        exact: bool = False) -> dict[str, np.ndarray]:  # fmt: skip
    """Each tensor rknnrt stores, computed from the vendor simulator's own int8 values of
    the tensors it reads (every stored tensor with a recorded vendor value is fed in place of
    rknnrt's): only that op's own difference remains, none carried from earlier layers.
    `exact`: instead of the int8 values, the value before rounding in steps of the tensor's
    grid (float32 emulation, float64 steps), which tells a rounding tie from a rule difference."""
    program = onnx.ModelProto()
    program.CopyFrom(quantized.program)
    exposed, fed, grids = {}, {}, {}
    for node in program.graph.node:
        base = node.output[0][: -len("__q")] if node.output[0].endswith("__q") else None
        if node.op_type != "QuantizeLinear" or base not in vendor_q:
            continue
        node.output[0] = f"{base}__q_own"
        exposed[base] = node.input[0] if exact else f"{base}__q_own"
        grids[base] = quantized.tensor_qparams[base]
        program.graph.input.append(onnx.helper.make_tensor_value_info(
            f"{base}__q", onnx.TensorProto.UINT8, list(vendor_q[base].shape)))  # fmt: skip
        fed[f"{base}__q"] = (vendor_q[base].astype(np.int16) + 128).astype(np.uint8)
    if not exposed:
        return {}
    if not exact:
        return _run(program, quantized, test, exposed, fed, False)
    values = _run(program, quantized, test, exposed, fed, True, floats=True)
    return {name: v.astype(np.float64) / grids[name][0] + grids[name][1]
            for name, v in values.items()}  # fmt: skip


def off_tie(vendor_q: np.ndarray, ours_q: np.ndarray, exact: np.ndarray,
            margin: float = 0.02) -> int:
    """How many elements differ although rknnrt's value before rounding (`exact`, in steps)
    lies more than `margin` steps from a rounding tie or outside the int8 range: differences
    the two sides' float32 arithmetic cannot explain (a weight, bias or rule differs)."""
    differ = vendor_q.ravel() != ours_q.ravel()
    r = exact.ravel()
    far = (np.abs(r - np.floor(r) - 0.5) > margin) | (r < -128.5) | (r > 127.5)
    return int(np.count_nonzero(differ & far))


def _run(program: onnx.ModelProto, quantized, test: list[np.ndarray], exposed: dict,
         fed: dict, emulate: bool, floats: bool = False) -> dict[str, np.ndarray]:  # fmt: skip
    import onnxruntime as ort

    known = {o.name for o in program.graph.output}
    program.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t)
                                for t in exposed.values() if t not in known)  # fmt: skip
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.x64quantprecision", "1")
    graph = program.SerializeToString()
    if emulate:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    else:  # the graph the runtime runs (its integer island sums included)
        graph, _ = whole.execution_graph(graph, {})
    factory.register_kernels(options, graph)  # the runtime's compiled int8 kernels
    session = ort.InferenceSession(graph, options,
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    feed = dict(fed)
    for vi, x in zip(quantized.program.graph.input, test):
        scale, zp = quantized.io_qparams[vi.name]
        feed[vi.name] = numerics.quantize(x, scale, zp)
    values = session.run(list(exposed.values()), feed)
    out = {}
    for name, v in zip(exposed, values):
        if v.dtype == np.uint8:  # stored as uint8 on the same grid, zp + 128 (qdq.py)
            v = (v.astype(np.int16) - 128).astype(np.int8)
        if v.dtype == np.int8 or (floats and v.dtype == np.float32):
            out[name] = v
    return out


def _io_attrs(path: str) -> dict:
    ctx = rk.rknn_context(0)
    data = open(path, "rb").read()
    assert rk.rknn_init(ctypes.byref(ctx), data, len(data), 0, None) == 0
    num = rk.rknn_input_output_num()
    rk.rknn_query(ctx, rk.RKNN_QUERY_IN_OUT_NUM, ctypes.byref(num), ctypes.sizeof(num))
    io = {}
    for cmd, count in ((rk.RKNN_QUERY_INPUT_ATTR, num.n_input),
                       (rk.RKNN_QUERY_OUTPUT_ATTR, num.n_output)):  # fmt: skip
        for i in range(count):
            a = rk.rknn_tensor_attr(index=i)
            rk.rknn_query(ctx, cmd, ctypes.byref(a), ctypes.sizeof(a))
            io[a.name.decode()] = {"dtype": _TYPE.get(a.type, str(a.type)),
                                   "scale": float(a.scale), "zp": int(a.zp)}  # fmt: skip
    rk.rknn_destroy(ctx)
    return io


def _base_name(vname: str, known: dict | set) -> str:
    name = vname
    for suffix in VENDOR_SUFFIXES:
        if name not in known and name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def vendor_values(rknnrt_tensors: dict, vendor_tensors: dict) -> dict[str, np.ndarray]:
    """The vendor's recorded int8 values, by rknnrt's tensor names and in rknnrt's shapes."""
    out = {}
    for vname, v in vendor_tensors.items():
        name = _base_name(vname, rknnrt_tensors)
        if name in rknnrt_tensors and "q" in v and v.get("rounded") and name not in out:
            q, ours = _vendor_q(v), rknnrt_tensors[name].get("q")
            if ours is not None and q.size == ours.size:  # the vendor dumps 2-D tensors 4-D
                out[name] = q.reshape(ours.shape)
    return out


def _vendor_q(v: dict) -> np.ndarray:
    raw = zlib.decompress(base64.b64decode(v["q"]))
    return np.frombuffer(raw, np.int8).reshape(v["shape"])


def match(rknnrt_tensors: dict, vendor_tensors: dict) -> dict:
    """Pair tensors by name (vendor renames undone); per-pair agreement of the parameters; the
    set of tensors each stores (the vendor's: those its simulator rounds to their grid); and,
    where the vendor's int8 values were recorded, how many elements are equal."""
    pairs, vendor_only = {}, []
    fused_by_vendor, fused_by_rknnrt = [], []
    for vname, v in vendor_tensors.items():
        if "scale" not in v:
            continue
        name = _base_name(vname, rknnrt_tensors)
        if "rounded" in v:
            if v["rounded"] and name not in rknnrt_tensors and not vname.endswith(
                    ("_int8", "-rs", "_rs", "_sw", "_mp")):  # fmt: skip
                fused_by_rknnrt.append(vname)
            elif not v["rounded"] and name in rknnrt_tensors:
                fused_by_vendor.append(vname)
        if name in rknnrt_tensors and name not in pairs:
            r = rknnrt_tensors[name]
            rel = abs(r["scale"] - v["scale"]) / v["scale"]
            pairs[name] = {"vendor_name": vname, "rknnrt": [r["scale"], r["zp"]],
                           "vendor": [v["scale"], v["zp"]], "scale_rel": rel,
                           "agree": rel <= 1e-4 and r["zp"] == v["zp"],
                           "range_ulps": range_ulps(r["scale"], v["scale"])}  # fmt: skip
            if "q" in v and "q" in r and v.get("rounded"):
                a = _vendor_q(v).astype(np.int16).ravel()
                for key, suffix in (("q", ""), ("q_emulated", "_emulated"),
                                    ("q_single", "_single")):  # fmt: skip
                    b = np.asarray(r.get(key, []), np.int16).ravel()
                    if a.size == b.size:
                        steps = np.abs(a - b)
                        pairs[name][f"equal{suffix}"] = float(np.mean(steps == 0))
                        pairs[name][f"max_steps{suffix}"] = int(steps.max())
                single, exact = r.get("q_single"), r.get("r_single")
                if single is not None and exact is not None and exact.size == a.size:
                    pairs[name]["differ_single"] = int(np.count_nonzero(
                        a != np.asarray(single, np.int16).ravel()))  # fmt: skip
                    pairs[name]["off_tie_single"] = off_tie(a, np.asarray(single, np.int16),
                                                            exact)  # fmt: skip
        elif name not in pairs:
            vendor_only.append(vname)
    rknnrt_only = sorted(set(rknnrt_tensors) - set(pairs))
    agree = sum(p["agree"] for p in pairs.values())
    valued = [p for p in pairs.values() if "equal" in p]
    return {"pairs": pairs, "vendor_only": sorted(vendor_only), "rknnrt_only": rknnrt_only,
            "agreement": agree / max(len(pairs), 1),
            "stored_by_vendor_only": sorted(fused_by_rknnrt),
            "stored_by_rknnrt_only": sorted(fused_by_vendor),
            "valued": len(valued), "bit_equal": sum(p["equal"] == 1.0 for p in valued),
            "max_steps": max((p["max_steps"] for p in valued), default=0),
            "bit_equal_emulated": sum(p.get("equal_emulated") == 1.0 for p in valued),
            "bit_equal_single": sum(p.get("equal_single") == 1.0 for p in valued),
            "valued_single": sum("equal_single" in p for p in valued),
            "max_steps_single": max((p.get("max_steps_single", 0) for p in valued), default=0),
            "differ_single": sum(p.get("differ_single", 0) for p in valued),
            "off_tie_single": sum(p.get("off_tie_single", 0) for p in valued),
            "max_steps_emulated": max((p.get("max_steps_emulated", 0) for p in valued),
                                      default=0),
            "range_bit_equal": sum(p["range_ulps"] == 0 for p in pairs.values()),
            "range_max_ulps": max((p["range_ulps"] for p in pairs.values()), default=0),
            }  # fmt: skip


def range_ulps(scale_a: float, scale_b: float) -> int:
    """How many float32 steps apart two calibrated ranges (scale * 255, a float32 max - min)
    are: 0 where both sides' float forward passes found the same extremes to the last bit.
    Where they differ, a value at an exact .5 of the grid rounds to either side."""
    a, b = np.float32(scale_a * 255.0), np.float32(scale_b * 255.0)
    return int(abs(int(a.view(np.int32)) - int(b.view(np.int32))))


def output_steps(ours: list, vendor: list, vendor_tensors: dict, names: list[str]) -> list[dict]:
    """Per output: cosine, and the difference in the vendor's quantisation steps."""
    result = []
    for name, a, b in zip(names, ours, vendor):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        cos = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-30))
        v = vendor_tensors.get(f"{name}_int8", vendor_tensors.get(name, {}))
        entry = {"name": name, "cosine": cos}
        if "scale" in v:
            steps = numerics.half_to_even(np.abs(a - b) / v["scale"])
            entry.update(within_one=float(np.mean(steps <= 1)), max_steps=int(steps.max()))
        result.append(entry)
    return result
