/* The kernel object of this library's ops that keep nothing but onnxruntime's API table
 * (f16round.c, affine.c), and the op fields they share. */

#ifndef RKNNRT_API_KERNEL_H
#define RKNNRT_API_KERNEL_H

#include <stdlib.h>

#include "ort_abi.h"

typedef struct ApiKernel {
    const OrtApi *api;
} ApiKernel;

static inline void *api_kernel_create(const CustomOp *op, const OrtApi *api,
                                      const OrtKernelInfo *info) {
    (void)op;
    (void)info;
    ApiKernel *k = (ApiKernel *)calloc(1, sizeof(ApiKernel));
    if (k != NULL)
        k->api = api;
    return k;
}

static inline void api_kernel_destroy(void *kernel) { free(kernel); }
static inline const char *any_provider(const CustomOp *op) { (void)op; return NULL; }
static inline int required(const CustomOp *op, size_t i) { (void)op; (void)i; return 0; }

#endif
