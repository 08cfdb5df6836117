"""Context: one rknn_context, one method per C call. It checks state across its parts and
delegates: options (flags), model (bytes, metadata, plans), weights (weight/internal/SRAM
memory, program), shapes (shape sets, feeds, binding), bindings (rknn_set_io_mem) and frames
(runs, jobs, results). It writes no part's private fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .. import device, guard, log, registry
from ..board import perf
from ..errors import FAIL, INPUT_INVALID, PARAM_INVALID, RknnError
from ..io import attrs
from ..io.memory import Buffer, Memory
from ..lazy_imports import onnx
from ..program import placement
from ..version import API_VERSION, DRIVER_VERSION
from .bindings import Bindings
from .frames import Extend, Frames, Handed, OutputRequest
from .model import Model
from .options import InitOptions
from .shapes import Shapes, check_index, model_layout_shape
from .weights import Weights

T = TypeVar("T")


class Context:
    """One rknn_context: a model, its memory, its IO, its settings and its run state."""

    def __init__(self, model: Model, options: InitOptions, source: Context | None = None):
        self.model = model
        self.platform = model.platform
        self.options = options
        self.handle = 0
        self.guard = guard.CallGuard()
        self.outside = options.mem_alloc_outside
        self.weights = Weights(model, options)
        self.shapes = Shapes(model)
        self.bindings = Bindings(self.shapes, options)
        self.frames = Frames(self.platform, options, self._finished)
        # Read once, as the vendor reads RKNN_LOG_LEVEL at init: the run path stays cheap.
        self._log_timing = log.level() >= log.TIMING
        self._log_perf = log.level() >= log.PERF
        self._perf: tuple[int, str] | None = None  # (frame, table) of the last PERF_DETAIL
        self._perf_text: Any = None  # the API layer's buffer of the last PERF_DETAIL text
        if source is not None:  # rknn_dup_context: same weights and program, own IO
            self.weights.share(source.weights)
            self.shapes.bind_program(self.weights.program)

    def load(self, donor: Context | None) -> None:
        self.model.log_fallback(self.options)
        self.weights.load(None if donor is None or donor.destroyed else donor.weights)
        self._bind()

    def _bind(self) -> None:
        """Bind the program; a segmented one places its crossing tensors in internal memory."""
        self.shapes.bind_program(self.weights.program)
        self._use_internal()

    def _use_internal(self) -> None:
        """A segmented program's crossing tensors go into the internal memory."""
        if self.shapes.binding is not None:
            self.shapes.binding.use_internal(self.weights.internal_views())

    # -- what other layers read ---------------------------------------------------------------
    @property
    def flags(self) -> frozenset[str]:
        return self.options.names

    @property
    def device(self) -> device.Device:
        """The simulated NPU this context's jobs run on (shared by the platform's contexts)."""
        return self.frames.device

    @property
    def frame_id(self) -> int:
        return self.frames.frame_id

    @property
    def last_cores(self) -> tuple[int, ...]:
        return self.frames.last_cores

    @property
    def last_run_us(self) -> int:
        return self.frames.last_run_us

    @property
    def fence_out(self) -> bool:
        return self.frames.fence_out

    @property
    def out_fence_fd(self) -> int:
        return self.frames.out_fence_fd

    @property
    def core_mask(self) -> int:
        return self.frames.core_mask

    @property
    def destroyed(self) -> bool:
        return self.guard.closed

    def internal_dram_size(self) -> int:
        return self.weights.internal_dram_size()

    # -- the guard --------------------------------------------------------------------------
    def enter(self, call: str, timeout_ms: int = 0) -> None:
        """Start a call (core/guard.py: a second thread waits, bounded). Pair with leave()."""
        self.guard.enter(call, timeout_ms)

    def leave(self) -> None:
        self.guard.leave()

    def locked(self, call: str, method: Callable[..., T], *args: Any) -> T:
        """`method(*args)` between enter(call) and leave(): for calls off the hot path."""
        return self.guard.run(call, method, *args)

    def require(self, call: str) -> None:
        """The platform's runtime has `call` (RKNN_ERR_FAIL with its library's name if not)."""
        if call not in self.platform.calls:
            raise RknnError(
                FAIL,
                f"{call} is not supported on {self.platform.name} "
                f"({self.platform.runtime_library})",
            )

    def check_general_api(self, call: str) -> None:
        """The general API's calls: supported on the platform, and the runtime has IO memory."""
        self.require(call)
        if self.outside:
            raise RknnError(
                FAIL,
                f"{call}: the context was made with RKNN_FLAG_MEM_ALLOC_OUTSIDE, so the runtime "
                "has no IO memory; bind inputs and outputs with rknn_set_io_mem",
            )

    # -- queries ----------------------------------------------------------------------------
    def io_num(self) -> tuple[int, int]:
        return len(self.model.inputs), len(self.model.outputs)

    def input_attr(self, index: int, native: bool) -> attrs.Attr:
        check_index(index, len(self.model.inputs), "input")
        if native:
            return self.model.inputs[index].native
        return attrs.input_attr(index, self.model.meta.inputs[index])

    def output_attr(self, index: int, native: bool = False, nhwc: bool = False) -> attrs.Attr:
        check_index(index, len(self.model.outputs), "output")
        spec = self.model.meta.outputs[index]
        if native:
            return attrs.native_output_attr(index, spec, self.platform, nhwc)
        return attrs.output_attr(index, spec)

    def current_input_attr(self, index: int, native: bool) -> attrs.Attr:
        return self.shapes.current_input_attr(index, native)

    def current_output_attr(self, index: int, native: bool) -> attrs.Attr:
        return self.shapes.current_output_attr(index, native)

    def dynamic_range(self, index: int) -> tuple[str, str, list[list[int]]]:
        return self.shapes.dynamic_range(index)

    def sdk_version(self) -> tuple[str, str]:
        return API_VERSION, DRIVER_VERSION

    def custom_string(self) -> str:
        return self.model.meta.custom_string

    def perf_run(self) -> int:
        """RKNN_QUERY_PERF_RUN: the last finished frame's estimated board µs for this platform and
        core mask (core/board/perf.py); RKNNRT_PERF_HOST=1 or no board model: the host µs."""
        host_us = self.frames.last_run_us
        if host_us == 0 or perf.host_times():
            return host_us
        split = device.cores_for(self.frames.core_mask, self.platform.npu_cores)[1]
        view = perf.board_view(self.model.meta, self.model.graph, self.weights.array,
                               self.platform, split)  # fmt: skip
        return view.run_us() or host_us

    def perf_detail(self) -> str:
        """RKNN_QUERY_PERF_DETAIL: the per-layer table of the last finished frame (made once
        per frame; core/board/perf.py). Without COLLECT_PERF_MASK a board answers success with
        an empty table (airockchip/rknn-toolkit2#437: "perf detail success, but detail is
        empty"), and so does rknnrt (docs/fidelity.md)."""
        if not self.options.collect_perf:
            return ""
        self.frames.settle("RKNN_QUERY_PERF_DETAIL")
        done = self.frames.done_frame
        if done == 0 or self.weights.program is None:
            raise RknnError(FAIL, "RKNN_QUERY_PERF_DETAIL: no finished run; call rknn_run first")
        if self._perf is None or self._perf[0] != done:
            self._perf = (done, self._perf_table())
        return self._perf[1]

    def keep_perf_text(self, buffer: Any) -> None:
        """The runtime owns perf_data (facts §3): valid until the next PERF_DETAIL or destroy."""
        self._perf_text = buffer

    def _perf_table(self) -> str:
        """Profile the program on the current inputs and render the table (core/board/perf.py)."""
        program, weights = self.weights.program, self.weights.array
        binding = self.shapes.binding
        assert program is not None and weights is not None and binding is not None
        split = device.cores_for(self.frames.core_mask, self.platform.npu_cores)[1]
        return program.perf_table(binding, weights, self.platform, split, self.frames.core_mask)

    def placement(self) -> list[tuple[str, str]]:
        """(op type x count, device) of the model's operators: the platform's op support and
        custom operators decide (core/program/segmented.py)."""
        graph = onnx.load_model_from_string(self.model.graph).graph
        # QDQ and fp16-rounding nodes are how rknnrt emulates the NPU's storage, not operators
        emulation = {"QuantizeLinear", "DequantizeLinear", "Cast"}
        where = self.platform.name
        counts = Counter(
            (n.op_type, placement.place(n, where)) for n in graph.node if n.op_type not in emulation
        )
        return [(f"{op} x{count}", device) for (op, device), count in sorted(counts.items())]

    def register_custom_ops(self, ops: list) -> None:
        """rknn_register_custom_ops: the callbacks live with the program's binding. An op whose
        type is a built-in op of the model (rknpu2's GPU demo registers ArgMax) runs in place of
        those nodes: the program is rebuilt with them as custom nodes, and rebuilt back if the
        registration fails."""
        if self.shapes.binding is None:
            raise RknnError(PARAM_INVALID, "the context has no weights loaded")
        replaced = self.model.builtin_types({str(op.op_type) for op in ops})
        if not replaced - self.weights.replaced:
            self.shapes.binding.register(ops)
            return
        if self.frames.frame_id:  # (a rebuilt binding would forget that a run happened)
            raise RknnError(FAIL, "register custom ops after rknn_init and before rknn_run")
        before = self.weights.replaced
        self.weights.replace_builtin(before | replaced)
        self._bind()
        try:
            self.shapes.binding.register(ops)
        except BaseException:
            self.weights.replace_builtin(before)
            self._bind()
            raise
        log.info(f"custom op {', '.join(sorted(replaced))} replaces the model's built-in "
                 "operator of that type")

    def mem_size(self) -> dict[str, int]:
        sizes = self.weights.mem_size()
        sizes["total_dma_allocated_size"] = self.dma_allocated()
        return sizes

    def dma_allocated(self) -> int:
        """Bytes this context itself allocated: weights, internal memory and IO buffers."""
        io = 0 if self.options.info_only else self.shapes.io_bytes()
        return self.weights.allocated() + io

    def device_mem_info(self) -> Buffer | None:
        return self.weights.device_mem_info()

    # -- memory -----------------------------------------------------------------------------
    def set_weight_mem(self, memory: Memory) -> None:
        self.frames.settle("rknn_set_weight_mem")
        self.weights.set_weight_mem(memory)
        self._bind()

    def set_internal_mem(self, memory: Memory) -> None:
        self.frames.settle("rknn_set_internal_mem")
        self.weights.set_internal_mem(memory)
        self._use_internal()

    def set_io_mem(self, memory: Memory, name: str, dtype: str, fmt: str, pass_through: bool,
                   w_stride: int, h_stride: int = 0) -> None:  # fmt: skip
        self.frames.settle("rknn_set_io_mem")
        self.shapes.check_chosen("rknn_set_io_mem")
        self.bindings.bind(memory, name, dtype, fmt, pass_through, w_stride, h_stride)

    # -- shapes -----------------------------------------------------------------------------
    def set_input_shapes(self, shapes: list[list[int]]) -> None:
        index = self.shapes.find(shapes)
        if index == self.shapes.shape_set:
            return
        self.frames.settle("rknn_set_input_shapes")
        self.frames.forget_results()
        self.shapes.choose(index)

    def set_input_shape(self, index: int, shape: list[int]) -> None:
        full = self.shapes.add_pending(index, shape)
        if full is not None:
            self.set_input_shapes(full)

    def model_layout_shape(self, dims: list[int], fmt: str, what: str) -> list[int]:
        return model_layout_shape(dims, fmt, what)

    # -- inference --------------------------------------------------------------------------
    def inputs_set(self, items: list[tuple[int, np.ndarray, str, str, bool]]) -> None:
        """items: (index, caller bytes, buffer dtype, buffer fmt, pass_through)."""
        if self.outside:
            self.check_general_api("rknn_inputs_set")
        if self.frames.job is not None:
            self.frames.settle("rknn_inputs_set")
        shapes = self.shapes
        shapes.check_chosen("rknn_inputs_set")
        count = len(shapes.inputs)
        if len(items) != count:
            log.warning(f"rknn_inputs_set: n_inputs {len(items)} != model input number {count}")
        for index, raw, dtype, fmt, pass_through in items:
            check_index(index, count, "input")
            if self.bindings.drop_input(index):
                log.warning(
                    f"rknn_inputs_set: input {index} was bound with rknn_set_io_mem; the general "
                    "API now replaces that binding (do not mix the two APIs on one context)"
                )
            shapes.inputs[index].convert(raw, dtype, fmt, pass_through, shapes.feeds[index])
            shapes.inputs_ready[index] = True

    def run(self, extend: Extend | None = None) -> int:
        """rknn_run (facts §4.1, §5.7; docs/device.md). `extend` is the caller's
        rknn_run_extend as (non_block, timeout_ms, fence_fd), None when NULL."""
        frames = self.frames
        if frames.job is not None:
            frames.settle("rknn_run", extend[1] if extend is not None else 0)
        binding = self.shapes.binding
        bound = self.bindings.table
        if (
            binding is None
            or self.options.info_only
            or not self.shapes.all_inputs_set()
            or (self.options.internal_alloc_outside and not self.weights.internal_ready())
            or (self.outside and not self.bindings.complete())
            or (bound and self.bindings.stale())
        ):
            self._refuse_run()
        if bound:
            self.bindings.read_inputs()
        return frames.run(binding, extend)  # type: ignore[arg-type]

    def _refuse_run(self) -> None:
        """Raise why the context cannot run now."""
        if self.options.info_only:
            raise RknnError(
                FAIL, "rknn_run: context was created with RKNN_FLAG_COLLECT_MODEL_INFO_ONLY"
            )
        problem = self.weights.problem()
        if problem is None:
            self.shapes.check_chosen("rknn_run")
            problem = self.bindings.problem(self.outside)
        if problem is not None:
            raise RknnError(FAIL, f"rknn_run: {problem}")
        missing = self.shapes.missing_inputs()
        raise RknnError(
            INPUT_INVALID,
            f"rknn_run: input(s) {', '.join(missing)} not set; call rknn_inputs_set first",
        )

    def _finished(self, frame: int, cores: tuple[int, ...]) -> None:
        """After a frame ran (on the caller's thread or the worker): bound outputs, log."""
        binding = self.shapes.binding
        if self.bindings.table and binding is not None:
            self.bindings.write_outputs(binding.outputs)
        if self._log_timing:
            where = ", ".join(str(c) for c in cores)
            us = self.frames.last_run_us
            log.timing(f"rknn_run: frame {frame}: {us} us on NPU core {where}")
        if self._log_perf:
            table = self._perf_table()
            log.emit(log.PERF, "I", f"rknn_run: frame {frame}, per-layer performance:\n{table}")

    def wait(self, timeout_ms: int = 0) -> int:
        return self.frames.wait(self.shapes.binding, timeout_ms)

    def outputs_get(self, requests: list[OutputRequest]) -> tuple[list[Handed], int]:
        if self.outside:
            self.check_general_api("rknn_outputs_get")
        return self.frames.outputs_get(self.shapes.binding, self.shapes.outputs, requests)

    def outputs_copied(self, count: int) -> list[np.ndarray]:
        """outputs_get of the first `count` outputs as float32 and their release in one step
        (rknnrt_inference): copies the caller owns."""
        if self.outside:
            self.check_general_api("rknn_outputs_get")
        return self.frames.outputs_copied(self.shapes.binding, self.shapes.outputs, count)

    def outputs_release(self, addresses: list[int]) -> None:
        """Release handed-out buffers (0: a NULL buf); releasing one twice, or before any
        rknn_outputs_get, logs one W line and changes nothing (issue 11 item 10; a board
        returns 0)."""
        not_held = self.frames.outputs_release(addresses)
        if not_held:
            log.warning(
                f"rknn_outputs_release: {not_held} of {len(addresses)} outputs were not held "
                "(released twice, or before rknn_outputs_get)"
            )

    # -- settings ---------------------------------------------------------------------------
    def set_core_mask(self, mask: int) -> None:
        self.require("rknn_set_core_mask")
        if mask not in self.platform.core_masks:
            raise RknnError(
                PARAM_INVALID,
                f"rknn_set_core_mask: core mask {mask:#x} is not valid on {self.platform.name}; "
                f"valid: {', '.join(hex(m) for m in sorted(self.platform.core_masks))}",
            )
        frames = self.frames
        frames.set_cores(mask, frames.batch_core_num, self.model.meta.rknn_batch_size)

    def set_batch_core_num(self, core_num: int) -> None:
        self.require("rknn_set_batch_core_num")
        if not 1 <= core_num <= self.platform.npu_cores:
            raise RknnError(
                PARAM_INVALID,
                f"rknn_set_batch_core_num: core_num {core_num} must be 1.."
                f"{self.platform.npu_cores} on {self.platform.name}",
            )
        self.frames.set_cores(self.frames.core_mask, core_num, self.model.meta.rknn_batch_size)

    # -- lifetime ---------------------------------------------------------------------------
    def dup(self) -> Context:
        self.require("rknn_dup_context")
        if self.model.dynamic:
            raise RknnError(
                FAIL, "rknn_dup_context is not supported for models with dynamic input shapes"
            )
        if self.weights.program is None:
            raise RknnError(FAIL, "rknn_dup_context: the context has no weights loaded")
        return Context(self.model, self.options, source=self)

    def register(self) -> int:
        self.handle = self.frames.handle = registry.add(self)
        return self.handle

    def close(self) -> None:
        """rknn_destroy: wait for a call in progress (bounded), unregister, tear down."""

        def teardown() -> None:
            registry.remove(self.handle)
            self.destroy()

        self.guard.close("rknn_destroy", teardown)

    def destroy(self) -> None:
        self.frames.stop()
        self.bindings.table.clear()
        self.shapes.unbind()
        self.weights.release()
        self._perf_text = None
