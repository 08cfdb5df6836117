"""1x1 float convolutions that only select channels, run as a Gather of the channels.

The vendor's compiler writes a ShuffleNet's channel shuffles, and the Concats around them, as
1x1 convolutions whose weights are a 0/1 selection matrix: each output channel copies one
input channel or none (two such convs and an Add make a Concat of shuffled halves; a float16
ShuffleNetV2 for rk3588 has 27 of them, up to 464 x 480 at 7x7). Run as dense convolutions
they put that file at 1.7x the same network converted by rknnrt, whose shuffles are Gathers
(fast_graph.py); as Gathers its kernel time went from 23.0 to 15.8 ms. Such a conv
(weights constant, each row a single 1 or none, the rest zeros, bias zero or absent, no
padding, stride or dilation) becomes

    Gather(x, indices, axis=1) [-> Mul(mask: 0 for the rows without a 1)] -> Add(+0.0)

The conv's sum x_k * 1 + sum of 0 * x_j is x_k exactly (0 for a row without a 1), but for a
-0, whose sum from +0 is +0: the Add of +0.0 does the same. So outputs are bit-identical
wherever the inputs are finite (tests/perf/test_selection_convs.py); a channel holding an
infinity or a NaN that a row does not select makes the conv's output NaN (0 x inf), the
Gather's not.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..lazy_imports import onnx
from . import graph_edit
from .int8_depthwise import _attr, _Lookup

_FLOAT = 1  # onnx.TensorProto.FLOAT


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with its selection convs as Gathers, the names of the weights it no longer
    reads); the same bytes when there is none. `weights`: the weights-section tensors."""
    if b"Conv" not in graph:
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    if not selections_as_gathers(model.graph, weights):
        return graph, set()
    return model.SerializeToString(), graph_edit.drop_unused_weights(model, weights)


def _float_const(g: _Lookup, name: str) -> np.ndarray | None:
    """The float value of constant `name`, or of a Cast to float32 of one, in its stored type
    (float16 in a float16 program: 0 and 1, all a selection holds, are exact in either)."""
    value = g.const(name)
    node = g.producer.get(name) if value is None else None
    if node is not None and graph_edit.cast_to(node) == _FLOAT:
        value = g.const(node.input[0])
    if value is None or value.dtype.kind != "f":
        return None
    return value


def selection(g: _Lookup, conv) -> tuple[np.ndarray, np.ndarray] | None:
    """(the input channel each output channel of `conv` copies, 1 where it copies one and 0
    where it copies none), or None if it is no selection conv (module doc)."""
    if conv.op_type != "Conv" or conv.domain or len(conv.input) < 2 or len(conv.output) != 1:
        return None
    if _attr(conv, "group", 1) != 1 or any(v != 1 for v in _attr(conv, "strides", []) or []) \
            or any(v != 1 for v in _attr(conv, "dilations", []) or []) \
            or any(_attr(conv, "pads", []) or []) \
            or _attr(conv, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):  # fmt: skip
        return None
    w = _float_const(g, conv.input[1])
    if w is None or w.ndim != 4 or w.shape[2:] != (1, 1) or w.size == 0:
        return None
    rows = w.reshape(w.shape[0], w.shape[1])
    # one row decides most convs (scanning every weight took ~30 ms of ResNet-50 fp16's 0.3 s
    # rknn_init)
    if not np.all((rows[0] == 0) | (rows[0] == 1)):
        return None
    ones = (rows == 1).sum(axis=1)
    if not (np.all((rows == 0) | (rows == 1)) and np.all(ones <= 1) and ones.any()):
        return None
    if len(conv.input) > 2 and conv.input[2]:
        bias = _float_const(g, conv.input[2])
        if bias is None or bias.size != rows.shape[0] or np.any(bias != 0):
            return None
    return rows.argmax(axis=1).astype(np.int64), ones.astype(np.float32)


def selections_as_gathers(graph, weights: Mapping[str, np.ndarray]) -> int:
    """Rewrite each selection conv in place; returns how many were rewritten."""
    # convs whose weights are not dequantised first: the lookup tables cost more than the
    # scan (an int8 graph's convs all read DequantizeLinear weights)
    dequantised = {n.output[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    if not any(n.op_type == "Conv" and len(n.input) > 1 and n.input[1] not in dequantised
               for n in graph.node):  # fmt: skip
        return 0
    g = _Lookup(graph, weights)
    taken = set(g.producer) | set(g.inline) | set(weights) | {i.name for i in graph.input}
    replace: dict[int, list] = {}
    added: list = []
    zero = None
    for conv in graph.node:
        found = selection(g, conv)
        if found is None:
            continue
        indices, mask = found
        base = conv.output[0]
        names = [f"{base}__sel_idx", f"{base}__sel", f"{base}__sel_mask", f"{base}__sel_m"]
        if zero is None:
            names.append(f"{base}__sel_zero")
        if taken.intersection(names):
            continue
        taken.update(names)
        if zero is None:
            zero = names[-1]
            added.append(onnx.numpy_helper.from_array(np.array(0.0, np.float32), zero))
        added.append(onnx.numpy_helper.from_array(indices, names[0]))
        nodes = [onnx.helper.make_node("Gather", [conv.input[0], names[0]], [names[1]], axis=1,
                                       name=names[1])]  # fmt: skip
        selected = names[1]
        if not mask.all():  # rows that copy nothing: 0 x (channel 0)
            added.append(onnx.numpy_helper.from_array(mask.reshape(1, -1, 1, 1), names[2]))
            nodes.append(onnx.helper.make_node("Mul", [selected, names[2]], [names[3]],
                                               name=names[3]))  # fmt: skip
            selected = names[3]
        nodes.append(onnx.helper.make_node("Add", [selected, zero], [base],
                                           name=f"{base}__sel_add"))  # fmt: skip
        replace[id(conv)] = nodes
    if replace:
        graph_edit.apply(graph, replace, set(), added)
    return len(replace)
