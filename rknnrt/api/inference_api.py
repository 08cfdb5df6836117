"""`rknnrt_inference`: rknn_inputs_set, rknn_run and rknn_outputs_get (want_float) with
rknn_outputs_release, as one call: the path of rknn-toolkit-lite2's `inference` (an rknnrt
extension for Python callers; C programs make the four calls).

Each step is the core call its C function makes, with the same checks, in the same order, inside
one entry of the context's call guard; a failure logs its one `E RKNN:` line under the step's C
name and returns the step's status, as the four calls would. What the one call saves is their
marshalling (ctypes structures in and out, four guard entries, views of the caller's memory):
~0.25 ms of a MobileNetV2 inference whose Python path runs cold after the network's run
(benchmarks/lite_path.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import context as contexts
from ..core import log
from ..core.errors import PARAM_INVALID, RknnError
from . import constants as c
from .marshal import context_handle, status_code
from .translate import format_name, type_name

__all__ = ["rknnrt_inference"]


def rknnrt_inference(
    context: Any, arrays: Sequence[np.ndarray], types: Sequence[int], fmts: Sequence[int],
    n_outputs: int, pass_through: Sequence[int] | None = None,
) -> tuple[int, list[np.ndarray] | None]:  # fmt: skip
    """(RKNN_SUCC, the first `n_outputs` outputs as float32 copies in the model's layout) after
    setting input i from `arrays[i]` as rknn_tensor_type `types[i]` and rknn_tensor_format
    `fmts[i]`, running and releasing; else (the failing step's status, None)."""
    step = "rknn_inputs_set"
    try:
        ctx = contexts.lookup(context_handle(context))
        ctx.check_general_api(step)
        if not arrays:
            raise RknnError(PARAM_INVALID, "n_inputs 0 must be > 0")
        items = []
        for i, x in enumerate(arrays):
            passed = bool(pass_through[i]) if pass_through and i < len(pass_through) else False
            what = f"inputs[{i}]"
            dtype = "" if passed else type_name(types[i], what)
            fmt = "" if passed else format_name(fmts[i], what)
            raw = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
            items.append((i, raw, dtype, fmt, passed))
        ctx.enter(step)
        try:
            ctx.inputs_set(items)
            step = "rknn_run"
            ctx.run(None)
            step = "rknn_outputs_get"
            ctx.require(step)
            if n_outputs <= 0:
                raise RknnError(PARAM_INVALID, f"n_outputs {n_outputs} must be > 0")
            # (rknn_outputs_release with it: on every platform that has rknn_outputs_get)
            outputs = ctx.outputs_copied(n_outputs)
        finally:
            ctx.leave()
        return c.RKNN_SUCC, outputs
    except RknnError as exc:
        message = exc.message if exc.message.startswith(step) else f"{step}: {exc.message}"
        log.error(message)
        return status_code(exc.status), None
    except Exception as exc:  # the boundary, as c_api's: no Python exception reaches the caller
        log.error(f"{step}: internal error: {type(exc).__name__}: {exc}")
        return c.RKNN_ERR_FAIL, None
