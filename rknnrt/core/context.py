"""The runtime core: a loaded Model (shared, immutable) and the Contexts that run it.

rknn_init prepares everything (program, conversion plans, buffers) so that rknn_inputs_set,
rknn_run and rknn_outputs_get only check state and move data.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from ..model import container
from ..model.meta import ModelMeta
from . import attrs, log, platforms
from .errors import (
    CTX_INVALID,
    FAIL,
    INPUT_INVALID,
    MODEL_INVALID,
    OUTPUT_INVALID,
    PARAM_INVALID,
    RknnError,
)  # fmt: skip
from .executor import Binding, Program, address_of
from .io import InputPlan, OutputPlan
from .version import API_VERSION, DRIVER_VERSION

PRIORITIES = ("HIGH", "MEDIUM", "LOW")


class Model:
    """Everything read from one model file; shared by a context and its duplicates."""

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
        if self.meta.remove_weight:
            raise RknnError(
                MODEL_INVALID,
                "this model was converted with remove_weight=True and carries no weights; "
                "initialise it with RKNN_FLAG_SHARE_WEIGHT_MEM and a donor context",
            )
        # The context's weight memory: an aligned copy, as the board copies the model.
        self.weights = np.frombuffer(sections.weights, np.uint8).copy()
        self.program = Program(self.meta, bytes(sections.graph), self.weights)
        self.inputs = [InputPlan(i, s, self.platform) for i, s in enumerate(self.meta.inputs)]
        self.outputs = [OutputPlan(i, s) for i, s in enumerate(self.meta.outputs)]
        log.info(
            f"RKNN Runtime Information, librknnrt version: {API_VERSION}; "
            f"RKNN Driver Information, version: {DRIVER_VERSION}"
        )
        log.info(
            f"RKNN Model Information, version: {container.FORMAT_VERSION}, toolkit version: "
            f"{self.meta.toolkit_version}, target platform: {self.meta.target_platform}, "
            f"framework name: {self.meta.framework}, framework layout: NCHW"
        )


@dataclass
class OutputRequest:
    """One rknn_output as the API layer decoded it."""

    want_float: bool
    is_prealloc: bool
    buffer: np.ndarray | None  # the caller's bytes (uint8) when is_prealloc


class Context:
    """One rknn_context: a model, its IO buffers, its settings and its run state."""

    def __init__(self, model: Model, flags: frozenset[str], priority: str) -> None:
        self.model = model
        self.platform = model.platform
        self.flags = flags
        self.priority = priority
        self.core_mask = 0
        self.batch_core_num = 1
        self._busy = threading.Lock()
        self._feed_arrays = [plan.new_buffer() for plan in model.inputs]
        self._binding = Binding(model.program, self._feed_arrays, model.meta.outputs)
        self._inputs_ready = [False] * len(model.inputs)
        self._has_results = False
        self._handed_out: dict[int, np.ndarray] = {}
        self.frame_id = 0
        self.last_run_us = 0
        self.destroyed = False
        # Read once, as the vendor reads RKNN_LOG_LEVEL at init: the run path stays cheap.
        self._log_timing = log.level() >= log.TIMING
        self.general_api = self.platform.supports("rknn_inputs_set")

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

    def mem_size(self) -> dict[str, int]:
        plan = self.model.meta.memory
        io_bytes = sum(p.native.size_with_stride for p in self.model.inputs) + sum(
            attrs.native_output_attr(p.index, p.spec, self.platform, False).size
            for p in self.model.outputs
        )
        return {
            "total_weight_size": plan.weight_size,
            "total_internal_size": plan.internal_size,
            "total_dma_allocated_size": plan.weight_size + plan.internal_size + io_bytes,
            "total_sram_size": 0,
            "free_sram_size": 0,
        }

    def custom_string(self) -> str:
        return self.model.meta.custom_string

    def perf_run(self) -> int:
        return self.last_run_us

    # -- inference --------------------------------------------------------------------------
    def inputs_set(self, items: list[tuple[int, np.ndarray, str, str, bool]]) -> None:
        """items: (index, caller bytes, buffer dtype, buffer fmt, pass_through)."""
        count = len(self.model.inputs)
        if len(items) != count:
            log.warning(f"rknn_inputs_set: n_inputs {len(items)} != model input number {count}")
        for index, raw, dtype, fmt, pass_through in items:
            self._check_index(index, count, "input")
            self.model.inputs[index].convert(
                raw, dtype, fmt, pass_through, self._feed_arrays[index]
            )
            self._inputs_ready[index] = True

    def run(self) -> int:
        if "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY" in self.flags:
            raise RknnError(
                FAIL, "rknn_run: context was created with RKNN_FLAG_COLLECT_MODEL_INFO_ONLY"
            )
        if not all(self._inputs_ready):
            missing = [
                p.spec.name for p, ok in zip(self.model.inputs, self._inputs_ready) if not ok
            ]
            raise RknnError(
                INPUT_INVALID,
                f"rknn_run: input(s) {', '.join(missing)} not set; call rknn_inputs_set first",
            )
        binding = self._binding
        for index, address in enumerate(binding.addresses):
            if address in self._handed_out:  # the caller still holds last run's buffer
                binding.replace_output(index)
        start = time.perf_counter()
        binding.run()
        self._has_results = True
        self.last_run_us = int((time.perf_counter() - start) * 1e6)
        self.frame_id += 1
        if self._log_timing:
            log.timing(f"rknn_run: {self.last_run_us} us")
        return self.frame_id

    def outputs_get(
        self, requests: list[OutputRequest]
    ) -> tuple[list[tuple[np.ndarray, int]], int]:
        """(array, address) handed to the caller per output (a view of its own buffer when
        preallocated), and the frame id."""
        if not self._has_results:
            raise RknnError(OUTPUT_INVALID, "rknn_outputs_get: no finished run; call rknn_run")
        count = len(self.model.outputs)
        if len(requests) > count:
            raise RknnError(
                PARAM_INVALID, f"rknn_outputs_get: n_outputs {len(requests)} > model's {count}"
            )
        handed = []
        binding = self._binding
        for plan, req, result, result_address in zip(
            self.model.outputs, requests, binding.outputs, binding.addresses
        ):
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
        return handed, self.frame_id

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

    def set_batch_core_num(self, core_num: int) -> None:
        self.require("rknn_set_batch_core_num")
        if not 1 <= core_num <= self.platform.npu_cores:
            raise RknnError(
                PARAM_INVALID,
                f"rknn_set_batch_core_num: core_num {core_num} must be 1.."
                f"{self.platform.npu_cores} on {self.platform.name}",
            )
        self.batch_core_num = core_num

    def dup(self) -> Context:
        self.require("rknn_dup_context")
        return Context(self.model, self.flags, self.priority)

    def destroy(self) -> None:
        self.destroyed = True
        self._handed_out.clear()
        self._has_results = False
