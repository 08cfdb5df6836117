"""Loaders of other frameworks' models: each turns its model into ONNX through a maintained
converter installed as an optional extra, then `RKNN` continues as with `load_onnx`.

A missing extra fails with one line naming the `pip install` to run.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import ConversionError


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import `module`, or fail with the install line of rknnrt's `extra`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConversionError(
            f"{what} needs the '{module}' package: pip install 'rknnrt[{extra}]'"
        ) from None
