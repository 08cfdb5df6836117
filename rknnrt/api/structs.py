"""ctypes declarations of the RKNN Runtime C API structs (RKNPU2 V2.3.2 ABI baseline, LP64).

Names, field names, field order and C types are exact copies of the public headers (see
``shared/spec/rknn_api_facts.md`` sections 1 and 3):

- **H** -- ``rknn_api.h``
- **M** -- ``rknn_matmul_api.h``
- **C** -- ``rknn_custom_op.h``

The headers use no ``#pragma pack``, so the structs use natural alignment (no ``_pack_``).
Every C enum is a 4-byte ``int`` (``ctypes.c_int``). ``rknn_context`` is ``uint64_t`` on LP64
targets (``uint32_t`` only on 32-bit ARM, which this package does not model).

Declarations only: no behaviour lives here.
"""

from __future__ import annotations

import ctypes
from ctypes import (
    CFUNCTYPE,
    POINTER,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_int8,
    c_int16,
    c_int32,
    c_int64,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)

__all__ = [
    # basic types
    "rknn_context",
    "rknn_matmul_ctx",
    "rknn_custom_op_interal_context",
    # enum types
    "rknn_query_cmd",
    "rknn_tensor_type",
    "rknn_tensor_qnt_type",
    "rknn_tensor_format",
    "rknn_core_mask",
    "rknn_tensor_mem_flags",
    "rknn_mem_alloc_flags",
    "rknn_mem_sync_mode",
    "rknn_matmul_quant_type",
    "rknn_matmul_type",
    "rknn_matmul_layout",
    "rknn_target_type",
    # rknn_api.h
    "rknn_input_output_num",
    "rknn_tensor_attr",
    "rknn_input_range",
    "rknn_perf_detail",
    "rknn_perf_run",
    "rknn_sdk_version",
    "rknn_mem_size",
    "rknn_custom_string",
    "rknn_tensor_mem",
    "rknn_input",
    "rknn_output",
    "rknn_init_extend",
    "rknn_run_extend",
    "rknn_output_extend",
    # rknn_matmul_api.h
    "rknn_quant_params",
    "rknn_matmul_tensor_attr",
    "rknn_matmul_io_attr",
    "rknn_matmul_shape",
    "rknn_matmul_info",
    "rknn_matmul_info_t",
    # rknn_custom_op.h
    "rknn_gpu_op_context",
    "rknn_custom_op_context",
    "rknn_custom_op_tensor",
    "rknn_custom_op_attr",
    "rknn_custom_op_callback",
    "rknn_custom_op_destroy_callback",
    "rknn_custom_op",
    "get_custom_op_func",
]

# --------------------------------------------------------------------------------------------
# Basic types (H, M, C)
# --------------------------------------------------------------------------------------------
rknn_context = c_uint64  # uint64_t on LP64 (uint32_t only when __arm__)
rknn_matmul_ctx = rknn_context  # M: typedef rknn_context rknn_matmul_ctx;
rknn_custom_op_interal_context = c_uint64  # C (spelling "interal" as in the header)

# Enum types: plain C enums, 4 bytes.
rknn_query_cmd = c_int
rknn_tensor_type = c_int
rknn_tensor_qnt_type = c_int
rknn_tensor_format = c_int
rknn_core_mask = c_int
rknn_tensor_mem_flags = c_int
rknn_mem_alloc_flags = c_int
rknn_mem_sync_mode = c_int
rknn_matmul_quant_type = c_int
rknn_matmul_type = c_int
rknn_matmul_layout = c_int  # M: anonymous enum, fields that hold it are int16_t
rknn_target_type = c_int

_MAX_DIMS = 16  # RKNN_MAX_DIMS
_MAX_NAME_LEN = 256  # RKNN_MAX_NAME_LEN
_MAX_DYNAMIC_SHAPE_NUM = 512  # RKNN_MAX_DYNAMIC_SHAPE_NUM


# --------------------------------------------------------------------------------------------
# rknn_api.h (H)
# --------------------------------------------------------------------------------------------
class rknn_input_output_num(ctypes.Structure):
    """Result of RKNN_QUERY_IN_OUT_NUM (all fields are outputs)."""

    _fields_ = [
        ("n_input", c_uint32),
        ("n_output", c_uint32),
    ]


class rknn_tensor_attr(ctypes.Structure):
    """Tensor attributes for the *_ATTR queries, rknn_set_io_mem and rknn_set_input_shapes.

    ``index`` is an input: the caller sets it before rknn_query. ``w_stride`` is output-only
    (0 means equal to the width). ``h_stride`` is set by the user (0 means equal to the
    height). ``fl`` applies to DFP quantization only; ``zp`` and ``scale`` to AFFINE.
    """

    _fields_ = [
        ("index", c_uint32),
        ("n_dims", c_uint32),
        ("dims", c_uint32 * _MAX_DIMS),
        ("name", c_char * _MAX_NAME_LEN),
        ("n_elems", c_uint32),
        ("size", c_uint32),
        ("fmt", rknn_tensor_format),
        ("type", rknn_tensor_type),
        ("qnt_type", rknn_tensor_qnt_type),
        ("fl", c_int8),
        ("zp", c_int32),
        ("scale", c_float),
        ("w_stride", c_uint32),
        ("size_with_stride", c_uint32),
        ("pass_through", c_uint8),
        ("h_stride", c_uint32),
    ]


class rknn_input_range(ctypes.Structure):
    """Result of RKNN_QUERY_INPUT_DYNAMIC_RANGE.

    ``index`` is an input set before rknn_query; the rest are outputs. ``dyn_range[s][d]`` is
    dimension ``d`` of shape ``s`` (laid out [512][16]); ``n_dims`` dims are valid per shape.
    """

    _fields_ = [
        ("index", c_uint32),
        ("shape_number", c_uint32),
        ("fmt", rknn_tensor_format),
        ("name", c_char * _MAX_NAME_LEN),
        ("dyn_range", c_uint32 * _MAX_DIMS * _MAX_DYNAMIC_SHAPE_NUM),
        ("n_dims", c_uint32),
    ]


class rknn_perf_detail(ctypes.Structure):
    """Result of RKNN_QUERY_PERF_DETAIL (outputs). The runtime owns ``perf_data``."""

    _fields_ = [
        ("perf_data", c_char_p),
        ("data_len", c_uint64),
    ]


class rknn_perf_run(ctypes.Structure):
    """Result of RKNN_QUERY_PERF_RUN (output): ``run_duration`` in microseconds."""

    _fields_ = [
        ("run_duration", c_int64),
    ]


class rknn_sdk_version(ctypes.Structure):
    """Result of RKNN_QUERY_SDK_VERSION (outputs)."""

    _fields_ = [
        ("api_version", c_char * 256),
        ("drv_version", c_char * 256),
    ]


class rknn_mem_size(ctypes.Structure):
    """Result of RKNN_QUERY_MEM_SIZE (outputs). The header has ``reserved[10]`` (docs: 12)."""

    _fields_ = [
        ("total_weight_size", c_uint32),
        ("total_internal_size", c_uint32),
        ("total_dma_allocated_size", c_uint64),
        ("total_sram_size", c_uint32),
        ("free_sram_size", c_uint32),
        ("reserved", c_uint32 * 10),
    ]


class rknn_custom_string(ctypes.Structure):
    """Result of RKNN_QUERY_CUSTOM_STRING (output)."""

    _fields_ = [
        ("string", c_char * 1024),
    ]


class rknn_tensor_mem(ctypes.Structure):
    """Tensor memory descriptor (C tag ``_rknn_tensor_memory``) for the zero-copy API."""

    _fields_ = [
        ("virt_addr", c_void_p),
        ("phys_addr", c_uint64),
        ("fd", c_int32),
        ("offset", c_int32),
        ("size", c_uint32),
        ("flags", c_uint32),
        ("priv_data", c_void_p),
    ]


class rknn_input(ctypes.Structure):
    """Input descriptor for rknn_inputs_set (all fields are inputs)."""

    _fields_ = [
        ("index", c_uint32),
        ("buf", c_void_p),
        ("size", c_uint32),
        ("pass_through", c_uint8),
        ("type", rknn_tensor_type),
        ("fmt", rknn_tensor_format),
    ]


class rknn_output(ctypes.Structure):
    """Output descriptor for rknn_outputs_get.

    ``want_float``, ``is_prealloc`` and ``index`` are inputs; ``buf`` and ``size`` are inputs
    when ``is_prealloc`` is true and outputs otherwise.
    """

    _fields_ = [
        ("want_float", c_uint8),
        ("is_prealloc", c_uint8),
        ("index", c_uint32),
        ("buf", c_void_p),
        ("size", c_uint32),
    ]


class rknn_init_extend(ctypes.Structure):
    """Extended information for rknn_init."""

    _fields_ = [
        ("ctx", rknn_context),
        ("real_model_offset", c_int32),
        ("real_model_size", c_uint32),
        ("model_buffer_fd", c_int32),
        ("model_buffer_flags", c_uint32),
        ("reserved", c_uint8 * 112),
    ]


class rknn_run_extend(ctypes.Structure):
    """Extended information for rknn_run / rknn_wait. ``frame_id`` is an output."""

    _fields_ = [
        ("frame_id", c_uint64),
        ("non_block", c_int32),
        ("timeout_ms", c_int32),
        ("fence_fd", c_int32),
    ]


class rknn_output_extend(ctypes.Structure):
    """Extended information for rknn_outputs_get. ``frame_id`` is an output (uint64 per H)."""

    _fields_ = [
        ("frame_id", c_uint64),
    ]


# --------------------------------------------------------------------------------------------
# rknn_matmul_api.h (M)
# --------------------------------------------------------------------------------------------
class rknn_quant_params(ctypes.Structure):
    """Quantization parameters for rknn_matmul_set_quant_params / get_quant_params."""

    _fields_ = [
        ("name", c_char * _MAX_NAME_LEN),
        ("scale", POINTER(c_float)),
        ("scale_len", c_int32),
        ("zp", POINTER(c_int32)),
        ("zp_len", c_int32),
    ]


class rknn_matmul_tensor_attr(ctypes.Structure):
    """Attributes of one matmul tensor (A, B or C)."""

    _fields_ = [
        ("name", c_char * _MAX_NAME_LEN),
        ("n_dims", c_uint32),
        ("dims", c_uint32 * _MAX_DIMS),
        ("size", c_uint32),
        ("type", rknn_tensor_type),
    ]


class rknn_matmul_io_attr(ctypes.Structure):
    """Matmul I/O attributes, filled by rknn_matmul_create (outputs)."""

    _fields_ = [
        ("A", rknn_matmul_tensor_attr),
        ("B", rknn_matmul_tensor_attr),
        ("C", rknn_matmul_tensor_attr),
    ]


class rknn_matmul_shape(ctypes.Structure):
    """One matmul shape (M, K, N) for the dynamic-shape matmul API."""

    _fields_ = [
        ("M", c_int32),
        ("K", c_int32),
        ("N", c_int32),
    ]


class rknn_matmul_info(ctypes.Structure):
    """Matmul description for rknn_matmul_create (struct tag ``rknn_matmul_info_t``; inputs).

    ``B_layout``/``AC_layout`` hold RKNN_MM_LAYOUT_* values and ``B_quant_type``/
    ``AC_quant_type`` hold rknn_matmul_quant_type values, stored as int16_t.
    """

    _fields_ = [
        ("M", c_int32),
        ("K", c_int32),
        ("N", c_int32),
        ("type", rknn_matmul_type),
        ("B_layout", c_int16),
        ("B_quant_type", c_int16),
        ("AC_layout", c_int16),
        ("AC_quant_type", c_int16),
        ("iommu_domain_id", c_int32),
        ("group_size", c_int16),
        ("reserved", c_int8 * 34),
    ]


rknn_matmul_info_t = rknn_matmul_info


# --------------------------------------------------------------------------------------------
# rknn_custom_op.h (C)
# --------------------------------------------------------------------------------------------
class rknn_gpu_op_context(ctypes.Structure):
    """OpenCL handles given to a GPU custom op (outputs of the runtime)."""

    _fields_ = [
        ("cl_context", c_void_p),
        ("cl_command_queue", c_void_p),
        ("cl_kernel", c_void_p),
    ]


class rknn_custom_op_context(ctypes.Structure):
    """Context passed to custom op callbacks; ``priv_data`` belongs to the op."""

    _fields_ = [
        ("target", rknn_target_type),
        ("internal_ctx", rknn_custom_op_interal_context),
        ("gpu_ctx", rknn_gpu_op_context),
        ("priv_data", c_void_p),
    ]


class rknn_custom_op_tensor(ctypes.Structure):
    """A tensor given to a custom op callback: attributes plus memory."""

    _fields_ = [
        ("attr", rknn_tensor_attr),
        ("mem", rknn_tensor_mem),
    ]


class rknn_custom_op_attr(ctypes.Structure):
    """A custom op attribute, as returned by rknn_custom_op_get_op_attr (outputs)."""

    _fields_ = [
        ("name", c_char * _MAX_NAME_LEN),
        ("dtype", rknn_tensor_type),
        ("n_elems", c_uint32),
        ("data", c_void_p),
    ]


# int (*)(rknn_custom_op_context*, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
#         rknn_custom_op_tensor* outputs, uint32_t n_outputs)  -- init/prepare/compute/native
rknn_custom_op_callback = CFUNCTYPE(
    c_int,
    POINTER(rknn_custom_op_context),
    POINTER(rknn_custom_op_tensor),
    c_uint32,
    POINTER(rknn_custom_op_tensor),
    c_uint32,
)
# int (*destroy)(rknn_custom_op_context*)
rknn_custom_op_destroy_callback = CFUNCTYPE(c_int, POINTER(rknn_custom_op_context))


class rknn_custom_op(ctypes.Structure):
    """Custom operator registration record for rknn_register_custom_ops (inputs)."""

    _fields_ = [
        ("version", c_uint32),
        ("target", rknn_target_type),
        ("op_type", c_char * 256),
        ("cl_kernel_name", c_char * 256),
        ("cl_kernel_source", c_char_p),
        ("cl_source_size", c_uint64),
        ("cl_build_options", c_char * 256),
        ("init", rknn_custom_op_callback),
        ("prepare", rknn_custom_op_callback),
        ("compute", rknn_custom_op_callback),
        ("compute_native", rknn_custom_op_callback),
        ("destroy", rknn_custom_op_destroy_callback),
    ]


# typedef rknn_custom_op* (*get_custom_op_func)();
get_custom_op_func = CFUNCTYPE(POINTER(rknn_custom_op))
