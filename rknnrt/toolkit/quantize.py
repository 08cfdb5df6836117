"""Quantisation as the vendor's toolkit does it: calibrate, choose scales, rewrite the graph.

w8a8: every tensor the NPU stores gets int8 asymmetric per-tensor parameters from calibration
('normal' = min/max; 'mmse' = the clipping range with the least quantisation error); weights are
int8 symmetric per output channel ('channel') or per tensor ('layer'); biases int32 with scale
s_in * s_w. The rewritten graph is ONNX QDQ (QuantizeLinear/DequantizeLinear around float ops),
which onnxruntime fuses into integer kernels (QLinearConv, QGemm, ...): int32 accumulation and
requantisation at each stored tensor, as on the NPU.

fp16: every stored tensor is rounded to float16 (Cast to float16 and back), weights are stored
as float16, and the model's inputs and outputs are float16.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from .errors import ConversionError

# Ops whose output keeps the input's quantisation (vendor: MaxPool keeps its input's scale and
# zero point); layout-only ops move bytes, they do not requantise.
KEEP_INPUT_QUANT = frozenset(
    {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Split",
     "Gather", "Identity", "DepthToSpace", "SpaceToDepth", "Resize", "Upsample"}
)  # fmt: skip
# An activation right after these is fused on the NPU: the tensor between is never stored.
_FUSES_ACTIVATION = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Add"})
_ACTIVATIONS = frozenset({"Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "HardSwish"})
# Ops the vendor runs in float16 when they end the model (facts: a final Softmax gives a
# float16 output, not int8).
FLOAT_OUTPUT_OPS = frozenset({"Softmax", "LogSoftmax", "Sigmoid", "Exp"})
_QUANT_WEIGHT_OPS = {"Conv": 1, "ConvTranspose": 1, "Gemm": 1, "MatMul": 1}


@dataclass(frozen=True)
class QParams:
    scale: float
    zp: int


def asymmetric(lo: float, hi: float) -> QParams:
    """The vendor's 'normal' formula: scale = (max - min) / 255, zp = -128 - round(min / scale),
    over a range widened to hold 0."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-12:
        return QParams(1.0 / 255, -128)
    scale = (hi - lo) / 255.0
    zp = int(np.clip(-128 - np.round(lo / scale), -128, 127))
    return QParams(scale, zp)


def stored_tensors(graph: onnx.GraphProto) -> list[str]:
    """Tensors the NPU writes to memory: graph inputs and node outputs, except an output that
    only feeds an activation fused into its producer."""
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    names = [i.name for i in graph.input]
    for node in graph.node:
        for out in node.output:
            users = consumers.get(out, [])
            fused = (
                node.op_type in _FUSES_ACTIVATION
                and len(users) == 1
                and users[0].op_type in _ACTIVATIONS
                and out not in outputs
            )
            if out and not fused:
                names.append(out)
    return names


class _Histogram:
    """Value range and a histogram of one tensor over every calibration sample."""

    BINS = 2048

    def __init__(self) -> None:
        self.lo, self.hi = np.inf, -np.inf
        self.samples: list[np.ndarray] = []

    def add(self, values: np.ndarray) -> None:
        flat = values.astype(np.float32, copy=False).ravel()
        if flat.size:
            self.lo, self.hi = min(self.lo, float(flat.min())), max(self.hi, float(flat.max()))
            # keep a bounded random subset for the error search
            step = max(1, flat.size // 65536)
            self.samples.append(flat[::step].copy())

    def mmse(self) -> QParams:
        """The clipping range (each end shrunk from min/max in turn) whose
        quantise-dequantise error is least."""
        values = np.concatenate(self.samples) if self.samples else np.zeros(1, np.float32)
        lo, hi = min(self.lo, 0.0), max(self.hi, 0.0)

        def error(a: float, b: float) -> float:
            qp = asymmetric(a, b)
            q = np.clip(np.round(values / qp.scale) + qp.zp, -128, 127)
            return float(np.mean(((q - qp.zp) * qp.scale - values) ** 2))

        ratios = np.geomspace(1.0, 0.01, 48)
        best = error(lo, hi)
        for _ in range(2):  # coordinate descent: the top end, then the bottom end
            for side in ("hi", "lo"):
                for r in ratios:
                    a, b = (lo, self.hi * r) if side == "hi" else (min(self.lo, 0) * r, hi)
                    e = error(a, b)
                    if e < best - 1e-15:
                        best, lo, hi = e, min(a, 0.0), max(b, 0.0)
        return asymmetric(lo, hi)


def _progress(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\rI calibrating [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")


def calibrate(
    model: onnx.ModelProto,
    samples: Sequence[list[np.ndarray]],
    tensors: list[str],
    algorithm: str,
    progress: Callable[[int, int], None] = _progress,
) -> dict[str, QParams]:
    """Run the float model on every sample and choose int8 parameters for `tensors`."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in tensors)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(probe.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])  # fmt: skip
    except Exception as exc:  # onnxruntime's errors come in several types
        raise ConversionError(f"calibration model cannot be loaded: {exc}") from None
    names = [i.name for i in model.graph.input]
    hists = {t: _Histogram() for t in tensors}
    for k, sample in enumerate(samples):
        feed = dict(zip(names, sample))
        for name in names:  # graph inputs are outputs of the probe too
            hists[name].add(feed[name]) if name in hists else None
        values = session.run([t for t in tensors if t not in names], feed)
        for t, v in zip([t for t in tensors if t not in names], values):
            hists[t].add(v)
        progress(k + 1, len(samples))
    if algorithm == "normal":
        return {t: asymmetric(h.lo, h.hi) for t, h in hists.items()}
    return {t: h.mmse() for t, h in hists.items()}


@dataclass(frozen=True)
class QuantizedProgram:
    """What quantisation hands the rest of the converter."""

    program: onnx.ModelProto  # the QDQ program
    io_qparams: dict[str, tuple[float, int]]  # (scale, zp) of the graph's int8 inputs/outputs
    tensor_qparams: dict[str, tuple[float, int]]  # (scale, zp) of every int8 tensor, by name


def quantize_model(
    model: onnx.ModelProto,
    samples: Sequence[list[np.ndarray]],
    *,
    algorithm: str = "normal",
    per_channel: bool = True,
    float_layers: Collection[str] = (),
    overrides: Mapping[str, tuple[float, int]] | None = None,
    progress: Callable[[int, int], None] = _progress,
) -> QuantizedProgram:
    """The one entry point of int8 quantisation: calibrate `model` on `samples` (normalised
    with mean/std, in the model's own layout, one array per graph input) and rewrite it as a
    w8a8 QDQ program.

    `float_layers`: names of nodes to keep in float16 (hybrid quantisation); `overrides`:
    (scale, zp) per tensor name that replace the calibrated ones (hybrid step 2's edited
    parameters)."""
    if float_layers:
        raise ConversionError("float16 layers in an int8 model are not supported yet")
    model = at_least_opset(model, 13)  # per-axis QDQ needs opset 13
    floats = float_tensors(model)
    tensors = [t for t in stored_tensors(model.graph) if t in floats]
    qparams = calibrate(model, samples, tensors, algorithm, progress)
    for name, (scale, zp) in (overrides or {}).items():
        if name in qparams:
            qparams[name] = QParams(float(scale), int(zp))
    program, io_params, _ = insert_qdq(model, qparams, per_channel)
    return QuantizedProgram(
        program,
        {name: (qp.scale, qp.zp) for name, qp in io_params.items()},
        {name: (qp.scale, qp.zp) for name, qp in qparams.items()},
    )


def load_dataset(dataset: str | Iterable, inputs: list[onnx.ValueInfoProto]) -> list[list]:
    """The vendor's dataset file (one line per sample, space-separated .npy paths, arrays in
    the model's layout) or an iterable of arrays / tuples of arrays."""
    samples: list[list[np.ndarray]] = []
    if isinstance(dataset, str):
        try:
            with open(dataset) as f:
                lines = [line.split() for line in f if line.strip()]
        except OSError as exc:
            raise ConversionError(f"cannot read dataset {dataset!r}: {exc}") from None
        for k, paths in enumerate(lines):
            if len(paths) != len(inputs):
                raise ConversionError(
                    f"dataset line {k + 1} has {len(paths)} files for {len(inputs)} inputs"
                )
            try:
                samples.append([np.load(p, allow_pickle=False) for p in paths])
            except (OSError, ValueError) as exc:
                raise ConversionError(f"dataset line {k + 1}: {exc}") from None
    else:
        for item in dataset:
            samples.append(list(item) if isinstance(item, (list, tuple)) else [item])
    if not samples:
        raise ConversionError("the calibration dataset is empty")
    for k, sample in enumerate(samples):
        for vi, array in zip(inputs, sample):
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            array = np.asarray(array)
            if list(array.shape) != shape:
                if array.size == int(np.prod(shape)) and array.ndim == len(shape) - 1:
                    array = array.reshape(shape)  # a sample without its batch dim
                else:
                    raise ConversionError(
                        f"dataset sample {k}: input '{vi.name}' has shape {list(array.shape)}, "
                        f"the model wants {shape} (NCHW, the model's own layout)"
                    )
            sample[inputs.index(vi)] = array
    return samples


def at_least_opset(model: onnx.ModelProto, version: int) -> onnx.ModelProto:
    """The model converted to the default-domain opset `version` when it is older."""
    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if current >= version:
        return model
    try:
        converted = onnx.version_converter.convert_version(model, version)
        return onnx.shape_inference.infer_shapes(converted, strict_mode=False)
    except Exception as exc:  # the converter's errors come in several types
        raise ConversionError(
            f"quantisation needs ONNX opset {version}; converting from opset {current} failed: "
            f"{exc}"
        ) from None


def float_tensors(model: onnx.ModelProto) -> set[str]:
    """Names of the float32 tensors of a shape-inferred model."""
    graph = model.graph
    infos = list(graph.input) + list(graph.value_info) + list(graph.output)
    return {vi.name for vi in infos if vi.type.tensor_type.elem_type == TensorProto.FLOAT}


def _consumers_rename(nodes: list[onnx.NodeProto], old: str, new: str) -> None:
    for node in nodes:
        for k, name in enumerate(node.input):
            if name == old:
                node.input[k] = new


def propagate(graph: onnx.GraphProto, qparams: dict[str, QParams]) -> None:
    """Layout-only ops and MaxPool keep their input's parameters (no requantisation)."""
    for node in graph.node:
        if node.op_type in KEEP_INPUT_QUANT and node.input and node.input[0] in qparams:
            for out in node.output:
                if out in qparams:
                    qparams[out] = qparams[node.input[0]]


def _weight_axis(node: onnx.NodeProto, weight: np.ndarray) -> int | None:
    if node.op_type == "Conv":
        return 0
    if node.op_type == "ConvTranspose":
        return 1
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    if node.op_type == "MatMul" and weight.ndim == 2:
        return 1
    return None


def insert_qdq(
    model: onnx.ModelProto, qparams: dict[str, QParams], per_channel: bool
) -> tuple[onnx.ModelProto, dict[str, QParams], set[str]]:
    """The w8a8 program: int8 inputs and outputs (float16 for outputs of FLOAT_OUTPUT_OPS),
    QDQ around every stored tensor, int8 weights and int32 biases.
    Returns (model, parameters of the graph's int8 inputs and outputs, float16 output names)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    propagate(graph, qparams)
    inits = {t.name: t for t in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    graph_outputs = {o.name for o in graph.output}
    float_outputs = {o for o in graph_outputs if producers.get(o) is not None
                     and producers[o].op_type in FLOAT_OUTPUT_OPS}  # fmt: skip
    head: list[onnx.NodeProto] = []
    body: list[onnx.NodeProto] = list(graph.node)
    new_inits: list[onnx.TensorProto] = []

    def const(name: str, array: np.ndarray) -> str:
        new_inits.append(numpy_helper.from_array(array, name))
        return name

    def qdq_params(name: str) -> tuple[str, str]:
        qp = qparams[name]
        return (const(f"{name}__scale", np.array(qp.scale, np.float32)),
                const(f"{name}__zp", np.array(qp.zp, np.int8)))  # fmt: skip

    io_params: dict[str, QParams] = {}
    for vi in graph.input:  # int8 inputs, dequantised for their consumers
        if vi.name in qparams:
            scale, zp = qdq_params(vi.name)
            _consumers_rename(body, vi.name, f"{vi.name}__dq")
            head.append(helper.make_node("DequantizeLinear", [vi.name, scale, zp],
                                         [f"{vi.name}__dq"]))  # fmt: skip
            vi.type.tensor_type.elem_type = TensorProto.INT8
            io_params[vi.name] = qparams[vi.name]
    rewritten: list[onnx.NodeProto] = []
    for index, node in enumerate(body):
        later = body[index + 1 :]
        _quantize_weights(node, inits, qparams, per_channel, const, head)
        rewritten.append(node)
        for k, name in enumerate(node.output):
            if name in float_outputs:
                node.output[k] = f"{name}__f"
                rewritten.append(helper.make_node("Cast", [f"{name}__f"], [name],
                                                  to=TensorProto.FLOAT16))  # fmt: skip
                continue
            if name not in qparams:
                continue
            scale, zp = qdq_params(name)
            stored = name if name in graph_outputs else f"{name}__q"
            if name in graph_outputs:
                node.output[k] = f"{name}__f"
                io_params[name] = qparams[name]
            source = node.output[k]
            rewritten.append(helper.make_node("QuantizeLinear", [source, scale, zp], [stored]))
            rewritten.append(helper.make_node("DequantizeLinear", [stored, scale, zp],
                                              [f"{name}__dq"]))  # fmt: skip
            _consumers_rename(later, name, f"{name}__dq")
    for vi in graph.output:
        if vi.name in io_params:
            vi.type.tensor_type.elem_type = TensorProto.INT8
        elif vi.name in float_outputs:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    del graph.node[:]
    graph.node.extend(head + rewritten)
    graph.initializer.extend(new_inits)
    _drop_unused_initializers(graph)
    return out, io_params, float_outputs


def _quantize_weights(node, inits, qparams, per_channel, const, head) -> None:
    """int8 symmetric weights (per output channel or per tensor) and int32 biases."""
    if node.op_type not in _QUANT_WEIGHT_OPS or len(node.input) < 2:
        return
    weight = inits.get(node.input[1])
    if weight is None or weight.data_type != TensorProto.FLOAT:
        return
    w = numpy_helper.to_array(weight).astype(np.float64)
    axis = _weight_axis(node, w)
    if axis is None:
        return
    source = node.input[0]
    if source.endswith("__dq"):
        source = source[: -len("__dq")]
    in_qp = qparams.get(source)
    if per_channel:
        other = tuple(d for d in range(w.ndim) if d != axis)
        scale = np.max(np.abs(w), axis=other) / 127.0
    else:
        scale = np.array([np.max(np.abs(w)) / 127.0])
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    broadcast = scale.reshape(shape) if per_channel else scale[0]
    q = np.clip(np.round(w / broadcast), -127, 127).astype(np.int8)
    name = node.input[1]
    s = const(f"{name}__wscale", scale if per_channel else np.array(scale[0], np.float32))
    z = const(f"{name}__wzp", np.zeros(scale.shape if per_channel else (), np.int8))
    qname = const(f"{name}__q", q)
    attrs = {"axis": axis} if per_channel else {}
    head.append(helper.make_node("DequantizeLinear", [qname, s, z], [f"{name}__dq"], **attrs))
    node.input[1] = f"{name}__dq"
    if len(node.input) > 2 and node.input[2] in inits and in_qp is not None:
        bias_name = node.input[2]
        bias = numpy_helper.to_array(inits[bias_name]).astype(np.float64)
        bias_scale = (in_qp.scale * scale).astype(np.float32)
        if not per_channel:
            bias_scale = np.full(bias.shape, bias_scale[0], np.float32)
        bq = np.clip(np.round(bias / bias_scale), -(2**31), 2**31 - 1).astype(np.int32)
        bs = const(f"{bias_name}__bscale", bias_scale)
        bz = const(f"{bias_name}__bzp", np.zeros(bias.shape, np.int32))
        bqn = const(f"{bias_name}__q", bq)
        head.append(helper.make_node("DequantizeLinear", [bqn, bs, bz], [f"{bias_name}__dq"],
                                     axis=0))  # fmt: skip
        node.input[2] = f"{bias_name}__dq"


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    used = {name for node in graph.node for name in node.input}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)


def emulate_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """The fp16 program: float16 inputs, outputs and weights; every stored tensor rounded to
    float16 (computation between stored tensors stays float32, as the NPU accumulates)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    floats = float_tensors(out)
    stored = [t for t in stored_tensors(graph) if t in floats]
    graph_inputs = {vi.name for vi in graph.input}
    graph_outputs = {vi.name for vi in graph.output}
    head: list[onnx.NodeProto] = []
    body = list(graph.node)
    for tensor in list(graph.initializer):
        if tensor.data_type == TensorProto.FLOAT and tensor.name not in graph_inputs:
            half = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16),
                                           f"{tensor.name}__fp16")  # fmt: skip
            graph.initializer.remove(tensor)
            graph.initializer.append(half)
            head.append(helper.make_node("Cast", [half.name], [tensor.name], to=TensorProto.FLOAT))
    for vi in graph.input:
        if vi.name in floats:
            _consumers_rename(body, vi.name, f"{vi.name}__f32")
            head.append(helper.make_node("Cast", [vi.name], [f"{vi.name}__f32"],
                                         to=TensorProto.FLOAT))  # fmt: skip
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    rewritten: list[onnx.NodeProto] = []
    stored_set = set(stored) - graph_inputs
    for index, node in enumerate(body):
        rewritten.append(node)
        for k, name in enumerate(node.output):
            if name not in stored_set:
                continue
            if name in graph_outputs:
                node.output[k] = f"{name}__f"
                rewritten.append(helper.make_node("Cast", [f"{name}__f"], [name],
                                                  to=TensorProto.FLOAT16))  # fmt: skip
                rewritten.append(helper.make_node("Cast", [name], [f"{name}__r"],
                                                  to=TensorProto.FLOAT))  # fmt: skip
            else:
                node.output[k] = f"{name}__f"
                rewritten.append(helper.make_node("Cast", [f"{name}__f"], [f"{name}__h"],
                                                  to=TensorProto.FLOAT16))  # fmt: skip
                rewritten.append(helper.make_node("Cast", [f"{name}__h"], [f"{name}__r"],
                                                  to=TensorProto.FLOAT))  # fmt: skip
            _consumers_rename(body[index + 1 :], name, f"{name}__r")
    for vi in graph.output:
        if vi.name in stored_set:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    del graph.node[:]
    graph.node.extend(head + rewritten)
    _drop_unused_initializers(graph)
    return out
