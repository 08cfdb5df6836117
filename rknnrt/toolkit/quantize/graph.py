"""Which tensors the NPU stores, and graph helpers shared by the quantisation modules."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ..errors import ConversionError
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
     "Gather", "Identity", "DepthToSpace", "SpaceToDepth", "Resize", "Upsample",
     "GlobalMaxPool", "Expand"}
)  # fmt: skip
SPLIT_KEEPS_INPUT_QUANT = KEEP_INPUT_QUANT | {"Split"}
# An activation right after these is fused on the NPU: the tensor between is never stored.
# A two-input opset-9 Sum is the vendor's Add (issue 15 cause 5; ShuffleNet's residuals).
_COMPUTES = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
_ADDS = frozenset({"Add", "Sum"})
_FUSES_ACTIVATION = _COMPUTES | _ADDS
# Activations computed inside the producing op on its unrounded result: the tensor between is
# never stored. Measured with the vendor's simulator (the accuracy_analysis dumps that
# tools/vendor_diff records): conv3 before hardswish5 (ocr_det_like), before leakyrelu5
# (op_zoo), 'c' before a Sigmoid (sigmoid_range) are float there, not on their int8 grid,
# although the quantisation config lists a scale for them; with them fused every ocr_det_like
# tensor is bit-equal to the simulator's (before: 78% of hardswish5 equal, max 19 steps at the
# output).
# Only Relu and Clip fuse into an Add: two_io's Add before its final Sigmoid is rounded
# (`mixed-rs`), ResNet-50's Add before Relu is not (r14).
_ACTIVATIONS = frozenset({"Relu", "Clip", "HardSwish", "LeakyRelu", "Sigmoid"})
_ADD_ACTIVATIONS = frozenset({"Relu", "Clip"})
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
    only feeds an activation (or a SiLU) fused into its producer, a SiLU's Sigmoid output and
    the conv output added inside an Add (conv_add_fusions)."""
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
                and out not in outputs
                and (
                    (len(users) == 1 and users[0].op_type in (
                        _ADD_ACTIVATIONS if node.op_type in _ADDS else _ACTIVATIONS))
                    or _feeds_only_silu(out, users, consumers, outputs)
                )
            )
            if out and not fused and not _silu_gate(node, consumers.get(out, []), outputs):
                names.append(out)
    skipped = conv_add_fusions(graph, consumers, outputs)
    skipped |= _layout_before_activation(graph, consumers, outputs)
    skipped |= gelu_inner_tensors(graph, consumers, outputs)
    return [n for n in names if n not in skipped]


# Layout ops the vendor moves after a following activation (its `_sw` tensors).
_SWAPPABLE_LAYOUT = frozenset({"Reshape", "Transpose"})


def _layout_before_activation(graph: onnx.GraphProto, consumers: dict,
                              outputs: set[str]) -> set[str]:  # fmt: skip
    """Conv -> Reshape/Transpose ... -> Sigmoid (a detection head): the vendor moves the
    activation before the layout ops (`reshape99_sw`, `transpose101_sw_rs`) and fuses it into
    the conv, so neither the conv output nor the layout ops' inputs are stored. Measured:
    yolov5s_like's conv96 and conv107 are unrounded in the simulator's dumps."""
    skipped: set[str] = set()
    for node in graph.node:
        if node.op_type not in _COMPUTES:
            continue
        chain, name = [], node.output[0]
        while name not in outputs and len(consumers.get(name, [])) == 1:
            user = consumers[name][0]
            if user.op_type in _SWAPPABLE_LAYOUT and user.input[0] == name:
                chain.append(name)
                name = user.output[0]
                continue
            if user.op_type in _ACTIVATIONS and chain:
                skipped.update(chain + [name])
            break
    return skipped


def gelu_inner_tensors(graph: onnx.GraphProto, consumers: dict, outputs: set[str]) -> set[str]:
    """GELU exported in its erf form, x * (1 + Erf(x / sqrt 2)) [* 0.5] (torch's nn.GELU below
    opset 20): one activation, as the vendor runs GELU, so only its result is stored, not the
    scaled input, the Erf, the sum or the unhalved product (each rounded to int8, they cost
    tools/real_arch's DeiT-tiny cosine; tests/quant/test_real_arch.py)."""
    inner: set[str] = set()

    def only(name: str, op: str):
        users = consumers.get(name, [])
        ok = len(users) == 1 and users[0].op_type == op and name not in outputs
        return users[0] if ok else None

    for div in graph.node:
        if div.op_type != "Div" or len(div.input) != 2:
            continue
        erf = only(div.output[0], "Erf")
        add = only(erf.output[0], "Add") if erf is not None else None
        mul = only(add.output[0], "Mul") if add is not None else None
        if mul is None or div.input[0] not in mul.input:
            continue
        chain = [div.output[0], erf.output[0], add.output[0]]
        half = only(mul.output[0], "Mul")
        if half is not None:  # the final * 0.5
            chain.append(mul.output[0])
        inner.update(chain)
    return inner


def sums_as_adds(model: onnx.ModelProto) -> onnx.ModelProto:
    """A two-input Sum (opset 9 models: ResNet-50, ShuffleNet) becomes an Add, as the vendor
    treats it (issue 15 cause 5), so onnxruntime runs it as an integer QLinearAdd and the
    vendor's Conv+Add fusion applies to it."""
    if not any(n.op_type == "Sum" and len(n.input) == 2 for n in model.graph.node):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for k, node in enumerate(out.graph.node):
        if node.op_type == "Sum" and len(node.input) == 2:
            add = onnx.helper.make_node("Add", list(node.input), list(node.output), name=node.name)
            out.graph.node[k].CopyFrom(add)
    return out


# Ops whose output an Add can take inside the op (conv_add_fusions).
_ADDS_INSIDE = frozenset({"Conv", "Gemm", "MatMul"})


def conv_add_fusions(graph: onnx.GraphProto, consumers: dict, outputs: set[str]) -> set[str]:
    """Conv outputs the vendor adds inside the convolution (Conv+Add(+Relu) fusion, issue 15
    cause 5): of each two-input Add, the FIRST input (in input order) that is a Conv output
    read by nothing else is never stored. Measured with the vendor's simulator (the accuracy
    analysis dumps, tools/vendor_diff): ResNet-50's Sum(r11, r13) and Sum(r43, r45) leave r11
    and r43 unrounded and store r13, r45 (Sum(r23, r15): r23); the tiled convs' Add(tile0,
    tile1) stores only tile1; SqueezeNet's split Add(r6_conv, r8_conv) stores only r8_conv;
    two_io's Add(r1, c2) and ocr_det_like's Add(resize48, conv41) leave the conv unrounded,
    and ocr_det_like's chain Add(Add(conv64_conv, resize71_conv), resize81_conv) stores
    resize71_conv and the partial sum only. Fusing r13 instead (the later-computed conv, the
    former rule) left ResNet-50 at cosine 0.9805 against the simulator; this rule brings every
    stem tensor to within one step (ties) of it. The same for a Gemm (run as a MatMul, the
    vendor's `_mm`): two_io's Add(logits, vec) leaves `logits_mm` unrounded."""
    producers = {out: node for node in graph.node for out in node.output}
    fused: set[str] = set()
    for node in graph.node:
        if node.op_type != "Add" or len(node.input) != 2:
            continue
        for name in node.input:
            conv = producers.get(name)
            if (conv is not None and conv.op_type in _ADDS_INSIDE and name not in outputs
                    and len(consumers.get(name, [])) == 1):  # fmt: skip
                fused.add(name)
                break
    return fused


def _feeds_only_silu(out: str, users: list, consumers: dict, outputs: set[str]) -> bool:
    """`out` is read only by x * Sigmoid(x): the vendor computes the SiLU inside the conv
    (yolov5s_like: every conv before a SiLU is unrounded in the simulator's dumps; with it
    fused every tensor up to the SPPF block is bit-equal, 73% of mul7 before)."""
    if len(users) != 2:
        return False
    sig = next((u for u in users if u.op_type == "Sigmoid"), None)
    mul = next((u for u in users if u.op_type == "Mul"), None)
    return (sig is not None and mul is not None
            and _silu_gate(sig, consumers.get(sig.output[0], []), outputs))  # fmt: skip


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
