/*
 * rknn_custom_op.h -- custom operators for the RKNN Runtime C API, as implemented by rknnrt.
 *
 * Written by the rknnrt project from the documented facts of the vendor's public V2.3.2 header:
 * same names, values, layouts and signatures.
 */
#ifndef _RKNN_CUSTOM_OP_H
#define _RKNN_CUSTOM_OP_H

#include "rknn_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RKNN_WARNING_SKIP_CUSTOM_OP_COMPUTE -14

#define RKNN_CUSTOM_OP_MAX_STR_LEN   64
#define RKNN_CUSTOM_OP_MAX_VALUE_LEN 32
#define RKNN_CUSTOM_OP_EXPORT __attribute__((visibility("default")))

#ifdef __arm__
typedef uint32_t rknn_custom_op_interal_context;
#else
typedef uint64_t rknn_custom_op_interal_context;
#endif

typedef enum _rknn_target_type {
    RKNN_TARGET_TYPE_CPU = 1,
    RKNN_TARGET_TYPE_GPU = 2,
    RKNN_TARGET_TYPE_MAX
} rknn_target_type;

typedef struct _rknn_gpu_op_context {
    void* cl_context;
    void* cl_command_queue;
    void* cl_kernel;
} rknn_gpu_op_context;

typedef struct _rknn_custom_op_context {
    rknn_target_type target;
    rknn_custom_op_interal_context internal_ctx;
    rknn_gpu_op_context gpu_ctx;
    void* priv_data;                /* the operator's own */
} rknn_custom_op_context;

typedef struct _rknn_custom_op_tensor {
    rknn_tensor_attr attr;
    rknn_tensor_mem mem;            /* data at mem.virt_addr + mem.offset */
} rknn_custom_op_tensor;

typedef struct _rknn_custom_op_attr {
    char name[RKNN_MAX_NAME_LEN];
    rknn_tensor_type dtype;
    uint32_t n_elems;
    void* data;
} rknn_custom_op_attr;

typedef struct _rknn_custom_op {
    uint32_t version;
    rknn_target_type target;
    char op_type[RKNN_MAX_NAME_LEN];
    char cl_kernel_name[RKNN_MAX_NAME_LEN];
    char* cl_kernel_source;         /* a path when cl_source_size is 0, else the source text */
    uint64_t cl_source_size;
    char cl_build_options[RKNN_MAX_NAME_LEN];
    int (*init)(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                rknn_custom_op_tensor* outputs, uint32_t n_outputs);
    int (*prepare)(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                   rknn_custom_op_tensor* outputs, uint32_t n_outputs);
    int (*compute)(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                   rknn_custom_op_tensor* outputs, uint32_t n_outputs);
    int (*compute_native)(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs,
                          uint32_t n_inputs, rknn_custom_op_tensor* outputs, uint32_t n_outputs);
    int (*destroy)(rknn_custom_op_context* op_ctx);
} rknn_custom_op;

typedef rknn_custom_op* (*get_custom_op_func)();

int rknn_register_custom_ops(rknn_context ctx, rknn_custom_op* op, uint32_t custom_op_num);
void rknn_custom_op_get_op_attr(rknn_custom_op_context* op_ctx, const char* attr_name,
                                rknn_custom_op_attr* op_attr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* _RKNN_CUSTOM_OP_H */
