"""InitOptions: rknn_init's `flag` decoded once into typed fields (facts §5.6, docs/device.md).

Bit values are the header's (rknn_api.h 2.5.0; tests/unit pins them against rknnrt.api). Each
flag is read where its entry says, and nowhere else:

- PRIOR_HIGH/MEDIUM/LOW (priority): frames.Frames, the order of the device's queue
- ASYNC_MASK (async_mode), FENCE_IN/OUT_OUTSIDE (fence_in, fence_out): frames.Frames
- COLLECT_PERF_MASK (collect_perf): facade.Context.perf_detail
- MEM_ALLOC_OUTSIDE (mem_alloc_outside): weights.Weights.load (weights wait for
  rknn_set_weight_mem); facade.Context refuses the general API and runs without bound IO
- SHARE_WEIGHT_MEM (share_weight_mem): weights.Weights.load (+ lifecycle.init finds the donor)
- COLLECT_MODEL_INFO_ONLY (info_only): weights.Weights.load (nothing loaded)
- INTERNAL_ALLOC_OUTSIDE (internal_alloc_outside, also set by MEM_ALLOC_OUTSIDE):
  weights.Weights (no internal buffer; rknn_set_internal_mem)
- EXECUTE_FALLBACK_PRIOR_DEVICE_GPU (fallback_gpu): model.Model.log_fallback (no GPU: CPU)
- ENABLE_SRAM / SHARE_SRAM (enable_sram, share_sram): weights.Weights
- DISABLE_PROC_HIGH_PRIORITY (keep_process_priority): weights.raise_process_priority
- DISABLE_FLUSH_INPUT/OUTPUT_MEM_CACHE (flush_inputs, invalidate_outputs): bindings.Bindings
- MODEL_BUFFER_ZERO_COPY (model_zero_copy): model.read_model_bytes (fd view) and
  weights.Weights.load (the program reads the model buffer in place)
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import log

PRIOR_MEDIUM, PRIOR_LOW = 0x1, 0x2
_BITS = {
    "RKNN_FLAG_ASYNC_MASK": 0x4, "RKNN_FLAG_COLLECT_PERF_MASK": 0x8,
    "RKNN_FLAG_MEM_ALLOC_OUTSIDE": 0x10, "RKNN_FLAG_SHARE_WEIGHT_MEM": 0x20,
    "RKNN_FLAG_FENCE_IN_OUTSIDE": 0x40, "RKNN_FLAG_FENCE_OUT_OUTSIDE": 0x80,
    "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY": 0x100, "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE": 0x200,
    "RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU": 0x400, "RKNN_FLAG_ENABLE_SRAM": 0x800,
    "RKNN_FLAG_SHARE_SRAM": 0x1000, "RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY": 0x2000,
    "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE": 0x4000,
    "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE": 0x8000,
    "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY": 0x10000,
}  # fmt: skip
FLAG_BITS = dict(_BITS)  # name -> bit, for the constants test
_KNOWN = PRIOR_MEDIUM | PRIOR_LOW | sum(_BITS.values())


@dataclass(frozen=True)
class InitOptions:
    """Every RKNN_FLAG_* of one rknn_init as a typed field."""

    priority: str = "HIGH"
    async_mode: bool = False
    collect_perf: bool = False
    mem_alloc_outside: bool = False
    share_weight_mem: bool = False
    fence_in: bool = False
    fence_out: bool = False
    info_only: bool = False
    internal_alloc_outside: bool = False
    fallback_gpu: bool = False
    enable_sram: bool = False
    share_sram: bool = False
    keep_process_priority: bool = False
    flush_inputs: bool = True
    invalidate_outputs: bool = True
    model_zero_copy: bool = False
    names: frozenset[str] = frozenset()  # the set flags' names, as `rknnrt info` prints them

    @classmethod
    def from_flag(cls, flag: int) -> InitOptions:
        """Decode rknn_init's flag; unknown bits and conflicting priorities get one W line."""
        flag &= 0xFFFFFFFF
        prio = flag & (PRIOR_MEDIUM | PRIOR_LOW)
        if prio == PRIOR_MEDIUM | PRIOR_LOW:
            log.warning("rknn_init: PRIOR_MEDIUM and PRIOR_LOW both set; using PRIOR_LOW")
        unknown = flag & ~_KNOWN
        if unknown:
            log.warning(f"rknn_init: unknown flag bits {unknown:#x} ignored (flag={flag:#x})")
        names = frozenset(name for name, bit in _BITS.items() if flag & bit)

        def has(name: str) -> bool:
            return f"RKNN_FLAG_{name}" in names

        return cls(
            priority={0: "HIGH", PRIOR_MEDIUM: "MEDIUM"}.get(prio, "LOW"),
            async_mode=has("ASYNC_MASK"),
            collect_perf=has("COLLECT_PERF_MASK"),
            mem_alloc_outside=has("MEM_ALLOC_OUTSIDE"),
            share_weight_mem=has("SHARE_WEIGHT_MEM"),
            fence_in=has("FENCE_IN_OUTSIDE"),
            fence_out=has("FENCE_OUT_OUTSIDE"),
            info_only=has("COLLECT_MODEL_INFO_ONLY"),
            internal_alloc_outside=has("INTERNAL_ALLOC_OUTSIDE") or has("MEM_ALLOC_OUTSIDE"),
            fallback_gpu=has("EXECUTE_FALLBACK_PRIOR_DEVICE_GPU"),
            enable_sram=has("ENABLE_SRAM"),
            share_sram=has("SHARE_SRAM"),
            keep_process_priority=has("DISABLE_PROC_HIGH_PRIORITY"),
            flush_inputs=not has("DISABLE_FLUSH_INPUT_MEM_CACHE"),
            invalidate_outputs=not has("DISABLE_FLUSH_OUTPUT_MEM_CACHE"),
            model_zero_copy=has("MODEL_BUFFER_ZERO_COPY"),
            names=names,
        )
