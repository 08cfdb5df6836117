"""Where a model's operators run on a platform: the NPU, or the CPU for custom operators and
for operators the platform's NPU lacks (model/op_placement.py; Target.cpu_ops). A model with any
CPU operator runs as NPU and CPU segments (core/program/segmented.py)."""

from __future__ import annotations

from ...model import targets
from ..lazy_imports import onnx


def cpu_op_types(graph: bytes, platform: str) -> set[str]:
    """The op types of a model graph that run on the platform's CPU."""
    from ...model.op_placement import device_for  # imports onnx: not at `import rknnrt`

    if not needs_partition(graph, platform):
        return set()
    nodes = onnx.load_model_from_string(graph).graph.node
    return {n.op_type for n in nodes if device_for(n, platform) == "CPU"}


def needs_partition(graph: bytes, platform: str) -> bool:
    """Whether a model graph has custom ops or ops the platform runs on the CPU."""
    from ...model.op_placement import device_for  # imports onnx: not at import

    cpu_ops = targets.cpu_ops(platform)
    if b"rknnrt.custom" not in graph and not any(op.encode() in graph for op in cpu_ops):
        return False  # cheap: a byte search before a parse
    nodes = onnx.load_model_from_string(graph).graph.node
    return any(device_for(n, platform) == "CPU" for n in nodes)


def place(node: onnx.NodeProto, platform: str) -> str:
    """Where a node of a model graph runs (model/op_placement.py)."""
    from ...model.op_placement import device_for  # imports onnx: not at `import rknnrt`

    return device_for(node, platform)
