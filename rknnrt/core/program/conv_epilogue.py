"""The activation and QuantizeLinear an int8 conv kernel may compute in its own pass (for
int8_islands.py): a float island whose output reaches an int8 QuantizeLinear only through a
HardSwish (one op, or HardSigmoid then Mul by the conv's value: MobileNetV3, PP-OCR) or a
SiLU (Sigmoid then Mul by the conv's value: EfficientNet, every YOLO).

The kernels compute onnxruntime's own float32 steps in its order (sessions/kernels/
epilogue.h), so the bytes are its own. For SiLU that is the rational function of its logistic
kernel evaluated with fused multiply-adds, which is a fact of this onnxruntime on this CPU,
not of the operator: `exact(kind)` probes it once per process (onnxruntime's two ops, as a
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
from .int8_depthwise import _RANGES, _attr, _Lookup, _scalar

HARDSWISH, SILU = 1, 2  # epilogue.h's ACT_HARDSWISH, ACT_SILU
_lock = threading.Lock()
_verdicts: dict[tuple, bool] = {}  # (library, kind, alpha, beta) -> the probe's verdict


def tail_after(g: _Lookup, node) -> tuple | None:
    """(the QuantizeLinear, the activation's nodes, {attributes of the kernel's epilogue}) when
    `node`'s float output reaches an int8 QuantizeLinear only through a HardSwish or a SiLU
    that the kernels compute as onnxruntime does here; None otherwise."""
    out, readers = node.output[0], g.readers.get(node.output[0], [])
    if out in g.outputs or any(r.domain for r in readers):
        return None
    kinds = sorted(r.op_type for r in readers)
    if kinds == ["HardSwish"]:
        ops, kind, alpha, beta = readers, HARDSWISH, 1.0 / 6.0, 0.5
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
    if quant is None or quant.op_type != "QuantizeLinear" or quant.domain \
            or len(quant.input) != 3 or g.elem_type(quant.input[2]) not in _RANGES:  # fmt: skip
        return None
    ys, yz = _scalar(g, quant.input[1]), _scalar(g, quant.input[2])
    if ys is None or yz is None or ys.dtype != np.float32 or not float(ys) > 0:
        return None
    alpha, beta = float(np.float32(alpha)), float(np.float32(beta))
    if not exact(kind, alpha, beta):
        return None
    return quant, ops, {"activation": kind, "alpha": alpha, "beta": beta,
                        "y_scale": float(ys)}  # fmt: skip


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
