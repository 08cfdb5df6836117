"""rknn_matmul_api.h, function for function: check the arguments, hand over to core.matmul.

Every function returns an int status and logs one `E RKNN:` line on failure. The emulated SoC is
`RKNNRT_PLATFORM` (default rk3588), read by rknn_matmul_create* and
rknn_B_normal_layout_to_native_layout. Ownership: rknn_matmul_create* writes a new handle to
`*ctx`, freed by rknn_matmul_destroy (which also frees, with a warning, memory made on it with
rknn_create_mem and not destroyed). Memory bound with rknn_matmul_set_io_mem stays the caller's:
A and B are copied and rearranged during that call (bind again after changing them), C is
written by every rknn_matmul_run and must stay alive until the last run.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..core import log, registry
from ..core.errors import CTX_INVALID, PARAM_INVALID, RknnError
from ..core.matmul import engine as mm
from ..core.matmul import layouts as lay
from . import constants as c
from . import memory_api
from .marshal import address_of, array_at, bytes_at, c_api, context_handle, struct_at
from .structs import (
    rknn_context,
    rknn_matmul_info,
    rknn_matmul_io_attr,
    rknn_matmul_shape,
    rknn_matmul_tensor_attr,
    rknn_quant_params,
    rknn_tensor_mem,
)
from .translate import TYPE_CODES, TYPE_NAMES

__all__ = [
    "rknn_matmul_create", "rknn_matmul_create_dynamic_shape", "rknn_matmul_create_dyn_shape",
    "rknn_matmul_set_io_mem", "rknn_matmul_set_core_mask", "rknn_matmul_set_quant_params",
    "rknn_matmul_get_quant_params", "rknn_matmul_set_dynamic_shape", "rknn_matmul_run",
    "rknn_matmul_destroy", "rknn_B_normal_layout_to_native_layout",
]  # fmt: skip

_TYPES = {getattr(c, name): name for name in mm.TYPES}  # rknn_matmul_type number -> name
_LAYOUTS = dict(enumerate(mm.LAYOUTS))
_QUANTS = dict(enumerate(mm.QUANT_TYPES))
_MAX_ARRAY = 1 << 26  # scale_len/zp_len beyond this cannot be a matmul's


def _enum(table: dict[int, str], value: int, what: str) -> str:
    if int(value) not in table:
        raise RknnError(PARAM_INVALID, f"{what} = {value} is not a valid value")
    return table[int(value)]


def _spec(info: rknn_matmul_info) -> mm.MatmulSpec:
    return mm.MatmulSpec(
        _enum(_TYPES, info.type, "info->type"),
        _enum(_LAYOUTS, info.B_layout, "info->B_layout"),
        _enum(_LAYOUTS, info.AC_layout, "info->AC_layout"),
        _enum(_QUANTS, info.B_quant_type, "info->B_quant_type"),
        _enum(_QUANTS, info.AC_quant_type, "info->AC_quant_type"),
        int(info.group_size),
    )


def _fill(out: rknn_matmul_io_attr, attrs: dict[str, mm.TensorAttr]) -> None:
    for name, attr in attrs.items():
        target = getattr(out, name)
        target.name = attr.name.encode()
        target.n_dims = len(attr.dims)
        target.dims[:] = list(attr.dims) + [0] * (16 - len(attr.dims))
        target.size, target.type = attr.size, TYPE_CODES[attr.dtype]


def _attr(given: rknn_matmul_tensor_attr) -> mm.TensorAttr:
    if given.n_dims > 16 or given.type not in TYPE_NAMES:
        raise RknnError(PARAM_INVALID, "attr: n_dims or type is invalid; pass an io_attr entry")
    dims = tuple(given.dims[: given.n_dims])
    return mm.TensorAttr(given.name.decode(errors="replace"), dims, given.size,
                         TYPE_NAMES[given.type])  # fmt: skip


def _window(mem: Any) -> mm.Window:
    """The bytes an rknn_tensor_mem describes, and rknnrt's own view of them if it made them."""
    m = struct_at(mem, rknn_tensor_mem, "mem")
    if m.offset < 0:
        raise RknnError(PARAM_INVALID, f"mem->offset {m.offset} is negative")
    try:
        memory = memory_api.lookup(mem)
    except RknnError:  # the caller's own memory described by hand, or freed rknnrt memory
        if m.flags == c.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE or memory_api.was_freed(mem):
            raise RknnError(PARAM_INVALID, "mem was freed by rknn_destroy_mem") from None
        cpu = bytes_at((m.virt_addr or 0) and m.virt_addr + m.offset, m.size, "mem->virt_addr")
        return mm.Window(cpu)
    # rknnrt's own memory: its real address and size, whatever the struct's fields now say
    cpu = bytes_at(memory.buffer.address + memory.offset, memory.size, "mem")

    def device() -> np.ndarray | None:
        return memory.device if memory.buffer.two_views else None

    return mm.Window(cpu, device, lambda: not memory.destroyed)


def _array(pointer: Any, count: int, dtype: type, what: str) -> np.ndarray:
    if count < 0 or count > _MAX_ARRAY or (count and not pointer):
        raise RknnError(PARAM_INVALID, f"{what}: length {count} with pointer {bool(pointer)}")
    return np.ctypeslib.as_array(pointer, (count,)).astype(dtype) if count else np.empty(0, dtype)


def _buffer(arg: Any, size: int, what: str) -> np.ndarray:
    """`size` bytes of a void* argument (an address, c_void_p, ctypes array or numpy array)."""
    if isinstance(arg, np.ndarray):
        if not arg.flags.c_contiguous or arg.nbytes < size:
            raise RknnError(PARAM_INVALID, f"{what}: need {size} contiguous bytes")
        return arg.reshape(-1).view(np.uint8)[:size]
    address, available = address_of(arg, what)
    if available is not None and available < size:
        raise RknnError(PARAM_INVALID, f"{what}: {available} bytes < the {size} needed")
    return bytes_at(address, size, what)


def _ctx(ctx: Any) -> mm.MatmulContext:
    handle = context_handle(ctx)
    obj = registry.get(handle)
    if not isinstance(obj, mm.MatmulContext):
        raise RknnError(CTX_INVALID, f"context {handle:#x} is not a matmul context")
    return obj


def _create(ctx: Any, info: Any, shapes: list[mm.Shape] | None, io_attrs: Any, n: int) -> None:
    out = struct_at(ctx, rknn_context, "ctx")
    spec_info = struct_at(info, rknn_matmul_info, "info")
    shapes = shapes or [mm.Shape(spec_info.M, spec_info.K, spec_info.N)]
    targets = array_at(io_attrs, rknn_matmul_io_attr, n, "io_attr")
    context = mm.MatmulContext(mm.emulated_platform(), _spec(spec_info), shapes)
    for target, attrs in zip(targets, context.attrs):
        _fill(target, attrs)
    out.value = registry.add(context)


@c_api
def rknn_matmul_create(ctx: Any, info: Any, io_attr: Any) -> None:
    """A C = A·B context for info's M, K, N; fills io_attr. Free with rknn_matmul_destroy."""
    _create(ctx, info, None, io_attr, 1)


def _shapes(shape_num: int, dynamic_shapes: Any) -> list[mm.Shape]:
    count = int(shape_num)
    if not 1 <= count <= c.RKNN_MAX_DYNAMIC_SHAPE_NUM:
        raise RknnError(PARAM_INVALID, f"shape_num {count} must be 1..512")
    given = array_at(dynamic_shapes, rknn_matmul_shape, count, "dynamic_shapes")
    shapes = [mm.Shape(s.M, s.K, s.N) for s in given]
    if len(set(shapes)) != count:
        raise RknnError(PARAM_INVALID, "dynamic_shapes lists a shape twice")
    return shapes


@c_api
def rknn_matmul_create_dynamic_shape(
    ctx: Any, info: Any, shape_num: int, dynamic_shapes: Any, io_attrs: Any
) -> None:
    """One context for several (M, K, N); info's M, K, N are ignored; io_attrs[i] is shape i's.
    The first shape is current until rknn_matmul_set_dynamic_shape."""
    shapes = _shapes(shape_num, dynamic_shapes)
    _create(ctx, info, shapes, io_attrs, len(shapes))


@c_api
def rknn_matmul_create_dyn_shape(
    ctx: Any, info: Any, shape_num: int, dynamic_shapes: Any, io_attrs: Any
) -> None:
    """Deprecated (2.0.0b0) name of rknn_matmul_create_dynamic_shape."""
    log.warning("rknn_matmul_create_dyn_shape is deprecated: use rknn_matmul_create_dynamic_shape")
    shapes = _shapes(shape_num, dynamic_shapes)
    _create(ctx, info, shapes, io_attrs, len(shapes))


@c_api
def rknn_matmul_set_io_mem(ctx: Any, mem: Any, attr: Any) -> None:
    """Bind memory to A, B or C (by attr->name). A and B are read and rearranged now."""
    context = _ctx(ctx)
    given = _attr(struct_at(attr, rknn_matmul_tensor_attr, "attr"))
    window = _window(mem)
    with context.call("rknn_matmul_set_io_mem"):
        context.set_io_mem(given, window)


@c_api
def rknn_matmul_set_core_mask(ctx: Any, core_mask: int) -> None:
    """RK3576/RK3588: run on one chosen core (multi-core masks fall back to AUTO and fail)."""
    context = _ctx(ctx)
    with context.call("rknn_matmul_set_core_mask"):
        context.set_core_mask(int(core_mask))


@c_api
def rknn_matmul_set_quant_params(ctx: Any, params: Any) -> None:
    """Scale/zero point of the tensor named params->name (copied; the arrays stay the caller's)."""
    context = _ctx(ctx)
    p = struct_at(params, rknn_quant_params, "params")
    scale = _array(p.scale, p.scale_len, np.float32, "params->scale")
    zp = _array(p.zp, p.zp_len, np.int64, "params->zp")
    with context.call("rknn_matmul_set_quant_params"):
        context.set_quant_params(p.name.decode(errors="replace"), scale, zp)


def _give(pointer: Any, length: int, values: np.ndarray) -> None:
    """Copy `values` to a caller's array when there is one that holds them all."""
    if pointer and length >= values.size:
        np.ctypeslib.as_array(pointer, (values.size,))[:] = values


@c_api
def rknn_matmul_get_quant_params(ctx: Any, params: Any, scale: Any) -> None:
    """INT8_MM_INT8_TO_INT32: *scale = B's normalised scale (C's scale = A's scale times it).
    params gets B's name, and B's scales/zero points where its arrays are long enough."""
    context = _ctx(ctx)
    p = struct_at(params, rknn_quant_params, "params")
    out = struct_at(scale, ctypes.c_float, "scale")
    with context.call("rknn_matmul_get_quant_params"):
        normalised, quant = context.get_quant_params()
    p.name, out.value = b"B", normalised
    _give(p.scale, p.scale_len, quant.scale)
    _give(p.zp, p.zp_len, quant.zp)


@c_api
def rknn_matmul_set_dynamic_shape(ctx: Any, shape: Any) -> None:
    """Choose one of the creation shapes; then bind A, B and C again with its io_attrs."""
    context = _ctx(ctx)
    s = struct_at(shape, rknn_matmul_shape, "shape")
    with context.call("rknn_matmul_set_dynamic_shape"):
        context.set_dynamic_shape(mm.Shape(s.M, s.K, s.N))


@c_api
def rknn_matmul_run(ctx: Any) -> None:
    """C = A·B, synchronously, into C's memory in its layout and type."""
    context = _ctx(ctx)
    with context.call("rknn_matmul_run"):
        context.run()


@c_api
def rknn_matmul_destroy(ctx: Any) -> None:
    """Free the context (and memory made on it with rknn_create_mem, with a warning)."""
    handle = context_handle(ctx)
    context = _ctx(handle)
    context.close(handle)


@c_api
def rknn_B_normal_layout_to_native_layout(
    B_input: Any, B_output: Any, K: int, N: int, info: Any
) -> None:
    """Rearrange B [K, N] (info->type's B dtype, int4 packed) into the native layout, K split
    included, for the RKNNRT_PLATFORM SoC. Both buffers stay the caller's."""
    spec = _spec(struct_at(info, rknn_matmul_info, "info"))
    platform = mm.emulated_platform()
    mtype, facts = mm.check_spec(platform, spec), mm.facts_for(platform)
    if int(K) <= 0 or int(N) <= 0:
        raise RknnError(PARAM_INVALID, f"K = {K} and N = {N} must be > 0")
    src = _buffer(B_input, lay.nbytes(int(K) * int(N), mtype.b), "B_input")
    native = mm.normal_to_native_b(src, int(K), int(N), mtype, facts)
    _buffer(B_output, native.size, "B_output")[:] = native
