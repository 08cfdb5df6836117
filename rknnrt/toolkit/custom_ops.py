"""Custom operators in the converter (RKNN.reg_custom_op; docs/custom-ops.md).

A registered op follows the toolkit2 class convention: `op_type`, `shape_infer(node, in_shapes,
in_dtypes) -> (out_shapes, out_dtypes)` and `compute(node, inputs) -> outputs`, where `node`
is the onnx NodeProto (read attributes with `get_node_attr`).

The converter works on a *cut* model: every custom node is taken out, its outputs become
extra graph inputs and its inputs extra graph outputs. That model is plain ONNX, so the graph
passes, fp16 emulation and int8 calibration run on it unchanged; calibration samples for the
extra inputs come from the op's own `compute`. `stitch` then puts the custom nodes back in the
storage domain of model/custom_ops.py, with the conversions around them that make the op see
float32 (DequantizeLinear / Cast before, QuantizeLinear / Cast after): so the tensors that cross
between the NPU segments and the CPU op are int8 (or float16) exactly as the NPU stores them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..model.custom_ops import CUSTOM_DOMAIN, attribute_value
from ..sessions import factory, policies
from .dataset import Samples, as_samples
from .errors import ConversionError

_CUT = "__cst_in"  # a graph output of the cut model that is also one of its inputs


def get_node_attr(node: onnx.NodeProto, name: str) -> Any:
    """An attribute of a custom node: a number, a list, a numpy array or a str (None if absent)."""
    for attr in node.attribute:
        if attr.name == name:
            value = attribute_value(attr)
            if isinstance(value, bytes):
                return value.decode()
            if attr.type in (onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT):
                return value[0].item()
            return value
    return None


def check_op(op: Any) -> str:
    """The op_type of a class the toolkit2 way, or ConversionError."""
    op_type = getattr(op, "op_type", None)
    if not isinstance(op_type, str) or not op_type:
        raise ConversionError("reg_custom_op: the op needs a string attribute op_type")
    for method in ("shape_infer", "compute"):
        if not callable(getattr(op, method, None)):
            raise ConversionError(f"reg_custom_op: {op_type} needs a {method} method")
    if onnx.defs.has(op_type):
        raise ConversionError(
            f"reg_custom_op: {op_type} is a standard ONNX op; custom op types "
            "must differ from them (the vendor recommends a 'cst' prefix)"
        )
    return op_type


def _elem(dtype: Any) -> int:
    if isinstance(dtype, int):
        return dtype
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    try:
        graph = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
    except Exception as exc:  # onnx reports inference failures with several types
        raise ConversionError(f"shape inference failed: {exc}") from None
    return {vi.name: vi.type for vi in [*graph.input, *graph.value_info, *graph.output]}


@dataclass
class CutModel:
    """A model without its custom nodes, and what it takes to put them back."""

    model: onnx.ModelProto
    nodes: list[onnx.NodeProto]  # the custom nodes, in graph order
    ops: dict[str, Any]
    original_inputs: list[str]
    original_outputs: list[str]
    extra_inputs: list[str] = field(default_factory=list)
    extra_outputs: list[str] = field(default_factory=list)

    def extend_samples(self, samples: Sequence[list[np.ndarray]]) -> Samples:
        """Samples for the cut model: each calibration sample (normalised with mean/std, one
        array per original input) plus the custom outputs that `compute` gives for it,
        computed as each sample is read."""
        sessions: list[Any] = []  # one reference session, made on first use

        def extend(sample: list[np.ndarray]) -> list[np.ndarray]:
            if not sessions:
                sessions.append(factory.create(self.model, policies.REFERENCE))
            return self._extend(sessions[0], sample)

        return as_samples(samples).map(extend)

    def _extend(self, session: Any, sample: list[np.ndarray]) -> list[np.ndarray]:
        shapes = {vi.name: vi.type.tensor_type for vi in self.model.graph.input}
        feed: dict[str, np.ndarray] = {
            name: np.asarray(x, np.float32) for name, x in zip(self.original_inputs, sample)
        }
        for name in self.extra_inputs:
            t = shapes[name]
            feed[name] = np.zeros(
                [d.dim_value for d in t.shape.dim], helper.tensor_dtype_to_np_dtype(t.elem_type)
            )
        for node in self.nodes:  # in graph order: each node's inputs are final when read
            wanted = [i for i in node.input if i not in feed]
            values = dict(zip(wanted, session.run(wanted, feed))) if wanted else {}
            ins = [feed[i] if i in feed else values[i] for i in node.input]
            try:
                values = list(self.ops[node.op_type].compute(node, ins))
                for name, value in zip(node.output, values, strict=True):
                    key = name + _CUT if name + _CUT in feed else name
                    feed[key] = np.asarray(value, feed[key].dtype).reshape(feed[key].shape)
            except Exception as exc:  # the user's code, or outputs shape_infer did not promise
                raise ConversionError(
                    f"custom op {node.op_type} at node '{node.name}': compute failed during "
                    f"calibration: {type(exc).__name__}: {exc}"
                ) from None
        return [*sample, *(feed[n] for n in self.extra_inputs)]


def cut(model: onnx.ModelProto, ops: dict[str, Any]) -> CutModel | None:
    """The model without its registered custom nodes (None if it has none). Output shapes come
    from each op's shape_infer, in graph order."""
    custom = [n for n in model.graph.node if n.op_type in ops]
    if not custom:
        return None
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    outputs = {o.name for o in graph.output}
    result_cut = CutModel(result, custom, ops, [vi.name for vi in graph.input], sorted(outputs))
    for node in custom:
        graph.node.remove(next(n for n in graph.node if n.output == node.output))
    for node in custom:
        types = _types(result)
        try:
            in_types = [types[i] for i in node.input]
        except KeyError as exc:
            raise ConversionError(
                f"custom op {node.op_type} at node '{node.name}': the type of "
                f"input {exc} is unknown"
            ) from None
        shapes = [[d.dim_value for d in t.tensor_type.shape.dim] for t in in_types]
        dtypes = [
            np.dtype(helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)) for t in in_types
        ]
        try:
            out_shapes, out_dtypes = ops[node.op_type].shape_infer(node, shapes, dtypes)
        except Exception as exc:  # the user's code
            raise ConversionError(
                f"custom op {node.op_type} at node '{node.name}': shape_infer "
                f"raised {type(exc).__name__}: {exc}"
            ) from None
        if len(out_shapes) != len(node.output) or len(out_dtypes) != len(node.output):
            raise ConversionError(
                f"custom op {node.op_type} at node '{node.name}': shape_infer "
                f"gave {len(out_shapes)} shapes for {len(node.output)} outputs"
            )
        for name in node.input:
            if name not in outputs and name not in result_cut.extra_outputs:
                graph.output.append(helper.make_value_info(name, types[name]))
                result_cut.extra_outputs.append(name)
        for name, shape, dtype in zip(node.output, out_shapes, out_dtypes):
            vi = helper.make_tensor_value_info(name, _elem(dtype), [int(d) for d in shape])
            if name in outputs:  # a model output made by the op: the cut model passes it on
                vi.name = name + _CUT
                graph.node.append(helper.make_node("Identity", [vi.name], [name]))
            graph.input.append(vi)
            result_cut.extra_inputs.append(vi.name)
    return result_cut


def _float_side(stored: str, elem: int, qparams: dict, inits: list, nodes: list,
                into_float: bool) -> str:  # fmt: skip
    """The float32 tensor a custom op reads (`into_float`) or writes in place of a stored int8
    or float16 tensor, with the conversion node between them; the stored name itself when it is
    float32 already."""
    floated = f"{stored}__cst_f"
    if elem == TensorProto.INT8 and stored in qparams:
        scale, zp = qparams[stored]
        inits += [
            numpy_helper.from_array(np.array(scale, np.float32), f"{stored}__cst__scale"),
            numpy_helper.from_array(np.array(zp, np.int8), f"{stored}__cst__zp"),
        ]
        op, source, dest = ("DequantizeLinear", stored, floated) if into_float \
            else ("QuantizeLinear", floated, stored)  # fmt: skip
        nodes.append(helper.make_node(
            op, [source, f"{stored}__cst__scale", f"{stored}__cst__zp"], [dest]))  # fmt: skip
        return floated
    if elem == TensorProto.FLOAT16:
        if into_float:
            nodes.append(helper.make_node("Cast", [stored], [floated], to=TensorProto.FLOAT))
        else:
            nodes.append(helper.make_node("Cast", [floated], [stored], to=TensorProto.FLOAT16))
        return floated
    return stored


def stitch(
    program: onnx.ModelProto, cut_model: CutModel, io_qparams: dict[str, tuple[float, int]] | None
) -> onnx.ModelProto:
    """The converted cut model with its custom nodes back in place, value_info complete."""
    qparams = io_qparams or {}
    clean = onnx.ModelProto()
    clean.CopyFrom(program)
    del clean.graph.value_info[:]  # the passes' types predate fp16 / int8 rewriting
    out = onnx.shape_inference.infer_shapes(clean, strict_mode=False)
    graph = out.graph
    # A graph input that is also an output (a custom op reading a model input) has its
    # stored type as an input: inputs come last so they win.
    every = [*graph.output, *graph.value_info, *graph.input]
    elems = {vi.name: vi.type.tensor_type.elem_type for vi in every}
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in every}
    info: list[onnx.ValueInfoProto] = []
    inits: list[onnx.TensorProto] = []
    added: list[onnx.NodeProto] = []
    for node in cut_model.nodes:
        ins = [_float_side(i, elems.get(i, 0), qparams, inits, added, True) for i in node.input]
        outs = []
        for name in node.output:
            target = (
                name + _CUT
                if any(o.name == name for o in graph.output)
                and any(i.name == name + _CUT for i in graph.input)
                else name
            )
            outs.append(_float_side(target, elems.get(target, 0), qparams, inits, added, False))
        stored = helper.make_node(node.op_type, ins, outs, name=node.name, domain=CUSTOM_DOMAIN)
        stored.attribute.extend(node.attribute)
        added.append(stored)
        for name, source in [*zip(ins, node.input), *zip(outs, node.output)]:
            dims = shapes.get(source + _CUT, shapes.get(source))
            elem = elems.get(name) or elems.get(source + _CUT) or elems.get(source)
            if name.endswith("__cst_f"):
                elem = TensorProto.FLOAT
            if dims is not None and elem:
                info.append(helper.make_tensor_value_info(name, elem, dims))
    extra_in = set(cut_model.extra_inputs)
    kept_in = [vi for vi in graph.input if vi.name not in extra_in]
    kept_out = [
        vi
        for vi in graph.output
        if vi.name not in cut_model.extra_outputs or vi.name in cut_model.original_outputs
    ]
    graph.value_info.extend(
        vi for vi in [*graph.input, *graph.output] if vi not in kept_in and vi not in kept_out
    )
    del graph.input[:]
    graph.input.extend(kept_in)
    del graph.output[:]
    graph.output.extend(kept_out)
    graph.initializer.extend(inits)
    nodes = _topological([*graph.node, *added])
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(o.domain == CUSTOM_DOMAIN for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(CUSTOM_DOMAIN, 1))
    known = {vi.name for vi in graph.value_info}
    graph.value_info.extend(vi for vi in info if vi.name not in known)
    return out


def _topological(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    order: list[int] = []
    state = [0] * len(nodes)

    def visit(k: int) -> None:
        stack = [(k, False)]
        while stack:
            index, done = stack.pop()
            if done:
                state[index] = 2
                order.append(index)
                continue
            if state[index]:
                continue
            state[index] = 1
            stack.append((index, True))
            for name in nodes[index].input:
                p = producer.get(name)
                if p is not None and not state[p]:
                    stack.append((p, False))

    for k in range(len(nodes)):
        visit(k)
    return [nodes[k] for k in order]
