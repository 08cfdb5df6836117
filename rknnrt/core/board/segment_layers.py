"""The board model's layers of a partitioned model (docs/custom-ops.md, docs/performance.md).

The board model places a layer on the CPU only for the ops no NPU runs; in a model with custom
ops, or ops the target platform's runtime places on the CPU (model/op_placement.py), those
nodes run as CPU segments too. Marking their layers as CPU layers gives them the board's CPU
cost (the runtime hand-over plus streaming their tensors from and to DDR), so the latency
estimate (RKNN_QUERY_PERF_RUN, `rknnrt perf --compare`) counts each NPU<->CPU crossing.
"""

from __future__ import annotations

from ..lazy_imports import onnx
from .layers import Layer


def place(layers: list[Layer], graph: onnx.GraphProto, platform: str) -> list[Layer]:
    """`layers` with those of the nodes that run on the CPU on `platform` marked as CPU."""
    from ...model.op_placement import device_for  # imports onnx: not at `import rknnrt`

    cpu = {n.name for n in graph.node if n.name and device_for(n, platform) == "CPU"}
    if not cpu:
        return layers
    for layer in layers:
        if layer.target != "CPU" and any(name in cpu for name in layer.nodes):
            layer.target, layer.kind = "CPU", "cpu"
    return layers
