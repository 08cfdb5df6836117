"""The runtime core: a loaded Model and the Contexts that run it.

rknn_init prepares everything (program, conversion plans, buffers) so that rknn_inputs_set,
rknn_run and rknn_outputs_get only check state and move data. A Context's memory set-up lives
in context_memory.py, its shape sets in dynamic_shapes.py and its rknn_set_io_mem bindings in
zero_copy.py; this module keeps its state, queries, runs and results.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import onnx

from ..model import container
from ..model.meta import ModelMeta
from . import (
    attrs,
    device,
    jobs,
    log,
    partition,  # custom-ops hook (issue 17)
    perf,
    platforms,
    sram,
)
from .context_memory import MemorySetup
from .dynamic_shapes import DynamicShapes
from .errors import (
    CTX_INVALID,
    FAIL,
    INPUT_INVALID,
    MODEL_INVALID,
    OUTPUT_INVALID,
    PARAM_INVALID,
    TIMEOUT,
    RknnError,
)  # fmt: skip
from .executor import Binding, Program, address_of
from .io import InputPlan, OutputPlan
from .memory import Buffer, Memory
from .version import API_VERSION, DRIVER_VERSION
from .zero_copy import IoBinding, ZeroCopy

PRIORITIES = ("HIGH", "MEDIUM", "LOW")
T = TypeVar("T")


class Model:
    """Everything read from one model file; shared by a context and its duplicates.

    `weights_section` is a view of the caller's model buffer: valid during rknn_init only,
    except with MODEL_BUFFER_ZERO_COPY, where the application keeps the buffer alive.
    """

    def __init__(self, buf: memoryview) -> None:
        try:
            sections = container.read(buf)
            self.meta = ModelMeta.from_json(sections.metadata, len(sections.weights))
        except container.ModelFormatError as exc:
            raise RknnError(MODEL_INVALID, str(exc)) from None
        try:
            self.platform = platforms.get(self.meta.target_platform)
        except KeyError:
            raise RknnError(
                MODEL_INVALID, f"unknown target platform '{self.meta.target_platform}'"
            ) from None
        self.graph = bytes(sections.graph)
        self.weights_section = sections.weights
        self.inputs = [InputPlan(i, s, self.platform) for i, s in enumerate(self.meta.inputs)]
        self.outputs = [OutputPlan(i, s) for i, s in enumerate(self.meta.outputs)]
        self.dynamic = bool(self.meta.input_shape_sets)
        self._plans: dict[int, tuple[list[InputPlan], list[OutputPlan]]] = {}
        log.info(
            f"RKNN Runtime Information, librknnrt version: {API_VERSION}; "
            f"RKNN Driver Information, version: {DRIVER_VERSION}"
        )
        log.info(
            f"RKNN Model Information, version: {container.FORMAT_VERSION}, toolkit version: "
            f"{self.meta.toolkit_version}, target platform: {self.meta.target_platform}, "
            f"framework name: {self.meta.framework}, framework layout: NCHW"
        )

    def plans_for(self, index: int) -> tuple[list[InputPlan], list[OutputPlan]]:
        """Input and output plans of shape set `index` (made once, then shared)."""
        if index not in self._plans:
            meta = self.meta
            ins = [
                InputPlan(i, replace(spec, shape=shape), self.platform)
                for i, (spec, shape) in enumerate(zip(meta.inputs, meta.input_shape_sets[index]))
            ]
            outs = [
                OutputPlan(i, replace(spec, shape=shape))
                for i, (spec, shape) in enumerate(zip(meta.outputs, meta.output_shape_sets[index]))
            ]
            self._plans[index] = (ins, outs)
        return self._plans[index]

    def find_shape_set(self, shapes: list[list[int]]) -> int | None:
        """The index of the set whose input shapes (model layout) are `shapes`."""
        for index, shape_set in enumerate(self.meta.input_shape_sets):
            if shape_set == shapes:
                return index
        return None

    def program(self, weights: np.ndarray, in_place: bool = False) -> Program:
        if partition.needs_partition(self.graph, self.platform.name):  # custom-ops hook (17)
            return partition.SegmentedProgram(  # type: ignore[return-value]
                self.meta, self.graph, weights, self.platform.name
            )
        return Program(self.meta, self.graph, weights, in_place)


@dataclass
class OutputRequest:
    """One rknn_output as the API layer decoded it."""

    want_float: bool
    is_prealloc: bool
    buffer: np.ndarray | None  # the caller's bytes (uint8) when is_prealloc


@dataclass
class Results:
    """Async mode: a finished frame's output buffers, detached from the binding."""

    arrays: list[np.ndarray]
    addresses: list[int]
    frame: int


class Context(MemorySetup, DynamicShapes, ZeroCopy):
    """One rknn_context: a model, its memory, its IO, its settings and its run state."""

    def __init__(self, model: Model, flags: frozenset[str], priority: str,
                 source: Context | None = None) -> None:  # fmt: skip
        self.model = model
        self.platform = model.platform
        self.flags = flags
        self.priority = priority
        self.handle = 0
        self.core_mask = 0
        self.batch_core_num = 1
        self._busy = threading.Lock()
        self._inputs_ready = [False] * len(model.inputs)
        self._has_results = False
        self._handed_out: dict[int, np.ndarray] = {}
        self._io: dict[tuple[str, int], IoBinding] = {}
        self.frame_id = 0  # the last frame submitted by rknn_run
        self.last_run_us = 0
        self.destroyed = False
        # Read once, as the vendor reads RKNN_LOG_LEVEL at init: the run path stays cheap.
        self._log_timing = log.level() >= log.TIMING
        self._log_perf = log.level() >= log.PERF
        # Scheduling and frames (docs/device.md): the platform's device, the cores a job asks
        # for, the frame in flight (non-blocking, async, fenced or time-limited runs).
        self.async_mode = "RKNN_FLAG_ASYNC_MASK" in flags
        self.fence_in = "RKNN_FLAG_FENCE_IN_OUTSIDE" in flags
        self.fence_out = "RKNN_FLAG_FENCE_OUT_OUTSIDE" in flags
        self._fenced = self.fence_in or self.fence_out
        self._inline = not (self.async_mode or self.fence_out)
        self._device = device.get(self.platform.name, self.platform.npu_cores)
        self._cores = device.cores_for(device.CORE_AUTO, self.platform.npu_cores)
        self._job: jobs.Job | None = None
        self._worker: jobs.Worker | None = None
        self._done_frame = 0  # the frame whose results the binding holds
        self._ready: Results | None = None  # async mode: what rknn_outputs_get returns
        self.out_fence_fd = -1  # FENCE_OUT_OUTSIDE: the last run's fence, for extend->fence_fd
        self.last_cores: tuple[int, ...] = ()
        self._profiler: perf.Profiler | None = None
        self._perf: tuple[int, str] | None = None  # (frame, table) of the last PERF_DETAIL
        self.general_api = self.platform.supports("rknn_inputs_set")
        self.outside = "RKNN_FLAG_MEM_ALLOC_OUTSIDE" in flags
        self.info_only = "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY" in flags
        self.internal_outside = self.outside or "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE" in flags
        # The plans of the current shapes (a dynamic model switches them with set_input_shapes)
        self.inputs, self.outputs = model.inputs, model.outputs
        self.shape_set: int | None = None
        self._pending_shapes: dict[int, list[int]] = {}  # rknn_set_input_shape, per input
        self._per_set: dict[int | None, tuple[list[np.ndarray], Binding]] = {}
        self._feed_arrays = [plan.new_buffer() for plan in model.inputs]
        self._binding: Binding | None = None
        self.program: Program | None = None
        self.weights: np.ndarray | None = None  # the weights the program reads
        self._pending_weights: np.ndarray | None = None  # MEM_ALLOC_OUTSIDE, until provided
        self._weight_buffer: Buffer | None = None
        self._internal_buffer: Buffer | None = None
        self.weight_memory: Memory | None = None
        self.internal_memory: Memory | None = None
        self.sram_taken = 0
        if source is not None:  # rknn_dup_context: same weights and program, own IO
            self.weights, self.program = source.weights, source.program
            self._make_binding()

    @property
    def device(self) -> device.Device:
        """The simulated NPU this context's jobs run on (shared by the platform's contexts)."""
        return self._device

    # -- set-up -----------------------------------------------------------------------------

    def _make_binding(self) -> None:
        assert self.program is not None
        specs = [plan.spec for plan in self.outputs]
        binding_type = partition.binding_type(self.program)  # custom-ops hook (issue 17)
        self._binding = binding_type(self.program, self._feed_arrays, specs)
        self._per_set = {self.shape_set: (self._feed_arrays, self._binding)}

    # -- dynamic shapes -----------------------------------------------------------------------

    # -- state ------------------------------------------------------------------------------
    def enter(self, call: str) -> None:
        """Start a call; refuse a second thread instead of letting two calls corrupt one context.
        Every successful enter() is paired with leave() (a plain lock: this is the hot path)."""
        if self.destroyed:
            raise RknnError(CTX_INVALID, f"{call}: context has been destroyed")
        if not self._busy.acquire(blocking=False):
            raise RknnError(
                FAIL,
                f"{call}: this context is in use by another thread; give each thread its own "
                "context (rknn_dup_context)",
            )

    def leave(self) -> None:
        self._busy.release()

    def locked(self, call: str, method: Callable[..., T], *args: Any) -> T:
        """`method(*args)` between enter(call) and leave(): for calls off the hot path."""
        self.enter(call)
        try:
            return method(*args)
        finally:
            self.leave()

    def require(self, call: str) -> None:
        if not self.platform.supports(call):
            raise RknnError(
                FAIL,
                f"{call} is not supported on {self.platform.name} "
                f"({self.platform.runtime_library})",
            )

    # -- queries ----------------------------------------------------------------------------
    def io_num(self) -> tuple[int, int]:
        return len(self.model.inputs), len(self.model.outputs)

    def _check_index(self, index: int, count: int, what: str) -> None:
        if not 0 <= index < count:
            raise RknnError(
                PARAM_INVALID, f"{what} index {index} is out of range: the model has {count}"
            )

    def input_attr(self, index: int, native: bool) -> attrs.Attr:
        self._check_index(index, len(self.model.inputs), "input")
        if native:
            return self.model.inputs[index].native
        return attrs.input_attr(index, self.model.meta.inputs[index])

    def output_attr(self, index: int, native: bool = False, nhwc: bool = False) -> attrs.Attr:
        self._check_index(index, len(self.model.outputs), "output")
        spec = self.model.meta.outputs[index]
        if native:
            return attrs.native_output_attr(index, spec, self.platform, nhwc)
        return attrs.output_attr(index, spec)

    def sdk_version(self) -> tuple[str, str]:
        return API_VERSION, DRIVER_VERSION

    def custom_string(self) -> str:
        return self.model.meta.custom_string

    def perf_run(self) -> int:
        """RKNN_QUERY_PERF_RUN: µs the last finished frame spent on its cores."""
        return self.last_run_us

    def perf_detail(self) -> str:
        """RKNN_QUERY_PERF_DETAIL: the per-layer table of the last finished frame (made once
        per frame; core/perf.py)."""
        if "RKNN_FLAG_COLLECT_PERF_MASK" not in self.flags:
            raise RknnError(
                FAIL, "RKNN_QUERY_PERF_DETAIL needs RKNN_FLAG_COLLECT_PERF_MASK at rknn_init"
            )
        self._settle("RKNN_QUERY_PERF_DETAIL")
        if self._done_frame == 0 or self.program is None:
            raise RknnError(FAIL, "RKNN_QUERY_PERF_DETAIL: no finished run; call rknn_run first")
        if self._perf is None or self._perf[0] != self._done_frame:
            self._perf = (self._done_frame, self._perf_table())
        return self._perf[1]

    def _perf_table(self) -> str:
        """Profile the program on the current inputs and render the table (core/perf.py)."""
        assert self.program is not None and self.weights is not None
        if isinstance(self.program, partition.SegmentedProgram):  # custom-ops hook (issue 17)
            from .partition_perf import perf_table

            split = device.cores_for(self.core_mask, self.platform.npu_cores)[1]
            return perf_table(self.program, self._binding, self.weights, self.platform, split,
                              self.core_mask)  # fmt: skip
        if self._profiler is None:
            self._profiler = perf.Profiler(self.model.meta, self.model.graph)
        feeds = dict(zip(self.program.input_names, self._feed_arrays))
        times = self._profiler.measure(self.weights, feeds)
        split = device.cores_for(self.core_mask, self.platform.npu_cores)[1]
        model = perf.CostModel(self.platform, self._profiler.dtype, split)
        return perf.render(perf.rows(self._profiler, times, model), model, self.core_mask)

    def register_custom_ops(self, ops: list) -> None:  # custom-ops hook (issue 17)
        partition.register(self._binding, ops)

    def placement(self) -> list[tuple[str, str]]:
        """(op type x count, device) of the model's operators. The converter accepts only
        operators the NPU runs, so every one is placed on the NPU and nothing needs the GPU
        that EXECUTE_FALLBACK_PRIOR_DEVICE_GPU would prefer (the flag is recorded)."""
        graph = onnx.load_model_from_string(self.model.graph).graph
        # QDQ and fp16-rounding nodes are how rknnrt emulates the NPU's storage, not operators
        emulation = {"QuantizeLinear", "DequantizeLinear", "Cast"}
        where = self.platform.name  # custom-ops hook (issue 17): per-node placement
        counts = Counter(
            (n.op_type, partition.place(n, where)) for n in graph.node if n.op_type not in emulation
        )
        return [(f"{op} x{count}", where) for (op, where), count in sorted(counts.items())]

    # -- zero-copy ----------------------------------------------------------------------------

    # -- inference --------------------------------------------------------------------------
    def check_general_api(self, call: str) -> None:
        if self.outside:
            raise RknnError(
                FAIL,
                f"{call}: the context was made with RKNN_FLAG_MEM_ALLOC_OUTSIDE, so the runtime "
                "has no IO memory; bind inputs and outputs with rknn_set_io_mem",
            )

    def inputs_set(self, items: list[tuple[int, np.ndarray, str, str, bool]]) -> None:
        """items: (index, caller bytes, buffer dtype, buffer fmt, pass_through)."""
        if self.outside:
            self.check_general_api("rknn_inputs_set")
        if self._job is not None:
            self._settle("rknn_inputs_set")
        self.check_shapes_chosen("rknn_inputs_set")
        count = len(self.inputs)
        if len(items) != count:
            log.warning(f"rknn_inputs_set: n_inputs {len(items)} != model input number {count}")
        for index, raw, dtype, fmt, pass_through in items:
            self._check_index(index, count, "input")
            if self._io and self._io.pop(("in", index), None) is not None:
                log.warning(
                    f"rknn_inputs_set: input {index} was bound with rknn_set_io_mem; the general "
                    "API now replaces that binding (do not mix the two APIs on one context)"
                )
            self.inputs[index].convert(raw, dtype, fmt, pass_through, self._feed_arrays[index])
            self._inputs_ready[index] = True

    def _check_runnable(self) -> None:
        if self.info_only:
            raise RknnError(
                FAIL, "rknn_run: context was created with RKNN_FLAG_COLLECT_MODEL_INFO_ONLY"
            )
        if self._binding is None:
            raise RknnError(
                FAIL, "rknn_run: no weight memory: call rknn_set_weight_mem before rknn_run"
            )
        if self.weight_memory is not None and self.weight_memory.destroyed:
            raise RknnError(
                FAIL,
                "rknn_run: the weight memory was destroyed; bind new memory with "
                "rknn_set_weight_mem",
            )
        if self.internal_outside and not self._internal_ready():
            raise RknnError(
                FAIL, "rknn_run: no internal memory: call rknn_set_internal_mem before rknn_run"
            )
        self.check_shapes_chosen("rknn_run")
        for kind, plans in (("in", self.inputs), ("out", self.outputs)):
            for plan in plans:
                bound = self._io.get((kind, plan.index))
                if bound is not None and bound.shape_set != self.shape_set:
                    raise RknnError(
                        FAIL,
                        f"rknn_run: {plan.spec.name}'s memory was bound for other input shapes; "
                        "call rknn_set_io_mem again after rknn_set_input_shapes",
                    )
                if bound is not None and bound.memory.destroyed:
                    raise RknnError(
                        FAIL,
                        f"rknn_run: {plan.spec.name}'s memory was destroyed while still bound; "
                        "bind new memory with rknn_set_io_mem",
                    )
                if self.outside and bound is None:
                    what = "input" if kind == "in" else "output"
                    raise RknnError(
                        FAIL, f"rknn_run: {what}({plan.spec.name}) tensor not attached to memory"
                    )
        missing = [p.spec.name for p, ok in zip(self.inputs, self._inputs_ready) if not ok]
        raise RknnError(
            INPUT_INVALID,
            f"rknn_run: input(s) {', '.join(missing)} not set; call rknn_inputs_set first",
        )

    def _internal_ready(self) -> bool:
        return self.internal_memory is not None and not self.internal_memory.destroyed

    def run(self, extend: tuple[int, int, int] | None = None) -> int:
        """rknn_run (facts §4.1, §5.7; docs/device.md). `extend` is the caller's
        rknn_run_extend as (non_block, timeout_ms, fence_fd), None when NULL. Returns the
        frame id. A blocking run without a time limit runs on the caller's thread; the others
        become a Job on the context's worker."""
        if self._job is not None:
            self._settle("rknn_run", extend[1] if extend is not None else 0)
        binding = self._binding
        if (
            binding is None
            or self.info_only
            or not all(self._inputs_ready)
            or (self.internal_outside and not self._internal_ready())
            or (self.outside and len(self._io) < len(self._inputs_ready) + len(binding.outputs))
        ):
            self._check_runnable()
        fence = self._check_fences(extend) if self._fenced else -1
        if self._io:
            if self.model.dynamic and any(b.shape_set != self.shape_set for b in self._io.values()):
                self._check_runnable()
            self._read_bound_inputs()
        if not self._inline or (extend is not None and (extend[0] or extend[1] > 0)):
            return self._run_job(binding, extend, fence)
        for index, address in enumerate(binding.addresses):
            if address in self._handed_out:  # the caller still holds last run's buffer
                binding.replace_output(index)
        if fence >= 0:
            jobs.wait_fence(fence)
        frame = self.frame_id + 1
        allowed, count = self._cores
        req = self._device.acquire(allowed, count, self.priority, (self.handle, frame))
        try:
            self._timed_run(binding)
        finally:
            self._device.release(req)
        self.frame_id = frame
        self._finish_frame(frame, req.cores)
        return frame

    def _timed_run(self, binding: Binding) -> None:
        """One inference of the program; PERF_RUN's run_duration is its time."""
        start = time.perf_counter()
        binding.run()
        self.last_run_us = int((time.perf_counter() - start) * 1e6)

    def _check_fences(self, extend: tuple[int, int, int] | None) -> int:
        """The input fence to wait for (-1: none); FENCE_* contexts need an extend."""
        if extend is None:
            flag = "FENCE_IN_OUTSIDE" if self.fence_in else "FENCE_OUT_OUTSIDE"
            raise RknnError(
                PARAM_INVALID,
                f"rknn_run: the context was made with RKNN_FLAG_{flag}; pass an rknn_run_extend "
                "(fence_fd: the fence to wait for, or -1; the output fence is returned there)",
            )
        fd = extend[2]
        if not self.fence_in or fd < 0:
            return -1
        jobs.check_fence(fd)
        return fd

    def _finish_frame(self, frame: int, cores: tuple[int, ...]) -> None:
        """After a frame ran (on the caller's thread or the worker): record it, write the
        zero-copy outputs, log."""
        self._done_frame = frame
        self._has_results = True
        self.last_cores = cores
        if self._io:
            self._write_bound_outputs()
        if self._log_timing:
            where = ", ".join(str(c) for c in cores)
            log.timing(f"rknn_run: frame {frame}: {self.last_run_us} us on NPU core {where}")
        if self._log_perf:
            table = self._perf_table()
            log.emit(log.PERF, "I", f"rknn_run: frame {frame}, per-layer performance:\n{table}")

    def _run_job(self, binding: Binding, extend: tuple[int, int, int] | None, fence: int) -> int:
        """Hand the frame to the worker; wait for it only for a blocking, time-limited run."""
        non_block, timeout_ms, _ = extend if extend is not None else (0, 0, -1)
        if self.async_mode:
            self._detach_results()  # frame n-1 becomes what rknn_outputs_get returns
        else:
            for index, address in enumerate(binding.addresses):
                if address in self._handed_out:
                    binding.replace_output(index)
        frame = self.frame_id + 1
        job = jobs.Job(frame)
        out = jobs.OutFence() if self.fence_out else None
        if self._worker is None:
            self._worker = jobs.Worker(f"rknnrt-ctx-{self.handle:#x}")
        self._job, self.frame_id = job, frame
        self._worker.submit(lambda: self._job_body(job, binding, fence, out))
        if out is not None:
            self.out_fence_fd = out.fd
        if non_block or self.async_mode or out is not None:
            return frame
        # A blocking run with timeout_ms > 0.
        if not job.wait(timeout_ms) and job.cancel(self._device.cancel):
            job.done.wait()
            self._job, self.frame_id = None, frame - 1
            raise RknnError(
                TIMEOUT,
                f"rknn_run: frame {frame} did not start within {timeout_ms} ms (its input fence "
                "or an NPU core was not free); it was withdrawn, and the context is ready",
            )
        if job.done.is_set():  # in time (or just after the limit, before it could be withdrawn)
            self._job = None
            if job.error is not None:
                raise job.error
            return frame
        raise RknnError(
            TIMEOUT,
            f"rknn_run: frame {frame} did not finish within {timeout_ms} ms; it completes in "
            "the background and the next call on this context waits for it",
        )

    def _job_body(self, job: jobs.Job, binding: Binding, fence: int,
                  out: jobs.OutFence | None) -> None:  # fmt: skip
        """The worker's part of a frame: input fence, cores, run, outputs, output fence."""
        try:
            if fence >= 0:
                jobs.wait_fence(fence, job=job)
            allowed, count = self._cores
            with job.lock:
                if job.cancelled:
                    return
                req = self._device.submit(allowed, count, self.priority, (self.handle, job.frame))
                job.request = req
            self._device.wait(req)
            if not job.begin():
                self._device.release(req)
                return
            try:
                self._timed_run(binding)
            finally:
                self._device.release(req)
            self._finish_frame(job.frame, req.cores)
        except RknnError as exc:
            job.error = exc
        except Exception as exc:  # the job runs off the API boundary: keep it as a status
            job.error = RknnError(FAIL, f"frame {job.frame}: {type(exc).__name__}: {exc}")
        finally:
            if out is not None:
                out.signal()
            job.done.set()

    def _settle(self, call: str, timeout_ms: int = 0) -> None:
        """Let the frame in flight finish before `call` touches the context's buffers."""
        job = self._job
        if job is None:
            return
        if not job.wait(timeout_ms):
            raise RknnError(
                TIMEOUT,
                f"{call}: frame {job.frame} is still running after {timeout_ms} ms "
                "(call rknn_wait, or retry)",
            )
        self._job = None
        if job.error is not None:
            log.warning(f"{call}: frame {job.frame} failed: {job.error.message}")

    def wait(self, timeout_ms: int = 0) -> int:
        """rknn_wait: the frame in flight (if any) finishes; returns the last finished frame.
        In async mode that frame becomes what rknn_outputs_get returns."""
        job = self._job
        if job is not None:
            if not job.wait(timeout_ms):
                raise RknnError(
                    TIMEOUT,
                    f"rknn_wait: frame {job.frame} did not finish within {timeout_ms} ms; it is "
                    "still running (wait again)",
                )
            self._job = None
            if job.error is not None:
                raise RknnError(job.error.status, f"frame {job.frame}: {job.error.message}")
        if self.async_mode:
            self._detach_results()
        return self._done_frame

    def _detach_results(self) -> None:
        """Async mode: the last finished frame's outputs become rknn_outputs_get's results and
        the binding writes the next frame into fresh buffers."""
        binding = self._binding
        if binding is None or self._done_frame == 0:
            return
        if self._ready is not None and self._ready.frame == self._done_frame:
            return
        self._ready = Results(list(binding.outputs), list(binding.addresses), self._done_frame)
        for index in range(len(binding.outputs)):
            binding.replace_output(index)

    def _results(self) -> tuple[list[np.ndarray], list[int], int]:
        """(arrays, addresses, frame id) that rknn_outputs_get hands out (facts §5.7)."""
        if self.async_mode and self.frame_id > 0:
            if self._ready is not None:
                return self._ready.arrays, self._ready.addresses, self._ready.frame
            # The first frame is still the current one: frame 0, zeros (docs/device.md).
            zeros = [np.zeros_like(a) for a in self._binding.outputs]  # type: ignore[union-attr]
            return zeros, [address_of(z) for z in zeros], 0
        if self._job is not None:
            self._settle("rknn_outputs_get")  # "blocks until inference finishes"
        if not self._has_results or self._binding is None:
            raise RknnError(OUTPUT_INVALID, "rknn_outputs_get: no finished run; call rknn_run")
        return self._binding.outputs, self._binding.addresses, self._done_frame

    def outputs_get(
        self, requests: list[OutputRequest]
    ) -> tuple[list[tuple[np.ndarray, int]], int]:
        """(array, address) handed to the caller per output (a view of its own buffer when
        preallocated), and the frame id."""
        if self.outside:
            self.check_general_api("rknn_outputs_get")
        if self._binding is None:
            raise RknnError(OUTPUT_INVALID, "rknn_outputs_get: no finished run; call rknn_run")
        arrays, addresses, frame = self._results()
        count = len(self.outputs)
        if len(requests) > count:
            raise RknnError(
                PARAM_INVALID, f"rknn_outputs_get: n_outputs {len(requests)} > model's {count}"
            )
        handed = []
        for plan, req, result, result_address in zip(self.outputs, requests, arrays, addresses):
            data = plan.convert(result, req.want_float)
            if req.is_prealloc:
                need = data.nbytes
                if req.buffer is None or req.buffer.size < need:
                    size = 0 if req.buffer is None else req.buffer.size
                    raise RknnError(
                        PARAM_INVALID,
                        f"rknn_outputs_get, param output size({size}) < model output "
                        f"size({need}) for output {plan.index}",
                    )
                target = req.buffer[:need].view(data.dtype).reshape(data.shape)
                np.copyto(target, data)
                handed.append((target, address_of(target)))
            else:
                address = result_address if data is result else address_of(data)
                if address in self._handed_out:  # each get owns its buffer until release
                    data = data.copy()
                    address = address_of(data)
                self._handed_out[address] = data
                handed.append((data, address))
        return handed, frame

    def outputs_release(self, addresses: list[int]) -> None:
        for address in addresses:
            self._handed_out.pop(address, None)

    # -- settings ---------------------------------------------------------------------------
    def set_core_mask(self, mask: int) -> None:
        self.require("rknn_set_core_mask")
        if mask not in self.platform.core_masks:
            raise RknnError(
                PARAM_INVALID,
                f"rknn_set_core_mask: core mask {mask:#x} is not valid on {self.platform.name}; "
                f"valid: {', '.join(hex(m) for m in sorted(self.platform.core_masks))}",
            )
        self.core_mask = mask
        self._update_cores()

    def set_batch_core_num(self, core_num: int) -> None:
        self.require("rknn_set_batch_core_num")
        if not 1 <= core_num <= self.platform.npu_cores:
            raise RknnError(
                PARAM_INVALID,
                f"rknn_set_batch_core_num: core_num {core_num} must be 1.."
                f"{self.platform.npu_cores} on {self.platform.name}",
            )
        self.batch_core_num = core_num
        self._update_cores()

    def _update_cores(self) -> None:
        """The cores each job asks for: the mask's (facts §5.10), and for a multi-batch model
        (`rknn_batch_size` > 1) up to batch_core_num cores for its batches."""
        allowed, count = device.cores_for(self.core_mask, self.platform.npu_cores)
        batch = self.model.meta.rknn_batch_size
        if batch > 1:
            count = max(count, min(self.batch_core_num, batch, len(allowed)))
        self._cores = (allowed, count)

    def dup(self) -> Context:
        self.require("rknn_dup_context")
        if self.model.dynamic:
            raise RknnError(
                FAIL, "rknn_dup_context is not supported for models with dynamic input shapes"
            )
        if self.program is None:
            raise RknnError(FAIL, "rknn_dup_context: the context has no weights loaded")
        return Context(self.model, self.flags, self.priority, source=self)

    def destroy(self) -> None:
        self.destroyed = True
        job, self._job = self._job, None
        if job is not None:  # withdraw a frame that has not started; let a running one end
            job.cancel(self._device.cancel)
            job.done.wait()
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        self._ready = None
        self._handed_out.clear()
        self._has_results = False
        self._io.clear()
        partition.destroy(self._binding)  # custom-ops hook (issue 17): destroy callbacks
        self._binding = None
        # Weight and internal buffers may be shared with duplicates and donees: they are
        # unmapped and their descriptors closed when the last context holding them goes.
        self._weight_buffer = self._internal_buffer = None
        self.program = self.weights = None
        if self.sram_taken:
            sram.release(self.platform.name, self.sram_taken)
            self.sram_taken = 0


def create(buf: memoryview, flags: frozenset[str], priority: str,
           donor: Context | None) -> Context:  # fmt: skip
    """rknn_init's work: parse, check and load the model into a new context."""
    ctx = Context(Model(buf), flags, priority)
    try:
        ctx.load(donor)
    except BaseException:
        ctx.destroy()
        raise
    return ctx
