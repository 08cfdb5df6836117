"""Constants and enum values of the RKNN Runtime C API (RKNPU2 V2.3.2 ABI baseline).

Every name and value is an exact copy of the public headers (see
``shared/spec/rknn_api_facts.md`` section 2):

- **H** -- ``rknn_api.h``
- **M** -- ``rknn_matmul_api.h``
- **C** -- ``rknn_custom_op.h``

C enums are plain 4-byte ``int`` values; here they are module-level ``int`` constants.
Misspellings in the headers (``INCOMPATILE``, ``"UNKNOW"``) are kept on purpose.
The header's inline helpers ``get_type_string``, ``get_qnt_type_string``,
``get_format_string`` (H) and ``get_matmul_type_string`` (M) are provided as functions.
"""

from __future__ import annotations

__all__ = [
    "RKNN_FLAG_PRIOR_HIGH",
    "RKNN_FLAG_PRIOR_MEDIUM",
    "RKNN_FLAG_PRIOR_LOW",
    "RKNN_FLAG_ASYNC_MASK",
    "RKNN_FLAG_COLLECT_PERF_MASK",
    "RKNN_FLAG_MEM_ALLOC_OUTSIDE",
    "RKNN_FLAG_SHARE_WEIGHT_MEM",
    "RKNN_FLAG_FENCE_IN_OUTSIDE",
    "RKNN_FLAG_FENCE_OUT_OUTSIDE",
    "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY",
    "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE",
    "RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU",
    "RKNN_FLAG_ENABLE_SRAM",
    "RKNN_FLAG_SHARE_SRAM",
    "RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY",
    "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE",
    "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE",
    "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY",
    "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT",
    "RKNN_SUCC",
    "RKNN_ERR_FAIL",
    "RKNN_ERR_TIMEOUT",
    "RKNN_ERR_DEVICE_UNAVAILABLE",
    "RKNN_ERR_MALLOC_FAIL",
    "RKNN_ERR_PARAM_INVALID",
    "RKNN_ERR_MODEL_INVALID",
    "RKNN_ERR_CTX_INVALID",
    "RKNN_ERR_INPUT_INVALID",
    "RKNN_ERR_OUTPUT_INVALID",
    "RKNN_ERR_DEVICE_UNMATCH",
    "RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL",
    "RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION",
    "RKNN_ERR_TARGET_PLATFORM_UNMATCH",
    "RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE",
    "RKNN_MAX_DIMS",
    "RKNN_MAX_NUM_CHANNEL",
    "RKNN_MAX_NAME_LEN",
    "RKNN_MAX_DYNAMIC_SHAPE_NUM",
    "RKNN_QUERY_IN_OUT_NUM",
    "RKNN_QUERY_INPUT_ATTR",
    "RKNN_QUERY_OUTPUT_ATTR",
    "RKNN_QUERY_PERF_DETAIL",
    "RKNN_QUERY_PERF_RUN",
    "RKNN_QUERY_SDK_VERSION",
    "RKNN_QUERY_MEM_SIZE",
    "RKNN_QUERY_CUSTOM_STRING",
    "RKNN_QUERY_NATIVE_INPUT_ATTR",
    "RKNN_QUERY_NATIVE_OUTPUT_ATTR",
    "RKNN_QUERY_NATIVE_NC1HWC2_INPUT_ATTR",
    "RKNN_QUERY_NATIVE_NC1HWC2_OUTPUT_ATTR",
    "RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR",
    "RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR",
    "RKNN_QUERY_DEVICE_MEM_INFO",
    "RKNN_QUERY_INPUT_DYNAMIC_RANGE",
    "RKNN_QUERY_CURRENT_INPUT_ATTR",
    "RKNN_QUERY_CURRENT_OUTPUT_ATTR",
    "RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR",
    "RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR",
    "RKNN_QUERY_CMD_MAX",
    "RKNN_TENSOR_FLOAT32",
    "RKNN_TENSOR_FLOAT16",
    "RKNN_TENSOR_INT8",
    "RKNN_TENSOR_UINT8",
    "RKNN_TENSOR_INT16",
    "RKNN_TENSOR_UINT16",
    "RKNN_TENSOR_INT32",
    "RKNN_TENSOR_UINT32",
    "RKNN_TENSOR_INT64",
    "RKNN_TENSOR_BOOL",
    "RKNN_TENSOR_INT4",
    "RKNN_TENSOR_BFLOAT16",
    "RKNN_TENSOR_TYPE_MAX",
    "RKNN_TENSOR_QNT_NONE",
    "RKNN_TENSOR_QNT_DFP",
    "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC",
    "RKNN_TENSOR_QNT_MAX",
    "RKNN_TENSOR_NCHW",
    "RKNN_TENSOR_NHWC",
    "RKNN_TENSOR_NC1HWC2",
    "RKNN_TENSOR_UNDEFINED",
    "RKNN_TENSOR_FORMAT_MAX",
    "RKNN_NPU_CORE_AUTO",
    "RKNN_NPU_CORE_0",
    "RKNN_NPU_CORE_1",
    "RKNN_NPU_CORE_2",
    "RKNN_NPU_CORE_0_1",
    "RKNN_NPU_CORE_0_1_2",
    "RKNN_NPU_CORE_ALL",
    "RKNN_NPU_CORE_UNDEFINED",
    "RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE",
    "RKNN_TENSOR_MEMORY_FLAGS_FROM_FD",
    "RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS",
    "RKNN_TENSOR_MEMORY_FLAGS_UNKNOWN",
    "RKNN_FLAG_MEMORY_FLAGS_DEFAULT",
    "RKNN_FLAG_MEMORY_CACHEABLE",
    "RKNN_FLAG_MEMORY_NON_CACHEABLE",
    "RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM",
    "RKNN_MEMORY_SYNC_TO_DEVICE",
    "RKNN_MEMORY_SYNC_FROM_DEVICE",
    "RKNN_MEMORY_SYNC_BIDIRECTIONAL",
    "RKNN_QUANT_TYPE_PER_LAYER_SYM",
    "RKNN_QUANT_TYPE_PER_LAYER_ASYM",
    "RKNN_QUANT_TYPE_PER_CHANNEL_SYM",
    "RKNN_QUANT_TYPE_PER_CHANNEL_ASYM",
    "RKNN_QUANT_TYPE_PER_GROUP_SYM",
    "RKNN_QUANT_TYPE_PER_GROUP_ASYM",
    "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32",
    "RKNN_INT8_MM_INT8_TO_INT32",
    "RKNN_INT8_MM_INT8_TO_INT8",
    "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16",
    "RKNN_FLOAT16_MM_INT8_TO_FLOAT32",
    "RKNN_FLOAT16_MM_INT8_TO_FLOAT16",
    "RKNN_FLOAT16_MM_INT4_TO_FLOAT32",
    "RKNN_FLOAT16_MM_INT4_TO_FLOAT16",
    "RKNN_INT8_MM_INT8_TO_FLOAT32",
    "RKNN_INT4_MM_INT4_TO_INT16",
    "RKNN_INT8_MM_INT4_TO_INT32",
    "RKNN_FLOAT16_MM_INT4_TO_BFLOAT16",
    "RKNN_INT8_MM_INT4_TO_FLOAT16",
    "RKNN_MM_LAYOUT_NORM",
    "RKNN_MM_LAYOUT_NATIVE",
    "RKNN_MM_LAYOUT_TP_NORM",
    "RKNN_CUSTOM_OP_MAX_STR_LEN",
    "RKNN_CUSTOM_OP_MAX_VALUE_LEN",
    "RKNN_TARGET_TYPE_CPU",
    "RKNN_TARGET_TYPE_GPU",
    "RKNN_TARGET_TYPE_MAX",
    "get_type_string",
    "get_qnt_type_string",
    "get_format_string",
    "get_matmul_type_string",
]

# --------------------------------------------------------------------------------------------
# rknn_init flags (H)
# --------------------------------------------------------------------------------------------
RKNN_FLAG_PRIOR_HIGH = 0x00000000
RKNN_FLAG_PRIOR_MEDIUM = 0x00000001
RKNN_FLAG_PRIOR_LOW = 0x00000002
RKNN_FLAG_ASYNC_MASK = 0x00000004
RKNN_FLAG_COLLECT_PERF_MASK = 0x00000008
RKNN_FLAG_MEM_ALLOC_OUTSIDE = 0x00000010
RKNN_FLAG_SHARE_WEIGHT_MEM = 0x00000020
RKNN_FLAG_FENCE_IN_OUTSIDE = 0x00000040
RKNN_FLAG_FENCE_OUT_OUTSIDE = 0x00000080
RKNN_FLAG_COLLECT_MODEL_INFO_ONLY = 0x00000100
RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE = 0x00000200
RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU = 0x00000400
RKNN_FLAG_ENABLE_SRAM = 0x00000800
RKNN_FLAG_SHARE_SRAM = 0x00001000
RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY = 0x00002000
RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE = 0x00004000
RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE = 0x00008000
RKNN_FLAG_MODEL_BUFFER_ZERO_COPY = 0x00010000
# An allocation flag for rknn_create_mem2() (no context), defined among the init flags in H.
RKNN_MEM_FLAG_ALLOC_NO_CONTEXT = 0x00020000

# --------------------------------------------------------------------------------------------
# Error codes (H; the -14 warning is from C)
# --------------------------------------------------------------------------------------------
RKNN_SUCC = 0
RKNN_ERR_FAIL = -1
RKNN_ERR_TIMEOUT = -2
RKNN_ERR_DEVICE_UNAVAILABLE = -3
RKNN_ERR_MALLOC_FAIL = -4
RKNN_ERR_PARAM_INVALID = -5
RKNN_ERR_MODEL_INVALID = -6
RKNN_ERR_CTX_INVALID = -7
RKNN_ERR_INPUT_INVALID = -8
RKNN_ERR_OUTPUT_INVALID = -9
RKNN_ERR_DEVICE_UNMATCH = -10
RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL = -11
RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION = -12
RKNN_ERR_TARGET_PLATFORM_UNMATCH = -13
RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE = -14  # C

# --------------------------------------------------------------------------------------------
# Limits (H)
# --------------------------------------------------------------------------------------------
RKNN_MAX_DIMS = 16
RKNN_MAX_NUM_CHANNEL = 15
RKNN_MAX_NAME_LEN = 256
RKNN_MAX_DYNAMIC_SHAPE_NUM = 512

# --------------------------------------------------------------------------------------------
# rknn_query_cmd (H)
# --------------------------------------------------------------------------------------------
RKNN_QUERY_IN_OUT_NUM = 0
RKNN_QUERY_INPUT_ATTR = 1
RKNN_QUERY_OUTPUT_ATTR = 2
RKNN_QUERY_PERF_DETAIL = 3
RKNN_QUERY_PERF_RUN = 4
RKNN_QUERY_SDK_VERSION = 5
RKNN_QUERY_MEM_SIZE = 6
RKNN_QUERY_CUSTOM_STRING = 7
RKNN_QUERY_NATIVE_INPUT_ATTR = 8
RKNN_QUERY_NATIVE_OUTPUT_ATTR = 9
RKNN_QUERY_NATIVE_NC1HWC2_INPUT_ATTR = 8  # alias of RKNN_QUERY_NATIVE_INPUT_ATTR
RKNN_QUERY_NATIVE_NC1HWC2_OUTPUT_ATTR = 9  # alias of RKNN_QUERY_NATIVE_OUTPUT_ATTR
RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR = 10
RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR = 11
RKNN_QUERY_DEVICE_MEM_INFO = 12
RKNN_QUERY_INPUT_DYNAMIC_RANGE = 13
RKNN_QUERY_CURRENT_INPUT_ATTR = 14
RKNN_QUERY_CURRENT_OUTPUT_ATTR = 15
RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR = 16
RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR = 17
RKNN_QUERY_CMD_MAX = 18

# --------------------------------------------------------------------------------------------
# rknn_tensor_type (H)
# --------------------------------------------------------------------------------------------
RKNN_TENSOR_FLOAT32 = 0
RKNN_TENSOR_FLOAT16 = 1
RKNN_TENSOR_INT8 = 2
RKNN_TENSOR_UINT8 = 3
RKNN_TENSOR_INT16 = 4
RKNN_TENSOR_UINT16 = 5
RKNN_TENSOR_INT32 = 6
RKNN_TENSOR_UINT32 = 7
RKNN_TENSOR_INT64 = 8
RKNN_TENSOR_BOOL = 9
RKNN_TENSOR_INT4 = 10
RKNN_TENSOR_BFLOAT16 = 11
RKNN_TENSOR_TYPE_MAX = 12

# --------------------------------------------------------------------------------------------
# rknn_tensor_qnt_type (H)
# --------------------------------------------------------------------------------------------
RKNN_TENSOR_QNT_NONE = 0
RKNN_TENSOR_QNT_DFP = 1
RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC = 2
RKNN_TENSOR_QNT_MAX = 3

# --------------------------------------------------------------------------------------------
# rknn_tensor_format (H)
# --------------------------------------------------------------------------------------------
RKNN_TENSOR_NCHW = 0
RKNN_TENSOR_NHWC = 1
RKNN_TENSOR_NC1HWC2 = 2
RKNN_TENSOR_UNDEFINED = 3
RKNN_TENSOR_FORMAT_MAX = 4

# --------------------------------------------------------------------------------------------
# rknn_core_mask (H)
# --------------------------------------------------------------------------------------------
RKNN_NPU_CORE_AUTO = 0
RKNN_NPU_CORE_0 = 1
RKNN_NPU_CORE_1 = 2
RKNN_NPU_CORE_2 = 4
RKNN_NPU_CORE_0_1 = RKNN_NPU_CORE_0 | RKNN_NPU_CORE_1  # 3
RKNN_NPU_CORE_0_1_2 = RKNN_NPU_CORE_0_1 | RKNN_NPU_CORE_2  # 7
RKNN_NPU_CORE_ALL = 0xFFFF
RKNN_NPU_CORE_UNDEFINED = 0x10000  # implicit successor of RKNN_NPU_CORE_ALL

# --------------------------------------------------------------------------------------------
# rknn_tensor_mem_flags (H)
# --------------------------------------------------------------------------------------------
RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE = 1
RKNN_TENSOR_MEMORY_FLAGS_FROM_FD = 2
RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS = 3
RKNN_TENSOR_MEMORY_FLAGS_UNKNOWN = 4

# --------------------------------------------------------------------------------------------
# rknn_mem_alloc_flags (H)
# --------------------------------------------------------------------------------------------
RKNN_FLAG_MEMORY_FLAGS_DEFAULT = 0 << 0  # same as RKNN_FLAG_MEMORY_CACHEABLE
RKNN_FLAG_MEMORY_CACHEABLE = 1 << 0
RKNN_FLAG_MEMORY_NON_CACHEABLE = 1 << 1
RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM = 1 << 2

# --------------------------------------------------------------------------------------------
# rknn_mem_sync_mode (H)
# --------------------------------------------------------------------------------------------
RKNN_MEMORY_SYNC_TO_DEVICE = 0x1
RKNN_MEMORY_SYNC_FROM_DEVICE = 0x2
RKNN_MEMORY_SYNC_BIDIRECTIONAL = RKNN_MEMORY_SYNC_TO_DEVICE | RKNN_MEMORY_SYNC_FROM_DEVICE  # 0x3

# --------------------------------------------------------------------------------------------
# rknn_matmul_quant_type (M)
# --------------------------------------------------------------------------------------------
RKNN_QUANT_TYPE_PER_LAYER_SYM = 0
RKNN_QUANT_TYPE_PER_LAYER_ASYM = 1
RKNN_QUANT_TYPE_PER_CHANNEL_SYM = 2
RKNN_QUANT_TYPE_PER_CHANNEL_ASYM = 3
RKNN_QUANT_TYPE_PER_GROUP_SYM = 4
RKNN_QUANT_TYPE_PER_GROUP_ASYM = 5

# --------------------------------------------------------------------------------------------
# rknn_matmul_type (M); 13 and 14 are unused
# --------------------------------------------------------------------------------------------
RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32 = 1
RKNN_INT8_MM_INT8_TO_INT32 = 2
RKNN_INT8_MM_INT8_TO_INT8 = 3
RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16 = 4
RKNN_FLOAT16_MM_INT8_TO_FLOAT32 = 5
RKNN_FLOAT16_MM_INT8_TO_FLOAT16 = 6
RKNN_FLOAT16_MM_INT4_TO_FLOAT32 = 7
RKNN_FLOAT16_MM_INT4_TO_FLOAT16 = 8
RKNN_INT8_MM_INT8_TO_FLOAT32 = 9
RKNN_INT4_MM_INT4_TO_INT16 = 10
RKNN_INT8_MM_INT4_TO_INT32 = 11
RKNN_FLOAT16_MM_INT4_TO_BFLOAT16 = 12
RKNN_INT8_MM_INT4_TO_FLOAT16 = 15

# --------------------------------------------------------------------------------------------
# rknn_matmul_layout (M, anonymous enum)
# --------------------------------------------------------------------------------------------
RKNN_MM_LAYOUT_NORM = 0
RKNN_MM_LAYOUT_NATIVE = 1
RKNN_MM_LAYOUT_TP_NORM = 2

# --------------------------------------------------------------------------------------------
# Custom operators (C)
# --------------------------------------------------------------------------------------------
RKNN_CUSTOM_OP_MAX_STR_LEN = 64  # not used by any struct
RKNN_CUSTOM_OP_MAX_VALUE_LEN = 32  # not used by any struct

# rknn_target_type (C)
RKNN_TARGET_TYPE_CPU = 1
RKNN_TARGET_TYPE_GPU = 2
RKNN_TARGET_TYPE_MAX = 3

# --------------------------------------------------------------------------------------------
# Header helper functions (H, M). Unknown values give "UNKNOW", exactly as in the headers.
# --------------------------------------------------------------------------------------------
_UNKNOW = "UNKNOW"

_TYPE_STRINGS: dict[int, str] = {
    RKNN_TENSOR_FLOAT32: "FP32",
    RKNN_TENSOR_FLOAT16: "FP16",
    RKNN_TENSOR_INT8: "INT8",
    RKNN_TENSOR_UINT8: "UINT8",
    RKNN_TENSOR_INT16: "INT16",
    RKNN_TENSOR_UINT16: "UINT16",
    RKNN_TENSOR_INT32: "INT32",
    RKNN_TENSOR_UINT32: "UINT32",
    RKNN_TENSOR_INT64: "INT64",
    RKNN_TENSOR_BOOL: "BOOL",
    RKNN_TENSOR_INT4: "INT4",
    RKNN_TENSOR_BFLOAT16: "BF16",
}

_QNT_TYPE_STRINGS: dict[int, str] = {
    RKNN_TENSOR_QNT_NONE: "NONE",
    RKNN_TENSOR_QNT_DFP: "DFP",
    RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC: "AFFINE",
}

_FORMAT_STRINGS: dict[int, str] = {
    RKNN_TENSOR_NCHW: "NCHW",
    RKNN_TENSOR_NHWC: "NHWC",
    RKNN_TENSOR_NC1HWC2: "NC1HWC2",
    RKNN_TENSOR_UNDEFINED: "UNDEFINED",
}

# M's switch has no case for RKNN_INT8_MM_INT4_TO_FLOAT16 (15), so 15 maps to "UNKNOW".
_MATMUL_TYPE_STRINGS: dict[int, str] = {
    RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32: "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32",
    RKNN_INT8_MM_INT8_TO_INT32: "RKNN_INT8_MM_INT8_TO_INT32",
    RKNN_INT8_MM_INT8_TO_INT8: "RKNN_INT8_MM_INT8_TO_INT8",
    RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16: "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16",
    RKNN_FLOAT16_MM_INT8_TO_FLOAT32: "RKNN_FLOAT16_MM_INT8_TO_FLOAT32",
    RKNN_FLOAT16_MM_INT8_TO_FLOAT16: "RKNN_FLOAT16_MM_INT8_TO_FLOAT16",
    RKNN_FLOAT16_MM_INT4_TO_FLOAT32: "RKNN_FLOAT16_MM_INT4_TO_FLOAT32",
    RKNN_FLOAT16_MM_INT4_TO_FLOAT16: "RKNN_FLOAT16_MM_INT4_TO_FLOAT16",
    RKNN_INT8_MM_INT8_TO_FLOAT32: "RKNN_INT8_MM_INT8_TO_FLOAT32",
    RKNN_INT4_MM_INT4_TO_INT16: "RKNN_INT4_MM_INT4_TO_INT16",
    RKNN_INT8_MM_INT4_TO_INT32: "RKNN_INT8_MM_INT4_TO_INT32",
    RKNN_FLOAT16_MM_INT4_TO_BFLOAT16: "RKNN_FLOAT16_MM_INT4_TO_BFLOAT16",
}


def get_type_string(t: int) -> str:
    """Return the short name of an ``rknn_tensor_type`` ("FP32", "BF16", ...) or "UNKNOW"."""
    return _TYPE_STRINGS.get(int(t), _UNKNOW)


def get_qnt_type_string(t: int) -> str:
    """Return "NONE", "DFP" or "AFFINE" for an ``rknn_tensor_qnt_type``, else "UNKNOW"."""
    return _QNT_TYPE_STRINGS.get(int(t), _UNKNOW)


def get_format_string(f: int) -> str:
    """Return "NCHW", "NHWC", "NC1HWC2" or "UNDEFINED" for an ``rknn_tensor_format``."""
    return _FORMAT_STRINGS.get(int(f), _UNKNOW)


def get_matmul_type_string(t: int) -> str:
    """Return the enum name of an ``rknn_matmul_type``; 15 and unknown values give "UNKNOW"."""
    return _MATMUL_TYPE_STRINGS.get(int(t), _UNKNOW)
