/* sizeof and offsetof of every structure of the three headers, one line each:
 * "rknn_tensor_attr 376" and "rknn_tensor_attr.index 0". Also the value of every constant
 * the tests compare with the Python API. */
#include <stddef.h>
#include <stdio.h>

#include "rknn_api.h"
#include "rknn_custom_op.h"
#include "rknn_matmul_api.h"

#define S(t) printf("%s %zu\n", #t, sizeof(t))
#define F(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))
#define K(c) printf("const %s %lld\n", #c, (long long)(c))

int main(void)
{
    S(rknn_input_output_num); F(rknn_input_output_num, n_input); F(rknn_input_output_num, n_output);
    S(rknn_tensor_attr); F(rknn_tensor_attr, index); F(rknn_tensor_attr, n_dims); F(rknn_tensor_attr, dims);
    F(rknn_tensor_attr, name); F(rknn_tensor_attr, n_elems); F(rknn_tensor_attr, size); F(rknn_tensor_attr, fmt);
    F(rknn_tensor_attr, type); F(rknn_tensor_attr, qnt_type); F(rknn_tensor_attr, fl); F(rknn_tensor_attr, zp);
    F(rknn_tensor_attr, scale); F(rknn_tensor_attr, w_stride); F(rknn_tensor_attr, size_with_stride);
    F(rknn_tensor_attr, pass_through); F(rknn_tensor_attr, h_stride);
    S(rknn_input_range); F(rknn_input_range, index); F(rknn_input_range, shape_number); F(rknn_input_range, fmt);
    F(rknn_input_range, name); F(rknn_input_range, dyn_range); F(rknn_input_range, n_dims);
    S(rknn_perf_detail); F(rknn_perf_detail, perf_data); F(rknn_perf_detail, data_len);
    S(rknn_perf_run); F(rknn_perf_run, run_duration);
    S(rknn_sdk_version); F(rknn_sdk_version, api_version); F(rknn_sdk_version, drv_version);
    S(rknn_mem_size); F(rknn_mem_size, total_weight_size); F(rknn_mem_size, total_internal_size);
    F(rknn_mem_size, total_dma_allocated_size); F(rknn_mem_size, total_sram_size);
    F(rknn_mem_size, free_sram_size); F(rknn_mem_size, reserved);
    S(rknn_custom_string); F(rknn_custom_string, string);
    S(rknn_tensor_mem); F(rknn_tensor_mem, virt_addr); F(rknn_tensor_mem, phys_addr); F(rknn_tensor_mem, fd);
    F(rknn_tensor_mem, offset); F(rknn_tensor_mem, size); F(rknn_tensor_mem, flags); F(rknn_tensor_mem, priv_data);
    S(rknn_input); F(rknn_input, index); F(rknn_input, buf); F(rknn_input, size); F(rknn_input, pass_through);
    F(rknn_input, type); F(rknn_input, fmt);
    S(rknn_output); F(rknn_output, want_float); F(rknn_output, is_prealloc); F(rknn_output, index);
    F(rknn_output, buf); F(rknn_output, size);
    S(rknn_init_extend); F(rknn_init_extend, ctx); F(rknn_init_extend, real_model_offset);
    F(rknn_init_extend, real_model_size); F(rknn_init_extend, model_buffer_fd);
    F(rknn_init_extend, model_buffer_flags); F(rknn_init_extend, reserved);
    S(rknn_run_extend); F(rknn_run_extend, frame_id); F(rknn_run_extend, non_block);
    F(rknn_run_extend, timeout_ms); F(rknn_run_extend, fence_fd);
    S(rknn_output_extend); F(rknn_output_extend, frame_id);
    S(rknn_quant_params); F(rknn_quant_params, name); F(rknn_quant_params, scale); F(rknn_quant_params, scale_len);
    F(rknn_quant_params, zp); F(rknn_quant_params, zp_len);
    S(rknn_matmul_tensor_attr); F(rknn_matmul_tensor_attr, name); F(rknn_matmul_tensor_attr, n_dims);
    F(rknn_matmul_tensor_attr, dims); F(rknn_matmul_tensor_attr, size); F(rknn_matmul_tensor_attr, type);
    S(rknn_matmul_io_attr); F(rknn_matmul_io_attr, A); F(rknn_matmul_io_attr, B); F(rknn_matmul_io_attr, C);
    S(rknn_matmul_shape); F(rknn_matmul_shape, M); F(rknn_matmul_shape, K); F(rknn_matmul_shape, N);
    S(rknn_matmul_info); F(rknn_matmul_info, M); F(rknn_matmul_info, K); F(rknn_matmul_info, N);
    F(rknn_matmul_info, type); F(rknn_matmul_info, B_layout); F(rknn_matmul_info, B_quant_type);
    F(rknn_matmul_info, AC_layout); F(rknn_matmul_info, AC_quant_type); F(rknn_matmul_info, iommu_domain_id);
    F(rknn_matmul_info, group_size); F(rknn_matmul_info, reserved);
    S(rknn_gpu_op_context); F(rknn_gpu_op_context, cl_context); F(rknn_gpu_op_context, cl_command_queue);
    F(rknn_gpu_op_context, cl_kernel);
    S(rknn_custom_op_context); F(rknn_custom_op_context, target); F(rknn_custom_op_context, internal_ctx);
    F(rknn_custom_op_context, gpu_ctx); F(rknn_custom_op_context, priv_data);
    S(rknn_custom_op_tensor); F(rknn_custom_op_tensor, attr); F(rknn_custom_op_tensor, mem);
    S(rknn_custom_op_attr); F(rknn_custom_op_attr, name); F(rknn_custom_op_attr, dtype);
    F(rknn_custom_op_attr, n_elems); F(rknn_custom_op_attr, data);
    S(rknn_custom_op); F(rknn_custom_op, version); F(rknn_custom_op, target); F(rknn_custom_op, op_type);
    F(rknn_custom_op, cl_kernel_name); F(rknn_custom_op, cl_kernel_source); F(rknn_custom_op, cl_source_size);
    F(rknn_custom_op, cl_build_options); F(rknn_custom_op, init); F(rknn_custom_op, prepare);
    F(rknn_custom_op, compute); F(rknn_custom_op, compute_native); F(rknn_custom_op, destroy);
    S(rknn_context); S(rknn_matmul_ctx); S(rknn_custom_op_interal_context);
    S(rknn_query_cmd); S(rknn_tensor_type); S(rknn_core_mask); S(rknn_matmul_type);

    K(RKNN_FLAG_PRIOR_HIGH); K(RKNN_FLAG_PRIOR_MEDIUM); K(RKNN_FLAG_PRIOR_LOW); K(RKNN_FLAG_ASYNC_MASK);
    K(RKNN_FLAG_COLLECT_PERF_MASK); K(RKNN_FLAG_MEM_ALLOC_OUTSIDE); K(RKNN_FLAG_SHARE_WEIGHT_MEM);
    K(RKNN_FLAG_FENCE_IN_OUTSIDE); K(RKNN_FLAG_FENCE_OUT_OUTSIDE); K(RKNN_FLAG_COLLECT_MODEL_INFO_ONLY);
    K(RKNN_FLAG_INTERNAL_ALLOC_OUTSIDE); K(RKNN_FLAG_EXECUTE_FALLBACK_PRIOR_DEVICE_GPU);
    K(RKNN_FLAG_ENABLE_SRAM); K(RKNN_FLAG_SHARE_SRAM); K(RKNN_FLAG_DISABLE_PROC_HIGH_PRIORITY);
    K(RKNN_FLAG_DISABLE_FLUSH_INPUT_MEM_CACHE); K(RKNN_FLAG_DISABLE_FLUSH_OUTPUT_MEM_CACHE);
    K(RKNN_FLAG_MODEL_BUFFER_ZERO_COPY); K(RKNN_MEM_FLAG_ALLOC_NO_CONTEXT);
    K(RKNN_SUCC); K(RKNN_ERR_FAIL); K(RKNN_ERR_TIMEOUT); K(RKNN_ERR_DEVICE_UNAVAILABLE); K(RKNN_ERR_MALLOC_FAIL);
    K(RKNN_ERR_PARAM_INVALID); K(RKNN_ERR_MODEL_INVALID); K(RKNN_ERR_CTX_INVALID); K(RKNN_ERR_INPUT_INVALID);
    K(RKNN_ERR_OUTPUT_INVALID); K(RKNN_ERR_DEVICE_UNMATCH); K(RKNN_ERR_INCOMPATILE_PRE_COMPILE_MODEL);
    K(RKNN_ERR_INCOMPATILE_OPTIMIZATION_LEVEL_VERSION); K(RKNN_ERR_TARGET_PLATFORM_UNMATCH);
    K(RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE);
    K(RKNN_MAX_DIMS); K(RKNN_MAX_NUM_CHANNEL); K(RKNN_MAX_NAME_LEN); K(RKNN_MAX_DYNAMIC_SHAPE_NUM);
    K(RKNN_QUERY_IN_OUT_NUM); K(RKNN_QUERY_INPUT_ATTR); K(RKNN_QUERY_OUTPUT_ATTR); K(RKNN_QUERY_PERF_DETAIL);
    K(RKNN_QUERY_PERF_RUN); K(RKNN_QUERY_SDK_VERSION); K(RKNN_QUERY_MEM_SIZE); K(RKNN_QUERY_CUSTOM_STRING);
    K(RKNN_QUERY_NATIVE_INPUT_ATTR); K(RKNN_QUERY_NATIVE_OUTPUT_ATTR); K(RKNN_QUERY_NATIVE_NC1HWC2_INPUT_ATTR);
    K(RKNN_QUERY_NATIVE_NC1HWC2_OUTPUT_ATTR); K(RKNN_QUERY_NATIVE_NHWC_INPUT_ATTR);
    K(RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR); K(RKNN_QUERY_DEVICE_MEM_INFO); K(RKNN_QUERY_INPUT_DYNAMIC_RANGE);
    K(RKNN_QUERY_CURRENT_INPUT_ATTR); K(RKNN_QUERY_CURRENT_OUTPUT_ATTR); K(RKNN_QUERY_CURRENT_NATIVE_INPUT_ATTR);
    K(RKNN_QUERY_CURRENT_NATIVE_OUTPUT_ATTR); K(RKNN_QUERY_CMD_MAX);
    K(RKNN_TENSOR_FLOAT32); K(RKNN_TENSOR_FLOAT16); K(RKNN_TENSOR_INT8); K(RKNN_TENSOR_UINT8); K(RKNN_TENSOR_INT16);
    K(RKNN_TENSOR_UINT16); K(RKNN_TENSOR_INT32); K(RKNN_TENSOR_UINT32); K(RKNN_TENSOR_INT64); K(RKNN_TENSOR_BOOL);
    K(RKNN_TENSOR_INT4); K(RKNN_TENSOR_BFLOAT16); K(RKNN_TENSOR_TYPE_MAX);
    K(RKNN_TENSOR_QNT_NONE); K(RKNN_TENSOR_QNT_DFP); K(RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC); K(RKNN_TENSOR_QNT_MAX);
    K(RKNN_TENSOR_NCHW); K(RKNN_TENSOR_NHWC); K(RKNN_TENSOR_NC1HWC2); K(RKNN_TENSOR_UNDEFINED);
    K(RKNN_TENSOR_FORMAT_MAX);
    K(RKNN_NPU_CORE_AUTO); K(RKNN_NPU_CORE_0); K(RKNN_NPU_CORE_1); K(RKNN_NPU_CORE_2); K(RKNN_NPU_CORE_0_1);
    K(RKNN_NPU_CORE_0_1_2); K(RKNN_NPU_CORE_ALL); K(RKNN_NPU_CORE_UNDEFINED);
    K(RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE); K(RKNN_TENSOR_MEMORY_FLAGS_FROM_FD);
    K(RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS); K(RKNN_TENSOR_MEMORY_FLAGS_UNKNOWN);
    K(RKNN_FLAG_MEMORY_FLAGS_DEFAULT); K(RKNN_FLAG_MEMORY_CACHEABLE); K(RKNN_FLAG_MEMORY_NON_CACHEABLE);
    K(RKNN_FLAG_MEMORY_TRY_ALLOC_SRAM);
    K(RKNN_MEMORY_SYNC_TO_DEVICE); K(RKNN_MEMORY_SYNC_FROM_DEVICE); K(RKNN_MEMORY_SYNC_BIDIRECTIONAL);
    K(RKNN_QUANT_TYPE_PER_LAYER_SYM); K(RKNN_QUANT_TYPE_PER_LAYER_ASYM); K(RKNN_QUANT_TYPE_PER_CHANNEL_SYM);
    K(RKNN_QUANT_TYPE_PER_CHANNEL_ASYM); K(RKNN_QUANT_TYPE_PER_GROUP_SYM); K(RKNN_QUANT_TYPE_PER_GROUP_ASYM);
    K(RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32); K(RKNN_INT8_MM_INT8_TO_INT32); K(RKNN_INT8_MM_INT8_TO_INT8);
    K(RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16); K(RKNN_FLOAT16_MM_INT8_TO_FLOAT32); K(RKNN_FLOAT16_MM_INT8_TO_FLOAT16);
    K(RKNN_FLOAT16_MM_INT4_TO_FLOAT32); K(RKNN_FLOAT16_MM_INT4_TO_FLOAT16); K(RKNN_INT8_MM_INT8_TO_FLOAT32);
    K(RKNN_INT4_MM_INT4_TO_INT16); K(RKNN_INT8_MM_INT4_TO_INT32); K(RKNN_FLOAT16_MM_INT4_TO_BFLOAT16);
    K(RKNN_INT8_MM_INT4_TO_FLOAT16);
    K(RKNN_MM_LAYOUT_NORM); K(RKNN_MM_LAYOUT_NATIVE); K(RKNN_MM_LAYOUT_TP_NORM);
    K(RKNN_CUSTOM_OP_MAX_STR_LEN); K(RKNN_CUSTOM_OP_MAX_VALUE_LEN);
    K(RKNN_TARGET_TYPE_CPU); K(RKNN_TARGET_TYPE_GPU); K(RKNN_TARGET_TYPE_MAX);
    printf("string type %s %s %s %s\n", get_type_string(RKNN_TENSOR_BFLOAT16), get_qnt_type_string(RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC),
           get_format_string(RKNN_TENSOR_NC1HWC2), get_matmul_type_string(RKNN_INT8_MM_INT4_TO_FLOAT16));
    return 0;
}
