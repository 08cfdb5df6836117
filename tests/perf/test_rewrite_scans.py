"""The runtime's graph rewrites (whole.execution_graph) skip a graph with nothing for them after
one scan of its nodes, before building their lookup tables (each table cost ~0.3 ms of every
int8 rknn_init; a vendor transformer's load was 2.15x the rknnrt-format file's)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rknnrt.core.program import (
    byte_maps,
    channel_muls,
    int8_affine,
    int8_depthwise,
    selection_convs,
)


def _int8_conv_graph() -> bytes:
    """x -> DequantizeLinear -> Conv (dequantised weights, group 1) -> Mul(float constant) ->
    QuantizeLinear: no grouped conv, no float-weight conv, no Mul of a dequantised tensor, no
    DequantizeLinear read by a QuantizeLinear."""
    inits = [numpy_helper.from_array(v, n) for v, n in (
        (np.array(0.02, np.float32), "s"), (np.array(128, np.uint8), "z"),
        (np.ones((4, 3, 1, 1), np.int8), "w"), (np.array(0.01, np.float32), "ws"),
        (np.array(0, np.int8), "wz"), (np.array(0.5, np.float32), "k"))]  # fmt: skip
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("Mul", ["c", "k"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "s", "z"], ["q"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                              [1, 3, 4, 4])], [helper.make_tensor_value_info("q", TensorProto.UINT8,
                              None)], inits)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("module", [selection_convs, int8_depthwise, int8_affine, byte_maps,
                                    channel_muls])  # fmt: skip
def test_a_graph_with_nothing_to_rewrite_builds_no_lookup(module, monkeypatch) -> None:
    built: list[object] = []
    real = int8_depthwise._Lookup

    def counting(*args):
        built.append(args)
        return real(*args)

    monkeypatch.setattr(module, "_Lookup", counting, raising=False)
    monkeypatch.setattr(int8_depthwise, "_Lookup", counting)
    graph = _int8_conv_graph()
    assert module.rewrite(graph, {})[0] is graph
    assert built == []
