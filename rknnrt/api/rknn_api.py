"""rknn_api.h, function for function: check the arguments, hand over to the core, return a code.

Every function returns an int status (RKNN_SUCC or a negative RKNN_ERR_*) and logs one
`E RKNN:` line on failure; no Python exception escapes. Memory ownership follows the header:
buffers that rknn_outputs_get allocates (is_prealloc=0) belong to the context until
rknn_outputs_release or rknn_destroy; everything the caller passes stays the caller's.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from ..core import context as contexts
from ..core import log
from ..core.context import Context, InitExtend, OutputRequest
from ..core.errors import FAIL, PARAM_INVALID, RknnError
from . import constants as c
from . import memory_api
from .marshal import (
    array_at,
    bytes_at,
    c_api,
    context_handle,
    model_bytes,
    struct_at,
)  # fmt: skip
from .structs import (
    rknn_context,
    rknn_custom_string,
    rknn_init_extend,
    rknn_input,
    rknn_input_output_num,
    rknn_input_range,
    rknn_mem_size,
    rknn_output,
    rknn_output_extend,
    rknn_perf_detail,
    rknn_perf_run,
    rknn_run_extend,
    rknn_sdk_version,
    rknn_tensor_attr,
    rknn_tensor_mem,
)  # fmt: skip
from .translate import FORMAT_CODES, QUERY_NAMES, fill_attr, format_name, type_name

__all__ = [
    "rknn_init", "rknn_destroy", "rknn_query", "rknn_inputs_set", "rknn_run", "rknn_outputs_get",
    "rknn_outputs_release", "rknn_dup_context", "rknn_set_core_mask", "rknn_set_batch_core_num",
    "rknn_set_io_mem", "rknn_set_weight_mem", "rknn_set_internal_mem", "rknn_set_input_shapes",
    "rknn_set_input_shape", "rknn_wait",
]  # fmt: skip


def _ctx(context: Any) -> Context:
    return contexts.lookup(context_handle(context))


@c_api
def rknn_init(context: Any, model: Any, size: int, flag: int, extend: Any) -> None:
    """Load a model (bytes, numpy array or address with size > 0; a path with size == 0) and
    write a new context handle to `*context`. Destroy it with rknn_destroy."""
    out = struct_at(context, rknn_context, "context")
    ext = None if extend is None else struct_at(extend, rknn_init_extend, "extend")
    init_ext = None
    if ext is not None:
        init_ext = InitExtend(context_handle(ext.ctx), int(ext.model_buffer_fd),
                              int(ext.real_model_offset), int(ext.real_model_size))  # fmt: skip
    by_fd = init_ext is not None and init_ext.model_buffer_fd > 0 and not model
    source = memoryview(b"") if by_fd else model_bytes(model, int(size))
    out.value = contexts.init(source, int(size), int(flag), init_ext)


@c_api
def rknn_destroy(context: Any) -> None:
    """Free the context (after another thread's call on it ends); runtime-allocated output
    buffers it handed out become invalid, and memory made on it with rknn_create_mem and not
    destroyed is freed (with a warning)."""
    contexts.destroy(context_handle(context))


@c_api
def rknn_dup_context(context_in: Any, context_out: Any) -> None:
    """A second context on the same model that shares its weights and program."""
    handle = struct_at(context_in, rknn_context, "context_in").value
    out = struct_at(context_out, rknn_context, "context_out")
    out.value = contexts.dup(handle)


def _query_attr(is_input: bool, native: bool = False, nhwc: bool = False) -> Callable[..., None]:
    def fill(ctx: Context, info: rknn_tensor_attr) -> None:
        if is_input:
            fill_attr(info, ctx.input_attr(info.index, native=native))
        else:
            fill_attr(info, ctx.output_attr(info.index, native=native, nhwc=nhwc))

    return fill


def _query_current(is_input: bool, native: bool) -> Callable[..., None]:
    def fill(ctx: Context, info: rknn_tensor_attr) -> None:
        if is_input:
            fill_attr(info, ctx.current_input_attr(info.index, native))
        else:
            fill_attr(info, ctx.current_output_attr(info.index, native))

    return fill


def _query_dynamic_range(ctx: Context, info: rknn_input_range) -> None:
    name, fmt, shapes = ctx.dynamic_range(info.index)
    info.name = name.encode()[:255]
    info.fmt = FORMAT_CODES[fmt]
    info.shape_number = len(shapes)
    info.n_dims = len(shapes[0])
    for s, shape in enumerate(shapes):
        for d, value in enumerate(shape):
            info.dyn_range[s][d] = value


def _query_io_num(ctx: Context, info: rknn_input_output_num) -> None:
    info.n_input, info.n_output = ctx.io_num()


def _query_sdk(ctx: Context, info: rknn_sdk_version) -> None:
    api, drv = ctx.sdk_version()
    info.api_version, info.drv_version = api.encode(), drv.encode()


def _query_mem_size(ctx: Context, info: rknn_mem_size) -> None:
    for key, value in ctx.mem_size().items():
        setattr(info, key, value)


def _query_custom_string(ctx: Context, info: rknn_custom_string) -> None:
    info.string = ctx.custom_string().encode()[:1023]


def _query_perf_run(ctx: Context, info: rknn_perf_run) -> None:
    info.run_duration = ctx.perf_run()


def _query_perf_detail(ctx: Context, info: rknn_perf_detail) -> None:
    text = ctx.perf_detail().encode()
    buffer = ctypes.create_string_buffer(text)
    ctx.keep_perf_text(buffer)  # the runtime's until the next PERF_DETAIL or rknn_destroy
    info.perf_data = ctypes.cast(buffer, ctypes.c_char_p)
    info.data_len = len(text)


def _query_device_mem_info(ctx: Context, info: rknn_tensor_mem) -> None:
    buffer = ctx.device_mem_info()
    if buffer is None:
        raise RknnError(FAIL, "RKNN_QUERY_DEVICE_MEM_INFO: the runtime allocated no model buffer")
    info.virt_addr, info.phys_addr, info.fd = buffer.address, buffer.phys, buffer.fd
    info.offset, info.size = 0, buffer.size
    info.flags = c.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE


_QUERIES: dict[str, tuple[type[ctypes.Structure], Callable[[Context, Any], None]]] = {
    "RKNN_QUERY_IN_OUT_NUM": (rknn_input_output_num, _query_io_num),
    "RKNN_QUERY_INPUT_ATTR": (rknn_tensor_attr, _query_attr(True)),
    "RKNN_QUERY_OUTPUT_ATTR": (rknn_tensor_attr, _query_attr(False)),
    # RT: NATIVE_NHWC_INPUT gives the same result as NATIVE_INPUT.
    "RKNN_QUERY_NATIVE_INPUT_ATTR": (rknn_tensor_attr, _query_attr(True, native=True)),
    "RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR": (rknn_tensor_attr, _query_attr(True, native=True)),
    "RKNN_QUERY_NATIVE_OUTPUT_ATTR": (rknn_tensor_attr, _query_attr(False, native=True)),
    "RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR": (
        rknn_tensor_attr,
        _query_attr(False, native=True, nhwc=True),
    ),
    "RKNN_QUERY_SDK_VERSION": (rknn_sdk_version, _query_sdk),
    "RKNN_QUERY_MEM_SIZE": (rknn_mem_size, _query_mem_size),
    "RKNN_QUERY_CUSTOM_STRING": (rknn_custom_string, _query_custom_string),
    "RKNN_QUERY_PERF_RUN": (rknn_perf_run, _query_perf_run),
    "RKNN_QUERY_PERF_DETAIL": (rknn_perf_detail, _query_perf_detail),
    "RKNN_QUERY_DEVICE_MEM_INFO": (rknn_tensor_mem, _query_device_mem_info),
    "RKNN_QUERY_INPUT_DYNAMIC_RANGE": (rknn_input_range, _query_dynamic_range),
    "RKNN_QUERY_CURRENT_INPUT_ATTR": (rknn_tensor_attr, _query_current(True, False)),
    "RKNN_QUERY_CURRENT_OUTPUT_ATTR": (rknn_tensor_attr, _query_current(False, False)),
    "RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR": (rknn_tensor_attr, _query_current(True, True)),
    "RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR": (rknn_tensor_attr, _query_current(False, True)),
}


def _query_entry(name: str) -> tuple[str, Any, int, Callable[[Context, Any], None] | None]:
    if name not in _QUERIES:
        return name, None, 0, None
    result_type, fill = _QUERIES[name]
    return name, result_type, ctypes.sizeof(result_type), fill


# cmd -> (name, result struct, its size, fill or None): one lookup per call (rknn_query is
# called in loops; its cost from C is a stated target, benchmarks/capi.py).
_QUERY_BY_CMD = {cmd: _query_entry(name) for cmd, name in QUERY_NAMES.items()}


@c_api
def rknn_query(context: Any, cmd: int, info: Any, size: int) -> None:
    """Fill `info` (at least `size` bytes, at least the result struct) for `cmd`."""
    ctx = contexts.lookup(context_handle(context))
    query = _QUERY_BY_CMD.get(int(cmd))
    if query is None:
        raise RknnError(PARAM_INVALID, f"unsupported cmd {cmd}")
    name, result_type, nbytes, fill = query
    if name not in ctx.platform.queries:
        raise RknnError(FAIL, f"{name} is not supported on {ctx.platform.name}")
    if fill is None:
        raise RknnError(FAIL, f"{name} is not available for this model in rknnrt yet")
    size = int(size)
    if size < nbytes:
        raise RknnError(
            PARAM_INVALID, f"{name}: size {size} < sizeof({result_type.__name__}) = {nbytes}"
        )
    # the guard itself rather than ctx.locked: one Python frame less on a call made in loops
    ctx.guard.run("rknn_query", fill, ctx, struct_at(info, result_type, "info", size))


@c_api
def rknn_inputs_set(context: Any, n_inputs: int, inputs: Any) -> None:
    """Convert and copy each input (type, fmt, pass_through as facts §5.3) into the context."""
    ctx = _ctx(context)
    ctx.check_general_api("rknn_inputs_set")
    if int(n_inputs) <= 0:
        raise RknnError(PARAM_INVALID, f"n_inputs {n_inputs} must be > 0")
    items = []
    for i, inp in enumerate(array_at(inputs, rknn_input, int(n_inputs), "inputs")):
        what = f"inputs[{i}]"
        pass_through = bool(inp.pass_through)
        dtype = "" if pass_through else type_name(inp.type, what)
        fmt = "" if pass_through else format_name(inp.fmt, what)
        items.append((inp.index, bytes_at(inp.buf, inp.size, f"{what}.buf"), dtype, fmt,
                      pass_through))  # fmt: skip
    ctx.enter("rknn_inputs_set")
    try:
        ctx.inputs_set(items)
    finally:
        ctx.leave()


@c_api
def rknn_run(context: Any, extend: Any) -> None:
    """Run one inference. `extend` may be None; else frame_id is written, non_block = 1 returns
    at once (see rknn_wait), timeout_ms > 0 bounds a blocking run, and fence_fd carries the
    input fence (FENCE_IN_OUTSIDE) or receives the output fence (FENCE_OUT_OUTSIDE), which the
    caller closes. docs/device.md has the rules."""
    ctx = _ctx(context)
    ext = None if extend is None else struct_at(extend, rknn_run_extend, "extend")
    args = None if ext is None else (ext.non_block, ext.timeout_ms, ext.fence_fd)
    ctx.enter("rknn_run", 0 if ext is None else int(ext.timeout_ms))
    try:
        frame_id = ctx.run(args)
        # read inside the call: another thread's run may replace the fence once it is left
        out_fence = ctx.out_fence_fd if ctx.fence_out else None
    finally:
        ctx.leave()
    if ext is not None:
        ext.frame_id = frame_id
        if out_fence is not None:
            ext.fence_fd = out_fence


@c_api
def rknn_wait(context: Any, extend: Any) -> None:
    """Wait for the frame a non-blocking rknn_run started (returns at once when none is in
    flight). `extend` may be None; else timeout_ms > 0 bounds the wait (RKNN_ERR_TIMEOUT, the
    frame keeps running) and frame_id receives the last finished frame's id."""
    ctx = _ctx(context)
    ext = None if extend is None else struct_at(extend, rknn_run_extend, "extend")
    timeout_ms = 0 if ext is None else int(ext.timeout_ms)
    ctx.enter("rknn_wait", timeout_ms)  # the same bound for a call in another thread
    try:
        frame_id = ctx.wait(timeout_ms)
    finally:
        ctx.leave()
    if ext is not None:
        ext.frame_id = frame_id


@c_api
def rknn_outputs_get(context: Any, n_outputs: int, outputs: Any, extend: Any) -> None:
    """Fill each rknn_output: float32 when want_float, else the model's output dtype."""
    ctx = _ctx(context)
    ctx.require("rknn_outputs_get")
    if int(n_outputs) <= 0:
        raise RknnError(PARAM_INVALID, f"n_outputs {n_outputs} must be > 0")
    outs = array_at(outputs, rknn_output, int(n_outputs), "outputs")
    ext = None if extend is None else struct_at(extend, rknn_output_extend, "extend")
    requests = [
        OutputRequest(
            bool(o.want_float),
            bool(o.is_prealloc),
            bytes_at(o.buf, o.size, f"outputs[{i}].buf") if o.is_prealloc else None,
        )
        for i, o in enumerate(outs)
    ]
    ctx.enter("rknn_outputs_get")
    try:
        arrays, frame_id = ctx.outputs_get(requests)
    finally:
        ctx.leave()
    for i, (o, (array, address)) in enumerate(zip(outs, arrays)):
        o.index = i
        o.buf = address
        o.size = array.nbytes
    if ext is not None:
        ext.frame_id = frame_id


@c_api
def rknn_outputs_release(context: Any, n_ouputs: int, outputs: Any) -> None:
    """Free the runtime-allocated buffers (is_prealloc=0); the array itself stays the caller's."""
    ctx = _ctx(context)
    ctx.require("rknn_outputs_release")
    if int(n_ouputs) <= 0:
        return
    outs = array_at(outputs, rknn_output, int(n_ouputs), "outputs")
    released = [o.buf or 0 for o in outs if not o.is_prealloc]  # 0: never handed out
    ctx.locked("rknn_outputs_release", ctx.outputs_release, released)


@c_api
def rknn_set_core_mask(context: Any, core_mask: int) -> None:
    """Choose the NPU cores (RK3576/RK3588 only)."""
    ctx = _ctx(context)
    ctx.locked("rknn_set_core_mask", ctx.set_core_mask, int(core_mask))


@c_api
def rknn_set_batch_core_num(context: Any, core_num: int) -> None:
    """Cores used by a multi-batch model (RK3576/RK3588 only)."""
    ctx = _ctx(context)
    ctx.locked("rknn_set_batch_core_num", ctx.set_batch_core_num, int(core_num))


@c_api
def rknn_set_io_mem(context: Any, mem: Any, attr: Any) -> None:
    """Bind `mem` to the input or output named by `attr` (from a query); attr's type, fmt,
    pass_through, w_stride and h_stride describe the data in `mem`. The caller keeps `mem`
    alive."""
    ctx = _ctx(context)
    memory = memory_api.lookup(mem, ctx.handle, "rknn_set_io_mem")
    a = struct_at(attr, rknn_tensor_attr, "attr")
    pass_through = bool(a.pass_through)
    dtype = type_name(a.type, "attr")
    fmt = format_name(a.fmt, "attr")
    name = a.name.decode(errors="replace")
    ctx.locked("rknn_set_io_mem", ctx.set_io_mem, memory, name, dtype, fmt, pass_through,
               a.w_stride, a.h_stride)  # fmt: skip


@c_api
def rknn_set_weight_mem(context: Any, mem: Any) -> None:
    """Weights go into `mem` (RKNN_FLAG_MEM_ALLOC_OUTSIDE); call before rknn_run."""
    ctx = _ctx(context)
    memory = memory_api.lookup(mem)
    ctx.locked("rknn_set_weight_mem", ctx.set_weight_mem, memory)


@c_api
def rknn_set_internal_mem(context: Any, mem: Any) -> None:
    """Intermediate tensors go into `mem` (MEM_ALLOC_OUTSIDE or INTERNAL_ALLOC_OUTSIDE)."""
    ctx = _ctx(context)
    memory = memory_api.lookup(mem)
    ctx.locked("rknn_set_internal_mem", ctx.set_internal_mem, memory)


def _model_layout_shape(ctx: Context, a: rknn_tensor_attr, what: str) -> tuple[int, list[int]]:
    """(index, shape in the model's layout) of one attr given to rknn_set_input_shape(s)."""
    index = int(a.index)
    if not 0 <= index < ctx.io_num()[0]:
        raise RknnError(PARAM_INVALID, f"{what}: input index {index} is out of range")
    dims = [int(d) for d in a.dims[: min(int(a.n_dims), 16)]]
    return index, ctx.model_layout_shape(dims, format_name(a.fmt, what), what)


@c_api
def rknn_set_input_shapes(context: Any, n_inputs: int, attr: Any) -> None:
    """Choose one of the model's input shape sets: one attr per input (index, n_dims, dims,
    fmt NHWC for 4-D inputs, UNDEFINED otherwise). Rebind inputs and outputs afterwards."""
    ctx = _ctx(context)
    ctx.require("rknn_set_input_shapes")
    count = ctx.io_num()[0]
    if int(n_inputs) != count:
        raise RknnError(
            PARAM_INVALID, f"n_inputs {n_inputs}: give the shapes of all {count} inputs at once"
        )
    shapes: list[list[int] | None] = [None] * count
    for i, a in enumerate(array_at(attr, rknn_tensor_attr, count, "attr")):
        index, shape = _model_layout_shape(ctx, a, f"attr[{i}]")
        shapes[index] = shape
    if any(s is None for s in shapes):
        raise RknnError(PARAM_INVALID, "every input index must appear once in attr[]")
    ctx.locked("rknn_set_input_shapes", ctx.set_input_shapes, shapes)


@c_api
def rknn_set_input_shape(context: Any, attr: Any) -> None:
    """Deprecated (runtime 1.5.0): one input at a time. Once every input has a shape, the shape
    set they form is chosen; use rknn_set_input_shapes."""
    ctx = _ctx(context)
    ctx.require("rknn_set_input_shape")
    log.warning("rknn_set_input_shape is deprecated: use rknn_set_input_shapes with all inputs")
    index, shape = _model_layout_shape(ctx, struct_at(attr, rknn_tensor_attr, "attr"), "attr")
    ctx.locked("rknn_set_input_shape", ctx.set_input_shape, index, shape)
