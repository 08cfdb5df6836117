"""Value checks of rknnrt.api.constants against rknn_api_facts.md §2 (copied here as data)."""

from __future__ import annotations

import pytest

from rknnrt.api import constants as K

EXPECTED: dict[str, int] = {
    # limits (H)
    "RKNN_MAX_DIMS": 16,
    "RKNN_MAX_NUM_CHANNEL": 15,
    "RKNN_MAX_NAME_LEN": 256,
    "RKNN_MAX_DYNAMIC_SHAPE_NUM": 512,
    # rknn_init flags (H)
    "RKNN_FLAG_PRIOR_HIGH": 0x00000000,
    "RKNN_FLAG_PRIOR_MEDIUM": 0x00000001,
    "RKNN_FLAG_PRIOR_LOW": 0x00000002,
    "RKNN_FLAG_ASYNC_MASK": 0x00000004,
    "RKNN_FLAG_COLLECT_PERF_MASK": 0x00000008,
    "RKNN_FLAG_MEM_ALLOC_OUTSIDE": 0x00000010,
    "RKNN_FLAG_SHARE_WEIGHT_MEM": 0x00000020,
    "RKNN_FLAG_FENCE_IN_OUTSIDE": 0x00000040,
    "RKNN_FLAG_FENCE_OUT_OUTSIDE": 0x00000080,
    "RKNN_FLAG_COLLECT_MODEL_INFO_ONLY": 0x00000100,
    "RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE": 0x00000200,
    "RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU": 0x00000400,
    "RKNN_FLAG_ENABLE_SRAM": 0x00000800,
    "RKNN_FLAG_SHARE_SRAM": 0x00001000,
    "RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY": 0x00002000,
    "RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE": 0x00004000,
    "RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE": 0x00008000,
    "RKNN_FLAG_MODEL_BUFFER_ZERO_COPY": 0x00010000,
    "RKNN_MEM_FLAG_ALLOC_NO_CONTEXT": 0x00020000,
    # error codes (H, C)
    "RKNN_SUCC": 0,
    "RKNN_ERR_FAIL": -1,
    "RKNN_ERR_TIMEOUT": -2,
    "RKNN_ERR_DEVICE_UNAVAILABLE": -3,
    "RKNN_ERR_MALLOC_FAIL": -4,
    "RKNN_ERR_PARAM_INVALID": -5,
    "RKNN_ERR_MODEL_INVALID": -6,
    "RKNN_ERR_CTX_INVALID": -7,
    "RKNN_ERR_INPUT_INVALID": -8,
    "RKNN_ERR_OUTPUT_INVALID": -9,
    "RKNN_ERR_DEVICE_UNMATCH": -10,
    "RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL": -11,
    "RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION": -12,
    "RKNN_ERR_TARGET_PLATFORM_UNMATCH": -13,
    "RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE": -14,
    # rknn_query_cmd (H)
    "RKNN_QUERY_IN_OUT_NUM": 0,
    "RKNN_QUERY_INPUT_ATTR": 1,
    "RKNN_QUERY_OUTPUT_ATTR": 2,
    "RKNN_QUERY_PERF_DETAIL": 3,
    "RKNN_QUERY_PERF_RUN": 4,
    "RKNN_QUERY_SDK_VERSION": 5,
    "RKNN_QUERY_MEM_SIZE": 6,
    "RKNN_QUERY_CUSTOM_STRING": 7,
    "RKNN_QUERY_NATIVE_INPUT_ATTR": 8,
    "RKNN_QUERY_NATIVE_OUTPUT_ATTR": 9,
    "RKNN_QUERY_NATIVE_NC1HWC2_INPUT_ATTR": 8,
    "RKNN_QUERY_NATIVE_NC1HWC2_OUTPUT_ATTR": 9,
    "RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR": 10,
    "RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR": 11,
    "RKNN_QUERY_DEVICE_MEM_INFO": 12,
    "RKNN_QUERY_INPUT_DYNAMIC_RANGE": 13,
    "RKNN_QUERY_CURRENT_INPUT_ATTR": 14,
    "RKNN_QUERY_CURRENT_OUTPUT_ATTR": 15,
    "RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR": 16,
    "RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR": 17,
    "RKNN_QUERY_CMD_MAX": 18,
    # rknn_tensor_type (H)
    "RKNN_TENSOR_FLOAT32": 0,
    "RKNN_TENSOR_FLOAT16": 1,
    "RKNN_TENSOR_INT8": 2,
    "RKNN_TENSOR_UINT8": 3,
    "RKNN_TENSOR_INT16": 4,
    "RKNN_TENSOR_UINT16": 5,
    "RKNN_TENSOR_INT32": 6,
    "RKNN_TENSOR_UINT32": 7,
    "RKNN_TENSOR_INT64": 8,
    "RKNN_TENSOR_BOOL": 9,
    "RKNN_TENSOR_INT4": 10,
    "RKNN_TENSOR_BFLOAT16": 11,
    "RKNN_TENSOR_TYPE_MAX": 12,
    # rknn_tensor_qnt_type (H)
    "RKNN_TENSOR_QNT_NONE": 0,
    "RKNN_TENSOR_QNT_DFP": 1,
    "RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC": 2,
    "RKNN_TENSOR_QNT_MAX": 3,
    # rknn_tensor_format (H)
    "RKNN_TENSOR_NCHW": 0,
    "RKNN_TENSOR_NHWC": 1,
    "RKNN_TENSOR_NC1HWC2": 2,
    "RKNN_TENSOR_UNDEFINED": 3,
    "RKNN_TENSOR_FORMAT_MAX": 4,
    # rknn_core_mask (H)
    "RKNN_NPU_CORE_AUTO": 0,
    "RKNN_NPU_CORE_0": 1,
    "RKNN_NPU_CORE_1": 2,
    "RKNN_NPU_CORE_2": 4,
    "RKNN_NPU_CORE_0_1": 3,
    "RKNN_NPU_CORE_0_1_2": 7,
    "RKNN_NPU_CORE_ALL": 0xFFFF,
    "RKNN_NPU_CORE_UNDEFINED": 0x10000,
    # rknn_tensor_mem_flags (H)
    "RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE": 1,
    "RKNN_TENSOR_MEMORY_FLAGS_FROM_FD": 2,
    "RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS": 3,
    "RKNN_TENSOR_MEMORY_FLAGS_UNKNOWN": 4,
    # rknn_mem_alloc_flags (H)
    "RKNN_FLAG_MEMORY_FLAGS_DEFAULT": 0,
    "RKNN_FLAG_MEMORY_CACHEABLE": 1,
    "RKNN_FLAG_MEMORY_NON_CACHEABLE": 2,
    "RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM": 4,
    # rknn_mem_sync_mode (H)
    "RKNN_MEMORY_SYNC_TO_DEVICE": 0x1,
    "RKNN_MEMORY_SYNC_FROM_DEVICE": 0x2,
    "RKNN_MEMORY_SYNC_BIDIRECTIONAL": 0x3,
    # rknn_matmul_quant_type (M)
    "RKNN_QUANT_TYPE_PER_LAYER_SYM": 0,
    "RKNN_QUANT_TYPE_PER_LAYER_ASYM": 1,
    "RKNN_QUANT_TYPE_PER_CHANNEL_SYM": 2,
    "RKNN_QUANT_TYPE_PER_CHANNEL_ASYM": 3,
    "RKNN_QUANT_TYPE_PER_GROUP_SYM": 4,
    "RKNN_QUANT_TYPE_PER_GROUP_ASYM": 5,
    # rknn_matmul_type (M)
    "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32": 1,
    "RKNN_INT8_MM_INT8_TO_INT32": 2,
    "RKNN_INT8_MM_INT8_TO_INT8": 3,
    "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16": 4,
    "RKNN_FLOAT16_MM_INT8_TO_FLOAT32": 5,
    "RKNN_FLOAT16_MM_INT8_TO_FLOAT16": 6,
    "RKNN_FLOAT16_MM_INT4_TO_FLOAT32": 7,
    "RKNN_FLOAT16_MM_INT4_TO_FLOAT16": 8,
    "RKNN_INT8_MM_INT8_TO_FLOAT32": 9,
    "RKNN_INT4_MM_INT4_TO_INT16": 10,
    "RKNN_INT8_MM_INT4_TO_INT32": 11,
    "RKNN_FLOAT16_MM_INT4_TO_BFLOAT16": 12,
    "RKNN_INT8_MM_INT4_TO_FLOAT16": 15,
    # rknn_matmul_layout (M)
    "RKNN_MM_LAYOUT_NORM": 0,
    "RKNN_MM_LAYOUT_NATIVE": 1,
    "RKNN_MM_LAYOUT_TP_NORM": 2,
    # custom op (C)
    "RKNN_CUSTOM_OP_MAX_STR_LEN": 64,
    "RKNN_CUSTOM_OP_MAX_VALUE_LEN": 32,
    "RKNN_TARGET_TYPE_CPU": 1,
    "RKNN_TARGET_TYPE_GPU": 2,
    "RKNN_TARGET_TYPE_MAX": 3,
}

HELPERS = ("get_type_string", "get_qnt_type_string", "get_format_string", "get_matmul_type_string")

# (function, value, expected string) -- exact strings from the headers' inline helpers.
STRINGS: list[tuple[str, int, str]] = [
    ("get_type_string", 0, "FP32"),
    ("get_type_string", 1, "FP16"),
    ("get_type_string", 2, "INT8"),
    ("get_type_string", 3, "UINT8"),
    ("get_type_string", 4, "INT16"),
    ("get_type_string", 5, "UINT16"),
    ("get_type_string", 6, "INT32"),
    ("get_type_string", 7, "UINT32"),
    ("get_type_string", 8, "INT64"),
    ("get_type_string", 9, "BOOL"),
    ("get_type_string", 10, "INT4"),
    ("get_type_string", 11, "BF16"),
    ("get_type_string", 12, "UNKNOW"),  # RKNN_TENSOR_TYPE_MAX
    ("get_type_string", -1, "UNKNOW"),
    ("get_type_string", 999, "UNKNOW"),
    ("get_qnt_type_string", 0, "NONE"),
    ("get_qnt_type_string", 1, "DFP"),
    ("get_qnt_type_string", 2, "AFFINE"),
    ("get_qnt_type_string", 3, "UNKNOW"),  # RKNN_TENSOR_QNT_MAX
    ("get_qnt_type_string", -1, "UNKNOW"),
    ("get_format_string", 0, "NCHW"),
    ("get_format_string", 1, "NHWC"),
    ("get_format_string", 2, "NC1HWC2"),
    ("get_format_string", 3, "UNDEFINED"),
    ("get_format_string", 4, "UNKNOW"),  # RKNN_TENSOR_FORMAT_MAX
    ("get_format_string", -1, "UNKNOW"),
    ("get_matmul_type_string", 1, "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32"),
    ("get_matmul_type_string", 2, "RKNN_INT8_MM_INT8_TO_INT32"),
    ("get_matmul_type_string", 3, "RKNN_INT8_MM_INT8_TO_INT8"),
    ("get_matmul_type_string", 4, "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16"),
    ("get_matmul_type_string", 5, "RKNN_FLOAT16_MM_INT8_TO_FLOAT32"),
    ("get_matmul_type_string", 6, "RKNN_FLOAT16_MM_INT8_TO_FLOAT16"),
    ("get_matmul_type_string", 7, "RKNN_FLOAT16_MM_INT4_TO_FLOAT32"),
    ("get_matmul_type_string", 8, "RKNN_FLOAT16_MM_INT4_TO_FLOAT16"),
    ("get_matmul_type_string", 9, "RKNN_INT8_MM_INT8_TO_FLOAT32"),
    ("get_matmul_type_string", 10, "RKNN_INT4_MM_INT4_TO_INT16"),
    ("get_matmul_type_string", 11, "RKNN_INT8_MM_INT4_TO_INT32"),
    ("get_matmul_type_string", 12, "RKNN_FLOAT16_MM_INT4_TO_BFLOAT16"),
    ("get_matmul_type_string", 0, "UNKNOW"),
    ("get_matmul_type_string", 13, "UNKNOW"),
    ("get_matmul_type_string", 14, "UNKNOW"),
    ("get_matmul_type_string", 15, "UNKNOW"),  # no case for RKNN_INT8_MM_INT4_TO_FLOAT16 in M
    ("get_matmul_type_string", 16, "UNKNOW"),
]


@pytest.mark.parametrize(("name", "value"), sorted(EXPECTED.items()))
def test_constant_value(name: str, value: int) -> None:
    got = getattr(K, name)
    assert type(got) is int
    assert got == value


def test_no_unexpected_constants() -> None:
    declared = {n for n in dir(K) if n.startswith("RKNN_")}
    assert declared == set(EXPECTED)


def test_all_lists_public_names() -> None:
    assert len(K.__all__) == len(set(K.__all__))
    assert set(K.__all__) == set(EXPECTED) | set(HELPERS)


@pytest.mark.parametrize(("func", "value", "expected"), STRINGS)
def test_helper_strings(func: str, value: int, expected: str) -> None:
    assert getattr(K, func)(value) == expected


def test_helpers_cover_every_enum_value() -> None:
    """Each in-range enum value has a non-"UNKNOW" string, except matmul type 15."""
    for t in range(K.RKNN_TENSOR_TYPE_MAX):
        assert K.get_type_string(t) != "UNKNOW"
    for t in range(K.RKNN_TENSOR_QNT_MAX):
        assert K.get_qnt_type_string(t) != "UNKNOW"
    for f in range(K.RKNN_TENSOR_FORMAT_MAX):
        assert K.get_format_string(f) != "UNKNOW"
    for name, value in EXPECTED.items():
        is_matmul_type = "_MM_" in name and not name.startswith("RKNN_MM_LAYOUT_")
        if is_matmul_type and value != K.RKNN_INT8_MM_INT4_TO_FLOAT16:
            assert K.get_matmul_type_string(value) == name
