"""An int8 global average pool between rknnrt's NHWC kernels, pooled channels-last.

rknnrt's int8 conv kernels (dw_kernel.py, qconv_kernel.py) read and write NHWC between
Transposes, which onnxruntime's optimiser cancels pairwise. A squeeze-and-excitation block's
pool, DequantizeLinear -> GlobalAveragePool -> QuantizeLinear, sits between two of them and
onnxruntime fuses it into its QLinearGlobalAveragePool; that op goes channels-last only when
onnxruntime's own NHWC pass runs, which it does for graphs that still hold a QLinearConv. With
every conv on the kernels none is left, and each pool kept a Transpose on both sides
(MobileNetV2 int8: its 1280 x 7 x 7 tensor before the classifier's pool, ~94 us profiled at
two threads; MobileNetV3-small's nine pools, with its last QLinearConvs taken off as a trial,
10 Transposes). Here such a pool reads the kernel's NHWC tensor directly as
`com.microsoft::QLinearGlobalAveragePool` with channels_last = 1, followed by one Transpose of
its [N, 1, 1, C] result, which cancels against the next kernel's. onnxruntime's NHWC and NCHW
forms of the op and the three nodes give the same bytes (tests/perf/test_nhwc_pools.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..lazy_imports import onnx
from . import graph_edit
from .int8_depthwise import _attr, _dq, _Lookup, _per_tensor

_TO_NCHW = [0, 3, 1, 2]  # a kernel's output back to NCHW
_MS = "com.microsoft"


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with each such pool channels-last, no weight dropped); the same bytes when it
    has none."""
    if b"GlobalAveragePool" not in graph or b"Transpose" not in graph:
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    g = _Lookup(model.graph, weights)
    replace: dict[int, list] = {}
    removed: set[int] = set()
    for node in model.graph.node:
        found = _pool(g, node)
        if found is None:
            continue
        dq, quant, nhwc = found
        pooled = f"{quant.output[0]}__nhwc_pool"
        if pooled in g.producer:
            continue
        replace[id(quant)] = [
            onnx.helper.make_node("QLinearGlobalAveragePool",
                                  [nhwc, dq.input[1], dq.input[2], quant.input[1],
                                   quant.input[2]], [pooled], name=f"{pooled}_op",
                                  domain=_MS, channels_last=1),
            onnx.helper.make_node("Transpose", [pooled], [quant.output[0]], perm=_TO_NCHW,
                                  name=f"{pooled}_nchw")]  # fmt: skip
        removed.add(id(node))
    if not replace:
        return graph, set()
    graph_edit.set_nodes(model.graph, graph_edit.live_nodes(
        model.graph, graph_edit.splice(model.graph, replace, removed)))  # fmt: skip
    if not any(o.domain == _MS for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(_MS, 1))
    return model.SerializeToString(), set()


def _pool(g: _Lookup, node) -> tuple | None:
    """(the DequantizeLinear, the QuantizeLinear, the NHWC tensor) where `node` is a
    GlobalAveragePool of a per-tensor DequantizeLinear of a Transpose to NCHW of a 4-D tensor,
    read only by a per-tensor QuantizeLinear to the same 8-bit type, else None."""
    if node.op_type != "GlobalAveragePool" or node.domain or len(node.input) != 1:
        return None
    dq = _dq(g, node.input[0])
    quant = g.only_reader(node.output[0])
    if dq is None or quant is None or quant.op_type != "QuantizeLinear" or quant.domain \
            or len(quant.input) != 3:  # fmt: skip
        return None
    if not _per_tensor(g, dq) or not _per_tensor(g, quant) \
            or g.elem_type(dq.input[2]) != g.elem_type(quant.input[2]):  # fmt: skip
        return None
    transpose = g.producer.get(dq.input[0])
    if transpose is None or transpose.op_type != "Transpose" or transpose.domain \
            or list(_attr(transpose, "perm", [])) != _TO_NCHW:  # fmt: skip
        return None
    return dq, quant, transpose.input[0]
