"""A context's memory at rknn_init and after: weights (own, a donor's, the application's or in
place), internal memory, SRAM and the MEM_SIZE accounting (facts §5.6, docs/memory.md).

A mixin of Context: the methods use the context's fields set in Context.__init__.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from . import log, perf, sram
from .errors import FAIL, MODEL_INVALID, PARAM_INVALID, RknnError
from .memory import Buffer, Memory

if TYPE_CHECKING:
    from .context import Context

_raised_priority = False


def _raise_process_priority() -> None:
    """The vendor runtime sets nice -19 on Linux (RT); RKNNRT_KEEP_PRIORITY=1 opts out."""
    global _raised_priority
    if _raised_priority or os.environ.get("RKNNRT_KEEP_PRIORITY") == "1":
        return
    _raised_priority = True
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -19)
    except OSError:  # not permitted: the vendor carries on too
        pass


class MemorySetup:
    """Weights, internal memory and SRAM of a context."""

    def load(self, donor: Context | None) -> None:
        """rknn_init's memory work, per flags (facts §5.6)."""
        meta = self.model.meta
        if "RKNN_FLAG_SHARE_SRAM" in self.flags and "RKNN_FLAG_ENABLE_SRAM" not in self.flags:
            raise RknnError(
                PARAM_INVALID, "RKNN_FLAG_SHARE_SRAM requires RKNN_FLAG_ENABLE_SRAM as well"
            )
        if "RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY" not in self.flags:
            _raise_process_priority()
        sharing = "RKNN_FLAG_SHARE_WEIGHT_MEM" in self.flags
        if meta.remove_weight and not sharing:
            raise RknnError(
                MODEL_INVALID,
                "this model was converted with remove_weight=True and carries no weights; "
                "initialise it with RKNN_FLAG_SHARE_WEIGHT_MEM and extend->ctx = a donor context",
            )
        if self.info_only:
            return
        if sharing:
            self._borrow_weights(donor)
        elif self.outside:
            self._pending_weights = np.frombuffer(self.model.weights_section, np.uint8).copy()
        elif "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY" in self.flags:
            self.weights = np.frombuffer(self.model.weights_section, np.uint8)
        else:
            self._weight_buffer = Buffer(meta.memory.weight_size, cacheable=False)
            np.copyto(self._weight_buffer.cpu, np.frombuffer(self.model.weights_section, np.uint8))
            self.weights = self._weight_buffer.cpu
        self.model.weights_section = None  # the caller may free its buffer after init
        self._reserve_sram()
        if not self.internal_outside:
            self._internal_buffer = Buffer(self.internal_dram_size(), cacheable=False)
        if self.weights is not None:
            in_place = "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY" in self.flags
            self.program = self.model.program(self.weights, in_place)
            self._make_binding()

    def _borrow_weights(self, donor: Context | None) -> None:
        if self.model.dynamic or (donor is not None and donor.model.dynamic):
            raise RknnError(
                PARAM_INVALID,
                "RKNN_FLAG_SHARE_WEIGHT_MEM is not supported for models with dynamic input shapes",
            )
        if donor is None or donor.destroyed:
            raise RknnError(
                PARAM_INVALID,
                "RKNN_FLAG_SHARE_WEIGHT_MEM needs extend->ctx: a live context of the same model",
            )
        if donor.weights is None:
            raise RknnError(PARAM_INVALID, "the donor context has no weights loaded yet")
        if donor.model.meta.weights_sha256 != self.model.meta.weights_sha256:
            raise RknnError(
                PARAM_INVALID,
                "the donor context's weights differ from this model's (convert both from the "
                "same ONNX model; a remove_weight model records the weights it needs)",
            )
        self.weights = donor.weights

    def _reserve_sram(self) -> None:
        if "RKNN_FLAG_ENABLE_SRAM" not in self.flags:
            return
        capacity = self.platform.sram_bytes
        if capacity == 0:
            log.warning(f"RKNN_FLAG_ENABLE_SRAM: {self.platform.name} has no NPU SRAM; ignored")
            return
        wanted = self.model.meta.memory.internal_size
        if "RKNN_FLAG_SHARE_SRAM" in self.flags:
            self.sram_taken = 0  # uses the shared region; takes nothing new
        else:
            self.sram_taken = sram.reserve(self.platform.name, capacity, wanted)
        log.info(f"SRAM: {self.sram_taken} bytes of {capacity} taken for intermediate tensors")

    def internal_dram_size(self) -> int:
        """Internal memory outside SRAM: intermediate tensors are placed in SRAM first."""
        return max(0, self.model.meta.memory.internal_size - self.sram_taken)

    def set_weight_mem(self, memory: Memory) -> None:
        self._settle("rknn_set_weight_mem")
        if not self.outside:
            raise RknnError(
                FAIL, "rknn_set_weight_mem needs a context made with RKNN_FLAG_MEM_ALLOC_OUTSIDE"
            )
        need = self.model.meta.memory.weight_size
        if memory.size < need:
            raise RknnError(
                PARAM_INVALID,
                f"weight memory size must be: {need}, but is: {memory.size} "
                "(allocate RKNN_QUERY_MEM_SIZE total_weight_size bytes)",
            )
        if self._pending_weights is None and self.weights is not None:
            self._pending_weights = self.weights[:need].copy()  # moving to new weight memory
        assert self._pending_weights is not None
        # The runtime writes the weights and flushes them to the device.
        np.copyto(memory.cpu[:need], self._pending_weights)
        memory.sync_to_device()
        self._pending_weights = None
        self.weight_memory = memory
        self.weights = memory.device[:need]
        self.program = self.model.program(self.weights)
        self._make_binding()

    def set_internal_mem(self, memory: Memory) -> None:
        self._settle("rknn_set_internal_mem")
        if not self.internal_outside:
            raise RknnError(
                FAIL,
                "rknn_set_internal_mem needs RKNN_FLAG_MEM_ALLOC_OUTSIDE or "
                "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE at rknn_init",
            )
        need = self.internal_dram_size()
        if memory.size < need:
            raise RknnError(
                PARAM_INVALID,
                f"internal memory size must be: {need}, but is: {memory.size} "
                "(allocate RKNN_QUERY_MEM_SIZE total_internal_size bytes)",
            )
        self.internal_memory = memory

    def dma_allocated(self) -> int:
        """Bytes this context itself allocated: weights, internal memory and IO buffers."""
        total = sum(b.size for b in (self._weight_buffer, self._internal_buffer) if b)
        if not self.info_only:
            total += sum(a.nbytes for a in self._feed_arrays)
            if self._binding is not None:
                total += sum(a.nbytes for a in self._binding.outputs)
        return total

    def mem_size(self) -> dict[str, int]:
        plan = self.model.meta.memory
        enabled = "RKNN_FLAG_ENABLE_SRAM" in self.flags and self.platform.sram_bytes > 0
        capacity = self.platform.sram_bytes if enabled else 0
        # Internal: the board's planner (core/perf.py) where it needs more than rknnrt's, so a
        # buffer of the reported size works here and on a board. Weights: the weights section
        # (within 1% of the vendor's packing on the calibration models).
        view = perf.board_view(self.model.meta, self.model.graph, self.weights, self.platform)
        board_internal = view.memory()[1]
        return {
            "total_weight_size": plan.weight_size,
            "total_internal_size": max(plan.internal_size, board_internal),
            "total_dma_allocated_size": self.dma_allocated(),
            "total_sram_size": capacity,
            "free_sram_size": sram.free(self.platform.name, capacity) if enabled else 0,
        }

    def device_mem_info(self) -> Buffer | None:
        """The model (weight) buffer the runtime created, for RKNN_QUERY_DEVICE_MEM_INFO."""
        return self._weight_buffer
