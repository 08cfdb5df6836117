"""Which device runs each operator, per platform: the NPU unless the platform's runtime places
the op on the CPU (shared by the converter's reports and the runtime's partitioning).

Only documented placements are listed, each with its source. Custom operators always run on
the CPU (RKNN_TARGET_TYPE_GPU ops too, here: rknnrt has no GPU).
"""

from __future__ import annotations

import onnx

from .custom_ops import is_custom

_MINI_RUNTIME_CPU_OPS = frozenset(
    {
        # airockchip/rknn-toolkit2#557: on RV1106 the runtime reports "unsupport cpu ArgMax op"
        # for an ArgMax model, i.e. it places ArgMax on the CPU (RK3588's NPU runs it).
        "ArgMax",
    }
)
CPU_OPS: dict[str, frozenset[str]] = {
    name: _MINI_RUNTIME_CPU_OPS for name in ("rv1103", "rv1106", "rv1103b", "rv1106b")
}


def device_for(node: onnx.NodeProto, platform: str) -> str:
    """ "NPU" or "CPU" for one node of a model built for `platform`."""
    if is_custom(node) or node.op_type in CPU_OPS.get(platform, frozenset()):
        return "CPU"
    return "NPU"
