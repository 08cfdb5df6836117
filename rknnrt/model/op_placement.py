"""Which device runs each operator, per platform: the NPU unless the platform's runtime places
the op on the CPU (shared by the converter's reports and the runtime's partitioning).

Only documented placements are listed (Target.cpu_ops in model/targets.py, with sources).
Custom operators always run on the CPU (RKNN_TARGET_TYPE_GPU ops too, here: rknnrt has no GPU).
"""

from __future__ import annotations

import onnx

from .custom_ops import is_custom
from .targets import cpu_ops


def device_for(node: onnx.NodeProto, platform: str) -> str:
    """ "NPU" or "CPU" for one node of a model built for `platform`."""
    if is_custom(node) or node.op_type in cpu_ops(platform):
        return "CPU"
    return "NPU"
