"""Graph rewrites the vendor's converter makes before it quantises, found by comparing
rknnrt with the vendor's simulator tensor by tensor (rknn-toolkit2 2.5.0, accuracy_analysis
dumps, tools/vendor_diff). Applied to int8 builds only (quantize_model), before calibration.

- `fold_identity_into_depthwise`: Add(x, DepthwiseConv(x)) is one depthwise conv whose centre
  tap is 1 larger. two_io's c2 = 3x3 depthwise conv of r1 added to r1: the vendor's .rknn holds
  per-channel weight ranges that equal those of w2 with 1 added at the centre (scale 0.0077416
  vs 0.0051856 for w2 alone, zp -24 vs 27), and the simulator's `res` is that conv's output.
  This changes the int8 weights (the centre tap's range), so it matters for results: 93.7% of
  `res` was equal to the simulator's before, 100% after.
- `oversized_maxpool_as_global`: a stride-1, same-size MaxPool whose kernel is larger than its
  input on both axes is computed as a global max broadcast back to the input's size (the
  vendor's `maxpool59_mp`). Probed with 5x5 kernels, pads 2: a 4x4 input gives the global
  max at every position (an exact max pool would not), 5x5, 6x6, 7x7, 3x8 and 8x3 inputs give
  the exact max pool. yolov5s_like's SPPF on its 4x4 map: 78% of maxpool59 equal before.
- `global_pool_as_convs`: a GlobalAveragePool over a map wider than 7 is two depthwise convs,
  7x7 windows with stride 7 (the map padded to a multiple of 7, one more pad row/column at the
  end than at the start) then one over the resulting grid, each weight 1/sqrt(H*W); the first
  conv's output is stored with its own parameters (the vendor's `<name>_2conv0`). Fitted on
  the simulator's dumps: SqueezeNet 13x13 -> 2x2 windows [0,7), [7,13), weights 1/13
  (within 0.52 steps, its rounding); two_io 32x32 -> 5x5 windows [0,6), [6,13), ... [27,32),
  weights 1/32 (within 0.06 of the sums). ResNet-50's 7x7 pool is one conv (no `_2conv0`).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rknnrt.toolkit.passes import _graph
from rknnrt.toolkit.passes.fuse_layernorm import fuse_split_layernorms


def _shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    infos = list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)
    return {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in infos}


def _same_size_depthwise(conv: onnx.NodeProto, weight: np.ndarray) -> bool:
    """A depthwise conv whose output has its input's size, so x equals its centre tap."""
    channels, one, kh, kw = weight.shape if weight.ndim == 4 else (0, 0, 0, 0)
    return (
        one == 1 and channels == _graph.attr(conv, "group", 1) and kh % 2 == 1 and kw % 2 == 1
        and list(_graph.attr(conv, "strides", [1, 1])) == [1, 1]
        and list(_graph.attr(conv, "dilations", [1, 1])) == [1, 1]
        and list(_graph.attr(conv, "pads", [0, 0, 0, 0])) == [kh // 2, kw // 2, kh // 2, kw // 2]
        and _graph.attr(conv, "auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET")
    )  # fmt: skip


def fold_identity_into_depthwise(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    drop: list[onnx.NodeProto] = []
    for add in graph.node:
        if add.op_type != "Add" or len(add.input) != 2:
            continue
        for k in (0, 1):
            conv = producers.get(add.input[k])
            x = add.input[1 - k]
            if (conv is None or conv.op_type != "Conv" or conv.input[0] != x
                    or readers.get(conv.output[0]) != 1 or conv.output[0] in outputs
                    or conv.input[1] not in inits or readers.get(conv.input[1]) != 1):  # fmt: skip
                continue
            weight = numpy_helper.to_array(inits[conv.input[1]])
            if weight.dtype != np.float32 or not _same_size_depthwise(conv, weight):
                continue
            folded = weight.copy()
            folded[:, 0, folded.shape[2] // 2, folded.shape[3] // 2] += 1.0
            inits[conv.input[1]].CopyFrom(numpy_helper.from_array(folded, conv.input[1]))
            conv.output[0] = add.output[0]
            drop.append(add)
            break
    if not drop:
        return out
    for node in drop:
        graph.node.remove(node)
    return out


def _replace_nodes(model: onnx.ModelProto, replacement) -> onnx.ModelProto:
    """A copy of `model` where each node for which `replacement(node, shape of its first
    input, shapes, graph)` returns a list of nodes is replaced by them (None: kept)."""
    shapes = _shapes(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    nodes: list[onnx.NodeProto] = []
    changed = False
    for node in graph.node:
        made = replacement(node, shapes.get(node.input[0], []) if node.input else [], shapes,
                           graph)  # fmt: skip
        nodes.extend(made if made is not None else [node])
        changed = changed or made is not None
    if not changed:
        return out
    del graph.node[:]
    graph.node.extend(nodes)
    return onnx.shape_inference.infer_shapes(out)


def _global_max(node: onnx.NodeProto, shape: list[int], shapes: dict,
                graph: onnx.GraphProto) -> list[onnx.NodeProto] | None:  # fmt: skip
    kernel = list(_graph.attr(node, "kernel_shape", []))
    if not (node.op_type == "MaxPool" and len(shape) == 4 and len(kernel) == 2
            and all(d > 0 for d in shape) and shape[2] < kernel[0] and shape[3] < kernel[1]
            and len(node.output) == 1 and shapes.get(node.output[0]) == shape):  # fmt: skip
        return None
    pooled, size = f"{node.output[0]}_mp", f"{node.output[0]}_mp_shape"
    graph.initializer.append(numpy_helper.from_array(np.array(shape, np.int64), size))
    return [helper.make_node("GlobalMaxPool", [node.input[0]], [pooled], name=pooled),
            helper.make_node("Expand", [pooled, size], list(node.output),
                             name=node.name or node.output[0])]  # fmt: skip


def oversized_maxpool_as_global(model: onnx.ModelProto) -> onnx.ModelProto:
    return _replace_nodes(model, _global_max)


GLOBAL_POOL_WINDOW = 7


def _pads(size: int) -> tuple[int, int]:
    total = -(-size // GLOBAL_POOL_WINDOW) * GLOBAL_POOL_WINDOW - size
    return total // 2, total - total // 2


def _two_convs(node: onnx.NodeProto, shape: list[int], shapes: dict,
               graph: onnx.GraphProto) -> list[onnx.NodeProto] | None:  # fmt: skip
    if (node.op_type != "GlobalAveragePool" or len(shape) != 4 or not all(d > 0 for d in shape)
            or max(shape[2:]) <= GLOBAL_POOL_WINDOW
            or max(shape[2:]) > GLOBAL_POOL_WINDOW**2):  # fmt: skip
        return None
    channels, height, width = shape[1:]
    weight = np.float32(1.0 / np.sqrt(height * width))
    grid = [-(-height // GLOBAL_POOL_WINDOW), -(-width // GLOBAL_POOL_WINDOW)]
    (top, bottom), (left, right) = _pads(height), _pads(width)
    base = node.name or node.output[0]
    first = f"{base}_2conv0"
    w0, w1 = f"{first}_w", f"{base}_2conv1_w"
    window = (GLOBAL_POOL_WINDOW, GLOBAL_POOL_WINDOW)
    graph.initializer.append(numpy_helper.from_array(
        np.full((channels, 1, *window), weight), w0))  # fmt: skip
    graph.initializer.append(numpy_helper.from_array(
        np.full((channels, 1, *grid), weight), w1))  # fmt: skip
    return [helper.make_node("Conv", [node.input[0], w0], [first], name=first, group=channels,
                             kernel_shape=list(window), strides=list(window),
                             pads=[top, left, bottom, right]),
            helper.make_node("Conv", [first, w1], list(node.output), name=base,
                             group=channels, kernel_shape=grid)]  # fmt: skip


def global_pool_as_convs(model: onnx.ModelProto) -> onnx.ModelProto:
    return _replace_nodes(model, _two_convs)

# In the order quantize_model applies them.
ALL = (fold_identity_into_depthwise, oversized_maxpool_as_global, global_pool_as_convs,
       fuse_split_layernorms)  # fmt: skip
