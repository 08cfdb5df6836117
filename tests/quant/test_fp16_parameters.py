"""The float16 program rounds tensors, not operator parameters: a Resize's scales stay float32
(the NPU keeps them in registers), so its output shape is the model's and is known at init."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rknnrt.lite import RKNNLite
from rknnrt.toolkit import RKNN

SCALES = np.array([1, 1, 1.3, 1.3], np.float32)  # 1.3 is not a float16 value


def _resize_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    scales = numpy_helper.from_array(SCALES, "scales")
    roi = numpy_helper.from_array(np.zeros(0, np.float32), "roi")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Resize", ["c", "roi", "scales"], ["y"], mode="nearest")]
    graph = helper.make_graph(
        nodes, "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, scales, roi])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_resize_scales_stay_float32_and_the_model_initialises(tmp_path) -> None:
    rknn = RKNN()
    rknn.config(target_platform="rk3588")
    assert rknn.load_onnx(_resize_model()) == 0
    assert rknn.build(do_quantization=False) == 0
    program = rknn._built.program
    inits = {t.name: t for t in program.graph.initializer}
    assert inits["scales"].data_type == TensorProto.FLOAT
    assert np.array_equal(numpy_helper.to_array(inits["scales"]), SCALES)
    assert not [n for n in program.graph.node if "scales" in n.output]  # no rounding Cast
    path = str(tmp_path / "resize.rknn")
    assert rknn.export_rknn(path) == 0
    runtime = RKNNLite()
    assert runtime.load_rknn(path) == 0 and runtime.init_runtime() == 0
    try:
        x = np.random.RandomState(0).rand(1, 2, 4, 4).astype(np.float32)
        (y,) = runtime.inference([x], data_format="nchw")
        assert y.shape == (1, 2, 5, 5)  # floor(4 * 1.3): the scales the model states
    finally:
        runtime.release()
