"""C callbacks of custom operators, as Python callables.

An `rknn_custom_op` registered from C (rknn_register_custom_ops, or a `librkcst_*.so` plugin's
get_rknn_custom_op) holds function pointers. `CustomOpCallbacks.from_struct` turns them into
Python callables that take the documented arguments, an `rknn_custom_op_context` and sequences
of `rknn_custom_op_tensor`, and return the callback's int status. Tensors cross without copies:
`api.custom_op_api.custom_op_tensor(array)` describes a numpy array in place, and a callback
writes outputs straight into the arrays the executor allocated. ctypes releases the GIL around
each call, so a callback may call back into librknnrt.so (rknn_custom_op_get_op_attr).

The custom-operator runtime itself (which ops run when, attributes, -14 skipping) is
core/program/custom_ops.py with api/custom_op_api.py.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import rknnrt as rk

TensorCallback = Callable[
    [rk.rknn_custom_op_context, Sequence[rk.rknn_custom_op_tensor],
     Sequence[rk.rknn_custom_op_tensor]],
    int,
]  # fmt: skip
DestroyCallback = Callable[[rk.rknn_custom_op_context], int]



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
