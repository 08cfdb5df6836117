"""Turning C-shaped Python arguments into addresses, structs and arrays, safely.

A pointer parameter accepts what design.md §3 lists: the structure or array itself,
`ctypes.byref(x)`, `ctypes.pointer(x)`, a raw address (int or c_void_p) or None for NULL.
When the size of the caller's object is known, a request to read or write past it is refused
with RKNN_ERR_PARAM_INVALID instead of corrupting memory.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import numpy as np

from ..core import log
from ..core.errors import PARAM_INVALID, RknnError
from . import constants

T = TypeVar("T", bound=ctypes.Structure)
_CArgObject = type(ctypes.byref(ctypes.c_int()))


def log_error(message: str) -> None:
    """One `E RKNN:` line, for the Python layers built on this API."""
    log.error(message)


def log_muted() -> AbstractContextManager[None]:
    """This thread's lines silenced, for a probe whose failure is an answer (RKNNLite)."""
    return log.muted()


def status_code(status: str) -> int:
    return getattr(constants, status)


def c_api(func: Callable[..., None]) -> Callable[..., int]:
    """Run `func`; a raised RknnError becomes its code and one `E RKNN:` line, anything else
    RKNN_ERR_FAIL. No Python exception escapes a C-shaped function."""
    name = func.__name__

    @functools.wraps(func)
    def wrapper(*args: Any) -> int:
        try:
            func(*args)
            return constants.RKNN_SUCC
        except RknnError as exc:
            message = exc.message if exc.message.startswith(name) else f"{name}: {exc.message}"
            log.error(message)
            return status_code(exc.status)
        except Exception as exc:  # the boundary: never let a Python exception reach the caller
            log.error(f"{name}: internal error: {type(exc).__name__}: {exc}")
            return constants.RKNN_ERR_FAIL

    return wrapper


def c_api_pointer(result_type: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Like c_api for functions that return a pointer in C: a failure returns a NULL
    `POINTER(result_type)` (falsy) after one `E RKNN:` line."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        name = func.__name__

        @functools.wraps(func)
        def wrapper(*args: Any) -> Any:
            try:
                return func(*args)
            except RknnError as exc:
                message = exc.message if exc.message.startswith(name) else f"{name}: {exc.message}"
                log.error(message)
            except Exception as exc:  # the boundary: never let a Python exception through
                log.error(f"{name}: internal error: {type(exc).__name__}: {exc}")
            return ctypes.POINTER(result_type)()

        return wrapper

    return decorate


def context_handle(ctx: Any) -> int:
    """An rknn_context passed by value: an rknn_context, a plain int or None (0)."""
    if type(ctx) is int:
        return ctx
    if ctx is None:
        return 0
    if isinstance(ctx, ctypes._SimpleCData):
        return int(ctx.value or 0)
    if isinstance(ctx, int):
        return ctx
    raise RknnError(PARAM_INVALID, f"context must be an rknn_context or int, not {type(ctx)}")


def address_of(arg: Any, what: str) -> tuple[int, int | None]:
    """(address, bytes available there or None when unknown) of a pointer argument."""
    if arg is None:
        raise RknnError(PARAM_INVALID, f"{what} is NULL")
    if isinstance(arg, _CArgObject):
        arg = arg._obj
    if isinstance(arg, ctypes._Pointer):
        if not arg:
            raise RknnError(PARAM_INVALID, f"{what} is NULL")
        return ctypes.addressof(arg.contents), None
    if isinstance(arg, ctypes.c_void_p):
        if not arg.value:
            raise RknnError(PARAM_INVALID, f"{what} is NULL")
        return arg.value, None
    if isinstance(arg, (ctypes.Structure, ctypes.Array, ctypes._SimpleCData, ctypes.Union)):
        return ctypes.addressof(arg), ctypes.sizeof(arg)
    if isinstance(arg, int) and not isinstance(arg, bool):
        if arg == 0:
            raise RknnError(PARAM_INVALID, f"{what} is NULL")
        return arg, None
    raise RknnError(PARAM_INVALID, f"{what}: cannot use a {type(arg).__name__} as a pointer")


def struct_at(arg: Any, ctype: type[T], what: str, size: int | None = None) -> T:
    """The `ctype` structure a pointer argument points to (`size`: the C size parameter)."""
    if type(arg) is int and arg > 0:  # a raw address: what every call from C passes
        return ctype.from_address(arg)
    if isinstance(arg, ctype):
        return arg
    if isinstance(arg, _CArgObject) and isinstance(arg._obj, ctype):
        return arg._obj
    if isinstance(arg, ctypes._Pointer) and arg and isinstance(arg.contents, ctype):
        return arg.contents
    address, available = address_of(arg, what)
    need = max(ctypes.sizeof(ctype), size or 0)
    if available is not None and available < need:
        raise RknnError(PARAM_INVALID, f"{what}: object of {available} bytes < {need} bytes")
    return ctype.from_address(address)


def array_at(arg: Any, ctype: type[T], count: int, what: str) -> Sequence[T]:
    """`count` consecutive `ctype` structures (a ctypes array, a list of structs or a pointer)."""
    if isinstance(arg, ctypes.Array) and arg._type_ is ctype and len(arg) >= count:
        return arg  # the common case, kept cheap: the caller's own array
    if isinstance(arg, (list, tuple)):
        if len(arg) < count or not all(isinstance(x, ctype) for x in arg[:count]):
            raise RknnError(PARAM_INVALID, f"{what}: expected {count} {ctype.__name__} structs")
        return arg[:count]
    if isinstance(arg, ctype) and count == 1:
        return [arg]
    address, available = address_of(arg, what)
    need = ctypes.sizeof(ctype) * count
    if available is not None and available < need:
        raise RknnError(
            PARAM_INVALID, f"{what}: array of {available} bytes holds fewer than {count} entries"
        )
    return (ctype * count).from_address(address)


_views: dict[tuple[int, int], np.ndarray] = {}
_VIEWS_KEPT = 256


def bytes_at(address: int | None, size: int, what: str) -> np.ndarray:
    """A writable uint8 view of `size` bytes of caller memory at `address`.

    Views are cached by (address, size): applications pass the same buffers every frame, and a
    view owns nothing, so reusing one is the same as making it again.
    """
    view = _views.get((address, size))  # type: ignore[arg-type]
    if view is not None:
        return view
    if not address:
        raise RknnError(PARAM_INVALID, f"{what} is NULL")
    if len(_views) >= _VIEWS_KEPT:
        _views.clear()
    view = np.frombuffer((ctypes.c_char * size).from_address(address), np.uint8)
    _views[(address, size)] = view
    return view


def model_bytes(model: Any, size: int) -> memoryview | str | os.PathLike:
    """rknn_init's `model`: a path when size == 0, otherwise `size` bytes of memory."""
    if size == 0:
        if isinstance(model, (str, os.PathLike)):
            return model
        if isinstance(model, ctypes.c_char_p) and model.value:
            return os.fsdecode(model.value)
        if isinstance(model, bytes) and model.split(b"\0", 1)[0]:
            return os.fsdecode(model.split(b"\0", 1)[0])  # a C string: up to its NUL
        raise RknnError(PARAM_INVALID, "size is 0, so model must be a file path")
    if model is None:
        raise RknnError(PARAM_INVALID, "model is NULL")
    if isinstance(model, (bytes, bytearray, memoryview, np.ndarray)):
        view = memoryview(model).cast("B") if not isinstance(model, np.ndarray) else None
        if view is None:
            view = memoryview(np.ascontiguousarray(model).reshape(-1).view(np.uint8))
        if len(view) < size:
            raise RknnError(PARAM_INVALID, f"size {size} > the {len(view)}-byte model buffer")
        return view[:size]
    address, available = address_of(model, "model")
    if available is not None and available < size:
        raise RknnError(PARAM_INVALID, f"size {size} > the {available}-byte model buffer")
    return memoryview(bytes_at(address, size, "model"))
