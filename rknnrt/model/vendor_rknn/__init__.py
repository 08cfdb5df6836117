"""Reader of the vendor's .rknn files (format version 6): rknnrt metadata plus a rebuilt graph.

`to_sections(buf)` turns a vendor file into the three sections of rknnrt's own container
(metadata JSON, ONNX graph, weights), so every runtime surface takes vendor files unchanged.
See docs/vendor-rknn.md for every field relied on and what is supported per platform.
"""

from __future__ import annotations

import hashlib
import struct
from math import prod

from ..errors import VendorFormatError
from ..meta import MemoryPlan, ModelMeta, PlannedTensor, TensorSpec, WeightSpec
from . import board_rules, fileformat, mini_format, rebuild
from .fileformat import KIND_FEATURE, KIND_INPUT, KIND_OUTPUT, Tensor, VendorModel

__all__ = ["VendorFormatError", "to_sections", "parse_meta"]

WEIGHT_ALIGN = 64
MAX_IO_ELEMENTS = 1 << 28  # a larger model input or output is a corrupted shape
MAX_RANK = 8
MAX_INTERNAL = 1 << 30  # bytes of internal memory a corrupted size could otherwise demand


def _spec(m: VendorModel, t: Tensor, norm: fileformat.InputNorm | None) -> TensorSpec:
    if not 0 < len(t.shape) <= MAX_RANK or min(t.shape) <= 0 or \
            prod(t.shape) > MAX_IO_ELEMENTS:  # fmt: skip
        raise VendorFormatError(f"vendor .rknn model: IO tensor '{t.name}' has an invalid shape")
    dtype = m.io_types.get(t.name, {}).get("dtype") or t.dtype
    spec = TensorSpec(t.name, list(t.shape), dtype, "NCHW" if len(t.shape) == 4 else "UNDEFINED")
    if dtype == "int8" and t.scale:
        spec.qnt_type, spec.scale, spec.zp = (
            "AFFINE",
            float(t.scale[0]),
            int(t.zp[0] if t.zp else 0),
        )
    if norm is not None and len(t.shape) == 4:
        channels = t.shape[1]
        mean, std = norm.mean[:channels], norm.std[:channels]
        if (
            len(mean) == channels
            and len(std) == channels
            and (any(v != 0 for v in mean) or any(v != 1 for v in std))
        ):
            spec.mean, spec.std = mean, std
    return spec


def _weight_section(m: VendorModel) -> bytearray:
    """The weight memory, exactly the stored total weight size: the rebuilt graph's large
    weights are placed in it (rebuild.place_weights); the board's own layout is not stored."""
    if not 0 <= m.weight_size <= 16 * sum(len(b) for b in m.buffers) + (1 << 20):
        raise VendorFormatError(f"vendor .rknn model: implausible weight size {m.weight_size}")
    return bytearray(m.weight_size)


def dynamic_shape_sets(m: VendorModel) -> tuple[list, list]:
    """(input, output) shape sets of a dynamic-shape file ([] for a static one). Such a file
    holds one compiled graph per set; rknnrt runs the first one's ops at every set's shapes,
    so only graphs whose ops do not depend on the shapes are accepted."""
    if m.shape_mode == "static_shape":
        return [], []
    sets = " | ".join(
        ", ".join(str(shape).replace(" ", "") for shape in shapes) for shapes in m.input_shape_sets
    )
    fixed = sorted({n.op_type for n in m.nodes if not rebuild.shape_free(n.op_type)})
    if m.shape_mode != "dynamic_shape" or fixed or len(m.input_shape_sets) < 2:
        raise VendorFormatError(
            f"vendor .rknn model: '{m.shape_mode}' models (dynamic shapes; "
            f"{len(m.input_shape_sets)} input shape sets: {sets}) with ops {fixed} are not "
            "supported"
        )
    return m.input_shape_sets, m.output_shape_sets


def program_kind(m: VendorModel) -> str:
    """The metadata's float_dtype: "int8" where the compiler quantised any tensor, else the
    NPU's float16 (the runtime chooses its kernels and layouts from it)."""
    return "int8" if any(t.qnt_type == "int8" for t in m.tensors) else "float16"


def parse_meta(m: VendorModel, weights_size: int) -> ModelMeta:
    shape_sets = dynamic_shape_sets(m)
    if not 0 <= m.internal_size <= MAX_INTERNAL:
        raise VendorFormatError(f"vendor .rknn model: implausible internal size {m.internal_size}")
    norms = m.norms
    inputs = [_spec(m, m.tensors[i], norms[k] if k < len(norms) else None)
              for k, i in enumerate(m.inputs)]  # fmt: skip
    outputs = [_spec(m, m.tensors[i], None) for i in m.outputs]
    planned = [
        PlannedTensor(t.name, t.offset, t.size)
        for t in m.tensors
        if t.kind in (KIND_INPUT, KIND_OUTPUT, KIND_FEATURE)
        and 0 <= t.offset
        and 0 < t.size
        and t.offset + t.size <= m.internal_size
    ]
    board_rules.check(m)
    return ModelMeta(
        target_platform=m.platform, inputs=inputs, outputs=outputs, weights=[],
        memory=MemoryPlan(m.weight_size, m.internal_size, planned),
        float_dtype=program_kind(m), custom_string=m.custom_string, model_name=m.model_name,
        framework=(m.source or "onnx").lower(), toolkit_version=m.toolkit_version,
        weights_sha256="",
        input_shape_sets=shape_sets[0], output_shape_sets=shape_sets[1],
    )  # fmt: skip


def to_sections(buf: memoryview) -> tuple[bytes, bytes, bytearray]:
    """(metadata JSON, ONNX graph, weights) for vendor file `buf`; VendorFormatError if the
    file is malformed or holds something this reader cannot decode."""
    try:
        m = mini_format.read(buf)
        weights = _weight_section(m)
        meta = parse_meta(m, len(weights))
        builder, _, _ = rebuild.rebuild(m)
        placed = rebuild.place_weights(builder, weights)
        meta.weights = [WeightSpec(*p) for p in placed]
        meta.weights_sha256 = hashlib.sha256(weights).hexdigest()
        graph = builder.model.SerializeToString()
    except VendorFormatError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, MemoryError,
            AttributeError, struct.error) as exc:  # fmt: skip
        # numpy/onnx on hostile values: one line, never a traceback
        raise VendorFormatError(
            f"vendor .rknn model: malformed content ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    return meta.to_json(), graph, weights
