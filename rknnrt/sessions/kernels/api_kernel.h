/* What this library's ops share: the kernel object of those that keep nothing but
 * onnxruntime's API table (f16round.c, affine.c), their common op fields, and reading a
 * node's attributes and inputs, running chunks on onnxruntime's threads (and their size) and a
 * tensor's dimensions. */

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

/* Attribute `name` of the node, or `fallback` when it has none (onnxruntime's status freed). */
static inline int64_t attr_int64(const OrtApi *api, const OrtKernelInfo *info, const char *name,
                                 int64_t fallback) {
    int64_t v = fallback;
    OrtStatus *st = FN(api, KernelInfoGetAttribute_int64)(info, name, &v);
    if (st) {
        FN(api, ReleaseStatus)(st);
        return fallback;
    }
    return v;
}

static inline float attr_float(const OrtApi *api, const OrtKernelInfo *info, const char *name,
                               float fallback) {
    float v = fallback;
    OrtStatus *st = FN(api, KernelInfoGetAttribute_float)(info, name, &v);
    if (st) {
        FN(api, ReleaseStatus)(st);
        return fallback;
    }
    return v;
}

/* fn(data, i) for every i < count: on onnxruntime's intra-op threads through `parallel` (its
 * API table with KernelContext_ParallelFor, NULL from an older onnxruntime), else here, also
 * for one chunk or when onnxruntime refuses (every chunk then runs here: each writes only its
 * own outputs, so the values are the same). */
static inline void run_chunks(const OrtApi *api, const OrtApi *parallel, OrtKernelContext *ctx,
                              void (*fn)(void *, size_t), size_t count, void *data) {
    if (parallel != NULL && count > 1) {
        OrtStatus *failed = FN(parallel, KernelContext_ParallelFor)(ctx, fn, count, 0, data);
        if (failed == NULL)
            return;
        FN(api, ReleaseStatus)(failed);
    }
    for (size_t i = 0; i < count; i++)
        fn(data, i);
}

/* The units a chunk of run_chunks takes, for `units` whole units holding `values` values: chunks
 * of at least `least` values, at most 32 of them (one where the tensor is smaller); *count: how
 * many chunks that makes. */
static inline int64_t chunk_units(int64_t units, int64_t values, int64_t least, int64_t *count) {
    int64_t n = values / least;
    n = n < 1 ? 1 : (n > 32 ? 32 : n);
    const int64_t chunk = (units + n - 1) / n;
    *count = (units + chunk - 1) / chunk;
    return chunk;
}

/* Inputs 0 .. n - 1 of the node into in: 0, or -1 where onnxruntime reports an error or gives
 * one no value (its status freed). */
static inline int kernel_inputs(const OrtApi *api, OrtKernelContext *ctx, const OrtValue **in,
                                size_t n) {
    for (size_t i = 0; i < n; i++) {
        in[i] = NULL;
        OrtStatus *st = FN(api, KernelContext_GetInput)(ctx, i, &in[i]);
        if (st) {
            FN(api, ReleaseStatus)(st);
            return -1;
        }
        if (in[i] == NULL)
            return -1;
    }
    return 0;
}

/* The dimensions of tensor `value` into dims (at most `most`) and their count into *rank:
 * 0, or -1 when onnxruntime reports an error or the rank exceeds `most`. */
static inline int tensor_dims(const OrtApi *api, const OrtValue *value, int64_t *dims,
                              size_t most, size_t *rank) {
    OrtTensorTypeAndShapeInfo *info = NULL;
    OrtStatus *st = FN(api, GetTensorTypeAndShape)(value, &info);
    if (st) {
        FN(api, ReleaseStatus)(st);
        return -1;
    }
    st = FN(api, GetDimensionsCount)(info, rank);
    if (!st && *rank <= most)
        st = FN(api, GetDimensions)(info, dims, *rank);
    FN(api, ReleaseTensorTypeAndShapeInfo)(info);
    if (st) {
        FN(api, ReleaseStatus)(st);
        return -1;
    }
    return *rank <= most ? 0 : -1;
}

/* Output 0 of the node with `rank` dims `dims` (NULL where onnxruntime gives none), and in
 * *count its element count (negative dims counted as 0). */
static inline OrtValue *output_like(const OrtApi *api, OrtKernelContext *ctx, const int64_t *dims,
                                    size_t rank, int64_t *count) {
    *count = 1;
    for (size_t i = 0; i < rank; i++)
        *count *= dims[i] > 0 ? dims[i] : 0;
    OrtValue *out = NULL;
    if (FN(api, KernelContext_GetOutput)(ctx, 0, dims, rank, &out) != NULL)
        return NULL;
    return out;
}

#endif
