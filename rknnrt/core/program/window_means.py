"""A vendor file's AveragePool in one kernel pass, in its own order.

model/vendor_rknn/window_ops.py rebuilds a vendor AveragePool as the simulator computes it: the
window's kh x kw values as strided Slices of the (padded) input, summed by a chain of Adds in
row-major order, then divided by each position's count (a constant) — onnxruntime's own
AveragePool sums in another order on some shapes. onnxruntime runs that as kh x kw strided
copies and as many adds: a DenseNet fixture's 2x2 pool took ~25 us of its 0.12 ms program
against its one AveragePool's ~5. Where the graph holds that pattern (the Slices' starts the
window's offsets in row-major order, their ends, axes [2, 3] and steps the strides; each partial
sum read by the next Add alone), it becomes `rknnrt.kernels::WindowMean` (sessions/kernels/
winmean.c: the same float32 sums and division; tests/perf/test_window_means.py). Without the
kernel library (no C compiler) the nodes stay; RKNNRT_WINDOW_MEAN_KERNEL=0 keeps them too.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...sessions import kernels
from .. import switches
from ..lazy_imports import onnx
from . import dw_kernel, graph_edit
from .int8_depthwise import _Lookup

OP = "WindowMean"


def rewrite(graph: bytes, weights: Mapping[str, np.ndarray]) -> tuple[bytes, set[str]]:
    """(`graph` with each window-mean pattern as the kernel's op, the weights it no longer
    reads); the same bytes when there is none."""
    if b"Slice" not in graph or b"Div" not in graph or not switches.window_mean_kernel():
        return graph, set()
    model = onnx.load_model_from_string(bytes(graph))
    g = _Lookup(model.graph, weights)
    found = [m for m in (_mean(g, n) for n in model.graph.node if n.op_type == "Div") if m]
    if not found or not dw_kernel.library_ready():
        return graph, set()
    replace, removed = {}, set()
    for div, x, (kh, kw, sh, sw), dropped in found:
        replace[id(div)] = [onnx.helper.make_node(
            OP, [x, div.input[1]], [div.output[0]], name=f"{div.output[0]}__winmean",
            domain=kernels.DOMAIN, kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw)]  # fmt: skip
        removed |= {id(node) for node in dropped}
    graph_edit.set_nodes(model.graph, graph_edit.splice(model.graph, replace, removed))
    dw_kernel.import_domain(model)
    unused = graph_edit.drop_unused_weights(model, weights)
    return model.SerializeToString(), unused


def _mean(g: _Lookup, div) -> tuple | None:
    """(the Div, the pooled input, (kh, kw, sh, sw), the Slices and Adds it replaces) where
    `div` ends the pattern, else None."""
    counts = g.const(div.input[1]) if len(div.input) == 2 and not div.domain else None
    if counts is None or counts.dtype != np.float32 or counts.ndim != 4 \
            or counts.shape[:2] != (1, 1):  # fmt: skip
        return None
    slices, adds, name = [], [], div.input[0]
    while True:  # walk the Add chain back to its first Slice
        node = g.producer.get(name)
        if node is None or node.domain:
            return None
        if node.op_type == "Slice":
            slices.append(node)
            break
        if node.op_type != "Add" or len(node.input) != 2:
            return None
        last = g.producer.get(node.input[1])
        if last is None or last.op_type != "Slice" or last.domain:
            return None
        adds.append(node)
        slices.append(last)
        name = node.input[0]
    slices.reverse()
    # every intermediate (each Slice's output and each partial sum) read once, by the chain
    if any(g.only_reader(n.output[0]) is None for n in (*slices, *adds)):
        return None
    window = _window(g, slices, counts.shape[2:])
    return (div, slices[0].input[0], window, [*slices, *adds]) if window else None


def _window(g: _Lookup, slices: list, out: tuple) -> tuple[int, int, int, int] | None:
    """(kh, kw, sh, sw) where `slices` are the row-major offsets of one window over the same
    input, ending where the output's last window does, else None."""
    x = slices[0].input[0]
    params = []
    for node in slices:
        if node.input[0] != x or len(node.input) != 5:
            return None
        values = [g.const(name) for name in node.input[1:]]
        if any(v is None or v.shape != (2,) for v in values):
            return None
        params.append([tuple(int(a) for a in v) for v in values])  # starts, ends, axes, steps
    steps = params[0][3]
    if any(p[2] != (2, 3) or p[3] != steps for p in params) or min(steps) < 1:
        return None
    kh, kw = params[-1][0][0] + 1, params[-1][0][1] + 1
    expected = [(i, j) for i in range(kh) for j in range(kw)]
    if [p[0] for p in params] != expected:
        return None
    for (i, j), p in zip(expected, params):  # the last window ends at the output's last one
        if p[1] != (i + (out[0] - 1) * steps[0] + 1, j + (out[1] - 1) * steps[1] + 1):
            return None
    return kh, kw, steps[0], steps[1]
