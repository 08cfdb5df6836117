"""Small ONNX models with custom nodes, built in the tests (no files)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_custom_conv(op_type: str = "cstSigmoid", **attrs: object) -> onnx.ModelProto:
    """input [1,3,8,8] -> Conv -> custom op -> Conv -> output [1,4,8,8]: NPU, CPU, NPU."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(0, 0.5, (4, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.5, (4, 4, 1, 1)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(op_type, ["a"], ["b"], name="my_sigmoid", domain="cst.ops", **attrs),
        helper.make_node("Conv", ["b", "w2"], ["y"], name="conv2"),
    ]
    graph = helper.make_graph(
        nodes,
        "cst_model",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [w1, w2],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("cst.ops", 1)]
    )


def reference(model: onnx.ModelProto, x: np.ndarray, custom) -> np.ndarray:  # type: ignore[no-untyped-def]
    """numpy forward of conv_custom_conv with `custom(a)` as the custom op."""
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}

    def conv(x: np.ndarray, k: np.ndarray, pad: int) -> np.ndarray:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        kh, kw = k.shape[2:]
        h, ww = x.shape[2] - kh + 1, x.shape[3] - kw + 1
        out = np.zeros((1, k.shape[0], h, ww), np.float64)
        for i in range(kh):
            for j in range(kw):
                out += np.einsum("nchw,oc->nohw", x[:, :, i : i + h, j : j + ww], k[:, :, i, j])
        return out

    a = conv(x.astype(np.float64), w["w1"], 1)
    return conv(custom(a), w["w2"], 0).astype(np.float32)
