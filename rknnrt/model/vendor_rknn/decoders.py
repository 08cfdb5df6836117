"""The shape of a vendor op decoder and the table decoders are registered in, by op type.

A decoder turns one compiled node into ONNX nodes of the rebuilt graph (graph.GraphBuilder) and
returns the raw float32 value of each output it writes (one name, or a list for several
outputs); rebuild.py then rounds each to its stored type. Each module of decoders (conv_ops,
tensor_ops, window_ops, ...) fills its own OpTable; registry.py joins them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .fileformat import Node
from .graph import GraphBuilder

Decoder = Callable[[GraphBuilder, Node], "str | list[str]"]


@dataclass(frozen=True)
class OpDecoder:
    op_type: str
    decode: Decoder
    # the rebuilt form holds no shape: a dynamic-shape file's first graph serves every set
    shape_free: bool


class OpTable(dict[str, OpDecoder]):
    """op type -> decoder of one module."""

    def register(self, *op_types: str, shape_free: bool = False) -> Callable[[Decoder], Decoder]:
        def add(fn: Decoder) -> Decoder:
            for op_type in op_types:
                if op_type in self:
                    raise ValueError(f"vendor op {op_type} registered twice")
                self[op_type] = OpDecoder(op_type, fn, shape_free)
            return fn

        return add
