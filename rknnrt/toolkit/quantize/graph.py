"""Which tensors the NPU stores, and graph helpers shared by the quantisation modules."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ..errors import ConversionError
from .calibrate import QParams

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
# float16 output, not int8). A final Sigmoid does NOT: the vendor's output is int8 (measured,
# tools/vendor_diff on two_io and yolov5s_like: 'score_int8', 'out0_int8' with zp -128).
FLOAT_OUTPUT_OPS = frozenset({"Softmax", "LogSoftmax", "Exp"})
_QUANT_WEIGHT_OPS = {"Conv": 1, "ConvTranspose": 1, "Gemm": 1, "MatMul": 1}


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
            if out and not fused and not _silu_gate(node, users, outputs):
                names.append(out)
    return names


def _silu_gate(node: onnx.NodeProto, users: list[onnx.NodeProto], outputs: set[str]) -> bool:
    """x * Sigmoid(x) (SiLU/Swish) is one NPU op: the Sigmoid's output is never stored.
    Measured: the vendor's quantisation config of yolov5s_like lists the conv and Mul
    outputs of every SiLU and no Sigmoid output (tools/vendor_diff)."""
    return (
        node.op_type == "Sigmoid"
        and len(users) == 1
        and users[0].op_type == "Mul"
        and node.input[0] in users[0].input
        and node.output[0] not in outputs
    )


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


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    used = {name for node in graph.node for name in node.input}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
