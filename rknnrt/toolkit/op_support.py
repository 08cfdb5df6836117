"""The ONNX operators the converter accepts (default domain), in the spirit of the vendor's
supported-operator list. Anything else is refused at build time with the op type and node name,
rather than failing later on a board. The list lives in model/op_rules.py: the runtime's
allow-list is built from it, so what the converter accepts rknn_init accepts."""

from __future__ import annotations

from ..model.op_rules import CONVERTER_OPS

SUPPORTED_OPS = CONVERTER_OPS
