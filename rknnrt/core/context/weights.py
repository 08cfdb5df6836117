"""A context's weight, internal and SRAM memory (facts §5.6, docs/memory.md): its own copy, a
donor's (SHARE_WEIGHT_MEM), the application's (MEM_ALLOC_OUTSIDE) or the model buffer itself
(MODEL_BUFFER_ZERO_COPY), and the program that reads them."""

from __future__ import annotations

import os
import threading

import numpy as np

from .. import log, switches
from ..board import perf
from ..errors import FAIL, MODEL_INVALID, PARAM_INVALID, RknnError
from ..io import sram
from ..io.memory import Buffer, Memory
from ..program.base import Program
from .model import Model
from .options import InitOptions

_priority_lock = threading.Lock()
_priority_raised = [False]  # once per process, as the vendor's runtime does


def raise_process_priority(options: InitOptions) -> None:
    """The vendor runtime sets nice -19 on Linux at the first rknn_init; the
    DISABLE_PROC_HIGH_PRIORITY flag and RKNNRT_KEEP_PRIORITY=1 opt out."""
    if options.keep_process_priority or switches.keep_priority():
        return
    with _priority_lock:
        if _priority_raised[0]:
            return
        _priority_raised[0] = True
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -19)
    except OSError:  # not permitted: the vendor carries on too
        pass


class Weights:
    """What a context's program reads: weights, internal memory and its SRAM share."""

    def __init__(self, model: Model, options: InitOptions) -> None:
        self.model = model
        self.options = options
        self.platform = model.platform
        self.array: np.ndarray | None = None  # the weights the program reads
        self.program: Program | None = None
        # built-in op types a registered custom op replaces (facade.register_custom_ops)
        self.replaced: frozenset[str] = frozenset()
        self.weight_memory: Memory | None = None  # MEM_ALLOC_OUTSIDE: the application's
        self.internal_memory: Memory | None = None
        self.sram_taken = 0
        self._pending: np.ndarray | None = None  # MEM_ALLOC_OUTSIDE, until provided
        self._weight_buffer: Buffer | None = None
        self._internal_buffer: Buffer | None = None

    def share(self, source: Weights) -> None:
        """rknn_dup_context: the same weights and program."""
        self.array, self.program = source.array, source.program
        self.replaced = source.replaced  # (its replacing ops are registered per context)

    def load(self, donor: Weights | None) -> None:
        """rknn_init's memory work, per flags (facts §5.6)."""
        options, meta = self.options, self.model.meta
        if options.share_sram and not options.enable_sram:
            raise RknnError(
                PARAM_INVALID, "RKNN_FLAG_SHARE_SRAM requires RKNN_FLAG_ENABLE_SRAM as well"
            )
        raise_process_priority(options)
        if meta.remove_weight and not options.share_weight_mem:
            raise RknnError(
                MODEL_INVALID,
                "this model was converted with remove_weight=True and carries no weights; "
                "initialise it with RKNN_FLAG_SHARE_WEIGHT_MEM and extend->ctx = a donor context",
            )
        if options.info_only:
            return
        section = self.model.weights_section
        assert section is not None
        if options.share_weight_mem:
            self._borrow(donor)
        elif options.mem_alloc_outside:
            self._pending = np.frombuffer(section, np.uint8).copy()
        elif options.model_zero_copy:
            self.array = np.frombuffer(section, np.uint8)
        else:
            self._weight_buffer = Buffer(meta.memory.weight_size, cacheable=False)
            self._weight_buffer.fill(section)
            self.array = self._weight_buffer.cpu
        self.model.release_weights_section()
        self._reserve_sram()
        if not options.internal_alloc_outside:
            self._internal_buffer = Buffer(self.internal_dram_size(), cacheable=False)
        if self.array is not None:
            self.program = self.model.program(self.array, options.model_zero_copy,
                                              self.replaced)  # fmt: skip

    def _borrow(self, donor: Weights | None) -> None:
        if self.model.dynamic or (donor is not None and donor.model.dynamic):
            raise RknnError(
                PARAM_INVALID,
                "RKNN_FLAG_SHARE_WEIGHT_MEM is not supported for models with dynamic input shapes",
            )
        if donor is None:
            raise RknnError(
                PARAM_INVALID,
                "RKNN_FLAG_SHARE_WEIGHT_MEM needs extend->ctx: a live context of the same model",
            )
        if donor.array is None:
            raise RknnError(PARAM_INVALID, "the donor context has no weights loaded yet")
        if donor.model.meta.weights_sha256 != self.model.meta.weights_sha256:
            raise RknnError(
                PARAM_INVALID,
                "the donor context's weights differ from this model's (convert both from the "
                "same ONNX model; a remove_weight model records the weights it needs)",
            )
        self.array = donor.array

    def _reserve_sram(self) -> None:
        if not self.options.enable_sram:
            return
        capacity = self.platform.sram_bytes
        if capacity == 0:
            log.warning(f"RKNN_FLAG_ENABLE_SRAM: {self.platform.name} has no NPU SRAM; ignored")
            return
        wanted = self.model.meta.memory.internal_size
        if self.options.share_sram:
            self.sram_taken = 0  # uses the shared region; takes nothing new
        else:
            self.sram_taken = sram.reserve(self.platform.name, capacity, wanted)
        log.info(f"SRAM: {self.sram_taken} bytes of {capacity} taken for intermediate tensors")

    def internal_dram_size(self) -> int:
        """Internal memory outside SRAM: intermediate tensors are placed in SRAM first."""
        return max(0, self.model.meta.memory.internal_size - self.sram_taken)

    def set_weight_mem(self, memory: Memory) -> None:
        """The weights move into the application's memory; a new program reads them there."""
        if not self.options.mem_alloc_outside:
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
        if self._pending is None and self.array is not None:
            self._pending = self.array[:need].copy()  # moving to new weight memory
        assert self._pending is not None
        # The runtime writes the weights and flushes them to the device.
        np.copyto(memory.cpu[:need], self._pending)
        memory.sync_to_device()
        self._pending = None
        self.weight_memory = memory
        self.array = memory.device[:need]
        self.program = self.model.program(self.array, replaced=self.replaced)

    def replace_builtin(self, op_types: frozenset[str]) -> None:
        """A new program in which the built-in nodes of `op_types` run as custom ops."""
        if self.array is not None:
            self.program = self.model.program(self.array, self.options.model_zero_copy,
                                              op_types)  # fmt: skip
        self.replaced = op_types

    def set_internal_mem(self, memory: Memory) -> None:
        if not self.options.internal_alloc_outside:
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

    def internal_views(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The internal memory (uint8, planned offsets from 0) as the NPU writes it and as the
        CPU sees it (the same array unless the memory is cacheable: core/io/memory.py), or None:
        not given yet (MEM_ALLOC_OUTSIDE), or partly in SRAM (the materialised intermediate
        tensors then stay in buffers of their own)."""
        if self.sram_taken:
            return None
        size = self.internal_dram_size()
        memory: Memory | Buffer | None = self._internal_buffer
        if self.internal_memory is not None and not self.internal_memory.destroyed:
            memory = self.internal_memory
        if memory is None:
            return None
        return memory.device[:size], memory.cpu[:size]

    def internal_ready(self) -> bool:
        return self.internal_memory is not None and not self.internal_memory.destroyed

    def problem(self) -> str | None:
        """Why the program cannot run now (weights or internal memory missing), or None."""
        if self.program is None:
            return "no weight memory: call rknn_set_weight_mem before rknn_run"
        if self.weight_memory is not None and self.weight_memory.destroyed:
            return "the weight memory was destroyed; bind new memory with rknn_set_weight_mem"
        if self.options.internal_alloc_outside and not self.internal_ready():
            return "no internal memory: call rknn_set_internal_mem before rknn_run"
        return None

    def allocated(self) -> int:
        """Bytes of weight and internal memory the context itself allocated."""
        return sum(b.size for b in (self._weight_buffer, self._internal_buffer) if b)

    def mem_size(self) -> dict[str, int]:
        """RKNN_QUERY_MEM_SIZE without total_dma_allocated_size (the facade adds IO)."""
        plan = self.model.meta.memory
        enabled = self.options.enable_sram and self.platform.sram_bytes > 0
        capacity = self.platform.sram_bytes if enabled else 0
        # Internal: the board's planner (core/board/perf.py) where it needs more than rknnrt's, so a
        # buffer of the reported size works here and on a board; a vendor file's stored figure
        # is the board's own. Weights: the weights section (within 1% of the vendor's packing
        # on the calibration models).
        internal = plan.internal_size
        if not self.model.from_vendor:
            board = perf.board_view(self.model.meta, self.model.graph, self.array, self.platform)
            internal = max(internal, board.memory()[1])
        return {
            "total_weight_size": plan.weight_size,
            "total_internal_size": internal,
            "total_sram_size": capacity,
            "free_sram_size": sram.free(self.platform.name, capacity) if enabled else 0,
        }

    def device_mem_info(self) -> Buffer | None:
        """The model (weight) buffer the runtime created, for RKNN_QUERY_DEVICE_MEM_INFO."""
        return self._weight_buffer

    def release(self) -> None:
        """Weight and internal buffers may be shared with duplicates and donees: they are
        unmapped and their descriptors closed when the last context holding them goes."""
        self._weight_buffer = self._internal_buffer = None
        self.program = self.array = None
        if self.sram_taken:
            sram.release(self.platform.name, self.sram_taken)
            self.sram_taken = 0
