"""The activation and QuantizeLinear an int8 conv kernel may compute in its own pass (for
int8_islands.py): a float island whose output reaches an int8 QuantizeLinear only through a
HardSwish (one op, or HardSigmoid then Mul by the conv's value: MobileNetV3, PP-OCR), a
SiLU (Sigmoid then Mul by the conv's value: EfficientNet, every YOLO) or a Sigmoid alone (a
squeeze-and-excitation gate: EfficientNet); or, for the dense
kernel, a residual: the island's output added to a dequantised uint8 tensor of its shape, then
a Relu or Clip or nothing, then the QuantizeLinear (ResNet's, RegNet's, the MobileNets'
blocks). Those are IEEE steps (a product of integers' float32 values, a sum, a max and min, a
division), so the kernel's bytes are onnxruntime's without a probe.

The kernels compute onnxruntime's own float32 steps in its order (sessions/kernels/
epilogue.h), so the bytes are its own. For SiLU that is the rational function of its logistic
kernel evaluated with fused multiply-adds (and, for Sigmoid alone, that op's bounds), which is
a fact of this onnxruntime on this CPU, not of the operator: `exact(kind)` probes it once per
process (onnxruntime's ops, as a
program session runs them, against the library's `rknnrt_activation_run` on every path the
kernels may take, over 200k values dense near the logistic's clamp at +-18 and its
ceiling) and an activation that differs anywhere is left to onnxruntime.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ...sessions import factory, kernels, policies
from ..lazy_imports import onnx
from .int8_depthwise import _RANGES, _attr, _dq, _Lookup, _scalar

HARDSWISH, SILU, SIGMOID = 1, 2, 3  # epilogue.h's ACT_HARDSWISH, ACT_SILU, ACT_SIGMOID
_UINT8 = 2  # onnx.TensorProto.UINT8
_lock = threading.Lock()
_verdicts: dict[tuple, bool] = {}  # (library, kind, alpha, beta) -> the probe's verdict


def tail_after(g: _Lookup, node) -> tuple | None:
    """(the QuantizeLinear, the activation's nodes, {attributes of the kernel's epilogue},
    None) when `node`'s float output reaches an int8 QuantizeLinear only through a HardSwish,
    a SiLU or a Sigmoid that the kernels compute as onnxruntime does here; None otherwise."""
    out, readers = node.output[0], g.readers.get(node.output[0], [])
    if out in g.outputs or any(r.domain for r in readers):
        return None
    kinds = sorted(r.op_type for r in readers)
    if kinds == ["HardSwish"]:
        ops, kind, alpha, beta = readers, HARDSWISH, 1.0 / 6.0, 0.5
    elif kinds == ["Sigmoid"]:  # a gate: the logistic of the conv's value alone
        ops, kind, alpha, beta = readers, SIGMOID, 0.0, 0.0
    elif kinds in (["HardSigmoid", "Mul"], ["Mul", "Sigmoid"]):
        gate = next(r for r in readers if r.op_type != "Mul")
        mul = next(r for r in readers if r.op_type == "Mul")
        if sorted(mul.input) != sorted([out, gate.output[0]]) \
                or g.only_reader(gate.output[0]) is not mul:  # fmt: skip
            return None
        ops = [gate, mul]
        if gate.op_type == "Sigmoid":
            kind, alpha, beta = SILU, 0.0, 0.0
        else:
            kind, alpha, beta = HARDSWISH, _attr(gate, "alpha", 0.2), _attr(gate, "beta", 0.5)
    else:
        return None
    quant = g.only_reader(ops[-1].output[0])
    ys = _quantize_scale(g, quant)
    if ys is None:
        return None
    alpha, beta = float(np.float32(alpha)), float(np.float32(beta))
    if not exact(kind, alpha, beta):
        return None
    return quant, ops, {"activation": kind, "alpha": alpha, "beta": beta,
                        "y_scale": ys}, None  # fmt: skip


def residual_after(g: _Lookup, node) -> tuple | None:
    """(the QuantizeLinear, the nodes the kernel computes in its place, {the residual's
    attributes}, the uint8 addend) when `node`'s float output is read only by an Add of a
    DequantizeLinear of a uint8 tensor of the same recorded shape (one scale and zero point)
    whose sum reaches an int8 QuantizeLinear directly or through one Relu or Clip of
    constant bounds; None otherwise."""
    out = node.output[0]
    add = g.only_reader(out)
    if add is None or add.op_type != "Add" or add.domain or len(add.input) != 2 \
            or add.input[0] == add.input[1]:  # fmt: skip
        return None
    addend = _dq(g, add.input[1] if add.input[0] == out else add.input[0])
    if addend is None or g.elem_type(addend.input[2]) != _UINT8:
        return None
    ss, sz = _scalar(g, addend.input[1]), _scalar(g, addend.input[2])
    if ss is None or sz is None or ss.dtype != np.float32 or not np.isfinite(ss).all():
        return None
    shape = _dims(g, out)
    if shape is None or shape != _addend_dims(g, addend):
        return None  # an Add that broadcasts, or shapes not recorded
    ops, low, high = [add], -np.inf, np.inf
    after = g.only_reader(add.output[0])
    if after is not None and not after.domain and after.op_type in ("Relu", "Clip"):
        bounds = (0.0, np.inf) if after.op_type == "Relu" else _clip_bounds(g, after)
        if bounds is None:
            return None
        (low, high), ops = bounds, [add, after]
        after = g.only_reader(after.output[0])
    ys = _quantize_scale(g, after)
    if ys is None:
        return None
    if g.only_reader(addend.output[0]) is add:
        ops.append(addend)  # read by nothing else once the kernel adds
    return after, ops, {"skip_scale": float(ss), "skip_zero_point": int(sz),
                        "clip_min": float(low), "clip_max": float(high),
                        "y_scale": ys}, addend.input[0]  # fmt: skip


def _quantize_scale(g: _Lookup, quant) -> float | None:
    """The scale of `quant` when it is a QuantizeLinear to int8 or uint8 with one positive
    float32 scale and one zero point, else None."""
    if quant is None or quant.op_type != "QuantizeLinear" or quant.domain \
            or len(quant.input) != 3 or g.elem_type(quant.input[2]) not in _RANGES:  # fmt: skip
        return None
    ys, yz = _scalar(g, quant.input[1]), _scalar(g, quant.input[2])
    if ys is None or yz is None or ys.dtype != np.float32 or not float(ys) > 0:
        return None
    return float(ys)


def _clip_bounds(g: _Lookup, clip) -> tuple[float, float] | None:
    """(min, max) of a Clip, from its constant float32 inputs (opset 11 on) or attributes;
    None where one is not a constant."""
    if not clip.input[1:] and not any(a.name in ("min", "max") for a in clip.attribute):
        return -np.inf, np.inf
    if len(clip.input) == 1:
        return float(_attr(clip, "min", -np.inf)), float(_attr(clip, "max", np.inf))
    bounds = []
    for i, default in ((1, -np.inf), (2, np.inf)):
        name = clip.input[i] if len(clip.input) > i else ""
        value = _scalar(g, name) if name else np.float32(default)
        if value is None or value.dtype != np.float32:
            return None
        bounds.append(float(value.reshape(())))
    return bounds[0], bounds[1]


def _addend_dims(g: _Lookup, dequantize) -> list[int] | None:
    """The shape of a DequantizeLinear's input: recorded for it or for the DequantizeLinear's
    output, or for the float input of the QuantizeLinear that made it (the converter records
    the float tensors' shapes)."""
    quantized = dequantize.input[0]
    made = g.producer.get(quantized)
    for name in (quantized, dequantize.output[0],
                 made.input[0] if made is not None and made.op_type == "QuantizeLinear"
                 and not made.domain else ""):  # fmt: skip
        dims = _dims(g, name) if name else None
        if dims is not None:
            return dims
    return None


def _dims(g: _Lookup, name: str) -> list[int] | None:
    """The recorded shape of tensor `name` where every dimension is known, else None."""
    shape = g.shapes.get(name)
    if shape is None or not all(d.HasField("dim_value") for d in shape.dim):
        return None
    return [d.dim_value for d in shape.dim]


def probe_values() -> np.ndarray:
    """The probe's inputs: a wide sweep, dense stretches where the logistic clamps its input
    (+-18) and reaches 1, HardSwish's corners (+-3), random magnitudes, and the signed zeros."""
    rng = np.random.default_rng(0)
    return np.concatenate([
        np.linspace(-30, 30, 60001, dtype=np.float32),
        np.linspace(17.0, 18.5, 40001, dtype=np.float32),
        np.linspace(-18.5, -17.0, 20001, dtype=np.float32),
        np.linspace(-3.5, 3.5, 20001, dtype=np.float32),
        (rng.standard_normal(60000) * 6).astype(np.float32),
        np.array([0.0, -0.0, 1e-38, -1e-38, 3.0, -3.0, 18.0, -18.0], np.float32)])  # fmt: skip


def exact(kind: int, alpha: float = 1.0 / 6.0, beta: float = 0.5) -> bool:
    """Whether the kernels' activation `kind` (HardSwish with `alpha`, `beta`) gives
    onnxruntime's bytes on every path, probed once per process and library."""
    library = kernels.loaded()
    if library is None:
        return False
    key = (str(library), kind, alpha, beta)
    with _lock:
        if key not in _verdicts:
            try:
                _verdicts[key] = _probe(str(library), kind, alpha, beta)
            except Exception:  # onnxruntime raises several types: the activation stays its own
                _verdicts[key] = False
        return _verdicts[key]


def _probe(library: str, kind: int, alpha: float, beta: float) -> bool:
    x = probe_values()
    make = onnx.helper.make_node
    if kind == SILU:
        ops = [make("Sigmoid", ["x"], ["g"]), make("Mul", ["x", "g"], ["y"])]
    elif kind == SIGMOID:
        ops = [make("Sigmoid", ["x"], ["y"])]
    else:
        ops = [make("HardSigmoid", ["x"], ["g"], alpha=alpha, beta=beta),
               make("Mul", ["x", "g"], ["y"])]  # fmt: skip
    graph = onnx.helper.make_graph(ops, "probe", [onnx.helper.make_tensor_value_info(
        "x", onnx.TensorProto.FLOAT, [x.size])], [onnx.helper.make_tensor_value_info(
            "y", onnx.TensorProto.FLOAT, [x.size])])  # fmt: skip
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    want = factory.create(model.SerializeToString(), policies.PROGRAM, threads=1).run(
        None, {"x": x})[0]  # fmt: skip
    run = ctypes.CDLL(library).rknnrt_activation_run
    run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int,
                    ctypes.c_float, ctypes.c_float, ctypes.c_int]  # fmt: skip
    for level in (0, 1, 2):  # scalar, AVX2 + FMA, AVX-512 (a path absent here: the next)
        got = np.empty_like(x)
        run(x.ctypes.data, got.ctypes.data, x.size, kind, alpha, beta, level)
        if got.tobytes() != want.tobytes():
            return False
    return True
