"""The vendor's calling convention for `RKNN`'s methods: 0 (or the value) on success, -1 (None
for value-returning methods) with one `E <method>:` line on failure, `last_error` kept; and what a
load or build forgets before it starts."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from .errors import ConversionError, engine_words
from .simulation import RuntimeReported


def reported(method: Callable[..., Any]) -> Callable[..., Any]:
    """0 / the method's value on success; -1 (None for value-returning methods) on failure,
    with one `E <method>:` line."""
    failure = None if getattr(method, "_returns_value", False) else -1

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            value = method(self, *args, **kwargs)
        except ConversionError as exc:
            self.last_error = str(exc)
            if not isinstance(exc, RuntimeReported):  # else the runtime printed its E line
                sys.stderr.write(f"E {method.__name__}: {exc}\n")
            return failure
        except Exception as exc:  # a converter bug: still the vendor's failure value, say so
            self.last_error = f"internal error: {type(exc).__name__}: {engine_words(exc)}"
            sys.stderr.write(f"E {method.__name__}: {self.last_error}\n")
            return failure
        self.last_error = ""
        return 0 if failure == -1 else value

    return wrapper


def replaces_model(method: Callable[..., Any]) -> Callable[..., Any]:
    """A load_* or build forgets the previous model first: when it fails, export_rknn and
    init_runtime fail too instead of using the previous build (issue 27 item 4)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._built, self._rknn = None, None
        if method.__name__ != "build":
            self._onnx = None
        return method(self, *args, **kwargs)

    return wrapper


def value(method: Callable[..., Any]) -> Callable[..., Any]:
    method._returns_value = True  # type: ignore[attr-defined]
    return reported(method)
