"""Target platform names a model file may carry (shared by the converter and the runtime)."""

from __future__ import annotations

NAMES = ("rk3588", "rk3576", "rk3566", "rk3568", "rk3562", "rv1126b", "rv1103", "rv1106",
         "rv1103b", "rv1106b", "rk2118")  # fmt: skip
# Spellings the vendor toolkit accepts for the same SoC (any case).
ALIASES = {"rk3588s": "rk3588"}
# Dynamic input shapes exist on these (UG 5.4: toolkit and runtime >= 1.5.0, RK356x/RK3562/
# RK3576/RK3588 only).
DYNAMIC_SHAPES = frozenset({"rk3588", "rk3576", "rk3566", "rk3568", "rk3562"})
# The vendor toolkit refuses unquantised models for these (do_quantization=False).
INT8_ONLY = frozenset({"rv1103", "rv1106", "rv1103b", "rv1106b"})


def canonical(name: str) -> str | None:
    """The canonical name for `name`, or None when it is not a known target."""
    key = name.lower()
    key = ALIASES.get(key, key)
    return key if key in NAMES else None
