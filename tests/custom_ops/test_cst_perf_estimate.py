"""The latency estimate of a model with a custom op counts its CPU segment (RKNN_QUERY_PERF_RUN,
`rknnrt perf`), and `rknnrt perf` times such a model with stand-in ops."""

from __future__ import annotations

import numpy as np

from rknnrt import board_eval
from rknnrt.core import platforms
from rknnrt.core.board import perf
from rknnrt.core.board import soc_costs as board_model
from rknnrt.model import container
from rknnrt.model.meta import ModelMeta


def _board(model: bytes, platform: str = "rk3588") -> perf.Board:
    sections = container.read(memoryview(model))
    meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
    weights = np.frombuffer(sections.weights, np.uint8)
    return perf.board_view(meta, bytes(sections.graph), weights, platforms.get(platform))


def test_the_custom_ops_layer_is_a_cpu_layer_with_the_hand_over_cost(sigmoid_model):
    view = _board(sigmoid_model)
    (layer,) = [a for a in view.layers if "my_sigmoid" in a.nodes]
    assert (layer.target, layer.kind) == ("CPU", "cpu")
    cost = view.model.cost(layer)
    assert cost.time_us >= board_model.board("rk3588").cpu_us  # the runtime's hand-over
    npu_like = [a for a in view.layers if a is not layer]
    assert view.run_us() > view.model.run_us(npu_like) + board_model.board("rk3588").cpu_us / 2


def test_rknnrt_perf_times_a_custom_op_model_with_stand_ins(sigmoid_model, capfd):
    report = board_eval.eval_perf(sigmoid_model)
    rows = [line.split() for line in report.table.splitlines() if "cstSigmoid:my_sigmoid" in line]
    assert len(rows) == 1 and rows[0][1:4] == ["cstSigmoid", "FLOAT32", "CPU"]
    assert report.run_us == _board(sigmoid_model).run_us()
    assert "stand-ins that write zeros" in capfd.readouterr().err
