"""A float grouped convolution the vendor's compiler wrote as one conv per group, run as one.

For a grouped convolution (RegNet's, ResNeXt's) the compiler stores a Split of the input
channels, one convolution per part and a Concat of their outputs, each output rounded to
float16 on its own (a float16 RegNetX-400MF for rk3588: 386 convs, each with its blocked-layout
reorder, 1.31x the same network converted by rknnrt). Where every part has the same kernel,
strides, pads and dilations and the same channel counts, and the Concat joins the parts' outputs
in the Split's order along the channels, the chain

    Split(x) [-> rounding] -> Conv_k(x_k, W_k, B_k) [-> Cast(float16) -> Cast(float32)] -> Concat

becomes Conv(x, concat(W_k), concat(B_k), group=K) [-> the same rounding]: the same products,
each output channel summed over its own group's inputs, the rounding of each element the same
(it is element-wise). onnxruntime's grouped kernel may sum a group in another order than its
plain one; tests/perf/test_grouped_convs.py compares the outputs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..lazy_imports import onnx
from . import graph_edit
from .int8_depthwise import _attr, _Lookup

_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT, FLOAT16
_SAME = ("kernel_shape", "strides", "pads", "dilations")


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with its per-group conv chains as grouped convs, the names of the weights it no
    longer reads); the same bytes when there is none."""
    if b"Split" not in graph or b"Concat" not in graph:
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    if not groups_as_one_conv(model.graph, weights):
        return graph, set()
    return model.SerializeToString(), graph_edit.drop_unused_weights(model, weights)


def _weight(g: _Lookup, name: str) -> tuple[np.ndarray, bool] | None:
    """(a constant conv weight, whether it reaches the conv through a Cast to float32)."""
    value = g.const(name)
    if value is not None:
        return (value, False) if value.dtype == np.float32 else None
    node = g.producer.get(name)
    if node is None or graph_edit.cast_to(node) != _FLOAT:
        return None
    value = g.const(node.input[0])
    return (value, True) if value is not None and value.dtype == np.float16 else None


def _rounding(g: _Lookup, name: str) -> tuple[list, str]:
    """(the float16 rounding pair reading `name` alone, or none; the value after it)."""
    first = g.only_reader(name)
    if first is None or graph_edit.cast_to(first) != _FLOAT16:
        return [], name
    second = g.only_reader(first.output[0])
    if second is None or graph_edit.cast_to(second) != _FLOAT:
        return [], name
    return [first, second], second.output[0]


def _chain(g: _Lookup, split) -> dict | None:
    """The parts of a per-group conv chain starting at `split`, or None."""
    if split.op_type != "Split" or split.domain or _attr(split, "axis", 0) != 1 or \
            len(split.output) < 2:  # fmt: skip
        return None
    # the parts may be rounded to float16 again on their way to the convs: the same values
    # where the Split's input is itself so rounded
    source = g.producer.get(split.input[0])
    on_float16 = source is not None and graph_edit.cast_to(source) == _FLOAT and \
        graph_edit.cast_to(g.producer.get(source.input[0]) or source) == _FLOAT16  # fmt: skip
    convs, parts, roundings, inner = [], [], [], []
    for out in split.output:
        pair, out = _rounding(g, out)
        if pair and not on_float16:
            return None
        inner += pair
        conv = g.only_reader(out)
        if conv is None or conv.op_type != "Conv" or conv.domain or conv.input[0] != out or \
                _attr(conv, "group", 1) != 1 or len(conv.input) not in (2, 3):  # fmt: skip
            return None
        w = _weight(g, conv.input[1])
        bias = g.const(conv.input[2]) if len(conv.input) == 3 and conv.input[2] else None
        if w is None or w[0].ndim != 4 or (len(conv.input) == 3 and conv.input[2] and (
                bias is None or bias.dtype != np.float32 or bias.shape != (w[0].shape[0],))):
            return None
        pair, value = _rounding(g, conv.output[0])
        convs.append(conv)
        parts.append((*w, bias))  # (weight, reached through a Cast, bias or None)
        roundings.append((pair, value))
    concat = g.only_reader(roundings[0][1])
    if concat is None or concat.op_type != "Concat" or concat.domain or \
            _attr(concat, "axis", 0) != 1 or list(concat.input) != [v for _, v in roundings]:
        return None
    if len({w.shape for w, _, _ in parts}) != 1 or len({cast for _, cast, _ in parts}) != 1 or \
            len({bias is None for _, _, bias in parts}) != 1 or \
            any(len({repr(_attr(c, a)) for c in convs}) != 1 for a in _SAME) or \
            len({bool(pair) for pair, _ in roundings}) != 1:  # fmt: skip
        return None
    return dict(split=split, convs=convs, parts=parts, roundings=roundings, concat=concat,
                inner=inner)


def groups_as_one_conv(graph, weights: Mapping[str, np.ndarray]) -> int:
    """Rewrite each per-group conv chain in place; returns how many were rewritten."""
    g = _Lookup(graph, weights)
    taken = set(g.producer) | set(g.inline) | set(weights) | {i.name for i in graph.input}
    replace: dict[int, list] = {}
    removed: set[int] = set()
    added: list = []
    for split in graph.node:
        found = _chain(g, split)
        if found is None:
            continue
        base = found["concat"].output[0]
        names = [f"{base}__gw", f"{base}__gwf", f"{base}__gb", f"{base}__gconv", f"{base}__gh"]
        if taken.intersection(names):
            continue
        taken.update(names)
        parts = found["parts"]
        cast = parts[0][1]
        weight = np.concatenate([w for w, _, _ in parts], axis=0)
        added.append(onnx.numpy_helper.from_array(weight, names[0]))
        nodes = []
        if cast:
            nodes.append(onnx.helper.make_node("Cast", [names[0]], [names[1]], to=_FLOAT,
                                               name=names[1]))  # fmt: skip
        inputs = [split.input[0], names[1] if cast else names[0]]
        if parts[0][2] is not None:
            added.append(onnx.numpy_helper.from_array(
                np.concatenate([bias for _, _, bias in parts]), names[2]))  # fmt: skip
            inputs.append(names[2])
        first = found["convs"][0]
        attrs = {a: _attr(first, a) for a in _SAME if _attr(first, a)}
        rounded = bool(found["roundings"][0][0])
        nodes.append(onnx.helper.make_node("Conv", inputs, [names[3] if rounded else base],
                                           group=len(found["convs"]), name=names[3],
                                           **attrs))  # fmt: skip
        if rounded:
            nodes.append(onnx.helper.make_node("Cast", [names[3]], [names[4]], to=_FLOAT16,
                                               name=names[4]))  # fmt: skip
            nodes.append(onnx.helper.make_node("Cast", [names[4]], [base], to=_FLOAT,
                                               name=f"{base}__gf"))  # fmt: skip
        replace[id(split)] = nodes
        removed |= {id(n) for n in (*found["convs"], found["concat"], *found["inner"])}
        removed |= {id(n) for pair, _ in found["roundings"] for n in pair}
    if replace:
        graph_edit.apply(graph, replace, removed, added)
    return len(replace)
