"""C callbacks of custom operators, as Python callables (the bridge the executor will call).

An `rknn_custom_op` registered from C (rknn_register_custom_ops, or a `librkcst_*.so` plugin's
get_rknn_custom_op) holds function pointers. `CustomOpCallbacks.from_struct` turns them into
Python callables that take the documented arguments, an `rknn_custom_op_context` and sequences
of `rknn_custom_op_tensor`, and return the callback's int status. Tensors cross without copies:
`tensor_of(array)` describes a numpy array in place (mem.virt_addr is its data), and a callback
writes outputs straight into the arrays the executor allocated. ctypes releases the GIL around
each call, so a callback may call back into librknnrt.so (rknn_custom_op_get_op_attr).

The custom-operator runtime itself (which ops run when, attributes, -14 skipping) belongs to the
custom-operator issue; this module only makes the C side callable.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import rknnrt as rk

TensorCallback = Callable[
    [rk.rknn_custom_op_context, Sequence[rk.rknn_custom_op_tensor],
     Sequence[rk.rknn_custom_op_tensor]],
    int,
]  # fmt: skip
DestroyCallback = Callable[[rk.rknn_custom_op_context], int]

_TYPES = {
    np.dtype(np.float32): rk.RKNN_TENSOR_FLOAT32, np.dtype(np.float16): rk.RKNN_TENSOR_FLOAT16,
    np.dtype(np.int8): rk.RKNN_TENSOR_INT8, np.dtype(np.uint8): rk.RKNN_TENSOR_UINT8,
    np.dtype(np.int16): rk.RKNN_TENSOR_INT16, np.dtype(np.uint16): rk.RKNN_TENSOR_UINT16,
    np.dtype(np.int32): rk.RKNN_TENSOR_INT32, np.dtype(np.uint32): rk.RKNN_TENSOR_UINT32,
    np.dtype(np.int64): rk.RKNN_TENSOR_INT64, np.dtype(np.bool_): rk.RKNN_TENSOR_BOOL,
}  # fmt: skip


def tensor_of(array: np.ndarray, name: str = "") -> rk.rknn_custom_op_tensor:
    """An rknn_custom_op_tensor describing `array` in place (C-contiguous): NCHW for 4-D,
    UNDEFINED otherwise, as custom ops receive them. The array must outlive the call."""
    if not array.flags.c_contiguous or array.ndim > rk.RKNN_MAX_DIMS:
        raise ValueError("a custom op tensor must be C-contiguous with at most 16 dims")
    tensor = rk.rknn_custom_op_tensor()
    attr, mem = tensor.attr, tensor.mem
    attr.n_dims = array.ndim
    for i, d in enumerate(array.shape):
        attr.dims[i] = d
    attr.name = name.encode()[: rk.RKNN_MAX_NAME_LEN - 1]
    attr.n_elems, attr.size = array.size, array.nbytes
    attr.size_with_stride = array.nbytes
    attr.fmt = rk.RKNN_TENSOR_NCHW if array.ndim == 4 else rk.RKNN_TENSOR_UNDEFINED
    attr.type = _TYPES[array.dtype]
    attr.qnt_type = rk.RKNN_TENSOR_QNT_NONE
    mem.virt_addr, mem.fd, mem.offset = array.ctypes.data, -1, 0
    mem.size, mem.flags = array.nbytes, rk.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE
    return tensor


def _array(tensors: Sequence[rk.rknn_custom_op_tensor]) -> ctypes.Array:
    """A contiguous C array of the tensors (the caller's own array is passed as it is)."""
    if isinstance(tensors, ctypes.Array) and tensors._type_ is rk.rknn_custom_op_tensor:
        return tensors
    return (rk.rknn_custom_op_tensor * len(tensors))(*tensors)


def tensor_callback(pointer: int | ctypes._CFuncPtr) -> TensorCallback | None:
    """init/prepare/compute/compute_native at `pointer` as a Python callable (None if NULL)."""
    address = ctypes.cast(pointer, ctypes.c_void_p).value if pointer else None
    if not address:
        return None
    function = rk.rknn_custom_op_callback(address)

    def call(op_ctx: rk.rknn_custom_op_context, inputs: Sequence[rk.rknn_custom_op_tensor],
             outputs: Sequence[rk.rknn_custom_op_tensor]) -> int:  # fmt: skip
        ins, outs = _array(inputs), _array(outputs)
        return int(function(ctypes.byref(op_ctx), ins, len(ins), outs, len(outs)))

    return call


def destroy_callback(pointer: int | ctypes._CFuncPtr) -> DestroyCallback | None:
    """The destroy callback at `pointer` as a Python callable (None if NULL)."""
    address = ctypes.cast(pointer, ctypes.c_void_p).value if pointer else None
    if not address:
        return None
    function = rk.rknn_custom_op_destroy_callback(address)
    return lambda op_ctx: int(function(ctypes.byref(op_ctx)))


@dataclass(frozen=True)
class CustomOpCallbacks:
    """The callbacks of one registered rknn_custom_op (None where C left them NULL)."""

    op_type: str
    target: int
    init: TensorCallback | None
    prepare: TensorCallback | None
    compute: TensorCallback | None
    compute_native: TensorCallback | None
    destroy: DestroyCallback | None

    @classmethod
    def from_struct(cls, op: rk.rknn_custom_op) -> CustomOpCallbacks:
        return cls(
            op.op_type.decode(errors="replace"),
            int(op.target),
            tensor_callback(op.init),
            tensor_callback(op.prepare),
            tensor_callback(op.compute),
            tensor_callback(op.compute_native),
            destroy_callback(op.destroy),
        )

    @classmethod
    def from_address(cls, address: int, count: int = 1) -> list[CustomOpCallbacks]:
        """Each of `count` rknn_custom_op structs at a C address (rknn_register_custom_ops)."""
        ops = (rk.rknn_custom_op * count).from_address(address)
        return [cls.from_struct(op) for op in ops]
