"""A weight shared by several Convs (TensorFlow's one variable applied to several inputs, the
vendor's multi_input example): the int8 program used to fail at rknn_init inside onnxruntime
("Attempt to replace the existing tensor"); passes/untie_weights gives each Conv its copy."""

from __future__ import annotations

import numpy as np

from rknnrt.toolkit import RKNN
from rknnrt.toolkit.passes import untie_weights

from .models import Graph, cosine, run_onnx


def _shared():
    g = Graph(0)
    w = g.const("w", (g.rng.randn(4, 3, 3, 3) * 0.3).astype(np.float32))
    a = g.node("Conv", ["x", w], "a", kernel_shape=[3, 3], pads=[1] * 4)
    b = g.node("Conv", ["y", w], "b", kernel_shape=[3, 3], pads=[1] * 4)
    g.node("Add", [a, b], "out")
    return g.model([("x", [1, 3, 8, 8]), ("y", [1, 3, 8, 8])], ["out"])


def test_each_conv_gets_its_own_copy() -> None:
    model = untie_weights.run(_shared())
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert [c.input[1] for c in convs] == ["w", "w__2"]
    inits = {t.name: t for t in model.graph.initializer}
    assert inits["w"].raw_data == inits["w__2"].raw_data


def test_int8_build_of_a_shared_weight_runs() -> None:
    rknn = RKNN()
    rknn.config(mean_values=[[0] * 3, [0] * 3], std_values=[[1] * 3, [1] * 3])
    assert rknn.load_onnx(_shared()) == 0
    rng = np.random.RandomState(0)
    data = [[rng.rand(1, 3, 8, 8).astype(np.float32) for _ in range(2)] for _ in range(4)]
    assert rknn.build(dataset=data) == 0, rknn.last_error
    assert rknn.init_runtime() == 0, rknn.last_error
    x, y = (rng.rand(1, 3, 8, 8).astype(np.float32) for _ in range(2))
    (got,) = rknn.inference([x, y], data_format="nchw")
    (expected,) = run_onnx(_shared(), {"x": x, "y": y})
    assert cosine(got, expected) > 0.999
