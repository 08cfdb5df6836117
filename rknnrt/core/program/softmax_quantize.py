"""An int8 program's quantised Softmax as its nodes define it, not onnxruntime's QLinearSoftmax.

An int8 program's Softmax (a transformer's attention probabilities, a classifier's last op)
reaches onnxruntime as DequantizeLinear -> Softmax -> QuantizeLinear, which its optimiser fuses
into QLinearSoftmax. That kernel scales by floor(1 / ys), not 1 / ys (DeiT's probabilities,
ys = 0.0037: 269 for 269.9, about 1 in 220 bytes one step low on random inputs), and sums its
exponential table one element at a time: 0.25 ms for a 1x3x197x197 softmax against 0.085 ms
for the three nodes unfused (12 of them: 3.2 of DeiT-tiny int8's ~22 ms). The QuantizeLinear
after a Softmax therefore runs as `rknnrt.kernels::QuantizeFloat_<t>` (sessions/kernels/
inputcast.c: QuantizeLinear's values, float32 division, half to even, saturation), which
onnxruntime does not fuse: the Softmax stays onnxruntime's float one and the bytes are the
nodes' definition (tests/perf/test_softmax_quantize.py). Where onnxruntime would not have
fused, the op gives QuantizeLinear's bytes. Rewritten only where the QuantizeLinear is the
Softmax's one reader, per tensor with a finite positive scale and a uint8 or int8 zero point.
Without the kernel library (no C compiler) the nodes stay (dw_kernel's one W line);
RKNNRT_INT8_EXACT_SOFTMAX=0 keeps them too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...sessions import kernels
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, graph_edit
from .int8_depthwise import _BYTE_NAMES, _Lookup, _per_tensor, _scalar


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with the QuantizeLinear after each Softmax as the kernel's op, the names of
    the weights it no longer reads); the same bytes when there is none."""
    if b"Softmax" not in graph or not switches.int8_exact_softmax():
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    softmaxes = [n for n in model.graph.node
                 if n.op_type == "Softmax" and n.domain in ("", "ai.onnx")]  # fmt: skip
    if not softmaxes:
        return graph, set()
    g = _Lookup(model.graph, weights)
    found = [q for q in (_quantize_after(g, n) for n in softmaxes) if q is not None]
    if not found or not dw_kernel.library_ready():
        return graph, set()
    replace = {}
    for k, (quant, params, t) in enumerate(found):
        name = f"{quant.output[0]}__softmaxq{k}"
        model.graph.initializer.append(onnx.numpy_helper.from_array(params, f"{name}_p"))
        replace[id(quant)] = [onnx.helper.make_node(
            f"QuantizeFloat_{_BYTE_NAMES[t]}", [quant.input[0], f"{name}_p"], [quant.output[0]],
            name=name, domain=kernels.DOMAIN)]  # fmt: skip
    graph_edit.set_nodes(model.graph, graph_edit.splice(model.graph, replace, set()))
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


def _quantize_after(g: _Lookup, softmax) -> tuple | None:
    """(the QuantizeLinear that is `softmax`'s one reader, its (scale, zp) as float32, its
    type), or None."""
    quant = g.only_reader(softmax.output[0])
    if quant is None or quant.op_type != "QuantizeLinear" or quant.domain not in ("", "ai.onnx") \
            or len(quant.input) != 3 or quant.input[0] != softmax.output[0]:  # fmt: skip
        return None
    if not _per_tensor(g, quant):
        return None
    scale, zp = (float(_scalar(g, name).reshape(())) for name in quant.input[1:])
    return quant, np.array([scale, zp], np.float32), g.elem_type(quant.input[2])
