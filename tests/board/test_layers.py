"""The vendor's layers of a converted graph (core/board/layers.py) and the compiler's cycle
counts (core/board/soc_costs.py), against the vendor toolkit's own build logs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core import platforms
from rknnrt.core.board import layers as board_layers
from rknnrt.core.board import perf
from rknnrt.core.board import soc_costs as board_model
from rknnrt.model import container
from rknnrt.model.meta import ModelMeta

from .conftest import LIGHT_RESNET50, int8_bytes
from .zoo_models import Builder, mobilenetv2


def layers_of(model: onnx.ModelProto, soc: str = "rk3588") -> list[board_layers.Layer]:
    tile = board_model.BOARDS[soc].tile_bytes
    return board_layers.vendor_layers(model.graph, board_layers.static_shapes(model), 1, tile)


def ops(layers: list[board_layers.Layer]) -> list[str]:
    return [layer.op for layer in layers]


def test_conv_activation_and_add_fuse_as_the_vendor_names_them():
    b = Builder("t", [1, 16, 8, 8])
    x = b.conv("images", 16, 3)  # ConvRelu
    main = b.conv(x, 32, act=None)  # Conv (the Add's earlier producer)
    short = b.conv(x, 32, act=None)  # ConvAddRelu (the later producer takes the Add)
    y = b.act(b.add(main, short), "relu")
    z = b.add(y, b.conv(y, 32, 3))  # bottleneck: ConvReluAdd
    b.output(b.conv(z, 8, act="silu"))  # ConvExSwish
    layers = layers_of(b.model())
    assert ops(layers) == ["InputOperator", "ConvRelu", "Conv", "ConvAddRelu", "ConvReluAdd",
                           "ConvExSwish", "OutputOperator"]  # fmt: skip
    assert layers[3].full_name.endswith("_ConvAddRelu")
    assert layers[1].full_name.startswith("Conv:conv_")
    assert layers[3].ins[-1] == [1, 32, 8, 8]  # the fused Add's other operand


def test_gemm_runs_as_a_1x1_conv_and_a_2d_output_gets_a_cpu_reshape():
    b = Builder("t", [1, 8, 4, 4])
    b.output(b.gemm(b.gap(b.conv("images", 16)), 10))
    layers = layers_of(b.model())
    assert ops(layers) == ["InputOperator", "ConvRelu", "Conv", "Conv", "Reshape",
                           "OutputOperator"]  # fmt: skip
    gemm = layers[3]
    assert gemm.onnx_op == "Gemm" and gemm.ins[:2] == [[1, 16, 1, 1], [10, 16, 1, 1]]
    assert layers[2].onnx_op == "GlobalAveragePool" and layers[2].kind == "dwconv"
    assert layers[4].target == "CPU" and layers[4].outs == [[1, 10]]


def test_a_big_global_pool_becomes_a_chain_of_7x7_convs():
    b = Builder("t", [1, 8, 65, 65])
    b.output(b.gap("images"))
    layers = layers_of(b.model())
    assert [layer.outs[0][2:] for layer in layers[1:-1]] == [[10, 10], [2, 2], [1, 1]]


def test_quantize_dequantize_nodes_are_not_layers(default_onnx):
    model = onnx.load_model_from_string(default_onnx.SerializeToString())
    blob = int8_bytes(model)
    sections = container.read(memoryview(blob))
    meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
    graph = onnx.load_model_from_string(bytes(sections.graph)).graph
    assert Counter(n.op_type for n in graph.node)["DequantizeLinear"] > 10
    view = perf.board_view(meta, bytes(sections.graph), np.frombuffer(sections.weights, np.uint8),
                           platforms.get("rk3588"))  # fmt: skip
    assert ops(view.layers) == ops(layers_of(default_onnx))
    assert not {"QuantizeLinear", "DequantizeLinear", "Cast"} & set(ops(view.layers))


def test_light_resnet50_has_the_vendors_layers_and_cycles(vendor):
    """rknn-toolkit2 2.5.0, int8 rk3588: 66 rows (InputOperator .. OutputOperator)."""
    layers = layers_of(onnx.load(LIGHT_RESNET50))
    theirs = vendor["light_resnet50"]["rk3588"]["layers"]
    assert len(theirs) == 66 and len(layers) == 66
    assert ops(layers) == [op for op, _, _ in theirs]
    assert [layer.target for layer in layers] == [target for _, target, _ in theirs]
    b = board_model.BOARDS["rk3588"]
    assert [board_model.cycles(layer, b, 1)[0] for layer in layers] == [c for *_, c in theirs]
    assert board_model.internal_bytes(layers, b, 1) == 1960 * 1024
    weight_kb = vendor["light_resnet50"]["rk3588"]["weight_kb"]
    assert board_model.weight_bytes(layers, b, 1) / 1024 == pytest.approx(weight_kb, rel=0.01)


@pytest.mark.parametrize("soc", ["rk3588", "rk3576", "rk3562", "rk3566"])
def test_mobilenetv2_cycles_per_layer_match_the_vendor(vendor, soc):
    layers = layers_of(mobilenetv2(), soc)
    theirs = vendor["mobilenetv2"][soc]["layers"]
    assert ops(layers) == [op for op, _, _ in theirs]
    b = board_model.BOARDS[soc]
    assert [board_model.cycles(layer, b, 1)[0] for layer in layers] == [c for *_, c in theirs]


def test_cycles_of_a_dense_and_a_depthwise_conv():
    b = board_model.BOARDS["rk3588"]
    dense = board_layers.Layer("Conv", "Conv", "c", "NPU", [[1, 64, 56, 56], [64, 64, 1, 1]],
                               [[1, 64, 56, 56]], "conv")  # fmt: skip
    # 1x1: Cin 64 counts as 128; 3136 pixels x 64 x 128 / 1024 MACs per cycle
    assert board_model.cycles(dense, b, 1) == (3136 * 8, 3136 * 64 * 64)
    assert board_model.cycles(dense, b, 2)[0] == 3136 * 16  # float16: half the rate
    dw = board_layers.Layer("Conv", "Conv", "d", "NPU", [[1, 96, 14, 14], [96, 1, 3, 3]],
                            [[1, 96, 14, 14]], "dwconv", [3, 3], 96)  # fmt: skip
    # 196 pixels pad to 208; 9 taps x ceil(96 / 64) lanes
    assert board_model.cycles(dw, b, 1)[0] == 208 * 9 * 2


def test_cpu_ops_run_on_the_cpu():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 3])
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y], [k]))
    layers = layers_of(model)
    top = next(layer for layer in layers if layer.onnx_op == "TopK")
    assert top.target == "CPU" and top.kind == "cpu"
    cost = board_model.cost(top, board_model.BOARDS["rk3588"], 1)
    assert cost.npu_cycles == 0 and cost.time_us >= board_model.BOARDS["rk3588"].cpu_us
