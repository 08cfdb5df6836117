"""rknn_init and rknn_destroy as the core does them: options, the model's bytes, the new
context and its handle; and the destroy order (wait for a call inside, unregister, tear down,
free the memory made on the context)."""

from __future__ import annotations

import os

from .. import log, registry
from ..errors import CTX_INVALID, PARAM_INVALID, RknnError
from ..io import memory
from .facade import Context
from .model import InitExtend, Model, read_model_bytes
from .options import InitOptions


def lookup(handle: int) -> Context:
    """The live model context behind `handle` (RKNN_ERR_CTX_INVALID otherwise)."""
    ctx = registry.get(handle)
    if not isinstance(ctx, Context):
        raise RknnError(CTX_INVALID, "this call needs an rknn_context, not an rknn_matmul_ctx")
    return ctx


def create(buf: memoryview, options: InitOptions, donor: Context | None) -> Context:
    """Parse, check and load the model into a new (unregistered) context."""
    ctx = Context(Model(buf), options)
    try:
        ctx.load(donor)
    except BaseException:
        ctx.destroy()
        raise
    return ctx


def init(source: memoryview | str | os.PathLike, size: int, flag: int,
         extend: InitExtend | None) -> int:  # fmt: skip
    """rknn_init: `source` is the model buffer or a path (size 0). Returns the new handle."""
    options = InitOptions.from_flag(flag)
    if options.model_zero_copy and extend is None:
        raise RknnError(PARAM_INVALID, "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY needs extend")
    donor = None
    if options.share_weight_mem:
        if extend is None or not extend.ctx:
            raise RknnError(PARAM_INVALID, "RKNN_FLAG_SHARE_WEIGHT_MEM needs extend->ctx")
        donor = lookup(extend.ctx)
    buf = read_model_bytes(source, size, extend, options)
    return create(buf, options, donor).register()


def dup(handle: int) -> int:
    """rknn_dup_context: waits for a call in progress on the source (read-only for it)."""
    src = lookup(handle)
    src.enter("rknn_dup_context")
    try:
        return src.dup().register()
    finally:
        src.leave()


def destroy(handle: int) -> None:
    """rknn_destroy: memory made on the context and not destroyed is freed (one W line)."""
    lookup(handle).close()
    leaked = memory.TABLE.release_owned(handle)
    if leaked:
        log.warning(
            f"rknn_destroy: {leaked} rknn_tensor_mem made on this context were not destroyed "
            "with rknn_destroy_mem; freed now"
        )
