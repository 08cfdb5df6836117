"""`RKNN.config`: the vendor's keywords, validated as a whole before any is applied.

An invalid value fails the call and leaves the previous configuration intact. Options that
change nothing on a PC (NPU compiler switches, board memory layout, YUV input, ...) are recorded
so scripts run unchanged, and named in one `W` line. The result is a frozen `Config`: one typed
field per vendor keyword (the converter reads attributes, never string keys).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import targets
from . import quantize
from .errors import ConversionError

FLOAT_DTYPES = ("float16", "float32")  # float32: rknnrt's exact extension
METHODS = ("channel", "layer")


@dataclass(frozen=True)
class Config:
    """The converter's configuration: the vendor's config() keywords with its defaults."""

    mean_values: list[list[float]] | None = None  # one list per input (per_input_values)
    std_values: list[list[float]] | None = None
    quantized_dtype: str = "w8a8"
    quantized_algorithm: str = "normal"
    quantized_method: str = "channel"
    quantized_hybrid_level: int = 0
    target_platform: str = targets.DEFAULT_PLATFORM
    quant_img_RGB2BGR: bool | Sequence[bool] = False  # the vendor's spelling
    float_dtype: str = "float16"
    optimization_level: int = 3
    custom_string: str = ""
    remove_weight: bool = False
    compress_weight: bool = False
    inputs_yuv_fmt: Any = None
    single_core_mode: bool = False
    dynamic_input: list[list[list[int]]] | None = None  # shape sets, one shape per input
    model_pruning: bool = False
    op_target: Mapping[str, str] | None = None
    quantize_weight: bool = False
    remove_reshape: bool = False
    sparse_infer: bool = False
    mini_rknn: bool = False
    enable_flash_attention: bool = False
    auto_hybrid_cos_thresh: float = 0.98
    auto_hybrid_euc_thresh: float | None = None
    memory_plan_strategy: str = "BestFit"
    compute_order: str = "WidthFirst"
    compiler_control_file: str | None = None
    # keywords the vendor's config() does not have, recorded as given (named in the W line)
    unknown_options: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The keywords and their values (what a hybrid step-1 .model records as JSON)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if not values["unknown_options"]:
            del values["unknown_options"]
        return values

    def rgb2bgr_for(self, index: int) -> bool:
        value = self.quant_img_RGB2BGR
        if isinstance(value, bool):
            return value
        return bool(value[index]) if index < len(value) else False


DEFAULTS = Config()
KEYWORDS = frozenset(f.name for f in dataclasses.fields(Config)) - {"unknown_options"}
# Recorded, no effect on a PC: the NPU compiler's and the board's switches.
NO_EFFECT = (
    "optimization_level", "compress_weight", "inputs_yuv_fmt", "single_core_mode",
    "model_pruning", "op_target", "quantize_weight", "remove_reshape", "sparse_infer",
    "mini_rknn", "enable_flash_attention", "memory_plan_strategy", "compute_order",
    "compiler_control_file",
)  # fmt: skip


def per_input_values(what: str, values: Any) -> list[list[float]] | None:
    """Flat [m0, m1, m2] (one input) or nested [[...], [...]] (one list per input)."""
    if values is None:
        return None
    if not isinstance(values, Sequence) or isinstance(values, str) or not len(values):
        raise ConversionError(f"{what} must be a list of numbers or a list of lists of numbers")
    groups = values if all(isinstance(v, Sequence) and not isinstance(v, str) for v in values) \
        else [values]  # fmt: skip
    try:
        return [[float(v) for v in group] for group in groups]
    except (TypeError, ValueError):
        raise ConversionError(f"{what} {values!r}: every value must be a number") from None


def updated(current: Config, given: Mapping[str, Any]) -> tuple[Config, list[str]]:
    """The configuration after one `config()` call, and the no-effect options it set.

    `given` holds only the keywords the caller passed (None for target_platform means keep)."""
    new = current.as_dict()
    unknown = {k: v for k, v in given.items() if k not in KEYWORDS and k != "unknown_options"}
    # a recorded configuration (as_dict of a hybrid step-1 .model) gives its unknowns back as one
    unknown.update(given.get("unknown_options") or {})
    for key, value in given.items():
        if key in KEYWORDS:
            new[key] = value
    choices = (("quantized_algorithm", quantize.ALGORITHMS), ("quantized_method", METHODS),
               ("float_dtype", FLOAT_DTYPES))  # fmt: skip
    for key, allowed in choices:
        if new[key] not in allowed:
            raise ConversionError(f"{key} '{new[key]}' is not supported; use one of {allowed}")
    if "target_platform" in given:
        if given["target_platform"] is None:
            new["target_platform"] = current.target_platform
        else:
            name = targets.canonical(str(given["target_platform"]))
            if name is None:
                raise ConversionError(f"target_platform '{given['target_platform']}' is not one "
                                      f"of {', '.join(targets.NAMES)}")  # fmt: skip
            new["target_platform"] = name
    # the vendor's dtypes per platform, its wording for a refusal (toolkit/quantize/dtypes.py)
    new["quantized_dtype"] = quantize.check_dtype(new["quantized_dtype"], new["target_platform"])
    new["mean_values"] = per_input_values("mean_values", new["mean_values"])
    new["std_values"] = per_input_values("std_values", new["std_values"])
    if any(v == 0 for group in new["std_values"] or [] for v in group):
        raise ConversionError("std_values contains 0")
    new["custom_string"] = new["custom_string"] or ""
    if len(new["custom_string"].encode()) > 1023:
        raise ConversionError("custom_string must be at most 1023 bytes")
    new["remove_weight"] = bool(new["remove_weight"])
    new["dynamic_input"] = new["dynamic_input"] or None
    level = new["quantized_hybrid_level"]
    if not isinstance(level, int) or isinstance(level, bool) or level < 0:
        raise ConversionError(f"quantized_hybrid_level must be an integer >= 0, not {level!r}")
    rgb2bgr = new["quant_img_RGB2BGR"]
    if not isinstance(rgb2bgr, bool) and not (
        isinstance(rgb2bgr, Sequence) and all(isinstance(v, bool) for v in rgb2bgr)
    ):
        raise ConversionError("quant_img_RGB2BGR must be True/False or one bool per input")
    for key in ("auto_hybrid_cos_thresh", "auto_hybrid_euc_thresh"):
        value = new[key]
        if value is not None and (not isinstance(value, (int, float)) or value < 0):
            raise ConversionError(f"{key} must be a number >= 0, not {value!r}")
    no_effect = [k for k in NO_EFFECT if k in given and given[k] != getattr(DEFAULTS, k)]
    if unknown:
        new["unknown_options"] = {**current.unknown_options, **unknown}
    return Config(**new), no_effect + sorted(unknown)
