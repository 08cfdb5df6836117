"""Frames of a context: rknn_run (on the caller's thread, or as a Job on the context's worker),
rknn_wait, async results, fences, the cores a job asks for, and the buffers rknn_outputs_get
hands out (facts §4.1, §5.7, §5.10; docs/device.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import device, jobs, log
from ..errors import FAIL, OUTPUT_INVALID, PARAM_INVALID, TIMEOUT, RknnError
from ..io.plans import OutputPlan
from ..platforms import Platform
from ..program.base import Binding
from ..program.whole import address_of
from .options import InitOptions

Extend = tuple[int, int, int]  # rknn_run_extend as (non_block, timeout_ms, fence_fd)
Handed = tuple[np.ndarray, int]  # an output handed to the caller: (array, address)


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


class Frames:
    """Run state of one context. `on_finish(frame, cores)` runs after every frame, on the
    thread that ran it (bound outputs, timing and perf lines: the facade's)."""

    def __init__(self, platform: Platform, options: InitOptions,
                 on_finish: Callable[[int, tuple[int, ...]], None]) -> None:  # fmt: skip
        self.platform = platform
        self.priority = options.priority  # PRIOR_* (the device's queue order)
        self.async_mode = options.async_mode  # ASYNC_MASK
        self.fence_in, self.fence_out = options.fence_in, options.fence_out  # FENCE_*_OUTSIDE
        self._fenced = self.fence_in or self.fence_out
        self._inline = not (self.async_mode or self.fence_out)
        self._on_finish = on_finish
        self.handle = 0  # the context handle, tags device requests
        self.device = device.get(platform.name, platform.npu_cores)
        self.core_mask = 0
        self.batch_core_num = 1
        self.cores = device.cores_for(device.CORE_AUTO, platform.npu_cores)
        self.frame_id = 0  # the last frame submitted by rknn_run
        self.done_frame = 0  # the frame whose results the binding holds
        self.has_results = False
        self.last_run_us = 0
        self.last_cores: tuple[int, ...] = ()
        self.out_fence_fd = -1  # FENCE_OUT_OUTSIDE: the last run's fence, for extend->fence_fd
        self.job: jobs.Job | None = None
        self._worker: jobs.Worker | None = None
        self._ready: Results | None = None  # async mode: what rknn_outputs_get returns
        self._handed_out: dict[int, np.ndarray] = {}

    # -- cores ------------------------------------------------------------------------------
    def set_cores(self, core_mask: int, batch_core_num: int, batch: int) -> None:
        """The cores each job asks for: the mask's (facts §5.10), and for a multi-batch model
        (`rknn_batch_size` > 1) up to batch_core_num cores for its batches."""
        self.core_mask, self.batch_core_num = core_mask, batch_core_num
        allowed, count = device.cores_for(core_mask, self.platform.npu_cores)
        if batch > 1:
            count = max(count, min(batch_core_num, batch, len(allowed)))
        self.cores = (allowed, count)

    # -- runs -------------------------------------------------------------------------------
    def run(self, binding: Binding, extend: Extend | None) -> int:
        """One frame of `binding` (its inputs are set); returns the frame id."""
        fence = self._check_fences(extend) if self._fenced else -1
        if not self._inline or (extend is not None and (extend[0] or extend[1] > 0)):
            return self._run_job(binding, extend, fence)
        for index, address in enumerate(binding.addresses):
            if address in self._handed_out:  # the caller still holds last run's buffer
                binding.replace_output(index)
        if fence >= 0:
            jobs.wait_fence(fence)
        frame = self.frame_id + 1
        allowed, count = self.cores
        req = self.device.acquire(allowed, count, self.priority, (self.handle, frame))
        try:
            self._timed_run(binding)
        finally:
            self.device.release(req)
        self.frame_id = frame
        self._finish(frame, req.cores)
        return frame

    def _timed_run(self, binding: Binding) -> None:
        """One inference of the program; PERF_RUN's run_duration is its time."""
        start = time.perf_counter()
        binding.run()
        self.last_run_us = int((time.perf_counter() - start) * 1e6)

    def _finish(self, frame: int, cores: tuple[int, ...]) -> None:
        self.done_frame = frame
        self.has_results = True
        self.last_cores = cores
        self._on_finish(frame, cores)

    def _check_fences(self, extend: Extend | None) -> int:
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

    def _run_job(self, binding: Binding, extend: Extend | None, fence: int) -> int:
        """Hand the frame to the worker; wait for it only for a blocking, time-limited run."""
        non_block, timeout_ms, _ = extend if extend is not None else (0, 0, -1)
        if self.async_mode:
            self.detach_results(binding)  # frame n-1 becomes what rknn_outputs_get returns
        else:
            for index, address in enumerate(binding.addresses):
                if address in self._handed_out:
                    binding.replace_output(index)
        frame = self.frame_id + 1
        job = jobs.Job(frame)
        out = jobs.OutFence() if self.fence_out else None
        if self._worker is None:
            self._worker = jobs.Worker(f"rknnrt-ctx-{self.handle:#x}")
        self.job, self.frame_id = job, frame
        self._worker.submit(lambda: self._job_body(job, binding, fence, out))
        if out is not None:
            self.out_fence_fd = out.fd
        if non_block or self.async_mode or out is not None:
            return frame
        # A blocking run with timeout_ms > 0.
        if not job.wait(timeout_ms) and job.cancel(self.device.cancel):
            job.done.wait()
            self.job, self.frame_id = None, frame - 1
            raise RknnError(
                TIMEOUT,
                f"rknn_run: frame {frame} did not start within {timeout_ms} ms (its input fence "
                "or an NPU core was not free); it was withdrawn, and the context is ready",
            )
        if job.done.is_set():  # in time (or just after the limit, before it could be withdrawn)
            self.job = None
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
            allowed, count = self.cores
            with job.lock:
                if job.cancelled:
                    return
                req = self.device.submit(allowed, count, self.priority, (self.handle, job.frame))
                job.request = req
            self.device.wait(req)
            if not job.begin():
                self.device.release(req)
                return
            try:
                self._timed_run(binding)
            finally:
                self.device.release(req)
            self._finish(job.frame, req.cores)
        except RknnError as exc:
            job.error = exc
        except Exception as exc:  # the job runs off the API boundary: keep it as a status
            job.error = RknnError(FAIL, f"frame {job.frame}: {type(exc).__name__}: {exc}")
        finally:
            if out is not None:
                out.signal()
            job.done.set()

    def settle(self, call: str, timeout_ms: int = 0) -> None:
        """Let the frame in flight finish before `call` touches the context's buffers."""
        job = self.job
        if job is None:
            return
        if not job.wait(timeout_ms):
            raise RknnError(
                TIMEOUT,
                f"{call}: frame {job.frame} is still running after {timeout_ms} ms "
                "(call rknn_wait, or retry)",
            )
        self.job = None
        if job.error is not None:
            log.warning(f"{call}: frame {job.frame} failed: {job.error.message}")

    def wait(self, binding: Binding | None, timeout_ms: int = 0) -> int:
        """rknn_wait: the frame in flight (if any) finishes; returns the last finished frame.
        In async mode that frame becomes what rknn_outputs_get returns."""
        job = self.job
        if job is not None:
            if not job.wait(timeout_ms):
                raise RknnError(
                    TIMEOUT,
                    f"rknn_wait: frame {job.frame} did not finish within {timeout_ms} ms; it is "
                    "still running (wait again)",
                )
            self.job = None
            if job.error is not None:
                raise RknnError(job.error.status, f"frame {job.frame}: {job.error.message}")
        if self.async_mode:
            self.detach_results(binding)
        return self.done_frame

    def detach_results(self, binding: Binding | None) -> None:
        """Async mode: the last finished frame's outputs become rknn_outputs_get's results and
        the binding writes the next frame into fresh buffers."""
        if binding is None or self.done_frame == 0:
            return
        if self._ready is not None and self._ready.frame == self.done_frame:
            return
        self._ready = Results(list(binding.outputs), list(binding.addresses), self.done_frame)
        for index in range(len(binding.outputs)):
            binding.replace_output(index)

    def forget_results(self) -> None:
        """New input shapes: earlier results no longer describe this context's outputs."""
        self._ready = None
        self.has_results = False

    # -- results ----------------------------------------------------------------------------
    def _results(self, binding: Binding) -> tuple[list[np.ndarray], list[int], int]:
        """(arrays, addresses, frame id) that rknn_outputs_get hands out (facts §5.7)."""
        if self.async_mode and self.frame_id > 0:
            if self._ready is not None:
                return self._ready.arrays, self._ready.addresses, self._ready.frame
            # The first frame is still the current one: frame 0, zeros (docs/device.md).
            zeros = [np.zeros_like(a) for a in binding.outputs]
            return zeros, [address_of(z) for z in zeros], 0
        if self.job is not None:
            self.settle("rknn_outputs_get")  # "blocks until inference finishes"
        if not self.has_results:
            raise RknnError(OUTPUT_INVALID, "rknn_outputs_get: no finished run; call rknn_run")
        return binding.outputs, binding.addresses, self.done_frame

    def outputs_get(self, binding: Binding | None, plans: list[OutputPlan],
                    requests: list[OutputRequest]) -> tuple[list[Handed], int]:  # fmt: skip
        """(array, address) handed to the caller per output (a view of its own buffer when
        preallocated), and the frame id."""
        if binding is None:
            raise RknnError(OUTPUT_INVALID, "rknn_outputs_get: no finished run; call rknn_run")
        arrays, addresses, frame = self._results(binding)
        count = len(plans)
        if len(requests) > count:
            raise RknnError(
                PARAM_INVALID, f"rknn_outputs_get: n_outputs {len(requests)} > model's {count}"
            )
        handed = []
        for plan, req, result, result_address in zip(plans, requests, arrays, addresses):
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

    def outputs_copied(self, binding: Binding | None, plans: list[OutputPlan],
                       count: int) -> list[np.ndarray]:  # fmt: skip
        """rknn_outputs_get of the first `count` outputs as float32, each released at once
        (RKNNLite's one call): arrays the caller owns, a converted one as made, the binding's
        own buffer copied; nothing stays handed out."""
        if binding is None:
            raise RknnError(OUTPUT_INVALID, "rknn_outputs_get: no finished run; call rknn_run")
        arrays, _, _ = self._results(binding)
        if count > len(plans):
            raise RknnError(
                PARAM_INVALID, f"rknn_outputs_get: n_outputs {count} > model's {len(plans)}"
            )
        copies = []
        for plan, result in zip(plans[:count], arrays):
            data = plan.convert(result, True)
            copies.append(data.copy() if data is result else data)
        return copies

    def outputs_release(self, addresses: list[int]) -> int:
        """Let go of buffers rknn_outputs_get handed out; returns how many were not held."""
        unknown = 0
        for address in addresses:
            if self._handed_out.pop(address, None) is None:
                unknown += 1
        return unknown

    def stop(self) -> None:
        """rknn_destroy: withdraw a frame that has not started, let a running one end."""
        job, self.job = self.job, None
        if job is not None:
            job.cancel(self.device.cancel)
            job.done.wait()
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        self._ready = None
        self._handed_out.clear()
        self.has_results = False
