"""One table of platform profiles: every per-SoC number only the runtime needs lives here.

What the converter needs too (name, NPU cores, dynamic shapes, float models, CPU-placed ops,
quantised dtypes) is the platform's `target` (model/targets.py, the one owner of those facts).

Sources (keys of ../shared/spec/rknn_api_facts.md): RT = RKNNRT C API reference V2.3.2
(Tables 4-1/4-2: which calls and queries each platform supports), UG = RKNPU User Guide V2.3.0
(Table 5-1: C2 per dtype; Table 5-2: zero-copy width alignment; 5.7: SRAM), UG15 = user guide
V1.5.2. Numbers marked "unverified" are inferred (see docs/fidelity.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..model import targets

# RT Table 4-1, grouped: G1 = RV1126B/RK3562/RK3566/RK3568, G2 = RK3576/RK3588,
# G3 = RV1106/RV1103/RV1103B/RV1106B (mini runtime), G4 = RK2118.
_CALLS_ALL = frozenset(
    {
        "rknn_init", "rknn_destroy", "rknn_query", "rknn_run", "rknn_create_mem_from_phys",
        "rknn_create_mem", "rknn_create_mem2", "rknn_destroy_mem", "rknn_set_weight_mem",
        "rknn_set_internal_mem", "rknn_set_io_mem", "rknn_mem_sync",
    }
)  # fmt: skip
_CALLS_FULL_RUNTIME = frozenset(
    {
        "rknn_dup_context", "rknn_inputs_set", "rknn_outputs_get", "rknn_outputs_release",
        "rknn_set_input_shapes", "rknn_set_input_shape", "rknn_register_custom_ops",
        "rknn_custom_op_get_op_attr",
    }
)  # fmt: skip
_CALLS_MULTI_CORE = frozenset({"rknn_set_core_mask", "rknn_set_batch_core_num"})

_G1 = _CALLS_ALL | {"rknn_create_mem_from_fd"} | _CALLS_FULL_RUNTIME
_G2 = _G1 | _CALLS_MULTI_CORE
_G3 = _CALLS_ALL | {"rknn_create_mem_from_fd"}
_G4 = _CALLS_ALL

# RT Table 4-2, by query name (the numbers live in api/constants.py): everywhere the basic and
# NATIVE* queries; G1/G2 also PERF_*, INPUT_DYNAMIC_RANGE and CURRENT_*; DEVICE_MEM_INFO only on
# the mini runtime and RK2118 (the table, not RT's prose, which says the opposite).
_QUERIES_ALL = frozenset(
    "RKNN_QUERY_" + q
    for q in ("IN_OUT_NUM", "INPUT_ATTR", "OUTPUT_ATTR", "SDK_VERSION", "MEM_SIZE",
              "CUSTOM_STRING", "NATIVE_INPUT_ATTR", "NATIVE_OUTPUT_ATTR",
              "NATIVE_NHWC_INPUT_ATTR", "NATIVE_NHWC_OUTPUT_ATTR")
)  # fmt: skip
_QUERIES_FULL = _QUERIES_ALL | frozenset(
    "RKNN_QUERY_" + q
    for q in ("PERF_DETAIL", "PERF_RUN", "INPUT_DYNAMIC_RANGE", "CURRENT_INPUT_ATTR",
              "CURRENT_OUTPUT_ATTR", "CURRENT_NATIVE_INPUT_ATTR", "CURRENT_NATIVE_OUTPUT_ATTR")
)  # fmt: skip
_QUERIES_MINI = _QUERIES_ALL | {"RKNN_QUERY_DEVICE_MEM_INFO"}


@dataclass(frozen=True)
class MatmulFacts:
    """What rknn_matmul_api.h offers on one SoC (facts §5.11; see docs/matmul.md for choices).

    Sources: H = rknn_matmul_api.h V2.3.2 comments; UG = user guide V2.3.0 §3.5, Table 3-5
    (native shapes), Table 3-6 (types), Table 3-7 (K/N limits). Dtype keys are the runtime's
    names ("int4", "int8", "float16", ...); type names are the rknn_matmul_type enum names.
    """

    types: frozenset[str]
    # Native A (AC_layout NATIVE): [K/subK, M, subK], keyed by A's dtype (UG Table 3-5).
    a_sub: Mapping[str, int]
    # Native B: [N/subN, K/subK, subN, subK], keyed by A's dtype: for mixed types B takes the
    # blocks of the same-type B of A's dtype (UG Table 3-7 note "*"; Table 3-5 note).
    b_sub: Mapping[str, tuple[int, int]]
    # Native C: [N/sub, M, sub], keyed by C's dtype. int32/float32 4 and int16 8 are UG Table
    # 3-5; int8 16, float16/bfloat16 8 are rknnrt's choice (16-byte blocks, as the C2 of
    # NC1HWC2 on these chips); the board's are undocumented (facts §7).
    c_sub: Mapping[str, int]
    # K <= k_max (H "K max: k <= 10240"; UG Table 3-7 for RK3562/3566/3568). None: no limit;
    # H's own K-split example (K = 20488 on RK3588) exceeds 10240, so RK3576/RK3588 have none.
    k_max: int | None
    # N <= n_max[A's dtype] (UG Table 3-7: 4096; RK3588 int4: 8192).
    n_max: Mapping[str, int]
    # Native B is laid out in K segments of this many rows when K is larger (H, UG 3.5.4.1:
    # RK3588 8192, RK3576 4096); None: never split.
    k_segment: int | None = None
    # B_layout RKNN_MM_LAYOUT_TP_NORM: everywhere but RK3566/RK3568 (UG 3.5.4.1).
    tp_norm: bool = True


@dataclass(frozen=True)
class Platform:
    """What an application on one SoC can observe of its NPU and runtime."""

    target: targets.Target
    # Channels per NC1HWC2 block for each dtype the NPU stores ("/" in UG Table 5-1 = absent).
    c2: dict[str, int]
    # Zero-copy width alignment in BYTES of one row's pixels for 4-D inputs with C in {1, 3, 4}
    # (UG Table 5-2 gives it in pixels of int8; vendor .rknn files store 8 px for float16 where
    # int8 gets 16, i.e. the same bytes: docs/vendor-rknn.md "Width alignment").
    width_align_bytes: int
    calls: frozenset[str]
    queries: frozenset[str]
    runtime_library: str = "librknnrt.so"
    # Usable SRAM in bytes (UG 5.7: RK3588 1 MB, 956 KB usable); 0 = none.
    sram_bytes: int = 0
    # Valid rknn_core_mask values (RT rknn_set_core_mask); empty = the call fails.
    core_masks: frozenset[int] = field(default_factory=frozenset)
    matmul: bool = False
    # rknn_matmul_api.h facts; None where the matmul API does not exist.
    matmul_facts: MatmulFacts | None = None
    # Cost model of the per-layer perf table (core/board/perf.py, docs/device.md): the NPU's peak
    # int8 throughput over all its cores in TOPS, and the DDR bandwidth in GB/s. Sources in the
    # table below; 0 = unknown (no estimate is printed).
    npu_tops: float = 0.0
    ddr_gbps: float = 0.0

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def npu_cores(self) -> int:
        return self.target.npu_cores

    @property
    def dynamic_shapes(self) -> bool:
        return self.target.dynamic_shapes

    @property
    def float_models(self) -> bool:
        """Whether unquantised models run here (the vendor refuses them on rv110x)."""
        return self.target.float_models

    def supports(self, call: str) -> bool:
        return call in self.calls

    def c2_for(self, dtype: str) -> int:
        """C2 for `dtype`; float32 (an rknnrt extension) keeps the platform's bytes per block."""
        if dtype in self.c2:
            return self.c2[dtype]
        block_bytes = self.c2.get("int8") or 2 * self.c2["float16"]
        return max(1, block_bytes // 4)


_C2_16B = {"int8": 16, "float16": 8, "int16": 8}  # UG15/UG Table 5-1: RK3588 row
_C2_8B = {"int8": 8, "float16": 4, "int16": 4}  # UG15/UG Table 5-1: RK3566/RK3568 row
_MASKS_3 = frozenset({0, 1, 2, 4, 3, 7, 0xFFFF})  # AUTO, 0, 1, 2, 0_1, 0_1_2, ALL
_MASKS_2 = frozenset({0, 1, 2, 3, 0xFFFF})  # AUTO, 0, 1, 0_1, ALL

# UG Table 3-6, read row by row from the extracted text (facts §5.11). The 7th row's lone
# INT8_MM_INT4_TO_INT32 goes to RK3576, the chip of mixed-type inputs (UG Table 3-5 note).
_MM_G1_TYPES = frozenset({"RKNN_INT8_MM_INT8_TO_INT32", "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32"})
_MM_RK3588_TYPES = frozenset(
    {"RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16", "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32",
     "RKNN_INT8_MM_INT8_TO_INT32", "RKNN_INT8_MM_INT8_TO_FLOAT32", "RKNN_INT8_MM_INT8_TO_INT8",
     "RKNN_INT4_MM_INT4_TO_INT16"}
)  # fmt: skip
_MM_RK3576_TYPES = frozenset(
    {"RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16", "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32",
     "RKNN_INT8_MM_INT8_TO_INT32", "RKNN_FLOAT16_MM_INT8_TO_FLOAT32",
     "RKNN_FLOAT16_MM_INT4_TO_FLOAT16", "RKNN_FLOAT16_MM_INT4_TO_FLOAT32",
     "RKNN_INT8_MM_INT4_TO_INT32",
     # Not in any table (facts §2, §5.11): the other mixed types of the header, given to the
     # mixed-type chip by inference (unverified).
     "RKNN_FLOAT16_MM_INT8_TO_FLOAT16", "RKNN_FLOAT16_MM_INT4_TO_BFLOAT16",
     "RKNN_INT8_MM_INT4_TO_FLOAT16"}
)  # fmt: skip
_MM_C_SUB = {"int32": 4, "float32": 4, "int16": 8, "int8": 16, "float16": 8, "bfloat16": 8}
_MM_16B = MatmulFacts(  # UG Table 3-5, RK3576/RK3588 columns (identical)
    types=frozenset(),
    a_sub={"int4": 32, "int8": 16, "float16": 8},
    b_sub={"int4": (64, 32), "int8": (32, 32), "float16": (16, 32)},
    c_sub=_MM_C_SUB, k_max=None, n_max={"int4": 8192, "int8": 4096, "float16": 4096},
)  # fmt: skip
_MM_RK3588 = replace(_MM_16B, types=_MM_RK3588_TYPES, k_segment=8192)
_MM_RK3576 = replace(_MM_16B, types=_MM_RK3576_TYPES, k_segment=4096,
                     n_max={"int8": 4096, "float16": 4096})  # fmt: skip
_MM_RK3562 = MatmulFacts(  # UG Table 3-5, RK3562 column; H alignments equal these B blocks
    types=_MM_G1_TYPES, a_sub={"int8": 16, "float16": 8},
    b_sub={"int8": (16, 32), "float16": (8, 32)}, c_sub=_MM_C_SUB, k_max=10240,
    n_max={"int8": 4096, "float16": 4096},
)  # fmt: skip
_MM_RK3566 = replace(  # UG Table 3-5, RK3566/RK3568 column; no TP_NORM (UG 3.5.4.1)
    _MM_RK3562, a_sub={"int8": 8, "float16": 4}, b_sub={"int8": (16, 32), "float16": (8, 16)},
    tp_norm=False,
)  # fmt: skip
# RV1126B: no table lists it; shapes as RK3562. Its runtime refuses INT8_MM_INT8_TO_INT32
# ("unsupported matmul dtype : RKNN_INT8_MM_INT8_TO_INT32 this platform",
# airockchip/rknn-toolkit2#567), leaving FLOAT16_MM_FLOAT16_TO_FLOAT32 (unverified).
_MM_RV1126B = replace(_MM_RK3562, types=frozenset({"RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32"}))

# Cost-model numbers (npu_tops, ddr_gbps). RK3588: 3 cores x 2 TOPS (RK3588 datasheet; the TRM's
# 1024 int8 / 512 fp16 MACs per cycle per core, as quoted by jas-hacks.blogspot.com, "RK3588 -
# Reverse engineering the RKNN", 2024-02); 4 x 16-bit LPDDR4X/LPDDR5, "up to 34GB/s"
# (blog.csdn.net/weixin_43199439/article/details/139720663). RK3576: 6 TOPS over 2 cores
# (RK3576 datasheet figure repeated by every spec sheet); its 32-bit LPDDR4X/LPDDR5 at 4266 MT/s
# gives 17 GB/s (unverified). RK3568: "up to 1TOPS" (RK3568 datasheet §1.2.2, text at
# mbb.eet-china.com/tags/17067.html). RK3566 0.8 TOPS, RK3562 1 TOPS, RV1126B 3 TOPS: Rockchip's
# product pages, not in the stored corpus (unverified). RK356x/RK3562/RV1126B DDR: 32-bit at
# 3200 MT/s = 12.8 GB/s (unverified). The mini-runtime chips and RK2118 have no PERF queries
# (RT Table 4-2), so they carry no numbers.
_T = targets.TARGETS
PLATFORMS: dict[str, Platform] = {
    p.name: p
    for p in (
        Platform(_T["rk3588"], _C2_16B, 16, _G2, _QUERIES_FULL, sram_bytes=956 * 1024,
                 core_masks=_MASKS_3, matmul=True,
                 matmul_facts=_MM_RK3588, npu_tops=6.0, ddr_gbps=34.0),
        Platform(_T["rk3576"], _C2_16B, 16, _G2, _QUERIES_FULL, core_masks=_MASKS_2,
                 matmul=True, matmul_facts=_MM_RK3576, npu_tops=6.0, ddr_gbps=17.0),
        Platform(_T["rk3566"], _C2_8B, 8, _G1, _QUERIES_FULL, matmul=True,
                 matmul_facts=_MM_RK3566, npu_tops=0.8, ddr_gbps=12.8),
        Platform(_T["rk3568"], _C2_8B, 8, _G1, _QUERIES_FULL, matmul=True,
                 matmul_facts=_MM_RK3566, npu_tops=1.0, ddr_gbps=12.8),
        Platform(_T["rk3562"], _C2_16B, 16, _G1, _QUERIES_FULL, matmul=True,
                 matmul_facts=_MM_RK3562, npu_tops=1.0, ddr_gbps=12.8),
        # RV1126B: grouped with the single-core G1 chips in RT V2.3.2; C2 unverified.
        Platform(_T["rv1126b"], _C2_16B, 16, _G1, _QUERIES_FULL, matmul=True,
                 matmul_facts=_MM_RV1126B, npu_tops=3.0, ddr_gbps=12.8),
        Platform(_T["rv1103"], _C2_16B, 16, _G3, _QUERIES_MINI, "librknnmrt.so"),
        Platform(_T["rv1106"], _C2_16B, 16, _G3, _QUERIES_MINI, "librknnmrt.so"),
        # RV1103B/RV1106B: int8 C2 8 and 16-byte input rows, as their vendor files store and the
        # toolkit's log allocates them (toolkit 2.5.0, tests/vendor/fixtures_mini)
        Platform(_T["rv1103b"], {"int8": 8}, 16, _G3, _QUERIES_MINI, "librknnmrt.so"),
        Platform(_T["rv1106b"], {"int8": 8}, 16, _G3, _QUERIES_MINI, "librknnmrt.so"),
        # RK2118: UG Table 5-1 gives float16 C2 4 and no int8 entry (unverified).
        Platform(_T["rk2118"], {"float16": 4}, 8, _G4, _QUERIES_MINI),
    )
}  # fmt: skip

assert set(PLATFORMS) == set(targets.NAMES)


def get(name: str) -> Platform:
    """The profile for `name` (case-insensitive, vendor aliases accepted); KeyError if unknown."""
    key = targets.canonical(name)
    if key is None:
        raise KeyError(name)
    return PLATFORMS[key]
