"""The rknn_set_io_mem table of a context: which memory holds which input or output, in which
type and layout, and moving it in and out of the program around each run through the
cache-coherency model (facts §5.4, docs/memory.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model.dtypes import numpy_dtype
from ..errors import PARAM_INVALID, RknnError
from ..io import conversions, layouts
from ..io.memory import Memory, warn_stale_input, warn_stale_output
from ..io.plans import InputPlan, OutputPlan
from .options import InitOptions
from .shapes import Shapes


@dataclass
class IoBinding:
    """A zero-copy binding made by rknn_set_io_mem: memory plus how its data is laid out."""

    memory: Memory
    dtype: str
    fmt: str
    pass_through: bool = False
    w_stride: int = 0
    shape_set: int | None = None  # the dynamic shape set the binding was made for
    h_stride: int = 0  # multi-batch NHWC inputs: rows from one batch to the next


class Bindings:
    """rknn_set_io_mem bindings of one context, keyed ("in" | "out", index)."""

    def __init__(self, shapes: Shapes, options: InitOptions) -> None:
        self.table: dict[tuple[str, int], IoBinding] = {}
        self._shapes = shapes
        self._flush = options.flush_inputs  # DISABLE_FLUSH_INPUT_MEM_CACHE
        self._invalidate = options.invalidate_outputs  # DISABLE_FLUSH_OUTPUT_MEM_CACHE

    def bind(self, memory: Memory, name: str, dtype: str, fmt: str, pass_through: bool,
             w_stride: int, h_stride: int = 0) -> None:  # fmt: skip
        """Bind `memory` to the input or output called `name` (the attr's name)."""
        shapes = self._shapes
        for plan in shapes.inputs:
            if plan.spec.name == name:
                self._bind_input(plan, memory, dtype, fmt, pass_through, w_stride, h_stride)
                return
        for plan in shapes.outputs:
            if plan.spec.name == name:
                self._bind_output(plan, memory, dtype, fmt)
                return
        raise RknnError(
            PARAM_INVALID,
            f"Unknown tensor name: '{name}'; pass the rknn_tensor_attr from an input or output "
            "query (its name says which tensor the memory is for)",
        )

    def _bind_input(self, plan: InputPlan, memory: Memory, dtype: str, fmt: str,
                    pass_through: bool, w_stride: int, h_stride: int) -> None:  # fmt: skip
        if pass_through:
            dtype, fmt, w_stride = plan.native.dtype, plan.native.fmt, plan.native.w_stride
            h_stride = 0
        else:
            plan.check_source(dtype, fmt)
        need = plan.required_bytes(dtype, fmt, pass_through, w_stride, h_stride)
        if memory.size < need:
            raise RknnError(
                PARAM_INVALID,
                f"input {plan.index} ({plan.spec.name}): memory size must be: {need}, but is: "
                f"{memory.size} ({fmt} {dtype}; allocate attr.size_with_stride bytes, scaled "
                "by the element size if you changed attr.type)",
            )
        shape_set = self._shapes.shape_set
        self.table[("in", plan.index)] = IoBinding(
            memory, dtype, fmt, pass_through, w_stride, shape_set, h_stride
        )
        self._shapes.inputs_ready[plan.index] = True

    def _bind_output(self, plan: OutputPlan, memory: Memory, dtype: str, fmt: str) -> None:
        wrong_rank = fmt == "NC1HWC2" and len(plan.spec.shape) != 4
        if dtype not in conversions.BOUND_OUTPUT_TYPES or wrong_rank:
            raise RknnError(PARAM_INVALID, f"output {plan.index}: cannot store {fmt} {dtype}")
        dims = layouts.output_dims(plan.spec.shape, fmt, self._shapes.platform.c2_for(dtype))
        need = int(np.prod(dims)) * numpy_dtype(dtype).itemsize
        if memory.size < need:
            raise RknnError(
                PARAM_INVALID,
                f"output {plan.index} ({plan.spec.name}): memory size must be: {need}, but is: "
                f"{memory.size} ({fmt} {dtype} dims {dims})",
            )
        self.table[("out", plan.index)] = IoBinding(
            memory, dtype, fmt, shape_set=self._shapes.shape_set
        )

    def drop_input(self, index: int) -> bool:
        """The general API replaces a binding of input `index`; True if there was one."""
        return bool(self.table) and self.table.pop(("in", index), None) is not None

    def complete(self) -> bool:
        """Every input and output bound (MEM_ALLOC_OUTSIDE has no other IO memory)."""
        shapes = self._shapes
        return len(self.table) >= len(shapes.inputs) + len(shapes.outputs)

    def stale(self) -> bool:
        """A binding made for another shape set, or on destroyed memory."""
        current = self._shapes.shape_set
        return any(b.shape_set != current or b.memory.destroyed for b in self.table.values())

    def problem(self, outside: bool) -> str | None:
        """Why the bound IO cannot run now, or None."""
        shapes = self._shapes
        for kind, plans in (("in", shapes.inputs), ("out", shapes.outputs)):
            for plan in plans:
                bound = self.table.get((kind, plan.index))
                if bound is not None and bound.shape_set != shapes.shape_set:
                    return (
                        f"{plan.spec.name}'s memory was bound for other input shapes; "
                        "call rknn_set_io_mem again after rknn_set_input_shapes"
                    )
                if bound is not None and bound.memory.destroyed:
                    return (
                        f"{plan.spec.name}'s memory was destroyed while still bound; "
                        "bind new memory with rknn_set_io_mem"
                    )
                if outside and bound is None:
                    what = "input" if kind == "in" else "output"
                    return f"{what}({plan.spec.name}) tensor not attached to memory"
        return None

    def read_inputs(self) -> None:
        """Before a run: bound input memory (flushed unless DISABLE_FLUSH_INPUT) into feeds."""
        shapes = self._shapes
        for plan in shapes.inputs:
            bound = self.table.get(("in", plan.index))
            if bound is None:
                continue
            if self._flush:
                bound.memory.sync_to_device()  # the runtime's own flush before the run
            elif bound.memory.cpu_differs():
                warn_stale_input(bound.memory, f"input {plan.index} ({plan.spec.name})")
            plan.convert(bound.memory.device, bound.dtype, bound.fmt, bound.pass_through,
                         shapes.feeds[plan.index], bound.w_stride, bound.h_stride)  # fmt: skip

    def write_outputs(self, results: list[np.ndarray]) -> None:
        """After a run: results into bound output memory (core/io/conversions.py), invalidated
        for the CPU unless DISABLE_FLUSH_OUTPUT."""
        shapes = self._shapes
        for plan, result in zip(shapes.outputs, results):
            bound = self.table.get(("out", plan.index))
            if bound is None:
                continue
            memory = bound.memory
            if memory.device_dirty:
                warn_stale_output(memory, f"output {plan.index} ({plan.spec.name})")
            c2 = shapes.platform.c2_for(bound.dtype)
            conversions.write_output(result, plan.spec, memory.device, bound.dtype, bound.fmt, c2)
            if self._invalidate:
                memory.sync_from_device()  # the runtime's own invalidate after the run
            else:
                memory.device_dirty = memory.buffer.two_views
