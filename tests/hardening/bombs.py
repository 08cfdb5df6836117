"""Resource bombs: valid model files whose graph, run as given, would take all memory or never
return (issue 27 item 1). Each edits a converted model's graph so that its output also depends
on the bomb (onnxruntime would otherwise drop the dead nodes); every checksum is right."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .conftest import rebuild


def _with_bomb(blob: bytes, nodes: Callable[[str], list[onnx.NodeProto]],
               consts: dict[str, np.ndarray]) -> bytes:  # fmt: skip
    """`blob` whose output becomes output + ReduceSum(bomb): nodes(x) make 'bomb' from the
    model's input name x."""

    def edit(model: onnx.ModelProto) -> None:
        graph = model.graph
        out = graph.output[0].name
        for node in graph.node:
            node.output[:] = [f"{o}__orig" if o == out else o for o in node.output]
        x = graph.input[0].name
        for name, value in consts.items():
            graph.initializer.append(numpy_helper.from_array(value, name))
        graph.node.extend(nodes(x))
        graph.node.extend([
            helper.make_node("ReduceSum", ["bomb"], ["bomb_sum"], keepdims=0),
            helper.make_node("Cast", ["bomb_sum"], ["bomb_f"], to=TensorProto.FLOAT),
            helper.make_node("Add", [f"{out}__orig", "bomb_f"], [out]),
        ])  # fmt: skip

    return rebuild(blob, graph=edit)


def constant_of_shape(blob: bytes, elements: int = 3 << 28) -> bytes:
    """A constant shape of `elements` floats (3 GB by default) from a 14 KB file."""
    return _with_bomb(
        blob, lambda x: [helper.make_node("ConstantOfShape", ["bomb_shape"], ["bomb"])],
        {"bomb_shape": np.array([elements], np.int64)},
    )  # fmt: skip


def expand(blob: bytes, copies: int = 1 << 16) -> bytes:
    """The input broadcast `copies` times along a new leading axis."""
    return _with_bomb(
        blob, lambda x: [helper.make_node("Expand", [x, "bomb_shape"], ["bomb"])],
        {"bomb_shape": np.array([copies, 1, 1, 1, 1], np.int64)},
    )  # fmt: skip


def tile(blob: bytes, repeats: int = 1 << 14) -> bytes:
    return _with_bomb(
        blob, lambda x: [helper.make_node("Tile", [x, "bomb_reps"], ["bomb"])],
        {"bomb_reps": np.array([repeats, 1, 1, 1], np.int64)},
    )  # fmt: skip


def range_from_values(blob: bytes) -> bytes:
    """Range whose length comes from the input's values: unknown until the run."""
    return _with_bomb(
        blob,
        lambda x: [
            helper.make_node("ReduceMax", [x], ["bomb_max"], keepdims=0),
            helper.make_node("Mul", ["bomb_max", "bomb_big"], ["bomb_limit"]),
            helper.make_node("Range", ["bomb_zero", "bomb_limit", "bomb_one"], ["bomb"]),
        ],
        {"bomb_big": np.array(1e12, np.float32), "bomb_zero": np.array(0, np.float32),
         "bomb_one": np.array(1, np.float32)},
    )  # fmt: skip


def loop(blob: bytes, trips: int = 10**15) -> bytes:
    """A Loop of `trips` iterations whose body passes a scalar through."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [])],
    )  # fmt: skip
    return _with_bomb(
        blob,
        lambda x: [helper.make_node("Loop", ["bomb_trips", "bomb_cond", "bomb_v"], ["bomb"],
                                    body=body)],
        {"bomb_trips": np.array(trips, np.int64), "bomb_cond": np.array(True),
         "bomb_v": np.array(0, np.float32)},
    )  # fmt: skip


def many_tensors(blob: bytes, count: int = 64, elements: int = 1 << 22,
                 from_input: bool = False) -> bytes:  # fmt: skip
    """`count` static tensors of `elements` floats each (each within the per-tensor bound,
    together over a small memory budget); from_input: copies of the input (12,288 values)
    that onnxruntime cannot fold away, so that the run takes time."""

    def nodes(x: str) -> list[onnx.NodeProto]:
        first = (
            helper.make_node("Expand", [x, "bomb_shape"], ["bomb_0"])
            if from_input
            else helper.make_node("ConstantOfShape", ["bomb_shape"], ["bomb_0"])
        )
        out = [first]
        for k in range(1, count):
            out.append(helper.make_node("Add", [f"bomb_{k - 1}", "bomb_one"], [f"bomb_{k}"]))
        out.append(helper.make_node("Identity", [f"bomb_{count - 1}"], ["bomb"]))
        return out

    shape = [elements // 12288, 1, 1, 1, 1] if from_input else [elements]
    return _with_bomb(blob, nodes, {"bomb_shape": np.array(shape, np.int64),
                                    "bomb_one": np.array(1, np.float32)})  # fmt: skip


BOMBS = {"constant_of_shape": constant_of_shape, "expand": expand, "tile": tile,
         "range_from_values": range_from_values, "loop": loop}  # fmt: skip
