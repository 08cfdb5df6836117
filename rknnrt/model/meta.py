"""The metadata section: what the board runtime reports about a model, as strict JSON.

This is the contract between the converter and the runtime, together with the graph section
(an ONNX ModelProto whose initializers point into the weights section) and the weights section.
Parsing checks every field's type and every weight's bounds, so a corrupted file is refused
with a message instead of failing later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from math import isfinite, prod
from typing import Any

import numpy as np

from .errors import ModelFormatError

# numpy dtype names the NPU program may use at its boundary.
DTYPES = ("float32", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
          "bool")  # fmt: skip
LAYOUTS = ("NCHW", "NHWC", "UNDEFINED")
QNT_TYPES = ("NONE", "DFP", "AFFINE")
# the program's float type: float32 (exact), float16 (fp16 emulation), int8 (quantised)
FLOAT_DTYPES = ("float32", "float16", "int8")


@dataclass
class TensorSpec:
    """One model input or output, in the original model's layout (ONNX: NCHW for 4-D)."""

    name: str
    shape: list[int]
    dtype: str
    layout: str
    qnt_type: str = "NONE"
    zp: int = 0
    scale: float = 1.0
    # Inputs only: per-channel normalisation applied by the runtime unless pass_through.
    mean: list[float] | None = None
    std: list[float] | None = None


@dataclass
class WeightSpec:
    """One constant of the graph, stored at `offset` in the weights section."""

    name: str
    dtype: str
    shape: list[int]
    offset: int
    nbytes: int


@dataclass
class PlannedTensor:
    """An intermediate tensor and its place in the internal memory."""

    name: str
    offset: int
    size: int


@dataclass
class MemoryPlan:
    weight_size: int = 0
    internal_size: int = 0
    tensors: list[PlannedTensor] = field(default_factory=list)


@dataclass
class ModelMeta:
    target_platform: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    weights: list[WeightSpec] = field(default_factory=list)
    memory: MemoryPlan = field(default_factory=MemoryPlan)
    float_dtype: str = "float32"
    custom_string: str = ""
    model_name: str = ""
    framework: str = "onnx"
    toolkit_version: str = ""
    remove_weight: bool = False
    # sha256 of the weights section, so a weightless model can check its donor's weights.
    weights_sha256: str = ""
    # Dynamic shapes: per set, the shape of every input / output (model layout). The specs in
    # `inputs`/`outputs` hold the largest set's shapes. Empty for a static model.
    input_shape_sets: list[list[list[int]]] = field(default_factory=list)
    output_shape_sets: list[list[list[int]]] = field(default_factory=list)
    # build(rknn_batch_size=N): the batch the model was built for (its inputs' first dim).
    rknn_batch_size: int = 1

    def to_json(self) -> bytes:
        return json.dumps(_plain(self), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | memoryview, weights_size: int) -> ModelMeta:
        meta = _parse_meta(load_json(data), weights_size)
        check_ranges(meta, weights_size)
        return meta


def _plain(value: Any) -> Any:
    """dataclasses.asdict for the metadata's classes (dataclasses, lists, dicts of JSON values),
    without its deep copies: half of a small model's to_json."""
    names = _FIELDS.get(type(value))
    if names is None and is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS.setdefault(type(value), tuple(f.name for f in fields(value)))
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, found once
_MAX_INT_DIGITS = 19  # every integer of the metadata fits an int64


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise ModelFormatError(f"metadata: integer {text[:24]}... is too large")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ModelFormatError(f"metadata: number {text[:24]} is out of range")
    return value


def _no_constant(text: str) -> Any:
    raise ModelFormatError(f"metadata: {text} is not a number JSON allows")


def load_json(data: bytes | memoryview) -> Any:
    """Strict JSON: no NaN/Infinity, no integer beyond int64, bounded nesting."""
    try:
        return json.loads(
            bytes(data).decode("utf-8"),
            parse_int=_parse_int, parse_float=_parse_float, parse_constant=_no_constant,
        )  # fmt: skip
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(f"metadata is not valid JSON: {exc}") from None
    except RecursionError:
        raise ModelFormatError("metadata is nested too deeply") from None


def _want(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ModelFormatError(f"metadata: {where} lacks '{key}'")
    value = obj[key]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ModelFormatError(f"metadata: {where}.{key} has the wrong type")
    if not isinstance(value, kind):
        raise ModelFormatError(f"metadata: {where}.{key} has the wrong type")
    return value


def _int_list(obj: dict, key: str, where: str) -> list[int]:
    values = _want(obj, key, list, where)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ModelFormatError(f"metadata: {where}.{key} must be non-negative integers")
    return values


def _float_list(obj: dict, key: str, where: str) -> list[float] | None:
    if obj.get(key) is None:
        return None
    values = _want(obj, key, list, where)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ModelFormatError(f"metadata: {where}.{key} must be numbers")
    return [float(v) for v in values]


def _parse_tensor(raw: Any, where: str) -> TensorSpec:
    spec = TensorSpec(
        name=_want(raw, "name", str, where),
        shape=_int_list(raw, "shape", where),
        dtype=_want(raw, "dtype", str, where),
        layout=_want(raw, "layout", str, where),
        qnt_type=_want(raw, "qnt_type", str, where),
        zp=_want(raw, "zp", int, where),
        scale=float(_want(raw, "scale", (int, float), where)),
        mean=_float_list(raw, "mean", where),
        std=_float_list(raw, "std", where),
    )
    if spec.dtype not in DTYPES or spec.layout not in LAYOUTS or spec.qnt_type not in QNT_TYPES:
        raise ModelFormatError(f"metadata: {where} has an unknown dtype, layout or qnt_type")
    if not 0 < len(spec.shape) <= 16:
        raise ModelFormatError(f"metadata: {where} must have 1 to 16 dims")
    return spec


def _batch_size(raw: dict) -> int:
    batch = raw.get("rknn_batch_size", 1)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ModelFormatError("metadata: rknn_batch_size must be a positive integer")
    return batch


def _shape_sets(raw: dict, key: str, count: int) -> list[list[list[int]]]:
    sets = raw.get(key, [])
    if not isinstance(sets, list) or len(sets) > 512:
        raise ModelFormatError(f"metadata: {key} must be a list of at most 512 shape sets")
    for k, shapes in enumerate(sets):
        if not isinstance(shapes, list) or len(shapes) != count:
            raise ModelFormatError(f"metadata: {key}[{k}] needs one shape per tensor")
        for shape in shapes:
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape
            ):
                raise ModelFormatError(f"metadata: {key}[{k}] has an invalid shape")
    return sets


def _parse_meta(raw: Any, weights_size: int) -> ModelMeta:
    if not isinstance(raw, dict):
        raise ModelFormatError("metadata: top level must be an object")
    inputs = [
        _parse_tensor(t, f"inputs[{i}]") for i, t in enumerate(_want(raw, "inputs", list, ""))
    ]
    outputs = [
        _parse_tensor(t, f"outputs[{i}]") for i, t in enumerate(_want(raw, "outputs", list, ""))
    ]
    if not inputs or not outputs:
        raise ModelFormatError("metadata: a model needs at least one input and one output")
    weights = []
    for i, w in enumerate(_want(raw, "weights", list, "")):
        where = f"weights[{i}]"
        spec = WeightSpec(
            _want(w, "name", str, where), _want(w, "dtype", str, where),
            _int_list(w, "shape", where), _want(w, "offset", int, where),
            _want(w, "nbytes", int, where),
        )  # fmt: skip
        if spec.dtype not in DTYPES or spec.offset < 0 or spec.nbytes < 0:
            raise ModelFormatError(f"metadata: {where} has an invalid dtype, offset or size")
        weights.append(spec)
    mem = _want(raw, "memory", dict, "")
    plan = MemoryPlan(
        weight_size=_want(mem, "weight_size", int, "memory"),
        internal_size=_want(mem, "internal_size", int, "memory"),
        tensors=[
            PlannedTensor(
                _want(t, "name", str, "memory.tensors"),
                _want(t, "offset", int, "memory.tensors"),
                _want(t, "size", int, "memory.tensors"),
            )
            for t in _want(mem, "tensors", list, "memory")
        ],
    )
    meta = ModelMeta(
        target_platform=_want(raw, "target_platform", str, ""),
        inputs=inputs,
        outputs=outputs,
        weights=weights,
        memory=plan,
        float_dtype=_want(raw, "float_dtype", str, ""),
        custom_string=_want(raw, "custom_string", str, ""),
        model_name=_want(raw, "model_name", str, ""),
        framework=_want(raw, "framework", str, ""),
        toolkit_version=_want(raw, "toolkit_version", str, ""),
        remove_weight=_want(raw, "remove_weight", bool, ""),
        weights_sha256=_want(raw, "weights_sha256", str, ""),
        rknn_batch_size=_batch_size(raw),
        input_shape_sets=_shape_sets(raw, "input_shape_sets", len(inputs)),
        output_shape_sets=_shape_sets(raw, "output_shape_sets", len(outputs)),
    )
    if len(meta.input_shape_sets) != len(meta.output_shape_sets):
        raise ModelFormatError("metadata: input and output shape sets differ in number")
    for w in meta.weights:
        itemsize = 1 if w.dtype == "bool" else np.dtype(w.dtype).itemsize
        if w.nbytes != prod(w.shape) * itemsize:
            raise ModelFormatError(
                f"metadata: weight '{w.name}' has {w.nbytes} bytes, its shape {w.shape} of "
                f"{w.dtype} needs {prod(w.shape) * itemsize}"
            )
    if not meta.remove_weight and meta.memory.weight_size != weights_size:
        raise ModelFormatError(
            f"metadata: weight_size {meta.memory.weight_size} differs from the "
            f"{weights_size}-byte weights section"
        )
    if not meta.remove_weight:
        for w in meta.weights:
            if w.offset + w.nbytes > weights_size:
                raise ModelFormatError(
                    f"metadata: weight '{w.name}' [{w.offset}, {w.offset + w.nbytes}) lies "
                    f"outside the {weights_size}-byte weights section"
                )
    return meta


# -- range checks: metadata that passed its checksum and its type checks is checked for what
# the runtime will do with it, so that a hostile or damaged model fails at rknn_init with
# RKNN_ERR_MODEL_INVALID instead of raising an internal error later: sizes and offsets fit the
# board API's 32-bit fields (rknn_mem_size), tensors are no larger than MAX_TENSOR_BYTES,
# quantisation parameters are usable and normalisation has one finite mean and non-zero std
# per channel.
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


_F32_MAX, _F32_TINY = float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny)


def _usable_f32(value: float, nonzero: bool = False) -> bool:
    """`value` survives the runtime's float32 arithmetic: finite as a float32 (1e308 is not)
    and, where it divides, a normal float32 (1e-308 and denormals become 0 or overflow 1/x)."""
    if not isfinite(value) or abs(value) > _F32_MAX:
        return False
    return not nonzero or abs(value) >= _F32_TINY


def _check_tensor(spec: TensorSpec, where: str) -> None:
    want = "NCHW" if len(spec.shape) == 4 else "UNDEFINED"
    if spec.layout != want:  # what the converter and the vendor reader write; nothing else
        raise ModelFormatError(
            f"metadata: {where} layout {spec.layout} is not {want} (a {len(spec.shape)}-D "
            "tensor is stored in the ONNX layout)"
        )
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
    if not _usable_f32(spec.scale, spec.qnt_type != "NONE") or (
        spec.qnt_type != "NONE" and spec.scale <= 0
    ):
        raise ModelFormatError(f"metadata: {where} scale {spec.scale} is not usable")
    for what, values in (("mean", spec.mean), ("std", spec.std)):
        if values is None:
            continue
        if len(spec.shape) != 4 or len(values) != spec.shape[1]:
            raise ModelFormatError(
                f"metadata: {where} {what} has {len(values)} values; a 4-D input {spec.shape} "
                "needs one per channel"
            )
        if not all(_usable_f32(v, what == "std") for v in values):
            raise ModelFormatError(
                f"metadata: {where} {what} {values} must be finite float32 values (std "
                "non-zero and normal)"
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
    if meta.float_dtype not in FLOAT_DTYPES:
        raise ModelFormatError(
            f"metadata: float_dtype {meta.float_dtype!r} is not one of {', '.join(FLOAT_DTYPES)}"
        )
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
