"""The Python side of librknnrt.so: each exported C function calls `rknnrt.<same name>`.

Arguments arrive as integers (addresses for pointers, 0 for NULL), which the C-shaped API takes
as they are (design.md §3), so most functions are bound directly with no layer in between.
The few differences between a C call and the Python convention are bridged here: a NULL
`extend` is None, rknn_init's model is a path string when size is 0, and functions returning
`rknn_tensor_mem*` hand C the address of the structure the Python API keeps alive until
rknn_destroy_mem. A function the Python API does not have yet fails with the vendor's code and
one `E RKNN:` line; so does any Python exception (never RKNN_SUCC).
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from .signatures import Function, functions

RKNN_ERR_FAIL = -1
# Pointer parameters where the C API gives NULL a meaning ("not given") rather than an error.
_OPTIONAL = {"extend"}
_NOT_YET = {
    "rknn_create_mem_from_mb_blk": "not supported on any platform (no MB_BLK memory)",
}


def log_error(message: str) -> None:
    """One vendor-style `E RKNN:` line (the same shape as the runtime's own)."""
    now = time.time()
    stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
    sys.stderr.write(f"E RKNN: [{stamp}] {message}\n")
    sys.stderr.flush()


def _missing(fn: Function) -> Callable[..., Any]:
    reason = _NOT_YET.get(fn.name, "not implemented in rknnrt yet")
    failure = {"int": RKNN_ERR_FAIL, "pointer": 0, "void": None}[fn.returns]

    def unavailable(*_args: int) -> Any:
        log_error(f"{fn.name}: {reason}")
        return failure

    return unavailable


def _address(pointer: Any) -> int:
    """A ctypes POINTER returned by the Python API -> the address C receives (0 = NULL)."""
    return (ctypes.cast(pointer, ctypes.c_void_p).value or 0) if pointer else 0


def _adapt(fn: Function, impl: Callable[..., Any], ffi: Any) -> Callable[..., Any]:
    optional = [i for i, p in enumerate(fn.params) if p.name in _OPTIONAL]
    if fn.name == "rknn_init":

        def rknn_init(context: int, model: int, size: int, flag: int, extend: int) -> int:
            source: Any = model
            if size == 0 and model:  # a NUL-terminated path
                source = os.fsdecode(ffi.string(ffi.cast("char *", model)))
            return impl(context, source, size, flag, extend or None)

        return rknn_init
    if fn.returns == "pointer":

        def returns_pointer(*args: int) -> int:
            return _address(impl(*args))

        return returns_pointer
    if optional:

        def with_optional(*args: int) -> Any:
            given = list(args)
            for i in optional:
                given[i] = given[i] or None
            return impl(*given)

        return with_optional
    return impl  # the Python API itself: integers are what it takes


def _on_error(name: str) -> Callable[..., None]:
    def report(exc_type: type, exc_value: BaseException, _tb: Any) -> None:
        log_error(f"{name}: internal error: {exc_type.__name__}: {exc_value}")

    return report


def bind_one(ffi: Any, fn: Function, target: Callable[..., Any]) -> None:
    """Make `target` the body of the library's `fn`: an exception it raises becomes
    RKNN_ERR_FAIL (NULL for pointers) and one `E RKNN:` line, never RKNN_SUCC."""
    error = {"int": RKNN_ERR_FAIL, "pointer": 0, "void": None}[fn.returns]
    options: dict[str, Any] = {"name": f"_py_{fn.name}", "onerror": _on_error(fn.name)}
    if error is not None:
        options["error"] = error
    ffi.def_extern(**options)(target)


def bind(ffi: Any, lib: Any) -> None:
    """Attach every `_py_<function>` of the library to the public Python API."""
    import rknnrt

    for fn in functions():
        impl = getattr(rknnrt, fn.name, None)
        bind_one(ffi, fn, _missing(fn) if impl is None else _adapt(fn, impl, ffi))
