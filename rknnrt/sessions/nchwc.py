"""The channel block of onnxruntime's blocked (NCHWc) layout on this CPU: a one-off probe.

onnxruntime's x86 layout pass stores a tensor of C channels as [N][Cp / b][H][W][b], Cp = C
rounded up to b, where b is MLAS's block for the CPU (16 with AVX-512, 8 with AVX2). rknnrt's
kernels that read or write such tensors (core/program/fp16_blocked_ops.py) are told b: it is
the channel count of a ReorderInput's output for an input of one channel... (channel counts
must be multiples of 4 there, so of four channels: the output holds max(4, b) rounded up).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .policies import KERNEL_PROBE, open_session, session_options

_lock = threading.Lock()
_block: list[int] = []  # [] until probed


def _probe_model() -> Any:
    import onnx  # not at `import rknnrt`

    h = onnx.helper
    node = h.make_node("ReorderInput", ["x"], ["y"], domain="com.microsoft.nchwc", channels_last=0)
    graph = h.make_graph([node], "nchwc_block",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 1, 1])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])  # fmt: skip
    opsets = [h.make_opsetid("", 17), h.make_opsetid("com.microsoft.nchwc", 1)]
    return h.make_model(graph, opset_imports=opsets)


def block() -> int:
    """onnxruntime's NCHWc channel block here; 0 where it has no blocked layout (the probe's
    model is refused) or the probe fails."""
    with _lock:
        if not _block:
            try:
                session = open_session(_probe_model().SerializeToString(),
                                       session_options(KERNEL_PROBE, None, False))  # fmt: skip
                (out,) = session.run(None, {"x": np.ones((1, 4, 1, 1), np.float32)})
                found = int(out.shape[1])
                _block.append(found if found >= 4 and found % 4 == 0 else 0)
            except Exception:  # onnxruntime raises several types: no blocked layout known
                _block.append(0)
        return _block[0]
