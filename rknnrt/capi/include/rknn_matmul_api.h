/*
 * rknn_matmul_api.h -- the RKNN matrix-multiplication C API as implemented by rknnrt.
 *
 * Written by the rknnrt project from the documented facts of the vendor's public V2.3.2 header:
 * same names, values, layouts and signatures. C = A * B with A[M,K], B[K,N], C[M,N].
 */
#ifndef _RKNN_MATMUL_API_H
#define _RKNN_MATMUL_API_H

#include "rknn_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef rknn_context rknn_matmul_ctx;

typedef enum _rknn_matmul_quant_type {
    RKNN_QUANT_TYPE_PER_LAYER_SYM = 0,
    RKNN_QUANT_TYPE_PER_LAYER_ASYM = 1,
    RKNN_QUANT_TYPE_PER_CHANNEL_SYM = 2,
    RKNN_QUANT_TYPE_PER_CHANNEL_ASYM = 3,
    RKNN_QUANT_TYPE_PER_GROUP_SYM = 4,
    RKNN_QUANT_TYPE_PER_GROUP_ASYM = 5
} rknn_matmul_quant_type;

typedef struct _rknn_quant_params {
    char name[RKNN_MAX_NAME_LEN];   /* the tensor's name, from rknn_matmul_io_attr */
    float* scale;
    int32_t scale_len;
    int32_t* zp;
    int32_t zp_len;
} rknn_quant_params;

typedef enum _rknn_matmul_type {
    RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32 = 1,
    RKNN_INT8_MM_INT8_TO_INT32 = 2,
    RKNN_INT8_MM_INT8_TO_INT8 = 3,
    RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16 = 4,
    RKNN_FLOAT16_MM_INT8_TO_FLOAT32 = 5,
    RKNN_FLOAT16_MM_INT8_TO_FLOAT16 = 6,
    RKNN_FLOAT16_MM_INT4_TO_FLOAT32 = 7,
    RKNN_FLOAT16_MM_INT4_TO_FLOAT16 = 8,
    RKNN_INT8_MM_INT8_TO_FLOAT32 = 9,
    RKNN_INT4_MM_INT4_TO_INT16 = 10,
    RKNN_INT8_MM_INT4_TO_INT32 = 11,
    RKNN_FLOAT16_MM_INT4_TO_BFLOAT16 = 12,
    RKNN_INT8_MM_INT4_TO_FLOAT16 = 15
} rknn_matmul_type;

inline static const char* get_matmul_type_string(rknn_matmul_type type)
{
    switch (type) {
    case RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32: return "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32";
    case RKNN_INT8_MM_INT8_TO_INT32: return "RKNN_INT8_MM_INT8_TO_INT32";
    case RKNN_INT8_MM_INT8_TO_INT8: return "RKNN_INT8_MM_INT8_TO_INT8";
    case RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16: return "RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16";
    case RKNN_FLOAT16_MM_INT8_TO_FLOAT32: return "RKNN_FLOAT16_MM_INT8_TO_FLOAT32";
    case RKNN_FLOAT16_MM_INT8_TO_FLOAT16: return "RKNN_FLOAT16_MM_INT8_TO_FLOAT16";
    case RKNN_FLOAT16_MM_INT4_TO_FLOAT32: return "RKNN_FLOAT16_MM_INT4_TO_FLOAT32";
    case RKNN_FLOAT16_MM_INT4_TO_FLOAT16: return "RKNN_FLOAT16_MM_INT4_TO_FLOAT16";
    case RKNN_INT8_MM_INT8_TO_FLOAT32: return "RKNN_INT8_MM_INT8_TO_FLOAT32";
    case RKNN_INT4_MM_INT4_TO_INT16: return "RKNN_INT4_MM_INT4_TO_INT16";
    case RKNN_INT8_MM_INT4_TO_INT32: return "RKNN_INT8_MM_INT4_TO_INT32";
    case RKNN_FLOAT16_MM_INT4_TO_BFLOAT16: return "RKNN_FLOAT16_MM_INT4_TO_BFLOAT16";
    default: return "UNKNOW";   /* the vendor's helper has no case for 15 either */
    }
}

typedef struct _rknn_matmul_tensor_attr {
    char name[RKNN_MAX_NAME_LEN];
    uint32_t n_dims;
    uint32_t dims[RKNN_MAX_DIMS];
    uint32_t size;                  /* bytes */
    rknn_tensor_type type;
} rknn_matmul_tensor_attr;

typedef struct _rknn_matmul_io_attr {
    rknn_matmul_tensor_attr A;
    rknn_matmul_tensor_attr B;
    rknn_matmul_tensor_attr C;
} rknn_matmul_io_attr;

/* B_layout and AC_layout values */
enum {
    RKNN_MM_LAYOUT_NORM = 0,
    RKNN_MM_LAYOUT_NATIVE = 1,
    RKNN_MM_LAYOUT_TP_NORM = 2
};

typedef struct rknn_matmul_info_t {
    int32_t M;
    int32_t K;
    int32_t N;
    rknn_matmul_type type;
    int16_t B_layout;               /* RKNN_MM_LAYOUT_* */
    int16_t B_quant_type;           /* rknn_matmul_quant_type */
    int16_t AC_layout;              /* RKNN_MM_LAYOUT_NORM or RKNN_MM_LAYOUT_NATIVE */
    int16_t AC_quant_type;          /* per-layer only */
    int32_t iommu_domain_id;
    int16_t group_size;             /* PER_GROUP quantisation only */
    int8_t reserved[34];
} rknn_matmul_info;

typedef struct _rknn_matmul_shape {
    int32_t M;
    int32_t K;
    int32_t N;
} rknn_matmul_shape;

int rknn_matmul_create(rknn_matmul_ctx* ctx, rknn_matmul_info* info, rknn_matmul_io_attr* io_attr);
int rknn_matmul_create_dynamic_shape(rknn_matmul_ctx* ctx, rknn_matmul_info* info, int shape_num,
                                     rknn_matmul_shape dynamic_shapes[], rknn_matmul_io_attr io_attrs[]);
int rknn_matmul_set_io_mem(rknn_matmul_ctx ctx, rknn_tensor_mem* mem, rknn_matmul_tensor_attr* attr);
int rknn_matmul_set_core_mask(rknn_matmul_ctx context, rknn_core_mask core_mask);
int rknn_matmul_set_quant_params(rknn_matmul_ctx context, rknn_quant_params* params);
int rknn_matmul_get_quant_params(rknn_matmul_ctx ctx, rknn_quant_params* params, float* scale);
int rknn_matmul_set_dynamic_shape(rknn_matmul_ctx ctx, rknn_matmul_shape* shape);
int rknn_matmul_run(rknn_matmul_ctx ctx);
int rknn_matmul_destroy(rknn_matmul_ctx ctx);
int rknn_B_normal_layout_to_native_layout(void* B_input, void* B_output, int K, int N, rknn_matmul_info* info);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* _RKNN_MATMUL_API_H */
