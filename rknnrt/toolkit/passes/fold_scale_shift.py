"""Per-channel scale and shift the way the vendor's converter runs them (Caffe-style models:
BatchNormalization -> Mul -> Add, DenseNet-121).

- A constant per-channel `Mul` or `Add` after a Conv (after fold_batchnorm: Conv -> Mul ->
  Add) is folded into the conv's weights and bias.
- A BatchNormalization that no conv precedes, and a constant per-channel `Mul` (with the
  per-channel `Add` that follows it, if any), become 1x1 depthwise convolutions: the NPU runs
  them as convolutions, so an int8 build quantises them as such (integer kernels, the Relu
  after them fused) instead of leaving float islands.

- A Mul by a constant whose elements are all equal (and then such an Add) right after such
  a BatchNormalization joins its depthwise convolution.

Measured with rknn-toolkit2 2.5.0's simulator on DenseNet-121 (re-drawn; tools/vendor_diff):
Conv -> BN -> Mul -> Add -> Relu stores only the Relu output (r5 unrounded, r1/r3 absent);
MaxPool -> BN -> Mul -> Add -> Relu stores the BN output (r8) and the Relu output (r13), the
Mul output (r10) is absent and the Add output (r12) unrounded: the BN is one op, Mul+Add
another, the Relu fused into it. After its Concats and AveragePools the Mul and Add constants
are all 0.02 (as the light model ships them): the vendor's log shows 'shrink_mul_const' and
'fuse_mul_into_bn' / 'fuse_add_into_bn', and the simulator has no BN or Mul output there (r23,
r25 absent, r27 unrounded); with per-channel constants (probed at 64, 72, 96 and 128 channels
after a MaxPool or AveragePool) it runs 'replace_mul_add_by_bn' and stores the BN output.
Probed after a MaxPool: uniform Mul and Add both join the BN; a uniform Mul joins it and a
per-channel Add after it stays an Add; a per-channel Mul with a uniform Add is one op apart.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rknnrt.toolkit.passes import _graph, fold_batchnorm


def _const(inits: dict, name: str) -> np.ndarray | None:
    return numpy_helper.to_array(inits[name]).astype(np.float64) if name in inits else None


def _per_channel(c: np.ndarray | None, channels: int | None) -> np.ndarray | None:
    """`c` as one value per channel of an NCHW tensor with `channels` channels, if it is one
    (shapes (C,1,1), (1,C,1,1), or a scalar when `channels` is known)."""
    if c is None or channels is None:
        return None
    if c.size == 1:
        return np.full(channels, float(c.ravel()[0]))
    if c.size == channels and c.ndim in (3, 4) and c.shape[-2:] == (1, 1) and \
            c.shape[-3] == channels and (c.ndim == 3 or c.shape[0] == 1):  # fmt: skip
        return c.reshape(channels)
    return None


def _uniform(inits: dict, pair: tuple[str, str] | None, x: str,
             channels: int) -> float | None:  # fmt: skip
    """The value of a constant operand (of a Mul/Add reading `x`) whose elements are all equal
    and that broadcasts per channel or as a scalar: the vendor shrinks it to a scalar and folds
    it into the BatchNormalization before it ('shrink_mul_const', 'fuse_mul_into_bn')."""
    if pair is None or pair[0] != x or inits[pair[1]].data_type != onnx.TensorProto.FLOAT:
        return None
    c = _const(inits, pair[1])
    values = _per_channel(c, channels)
    if values is None or not np.all(values == values[0]):
        return None
    return float(values[0])


def _operands(node: onnx.NodeProto, inits: dict) -> tuple[str, str] | None:
    """(tensor input, constant input) of a two-input Mul/Add with one initializer operand."""
    if node.op_type not in ("Mul", "Add") or len(node.input) != 2:
        return None
    a, b = node.input
    if b in inits and a not in inits:
        return a, b
    if a in inits and b not in inits:
        return b, a
    return None


def _fold_into_convs(graph: onnx.GraphProto, taken: set[str]) -> bool:
    inits = {t.name: t for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    uses = Counter(name for node in graph.node for name in _graph.node_inputs(node))
    producers = {name: node for node in graph.node for name in node.output}
    for index, node in enumerate(graph.node):
        pair = _operands(node, inits)
        conv = producers.get(pair[0]) if pair else None
        if conv is None or conv.op_type != "Conv" or conv.input[1] not in inits:
            continue
        bias = conv.input[2] if len(conv.input) > 2 and conv.input[2] else ""
        if (bias and bias not in inits) or uses[conv.output[0]] != 1 or conv.output[0] in outputs:
            continue
        w = _const(inits, conv.input[1])
        c = _per_channel(_const(inits, pair[1]), w.shape[0] if w.ndim == 4 else None)
        if c is None:
            continue
        b = _const(inits, bias) if bias else np.zeros(w.shape[0])
        if node.op_type == "Mul":
            w, b = w * c.reshape(-1, 1, 1, 1), b * c
        else:
            b = b + c
        dtype = numpy_helper.to_array(inits[conv.input[1]]).dtype
        w_name = _graph.unique_name(taken, f"{node.output[0]}_W")
        b_name = _graph.unique_name(taken, f"{node.output[0]}_B")
        graph.initializer.extend([numpy_helper.from_array(w.astype(dtype), w_name),
                                  numpy_helper.from_array(b.astype(dtype), b_name)])  # fmt: skip
        del conv.input[1:]
        conv.input.extend([w_name, b_name])
        _graph.remove_where(graph.value_info, lambda _, v, old=conv.output[0]: v.name == old)
        conv.output[0] = node.output[0]
        del graph.node[index]
        return True
    return False


def _depthwise(x: str, out: str, scale: np.ndarray, shift: np.ndarray, name: str,
               taken: set[str], graph: onnx.GraphProto) -> onnx.NodeProto:  # fmt: skip
    w_name = _graph.unique_name(taken, f"{out}_dw_W")
    b_name = _graph.unique_name(taken, f"{out}_dw_B")
    graph.initializer.extend([
        numpy_helper.from_array(scale.reshape(-1, 1, 1, 1).astype(np.float32), w_name),
        numpy_helper.from_array(shift.astype(np.float32), b_name)])  # fmt: skip
    return helper.make_node("Conv", [x, w_name, b_name], [out], name=name or out,
                            group=scale.size, kernel_shape=[1, 1])  # fmt: skip


def _standalone_as_depthwise(model: onnx.ModelProto, taken: set[str]) -> onnx.ModelProto:
    graph = model.graph
    infos = list(_graph.infer_shapes(model).value_info) + list(graph.input)
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in infos}
    inits = {t.name: t for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    uses = Counter(name for node in graph.node for name in _graph.node_inputs(node))
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    nodes, absorbed = [], set()
    for node in graph.node:
        if id(node) in absorbed:
            continue
        shape = shapes.get(node.input[0], []) if node.input else []
        channels = shape[1] if len(shape) == 4 and shape[1] > 0 else None
        if fold_batchnorm.inference_form(node, inits) and channels is not None:
            s, bias, mean = fold_batchnorm.scale_and_terms(node, inits)
            scale, shift, out = s, bias - mean * s, node.output[0]
            for op_type in ("Mul", "Add"):  # a uniform Mul, then a uniform Add, join the BN
                users = consumers.get(out, [])
                user = users[0] if len(users) == 1 and uses[out] == 1 and \
                    out not in outputs and users[0].op_type == op_type else None  # fmt: skip
                pair = _operands(user, inits) if user is not None else None
                c = _uniform(inits, pair, out, channels)
                if c is None:
                    continue
                scale, shift = (scale * c, shift * c) if op_type == "Mul" else (scale, shift + c)
                out = user.output[0]
                absorbed.add(id(user))
            nodes.append(_depthwise(node.input[0], out, scale, shift, node.name, taken, graph))
            continue
        pair = _operands(node, inits) if node.op_type == "Mul" else None
        factor = _const(inits, pair[1]) if pair and inits[pair[1]].data_type == \
            onnx.TensorProto.FLOAT else None  # fmt: skip
        x_shape = shapes.get(pair[0], []) if pair else []
        # a scalar factor is left alone (x * 0.5 inside decomposed activations)
        scale = _per_channel(factor, x_shape[1] if len(x_shape) == 4 else None) if (
            factor is not None and factor.size > 1) else None  # fmt: skip
        if scale is not None:
            out, shift = node.output[0], np.zeros(scale.size)
            users = consumers.get(out, [])
            add = users[0] if len(users) == 1 and uses[out] == 1 and out not in outputs else None
            add_pair = _operands(add, inits) if add is not None and add.op_type == "Add" else None
            add_shift = _per_channel(_const(inits, add_pair[1]), scale.size) if (
                add_pair and add_pair[0] == out) else None  # fmt: skip
            if add_shift is not None:
                out, shift = add.output[0], add_shift
                absorbed.add(id(add))
            nodes.append(_depthwise(pair[0], out, scale, shift, node.name, taken, graph))
            continue
        nodes.append(node)
    if len(nodes) == len(graph.node) and all(a is b for a, b in zip(nodes, graph.node)):
        return model
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def run(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with per-channel scales and shifts folded into convs or turned into
    1x1 depthwise convs (module docstring)."""
    model = _graph.copy(model)
    taken = _graph.all_names(model.graph)
    while _fold_into_convs(model.graph, taken):
        pass
    model = _standalone_as_depthwise(model, taken)
    _graph.drop_unused_initializers(model.graph)
    return model
