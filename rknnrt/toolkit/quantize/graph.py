"""Which tensors the NPU stores, and graph helpers shared by the quantisation modules."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ..errors import ConversionError
from ..passes.split_concat_conv import SPLIT_MARK
from .calibrate import QParams

# Ops whose output keeps the input's quantisation (vendor: MaxPool keeps its input's scale and
# zero point); layout-only ops move bytes, they do not requantise. Not Split: the vendor
# calibrates each Split output on its own (op_zoo: split9 0.0079359/-94 under an input of
# 0.0089558/-96, tools/vendor_diff); rknnrt's former choice is SPLIT_KEEPS_INPUT_QUANT.
# AveragePool keeps its input's (ShuffleNet re-drawn: r14 = r3 = 0.0201450/-128; rknnrt had
# requantised to 0.0139953); GlobalAveragePool does not (two_io: gap 0.017957/-54 under an
# input of 0.031798/-58, the vendor rewrites it as convolutions).
KEEP_INPUT_QUANT = frozenset(
    {"MaxPool", "AveragePool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice",
     "Gather", "Identity", "DepthToSpace", "SpaceToDepth", "Resize", "Upsample"}
)  # fmt: skip
SPLIT_KEEPS_INPUT_QUANT = KEEP_INPUT_QUANT | {"Split"}
# An activation right after these is fused on the NPU: the tensor between is never stored.
# A two-input opset-9 Sum is the vendor's Add (issue 15 cause 5; ShuffleNet's residuals).
_FUSES_ACTIVATION = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sum"})
# Only Relu/Clip fuse that way. Measured (tools/vendor_diff, ocr_det_like and op_zoo): the
# vendor stores the conv output before HardSwish, LeakyRelu and Sigmoid with its own
# calibrated scale/zp (conv3 0.016927/-16 before hardswish5 0.010077/-91), and before a Relu
# with the Relu's parameters (conv9 = relu11 = 0.0086362/-128), which is the fused result.
_ACTIVATIONS = frozenset({"Relu", "Clip"})
# Ops the vendor runs in float16 when they end the model (facts: a final Softmax gives a
# float16 output, not int8). A final Sigmoid does NOT: the vendor's output is int8 (measured,
# tools/vendor_diff on two_io and yolov5s_like: 'score_int8', 'out0_int8' with zp -128).
FLOAT_OUTPUT_OPS = frozenset({"Softmax", "LogSoftmax", "Exp"})
# Layout ops that may wrap a final float op (issue 15 cause 6: after the opset 9 -> 13 upgrade
# SqueezeNet's final Softmax sits between Flatten and Reshape; the vendor's output is still
# float16).
_WRAPPING_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"})
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
    fused_adds = conv_add_fusions(graph, consumers, outputs)
    return [n for n in names if n not in fused_adds]


SUM_MARK = "__from_sum"


def sums_as_adds(model: onnx.ModelProto) -> onnx.ModelProto:
    """A two-input Sum (opset 9 models: ResNet-50, ShuffleNet) becomes an Add, as the vendor
    treats it (issue 15 cause 5), so onnxruntime runs it as an integer QLinearAdd; marked so
    that conv_add_fusions leaves its inputs stored, as the vendor does."""
    if not any(n.op_type == "Sum" and len(n.input) == 2 for n in model.graph.node):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for k, node in enumerate(out.graph.node):
        if node.op_type == "Sum" and len(node.input) == 2:
            name = f"{node.name or node.output[0]}{SUM_MARK}"
            add = onnx.helper.make_node("Add", list(node.input), list(node.output), name=name)
            out.graph.node[k].CopyFrom(add)
    return out


def conv_add_fusions(graph: onnx.GraphProto, consumers: dict, outputs: set[str]) -> set[str]:
    """Conv outputs the vendor adds inside the convolution (Conv+Add(+Relu) fusion, issue 15
    cause 5): a Conv output whose only consumer is an Add is never stored when that Conv is
    the Add's last input computed (the other operand exists when the conv runs). Measured
    (tools/vendor_diff): two_io's depthwise conv c2 in Add(r1, c2) has no int8 tensor in the
    vendor's config, while ocr_det_like's lateral convs, computed before the other operand
    of their FPN Adds, keep theirs (conv41 before resize48). Not for opset-9 Sum: re-drawn
    ResNet-50 and ShuffleNet keep both Sum inputs in the vendor's config (r11, r13 -> r14);
    fusing them there dropped ResNet-50's rknnrt-vs-vendor cosine from 0.9839 to 0.9805."""
    producers = {out: (k, node) for k, node in enumerate(graph.node) for out in node.output}
    fused: set[str] = set()
    for node in graph.node:
        if node.op_type != "Add" or len(node.input) != 2:
            continue
        if node.name.endswith((SPLIT_MARK, SUM_MARK)):  # the vendor keeps these inputs
            continue
        candidates = [
            producers[i] for i in node.input
            if i in producers and producers[i][1].op_type == "Conv" and i not in outputs
            and len(consumers.get(i, [])) == 1
        ]  # fmt: skip
        others = [producers[i][0] for i in node.input if i in producers]
        if candidates:
            index, conv = max(candidates, key=lambda item: item[0])
            if index == max(others):
                fused.add(conv.output[0])
    return fused


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


def _is_global(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    """An unpadded AveragePool whose output is 1x1: the vendor treats it as a global average
    pool, with its own parameters (ShuffleNet's final 7x7 pool r199: 0.0144099/-128 under an
    input of 0.0452584/-128). Inception v1's final 7x7 pool, padded (0, 0, 1, 1), keeps its
    input's (r138 = r137 = 0.0384654/-128)."""
    for attr in node.attribute:
        if attr.name == "pads" and any(attr.ints):
            return False
    for vi in graph.value_info:
        if vi.name == node.output[0]:
            dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            return len(dims) > 2 and all(d == 1 for d in dims[2:])
    return False


def propagate(graph: onnx.GraphProto, qparams: dict[str, QParams]) -> None:
    """Layout-only ops and MaxPool keep their input's parameters (no requantisation)."""
    for node in graph.node:
        if node.op_type == "AveragePool" and _is_global(graph, node):
            continue
        if node.op_type in KEEP_INPUT_QUANT and node.input and node.input[0] in qparams:
            for out in node.output:
                if out in qparams:
                    qparams[out] = qparams[node.input[0]]


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    used = {name for node in graph.node for name in node.input}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)


def float_output_tails(graph: onnx.GraphProto) -> tuple[set[str], set[str]]:
    """(graph outputs that are float16 because a FLOAT_OUTPUT_OPS op ends the model, possibly
    wrapped in layout ops; the tensors between that op and the output, kept float)."""
    producers = {out: node for node in graph.node for out in node.output}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    outputs, tails = set(), set()
    for vi in graph.output:
        chain, name = [], vi.name
        node = producers.get(name)
        while node is not None and node.op_type in _WRAPPING_OPS and node.input:
            chain.append(node.input[0])
            node = producers.get(node.input[0])
            if uses.get(chain[-1], 0) != 1:
                node = None
        if node is not None and node.op_type in FLOAT_OUTPUT_OPS:
            outputs.add(vi.name)
            tails.update(chain)
    return outputs, tails
