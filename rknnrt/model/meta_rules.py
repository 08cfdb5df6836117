"""Range checks of metadata that has passed its checksum and its type checks.

A file's metadata is checked for what the runtime will do with it, so that a hostile or
damaged model fails at rknn_init with RKNN_ERR_MODEL_INVALID instead of raising an internal
error later: sizes and offsets fit the board API's 32-bit fields (`rknn_mem_size`), tensors
are no larger than MAX_TENSOR_BYTES, quantisation parameters are usable and normalisation has
one finite mean and non-zero std per channel.
"""

from __future__ import annotations

from math import isfinite, prod
from typing import TYPE_CHECKING

import numpy as np

from .errors import ModelFormatError

if TYPE_CHECKING:
    from .meta import ModelMeta, TensorSpec

MAX_SIZE = (1 << 32) - 1  # rknn_mem_size reports weight and internal sizes as uint32
MAX_TENSOR_BYTES = 1 << 31  # one input or output (the vendor's attr.size is a uint32)
MAX_TENSORS = 4096  # inputs or outputs of one model
MAX_BATCH = 4096
WEIGHT_ALIGN = 64
_INT_RANGES = {
    name: (int(np.iinfo(name).min), int(np.iinfo(name).max))
    for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64")
}


def _itemsize(dtype: str) -> int:
    return 1 if dtype == "bool" else np.dtype(dtype).itemsize


def _check_tensor(spec: TensorSpec, where: str) -> None:
    if any(d < 1 for d in spec.shape):
        raise ModelFormatError(f"metadata: {where} has a non-positive dim in {spec.shape}")
    if prod(spec.shape) * _itemsize(spec.dtype) > MAX_TENSOR_BYTES:
        raise ModelFormatError(f"metadata: {where} {spec.shape} exceeds {MAX_TENSOR_BYTES} bytes")
    low, high = _INT_RANGES.get(spec.dtype, _INT_RANGES["int32"])
    if spec.qnt_type != "NONE" and not low <= spec.zp <= high:
        raise ModelFormatError(
            f"metadata: {where} zero point {spec.zp} is outside {spec.dtype}'s [{low}, {high}]"
        )
    if not _INT_RANGES["int32"][0] <= spec.zp <= _INT_RANGES["int32"][1]:
        raise ModelFormatError(f"metadata: {where} zero point {spec.zp} is not an int32")
    if not isfinite(spec.scale) or (spec.qnt_type != "NONE" and spec.scale <= 0):
        raise ModelFormatError(f"metadata: {where} scale {spec.scale} is not usable")
    for what, values in (("mean", spec.mean), ("std", spec.std)):
        if values is None:
            continue
        if len(spec.shape) != 4 or len(values) != spec.shape[1]:
            raise ModelFormatError(
                f"metadata: {where} {what} has {len(values)} values; a 4-D input {spec.shape} "
                "needs one per channel"
            )
        if not all(isfinite(v) for v in values) or (what == "std" and 0.0 in values):
            raise ModelFormatError(
                f"metadata: {where} {what} {values} must be finite (std non-zero)"
            )


def _check_weights(meta: ModelMeta, weights_size: int) -> None:
    limit = meta.memory.weight_size if meta.remove_weight else weights_size
    spans = []
    for w in meta.weights:
        if w.offset % WEIGHT_ALIGN:
            raise ModelFormatError(f"metadata: weight '{w.name}' offset {w.offset} is not aligned")
        if w.offset + w.nbytes > limit:
            raise ModelFormatError(
                f"metadata: weight '{w.name}' [{w.offset}, {w.offset + w.nbytes}) lies outside "
                f"the {limit}-byte weights"
            )
        if w.nbytes:
            spans.append((w.offset, w.offset + w.nbytes, w.name))
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise ModelFormatError(f"metadata: weights '{first}' and '{second}' overlap")


def check_ranges(meta: ModelMeta, weights_size: int) -> None:
    if len(meta.inputs) > MAX_TENSORS or len(meta.outputs) > MAX_TENSORS:
        raise ModelFormatError(f"metadata: more than {MAX_TENSORS} inputs or outputs")
    for kind, specs in (("inputs", meta.inputs), ("outputs", meta.outputs)):
        for i, spec in enumerate(specs):
            _check_tensor(spec, f"{kind}[{i}]")
            if kind == "outputs" and (spec.mean is not None or spec.std is not None):
                raise ModelFormatError(f"metadata: outputs[{i}] cannot have a mean or std")
    names = [spec.name for spec in meta.inputs]
    if len(set(names)) != len(names):
        raise ModelFormatError("metadata: two inputs have the same name")
    memory = meta.memory
    if not 0 <= memory.weight_size <= MAX_SIZE or not 0 <= memory.internal_size <= MAX_SIZE:
        raise ModelFormatError(
            f"metadata: weight size {memory.weight_size} or internal size "
            f"{memory.internal_size} is outside [0, {MAX_SIZE}]"
        )
    for t in memory.tensors:
        if t.offset < 0 or t.size < 0 or t.offset + t.size > memory.internal_size:
            raise ModelFormatError(
                f"metadata: planned tensor '{t.name}' [{t.offset}, {t.offset + t.size}) lies "
                f"outside the {memory.internal_size}-byte internal memory"
            )
    _check_weights(meta, weights_size)
    if meta.rknn_batch_size > MAX_BATCH:
        raise ModelFormatError(f"metadata: rknn_batch_size {meta.rknn_batch_size} is too large")
    if len(meta.custom_string.encode()) > 1023:
        raise ModelFormatError("metadata: custom_string is longer than 1023 bytes")
    for key, sets in (("input_shape_sets", meta.input_shape_sets),
                      ("output_shape_sets", meta.output_shape_sets)):  # fmt: skip
        for k, shapes in enumerate(sets):
            for shape, spec in zip(shapes, meta.inputs if key[0] == "i" else meta.outputs):
                if len(shape) != len(spec.shape) or prod(shape) * _itemsize(spec.dtype) > (
                    MAX_TENSOR_BYTES
                ):
                    raise ModelFormatError(f"metadata: {key}[{k}] has an invalid shape {shape}")
