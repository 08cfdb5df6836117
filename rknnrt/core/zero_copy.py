"""Zero-copy IO on a context: rknn_set_io_mem bindings, and moving bound memory in and out
of the program around each run, through the cache-coherency model (facts §5.4, docs/memory.md).

A mixin of Context: the methods use the context's fields set in Context.__init__.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import attrs, conversions
from .errors import PARAM_INVALID, RknnError
from .io import InputPlan, OutputPlan
from .memory import Memory, warn_stale_input, warn_stale_output


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


class ZeroCopy:
    """rknn_set_io_mem bindings of a context."""

    def set_io_mem(self, memory: Memory, name: str, dtype: str, fmt: str, pass_through: bool,
                   w_stride: int, h_stride: int = 0) -> None:  # fmt: skip
        """Bind `memory` to the input or output called `name` (the attr's name)."""
        self._settle("rknn_set_io_mem")
        self.check_shapes_chosen("rknn_set_io_mem")
        for plan in self.inputs:
            if plan.spec.name == name:
                self._bind_input(plan, memory, dtype, fmt, pass_through, w_stride, h_stride)
                return
        for plan in self.outputs:
            if plan.spec.name == name:
                self._bind_output(plan, memory, dtype, fmt)
                return
        raise RknnError(
            PARAM_INVALID,
            f"Unknown tensor name: '{name}'; pass the rknn_tensor_attr from an input or output "
            "query (its name says which tensor the memory is for)",
        )

    def _bind_input(self, plan: InputPlan, memory: Memory, dtype: str, fmt: str,
                    pass_through: bool, w_stride: int, h_stride: int = 0) -> None:  # fmt: skip
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
        self._io[("in", plan.index)] = IoBinding(
            memory, dtype, fmt, pass_through, w_stride, self.shape_set, h_stride
        )
        self._inputs_ready[plan.index] = True

    def _bind_output(self, plan: OutputPlan, memory: Memory, dtype: str, fmt: str) -> None:
        wrong_rank = fmt == "NC1HWC2" and len(plan.spec.shape) != 4
        if dtype not in conversions.BOUND_OUTPUT_TYPES or wrong_rank:
            raise RknnError(PARAM_INVALID, f"output {plan.index}: cannot store {fmt} {dtype}")
        dims = plan.layout_dims(fmt, self.platform.c2_for(dtype))
        need = int(np.prod(dims)) * attrs.itemsize(dtype)
        if memory.size < need:
            raise RknnError(
                PARAM_INVALID,
                f"output {plan.index} ({plan.spec.name}): memory size must be: {need}, but is: "
                f"{memory.size} ({fmt} {dtype} dims {dims})",
            )
        self._io[("out", plan.index)] = IoBinding(memory, dtype, fmt, shape_set=self.shape_set)

    def _read_bound_inputs(self) -> None:
        flush = "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE" not in self.flags
        for plan in self.inputs:
            bound = self._io.get(("in", plan.index))
            if bound is None:
                continue
            if bound.memory.destroyed or bound.shape_set != self.shape_set:
                self._check_runnable()
            if flush:
                bound.memory.sync_to_device()  # the runtime's own flush before the run
            elif bound.memory.cpu_differs():
                warn_stale_input(bound.memory, f"input {plan.index} ({plan.spec.name})")
            plan.convert(bound.memory.device, bound.dtype, bound.fmt, bound.pass_through,
                         self._feed_arrays[plan.index], bound.w_stride,
                         bound.h_stride)  # fmt: skip

    def _write_bound_outputs(self) -> None:
        assert self._binding is not None
        invalidate = "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE" not in self.flags
        for plan, result in zip(self.outputs, self._binding.outputs):
            bound = self._io.get(("out", plan.index))
            if bound is None:
                continue
            memory = bound.memory
            if memory.device_dirty:
                warn_stale_output(memory, f"output {plan.index} ({plan.spec.name})")
            c2 = self.platform.c2_for(bound.dtype)
            plan.write(result, memory.device, bound.dtype, bound.fmt, c2)
            if invalidate:
                memory.sync_from_device()  # the runtime's own invalidate after the run
            else:
                memory.device_dirty = memory.buffer.two_views
