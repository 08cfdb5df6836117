"""The vendor's rewrite of a Conv that reads a Concat: one Conv per Concat input (the weight's
input channels sliced to that input) and an Add chain, so the Concat is never stored.

Measured with tools/vendor_diff (rknn-toolkit2 2.5.0, rk3588): in SqueezeNet (re-drawn) each
fire module's expand Concat has no int8 tensor in the vendor's config while `r21_conv`,
`r23_conv` (one per Concat input, each with its own scale/zp) do; in ocr_det_like the four-way
Concat before the head conv becomes `conv64_conv`, `resize71_conv`, ... and the partial sums
`conv64_conv_add`, `conv64_conv_add_add`. The bias goes with the LAST part: with it on the
first, SqueezeNet's partial-conv scales differed from the vendor's by 0.1-0.9%; on the last,
all 43 shared tensors agree within 1e-4. Each Add takes the running sum first and the next
part second, as the vendor's `conv64_conv_add` chain does; quantisation then fuses the first
part into the first Add, as the vendor's simulator does (graph.conv_add_fusions). Applied to
int8 builds only (quantize_model), before calibration.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rknnrt.toolkit.passes import _graph

SPLIT_MARK = "__concat_split"
# Producers of the Concat inputs in every split the vendor made (SqueezeNet: Relu after Conv;
# ocr_det_like: Conv, Resize). It did NOT split any of yolov5s_like's three Concat -> Conv
# pairs, each of which has a SiLU Mul or a MaxPool input: such Concats are kept.
_SPLIT_PRODUCERS = frozenset({"Conv", "Relu", "Clip", "Resize", "Upsample"})
# The vendor splits only convs with few output channels. Measured (rknn-toolkit2 2.5.0's
# accuracy_analysis on Concat(Relu(Conv), Relu(Conv)) -> 1x1 Conv, C_in x C_out): split at
# 512x128, 1024x64, 1024x128, 2048x64 and in every SqueezeNet fire module (C_out 16..64); not
# split at 512x256, 512x512, 64/128/256x1000 nor SqueezeNet's final 512x1000 conv10.
MAX_SPLIT_OUT_CHANNELS = 128


def _channels(model: onnx.ModelProto, name: str) -> int | None:
    for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        if vi.name == name:
            dims = vi.type.tensor_type.shape.dim
            return dims[1].dim_value if len(dims) > 1 and dims[1].dim_value > 0 else None
    return None


def run(model: onnx.ModelProto, keep: frozenset[str] = frozenset()) -> onnx.ModelProto:
    """A new model with every Concat(axis=1) -> Conv(group=1) pair split (the Concat having
    that Conv as its only consumer and not being a graph output); Convs named in `keep` (a
    hybrid model's float16 layers) are left whole."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    new_nodes: list[onnx.NodeProto] = []
    dropped: set[int] = set()
    replacements: dict[int, list[onnx.NodeProto]] = {}
    for index, node in enumerate(graph.node):
        if node.op_type != "Concat" or _graph.attr(node, "axis", None) not in (1, -3):
            continue
        users = consumers.get(node.output[0], [])
        if len(users) != 1 or node.output[0] in outputs or len(node.input) < 2:
            continue
        conv = users[0]
        if (conv.op_type != "Conv" or conv.input[0] != node.output[0] or conv.name in keep
                or _graph.attr(conv, "group", 1) != 1 or conv.input[1] not in inits):  # fmt: skip
            continue
        producers = {o: n.op_type for n in graph.node for o in n.output}
        if any(producers.get(name) not in _SPLIT_PRODUCERS for name in node.input):
            continue
        widths = [_channels(out, name) for name in node.input]
        weight = numpy_helper.to_array(inits[conv.input[1]])
        if None in widths or sum(widths) != weight.shape[1]:
            continue
        if weight.shape[0] > MAX_SPLIT_OUT_CHANNELS:
            continue
        bias = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
        parts, start = [], 0
        for k, (name, width) in enumerate(zip(node.input, widths)):
            w_name = f"{conv.input[1]}__part{k}"
            graph.initializer.append(numpy_helper.from_array(
                np.ascontiguousarray(weight[:, start : start + width]), w_name))  # fmt: skip
            start += width
            inputs = [name, w_name] + ([bias] if bias and k == len(widths) - 1 else [])
            part = helper.make_node("Conv", inputs, [f"{name}_conv"],
                                    name=f"{conv.name or conv.output[0]}_part{k}")  # fmt: skip
            part.attribute.extend(a for a in conv.attribute)
            parts.append(part)
        chain = [p.output[0] for p in parts]
        adds, total = [], chain[0]
        for k, term in enumerate(chain[1:]):
            last = k == len(chain) - 2
            result = conv.output[0] if last else f"{total}_add"
            adds.append(helper.make_node("Add", [total, term], [result],
                                         name=f"{result}{SPLIT_MARK}"))  # fmt: skip
            total = result
        dropped.add(index)
        conv_index = list(graph.node).index(conv)
        dropped.add(conv_index)
        replacements[conv_index] = parts + adds
    if not replacements:
        return out
    for index, node in enumerate(graph.node):
        if index in replacements:
            new_nodes.extend(replacements[index])
        elif index not in dropped:
            new_nodes.append(node)
    del graph.node[:]
    graph.node.extend(new_nodes)
    used = {name for node in graph.node for name in node.input}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    return onnx.shape_inference.infer_shapes(out)


# The vendor tiles a convolution whose per-output-channel reduction (C_in x kh x kw) exceeds
# 4096 into two along the input channels. Measured on ResNet-50 (re-drawn, tools/vendor_diff):
# the 512x512x3x3 convs (4608) become Split -> `r142_split`, `r142_split_o1` (each calibrated
# on its own) -> `r144_tile0_conv`, `r144_tile1_conv` -> Add; the 256x256x3x3 ones (2304) stay
# whole. The bias goes with the FIRST tile here (all 84 shared tensors then agree; on the
# second, the tiles' scales were 1-13% off). Reductions beyond 8192 (more tiles, unmeasured)
# are left whole.
TILE_LIMIT = 4096


def split_wide_convs(model: onnx.ModelProto, keep: frozenset[str] = frozenset()) -> onnx.ModelProto:
    """A new model with each Conv(group=1) whose reduction is in (TILE_LIMIT, 2 x TILE_LIMIT]
    tiled in two along its input channels (Convs named in `keep` left whole)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    changed = False
    # (YOLOv5su's head: two wide convs read one tensor; a Split each gave the same names,
    # "Duplicate definition of name (/model.23/cv3/act/Mul_output_0_split)")
    split_done: dict[str, list[str]] = {}
    for node in graph.node:
        weight = (
            inits.get(node.input[1]) if node.op_type == "Conv" and len(node.input) > 1 else None
        )
        dims = list(weight.dims) if weight is not None else []
        reduction = int(np.prod(dims[1:])) if len(dims) == 4 else 0
        if (weight is None or node.name in keep or _graph.attr(node, "group", 1) != 1
                or not TILE_LIMIT < reduction <= 2 * TILE_LIMIT or dims[1] % 2):  # fmt: skip
            nodes.append(node)
            continue
        w = numpy_helper.to_array(weight)
        half = dims[1] // 2
        source, result = node.input[0], node.output[0]
        halves = split_done.get(source)
        if halves is None:  # one Split per source: every wide conv reading it shares it
            halves = split_done[source] = [f"{source}_split", f"{source}_split_o1"]
            sizes = f"{source}__split_sizes"
            graph.initializer.append(numpy_helper.from_array(np.array([half, half], np.int64),
                                                             sizes))  # fmt: skip
            nodes.append(helper.make_node("Split", [source, sizes], halves, axis=1,
                                          name=f"{node.name or result}_split"))  # fmt: skip
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        parts = []
        for k, part_input in enumerate(halves):
            w_name = f"{node.input[1]}__tile{k}"
            graph.initializer.append(numpy_helper.from_array(
                np.ascontiguousarray(w[:, k * half : (k + 1) * half]), w_name))  # fmt: skip
            inputs = [part_input, w_name] + ([bias] if bias and k == 0 else [])
            part = helper.make_node("Conv", inputs, [f"{result}_tile{k}_conv"],
                                    name=f"{node.name or result}_part{k}")  # fmt: skip
            part.attribute.extend(node.attribute)
            parts.append(part)
        nodes.extend(parts)
        nodes.append(helper.make_node("Add", [p.output[0] for p in parts], [result],
                                      name=f"{result}{SPLIT_MARK}"))  # fmt: skip
        changed = True
    if not changed:
        return out
    del graph.node[:]
    graph.node.extend(nodes)
    return onnx.shape_inference.infer_shapes(out)
