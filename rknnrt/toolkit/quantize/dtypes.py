"""The quantised dtypes the vendor offers per platform, and rknnrt's refusals.

Measured with rknn-toolkit2 2.5.0's `config(target_platform=P, quantized_dtype=D)` for every
platform it accepts (the table is Target.quantized_dtypes in model/targets.py): 'w8a8' and
'w16a16i_dfp' are accepted everywhere, 'w8a16' only on rk3562, 'w4a16' only on rk3576 and
rv1126b ('asymmetric_quantized-8' is an old alias of 'w8a8'). Any other name fails with
"Invalid quantized_dtype '<D>', expect in ['w8a8', 'w8a16', 'w16a16i_dfp', 'w4a16']!"; a known
name on a platform without it with "The quantized_dtype = '<D>' not support in '<P>'!".
"""

from __future__ import annotations

from ...model import targets
from ..errors import ConversionError

QUANTIZED_DTYPES = ("w8a8", "w8a16", "w16a16i_dfp", "w4a16")
ALIASES = {"asymmetric_quantized-8": "w8a8"}
# Which platform offers which: Target.quantized_dtypes (model/targets.py, their one owner).
# What rknnrt implements: the NPU's int8 path.
IMPLEMENTED = frozenset({"w8a8"})


def check_dtype(dtype: str, platform: str) -> str:
    """The canonical dtype name for `platform`, or ConversionError with the vendor's wording
    (and, for a dtype the vendor offers there but rknnrt does not implement, a line saying
    so)."""
    name = ALIASES.get(dtype, dtype)
    if name not in QUANTIZED_DTYPES:
        raise ConversionError(
            f"Invalid quantized_dtype '{dtype}', expect in {list(QUANTIZED_DTYPES)}!"
        )
    if name not in targets.get(platform).quantized_dtypes:
        raise ConversionError(f"The quantized_dtype = '{dtype}' not support in '{platform}'!")
    if name not in IMPLEMENTED:
        raise ConversionError(
            f"quantized_dtype '{dtype}' is offered by the vendor on {platform} but rknnrt "
            "implements only 'w8a8'"
        )
    return name
