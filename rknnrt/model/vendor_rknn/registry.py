"""Every vendor op type rknnrt decodes, by name: the union of the decoder modules' tables.

Adding an op is adding one decoder to a module's OpTable (and a fixture); an op type in no
table is refused by name (`lookup`), never approximated.
"""

from __future__ import annotations

from ..errors import VendorFormatError
from . import act_ops, attention_ops, conv_ops, custom_nodes, tensor_ops, window_ops
from .decoders import OpDecoder
from .fileformat import Node

# The graph's boundary markers: no computation (rebuild.py binds the IO tensors itself).
BOUNDARY = ("InputOperator", "OutputOperator")


def _join(*tables: dict[str, OpDecoder]) -> dict[str, OpDecoder]:
    joined: dict[str, OpDecoder] = {}
    for table in tables:
        for op_type, decoder in table.items():
            if op_type in joined:
                raise ValueError(f"vendor op {op_type} registered by two modules")
            joined[op_type] = decoder
    return joined


DECODERS = _join(conv_ops.OPS, tensor_ops.OPS, window_ops.OPS, act_ops.OPS, attention_ops.OPS)


# A custom op of the file (Model field 21): run by the op the application registers.
CUSTOM = OpDecoder("custom", custom_nodes.decode, shape_free=False)


def lookup(n: Node, custom_types: tuple[str, ...] = ()) -> OpDecoder:
    if n.op_type in custom_types:  # the file says so, even for a built-in op's name
        return CUSTOM
    decoder = DECODERS.get(n.op_type)
    if decoder is None:
        raise VendorFormatError(f"vendor .rknn model: op {n.op_type} ('{n.name}') is not supported")
    return decoder


def shape_free(op_type: str) -> bool:
    decoder = DECODERS.get(op_type)
    return op_type in BOUNDARY or (decoder is not None and decoder.shape_free)
