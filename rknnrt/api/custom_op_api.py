"""rknn_custom_op.h, function for function (facts §4.3, §5.12; docs/custom-ops.md).

`rknn_register_custom_ops` turns each `rknn_custom_op` structure into a `StructOp` (the core's
view of an operator) and hands them to the context. A callback gets the documented arguments:
an `rknn_custom_op_context` per node (made once, kept until rknn_destroy) and C arrays of
`rknn_custom_op_tensor` describing the context's own buffers in place (made once per node,
remade only when a buffer moves), so a run builds no structure.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..core import registry
from ..core.context import Context
from ..core.errors import CTX_INVALID, PARAM_INVALID, RknnError
from ..core.program import custom_ops
from ..model import dtypes
from . import constants as c
from .marshal import _CArgObject, array_at, c_api, context_handle, struct_at
from .structs import (
    rknn_custom_op,
    rknn_custom_op_attr,
    rknn_custom_op_callback,
    rknn_custom_op_context,
    rknn_custom_op_tensor,
)

__all__ = [
    "rknn_register_custom_ops",
    "rknn_custom_op_get_op_attr",
    "rknn_custom_op_from_python",
    "rknn_custom_op_standin",
]

# numpy name -> rknn_tensor_type of the types a custom op's tensors may have (numpy's own)
_TYPES = {t.name: code for code, t in dtypes.BY_RKNN.items() if t.numpy is not None}


def custom_op_tensor(array: np.ndarray, name: str = "") -> rknn_custom_op_tensor:
    """An rknn_custom_op_tensor describing `array` in place (C-contiguous), as custom ops
    receive tensors: NCHW for 4-D, UNDEFINED otherwise. The array must outlive its use."""
    if not array.flags.c_contiguous or array.ndim > c.RKNN_MAX_DIMS:
        raise ValueError("a custom op tensor must be C-contiguous with at most 16 dims")
    tensor = rknn_custom_op_tensor()
    attr, mem = tensor.attr, tensor.mem
    attr.n_dims = array.ndim
    for i, d in enumerate(array.shape):
        attr.dims[i] = d
    attr.name = name.encode()[: c.RKNN_MAX_NAME_LEN - 1]
    attr.n_elems, attr.size = array.size, array.nbytes
    attr.size_with_stride = array.nbytes
    attr.fmt = c.RKNN_TENSOR_NCHW if array.ndim == 4 else c.RKNN_TENSOR_UNDEFINED
    attr.type = _TYPES[array.dtype.name]
    attr.qnt_type = c.RKNN_TENSOR_QNT_NONE
    mem.virt_addr, mem.fd, mem.offset = array.ctypes.data, -1, 0
    mem.size, mem.flags = array.nbytes, c.RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE
    return tensor


def _tensors(arrays: list[np.ndarray], names: list[str]) -> ctypes.Array:
    """The arrays as a C array of rknn_custom_op_tensor, in place."""
    tensors = (rknn_custom_op_tensor * len(arrays))()
    for k, (array, name) in enumerate(zip(arrays, names)):
        tensors[k] = custom_op_tensor(array, name)
    return tensors


class _NodeState:
    """A node's rknn_custom_op_context and tensor arrays (the C side of one NodeInstance)."""

    def __init__(self, node: custom_ops.NodeInstance, target: int) -> None:
        self.op_ctx = rknn_custom_op_context()
        self.op_ctx.target = target
        self.op_ctx.internal_ctx = node.internal_id
        self.key = -1
        self.ins: ctypes.Array = (rknn_custom_op_tensor * 0)()
        self.outs: ctypes.Array = (rknn_custom_op_tensor * 0)()

    def tensors(
        self, node: custom_ops.NodeInstance, ins: list[np.ndarray], outs: list[np.ndarray]
    ) -> tuple[ctypes.Array, ctypes.Array]:
        key = node.generation  # bumped whenever the context binds new buffers
        if key != self.key:
            self.ins, self.outs = _tensors(ins, node.inputs), _tensors(outs, node.outputs)
            self.key = key
        return self.ins, self.outs


def _pointer(function: Any) -> Any:
    return function if ctypes.cast(function, ctypes.c_void_p).value else None


class StructOp:
    """One registered rknn_custom_op as the core calls it (custom_ops.OpCallbacks)."""

    def __init__(self, op: rknn_custom_op) -> None:
        # Holding the structure (and the array it is part of) keeps Python callbacks alive:
        # ctypes keeps a function pointer's thunk in the structure's objects.
        self._keep = (op, getattr(op, "_b_base_", None))
        self.op_type = op.op_type.decode(errors="replace")
        self.target = int(op.target)
        # A GPU op's callbacks run on the CPU target here (the core logs it once).
        self._ctx_target = custom_ops.TARGET_CPU
        self._init, self._prepare = _pointer(op.init), _pointer(op.prepare)
        self._compute, self._destroy = _pointer(op.compute), _pointer(op.destroy)
        self.has_prepare = self._prepare is not None
        self.has_compute = self._compute is not None
        self.has_compute_native = _pointer(op.compute_native) is not None

    def _state(self, node: custom_ops.NodeInstance) -> _NodeState:
        if not isinstance(node.state, _NodeState):
            node.state = _NodeState(node, self._ctx_target)
        return node.state

    def _call(
        self,
        function: Any,
        node: custom_ops.NodeInstance,
        ins: list[np.ndarray],
        outs: list[np.ndarray],
    ) -> int:
        if function is None:
            return 0
        state = self._state(node)
        t_in, t_out = state.tensors(node, ins, outs)
        return function(ctypes.byref(state.op_ctx), t_in, len(t_in), t_out, len(t_out))

    def init(self, node, ins, outs) -> int:  # type: ignore[no-untyped-def]
        return self._call(self._init, node, ins, outs)

    def prepare(self, node, ins, outs) -> int:  # type: ignore[no-untyped-def]
        return self._call(self._prepare, node, ins, outs)

    def compute(self, node, ins, outs) -> int:  # type: ignore[no-untyped-def]
        return self._call(self._compute, node, ins, outs)

    def destroy(self, node: custom_ops.NodeInstance) -> int:
        if self._destroy is None:
            return 0
        return self._destroy(ctypes.byref(self._state(node).op_ctx))


@c_api
def rknn_register_custom_ops(context: Any, op: Any, custom_op_num: int) -> None:
    """Register all of the model's custom ops in one call, after rknn_init and before
    rknn_run; `init` of each op runs here once per node. The structures are read now; a C
    caller's callbacks must live until rknn_destroy (Python ctypes callbacks stored in the
    structures are kept alive by the context)."""
    ctx = registry.get(context_handle(context))
    if not isinstance(ctx, Context):
        raise RknnError(CTX_INVALID, "this call needs an rknn_context, not an rknn_matmul_ctx")
    if isinstance(op, _CArgObject):  # byref(struct or array): hold the object, its callbacks too
        op = op._obj
    if isinstance(op, (list, tuple)):  # plain Python ops (toolkit2 classes) among structures
        op = [rknn_custom_op_from_python(o) if _is_python_op(o) else o for o in op]
    count = int(custom_op_num)
    if count <= 0:
        raise RknnError(PARAM_INVALID, f"custom_op_num is {count}; give at least one op")
    ops = [StructOp(o) for o in array_at(op, rknn_custom_op, count, "op")]
    ctx.locked("rknn_register_custom_ops", ctx.register_custom_ops, ops)


def rknn_custom_op_get_op_attr(op_ctx: Any, attr_name: Any, op_attr: Any) -> None:
    """Fill `op_attr` with the node's attribute `attr_name` (dtype, n_elems, data); n_elems 0
    and data NULL when the node has none. Returns nothing, as in C; bad pointers are ignored."""
    try:
        context = struct_at(op_ctx, rknn_custom_op_context, "op_ctx")
        out = struct_at(op_attr, rknn_custom_op_attr, "op_attr")
    except RknnError:
        return
    if isinstance(attr_name, (bytes, str)):
        name = attr_name.decode() if isinstance(attr_name, bytes) else attr_name
    elif attr_name:
        name = (ctypes.string_at(attr_name) or b"").decode(errors="replace")
    else:
        name = ""
    value = custom_ops.lookup_attr(int(context.internal_ctx), name)
    out.name = name.encode()[: c.RKNN_MAX_NAME_LEN - 1]
    if value is None:
        out.dtype, out.n_elems, out.data = 0, 0, None
        return
    out.dtype = _TYPES[value.dtype.name]
    out.n_elems = value.size
    out.data = value.ctypes.data if value.size else None


# -- plain Python operators ---------------------------------------------------------------------
_DTYPES = {code: np.dtype(name) for name, code in _TYPES.items()}


def _is_python_op(op: Any) -> bool:
    return not isinstance(op, ctypes.Structure) and callable(getattr(op, "compute", None)) \
        and isinstance(getattr(op, "op_type", None), str)  # fmt: skip


def _view(tensor: rknn_custom_op_tensor) -> np.ndarray:
    """A custom op tensor's data in place, with its dims and type."""
    attr = tensor.attr
    dtype = _DTYPES[attr.type]
    shape = tuple(attr.dims[i] for i in range(attr.n_dims))
    if attr.n_elems == 0:
        return np.empty(shape, dtype)
    raw = ctypes.cast(tensor.mem.virt_addr + tensor.mem.offset, ctypes.POINTER(ctypes.c_uint8))
    return np.ctypeslib.as_array(raw, (attr.n_elems * dtype.itemsize,)).view(dtype).reshape(shape)


def rknn_custom_op_from_python(op: Any, target: int = c.RKNN_TARGET_TYPE_CPU) -> rknn_custom_op:
    """rknnrt extension: an `rknn_custom_op` whose compute runs a toolkit2-style Python op,
    `op.op_type` and `op.compute(node, inputs) -> outputs` (the class given to
    RKNN.reg_custom_op). `node` is the model's stored ONNX NodeProto (its attributes read with
    rknnrt.toolkit.custom_ops.get_node_attr); `inputs` are read-only float32 (NCHW) / int64
    arrays on the runtime's buffers; each returned array must have its output's number of
    elements and is written into the output. The structure keeps the callback alive.
    rknn_register_custom_ops also takes such objects directly in a list."""
    if not _is_python_op(op):
        raise TypeError("the op needs a string op_type and a compute(node, inputs) method")
    compute_op = op.compute

    def compute(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
        node = custom_ops.lookup_node(int(op_ctx.contents.internal_ctx))
        if node is None or node.proto is None:
            raise RuntimeError("the op context belongs to no live custom node")
        inputs = [_view(ins[i]) for i in range(n_in)]
        for array in inputs:
            array.flags.writeable = False  # the runtime's buffers: compute returns new arrays
        results = list(compute_op(node.proto, inputs))
        if len(results) != n_out:
            raise ValueError(f"compute returned {len(results)} outputs, the node has {n_out}")
        for k, result in enumerate(results):
            out = _view(outs[k])
            value = np.asarray(result)
            if value.size != out.size:
                raise ValueError(
                    f"compute returned shape {value.shape} for output {k} of shape {out.shape}"
                )
            out[...] = value.reshape(out.shape)
        return 0

    struct = rknn_custom_op(version=1, target=int(target), op_type=op.op_type.encode())
    struct.compute = rknn_custom_op_callback(compute)  # ctypes keeps it with the structure
    return struct


def _zero_outputs(op_ctx, ins, n_in, outs, n_out):  # type: ignore[no-untyped-def]
    for k in range(n_out):
        ctypes.memset(outs[k].mem.virt_addr + outs[k].mem.offset, 0, outs[k].attr.size)
    return 0


_ZERO_OUTPUTS = rknn_custom_op_callback(_zero_outputs)


def rknn_custom_op_standin(op_type: str) -> rknn_custom_op:
    """rknnrt extension, for tools that time a model without its operators' code (`rknnrt
    perf`): an `rknn_custom_op` of that type whose compute writes zeros to its outputs."""
    struct = rknn_custom_op(version=1, target=c.RKNN_TARGET_TYPE_CPU, op_type=op_type.encode())
    struct.compute = _ZERO_OUTPUTS
    return struct
