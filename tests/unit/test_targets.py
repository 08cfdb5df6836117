"""model/targets.py: one owner of the per-chip facts that the converter and the runtime share;
both read the same Target objects (a change there is seen by both)."""

from __future__ import annotations

import dataclasses

import onnx
import pytest
from onnx import helper

from rknnrt.core import platforms
from rknnrt.core.board import soc_costs
from rknnrt.core.program import placement
from rknnrt.model import op_placement, targets
from rknnrt.toolkit import builder
from rknnrt.toolkit import config as configuration
from rknnrt.toolkit.errors import ConversionError
from rknnrt.toolkit.quantize import check_dtype


def test_the_runtime_profile_holds_the_shared_target() -> None:
    assert list(platforms.PLATFORMS) == list(targets.NAMES)
    for name, target in targets.TARGETS.items():
        platform = platforms.get(name)
        assert platform.target is target
        assert (platform.name, platform.npu_cores) == (target.name, target.npu_cores)
        assert platform.dynamic_shapes == target.dynamic_shapes
        assert platform.float_models == target.float_models
    assert platforms.get("RK3588S").target is targets.get("rk3588s") is targets.get("rk3588")
    assert targets.DYNAMIC_SHAPES == {"rk3588", "rk3576", "rk3566", "rk3568", "rk3562"}
    assert targets.INT8_ONLY == {"rv1103", "rv1106", "rv1103b", "rv1106b"}
    with pytest.raises(KeyError):
        targets.get("rk9999")


def test_board_cost_tables_agree_with_the_targets() -> None:
    """The latency model keeps its own fitted numbers; its core counts are the targets'."""
    for name, board in soc_costs.BOARDS.items():
        assert board.cores == targets.get(name).npu_cores, name
        assert board.c2_int8 == platforms.get(name).c2_for("int8"), name


def _argmax_graph() -> onnx.ModelProto:
    node = helper.make_node("ArgMax", ["x"], ["y"], name="argmax", axis=1)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [1, 1])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_converter_and_runtime_read_the_same_object(monkeypatch) -> None:
    """Change rk3576's target: the converter's dtype and float-model checks and the op placement
    of both sides (model/op_placement.py for the converter, core/program/placement.py for the
    runtime) follow; the runtime's profile holds the same object (test above)."""
    old = targets.TARGETS["rk3576"]
    new = dataclasses.replace(old, float_models=False, quantized_dtypes=frozenset({"w8a8"}),
                              cpu_ops=frozenset({"ArgMax"}))  # fmt: skip
    monkeypatch.setitem(targets.TARGETS, "rk3576", new)
    # converter: w4a16 is no longer offered on rk3576, nor are float models
    with pytest.raises(ConversionError, match="not support in 'rk3576'"):
        check_dtype("w4a16", "rk3576")
    config = configuration.updated(configuration.DEFAULTS, {"target_platform": "rk3576"})[0]
    model = _argmax_graph()
    with pytest.raises(ConversionError, match="rk3576 runs only quantised models"):
        builder.prepare(model, config, False, None)
    # both sides place ArgMax on the CPU for rk3576 now
    assert op_placement.device_for(model.graph.node[0], "rk3576") == "CPU"
    assert placement.cpu_op_types(model.SerializeToString(), "rk3576") == {"ArgMax"}
    monkeypatch.setitem(targets.TARGETS, "rk3576", old)
    assert op_placement.device_for(model.graph.node[0], "rk3576") == "NPU"
    assert check_dtype("w8a8", "rk3576") == "w8a8"
