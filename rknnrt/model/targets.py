"""The target platforms, and every per-chip fact both the converter and the runtime read.

One `Target` per SoC a model file may name; the converter (toolkit/config.py, builder.py,
quantize/dtypes.py) and the runtime (core/platforms.py, which adds the runtime-only facts:
calls, queries, layouts, matmul, cost numbers) read these same objects, so a fact has one home.
"""

from __future__ import annotations

from dataclasses import dataclass

# The platform of a model or command that names none (the vendor toolkit's default too).
DEFAULT_PLATFORM = "rk3588"

# quantized_dtype names rknn-toolkit2 2.5.0 accepts per platform (measured with
# config(target_platform=P, quantized_dtype=D); tools/vendor_diff/dtypes.py regenerates them):
# 'w8a8' and 'w16a16i_dfp' everywhere, 'w8a16' only on rk3562, 'w4a16' on rk3576 and rv1126b.
_DTYPES = frozenset({"w8a8", "w16a16i_dfp"})
# airockchip/rknn-toolkit2#557: on RV1106 the runtime reports "unsupport cpu ArgMax op" for an
# ArgMax model, i.e. the mini runtime places ArgMax on the CPU (RK3588's NPU runs it).
_MINI_RUNTIME_CPU_OPS = frozenset({"ArgMax"})


@dataclass(frozen=True)
class Target:
    """What the converter and the runtime both need to know of one SoC."""

    name: str
    npu_cores: int
    # Dynamic input shapes (UG 5.4: toolkit and runtime >= 1.5.0, RK356x/RK3562/RK3576/RK3588).
    dynamic_shapes: bool
    # Unquantised models (the vendor toolkit refuses do_quantization=False on rv110x).
    float_models: bool
    quantized_dtypes: frozenset[str] = _DTYPES
    # Op types the platform's runtime places on the CPU (model/op_placement.py; documented only).
    cpu_ops: frozenset[str] = frozenset()


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("rk3588", 3, True, True),
        Target("rk3576", 2, True, True, _DTYPES | {"w4a16"}),
        Target("rk3566", 1, True, True),
        Target("rk3568", 1, True, True),
        Target("rk3562", 1, True, True, _DTYPES | {"w8a16"}),
        Target("rv1126b", 1, False, True, _DTYPES | {"w4a16"}),
        Target("rv1103", 1, False, False, cpu_ops=_MINI_RUNTIME_CPU_OPS),
        Target("rv1106", 1, False, False, cpu_ops=_MINI_RUNTIME_CPU_OPS),
        Target("rv1103b", 1, False, False, cpu_ops=_MINI_RUNTIME_CPU_OPS),
        Target("rv1106b", 1, False, False, cpu_ops=_MINI_RUNTIME_CPU_OPS),
        Target("rk2118", 1, False, True),
    )
}  # fmt: skip
NAMES = tuple(TARGETS)
# Spellings the vendor toolkit accepts for the same SoC (any case).
ALIASES = {"rk3588s": DEFAULT_PLATFORM}
DYNAMIC_SHAPES = frozenset(t.name for t in TARGETS.values() if t.dynamic_shapes)
INT8_ONLY = frozenset(t.name for t in TARGETS.values() if not t.float_models)


def canonical(name: str) -> str | None:
    """The canonical name for `name`, or None when it is not a known target."""
    key = name.lower()
    key = ALIASES.get(key, key)
    return key if key in TARGETS else None


def cpu_ops(platform: str) -> frozenset[str]:
    """The op types `platform`'s runtime places on the CPU (none for an unknown name)."""
    target = TARGETS.get(platform)
    return target.cpu_ops if target is not None else frozenset()


def get(name: str) -> Target:
    """The target for `name` (any case, vendor aliases accepted); KeyError if unknown."""
    key = canonical(name)
    if key is None:
        raise KeyError(name)
    return TARGETS[key]
