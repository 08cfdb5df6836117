/* The part of onnxruntime's C API this library uses, declared here.
 *
 * onnxruntime's wheel ships no headers: these few declarations are this library's own,
 * from the facts of onnxruntime_c_api.h. OrtApi is an append-only table of function pointers,
 * so an entry's position is the same in every version at or after the one that added it; the
 * positions used are named API_* (tests/perf/test_dw_kernel.py runs the op on the installed
 * onnxruntime, which exercises every one). OrtCustomOp's `version` says which of its fields
 * onnxruntime may read: at 8, the first twelve (types, compute, destroy, and the inputs' and
 * outputs' characteristics, which onnxruntime's schema check calls at any version); the
 * fields added later (memory types from 13, variadic arity from 14, ...) stay NULL. One op
 * declares version 18 where onnxruntime has it, to say that its output may take its input's
 * buffer (GetMayInplace, f16round.c), which onnxruntime's planner grants only where it knows
 * both shapes equal (so the op also says its output's shape: InferOutputShapeFn). At 13 and
 * above onnxruntime calls GetInputMemoryType for every input; the other fields from 14 on it
 * reads only when set (the variadic ones only for variadic inputs, which no op here has). */

#ifndef RKNNRT_ORT_ABI_H
#define RKNNRT_ORT_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef struct OrtStatus OrtStatus;
typedef struct OrtApi OrtApi; /* used only as a table of function pointers */
typedef struct OrtValue OrtValue;
typedef struct OrtKernelContext OrtKernelContext;
typedef struct OrtKernelInfo OrtKernelInfo;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtCustomOpDomain OrtCustomOpDomain;
typedef struct OrtTensorTypeAndShapeInfo OrtTensorTypeAndShapeInfo;
typedef struct OrtShapeInferContext OrtShapeInferContext;

typedef struct OrtApiBase {
    const OrtApi *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

/* ONNXTensorElementDataType values */
enum { T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_INT32 = 6 };
enum { ORT_FAIL = 1, ORT_INVALID_ARGUMENT = 2 };

/* positions in OrtApi */
enum {
    API_CreateStatus = 0,
    API_CreateCustomOpDomain = 26,
    API_CustomOpDomain_Add = 27,
    API_AddCustomOpDomain = 28,
    API_GetTensorMutableData = 51,
    API_SetDimensions = 59,
    API_GetDimensionsCount = 61,
    API_GetDimensions = 62,
    API_GetSymbolicDimensions = 63,
    API_GetTensorTypeAndShape = 65,
    API_KernelInfoGetAttribute_float = 85,
    API_KernelInfoGetAttribute_int64 = 86,
    API_KernelContext_GetInput = 90,
    API_KernelContext_GetOutput = 91,
    API_ReleaseStatus = 93,
    API_ReleaseTensorTypeAndShapeInfo = 99,
};
#define API_VERSION_USED 13 /* every position above exists by this version */
/* a later entry, asked for with a later version (NULL from an older onnxruntime: then the
 * kernel runs on the calling thread) */
#define API_KernelContext_ParallelFor 274
#define API_VERSION_PARALLEL 20
/* entries of version 17, used through GetApi(18) by the op that declares version 18 and through
 * GetApi(17) by the ops that declare version 17 (their output shapes: blocked.c) */
#define API_ShapeInferContext_GetInputTypeShape 268
#define API_ShapeInferContext_SetOutputTypeShape 270
#define API_SetSymbolicDimensions 271

typedef OrtStatus *(*CreateStatus_f)(int code, const char *msg);
typedef OrtStatus *(*CreateCustomOpDomain_f)(const char *domain, OrtCustomOpDomain **out);
typedef OrtStatus *(*CustomOpDomain_Add_f)(OrtCustomOpDomain *domain, const void *op);
typedef OrtStatus *(*AddCustomOpDomain_f)(OrtSessionOptions *options, OrtCustomOpDomain *domain);
typedef OrtStatus *(*GetTensorMutableData_f)(OrtValue *value, void **out);
typedef OrtStatus *(*SetDimensions_f)(OrtTensorTypeAndShapeInfo *info, const int64_t *dims,
                                      size_t count);
typedef OrtStatus *(*GetDimensionsCount_f)(const OrtTensorTypeAndShapeInfo *info, size_t *out);
typedef OrtStatus *(*GetDimensions_f)(const OrtTensorTypeAndShapeInfo *info, int64_t *dims,
                                      size_t count);
typedef OrtStatus *(*GetTensorTypeAndShape_f)(const OrtValue *value,
                                              OrtTensorTypeAndShapeInfo **out);
typedef OrtStatus *(*KernelInfoGetAttribute_float_f)(const OrtKernelInfo *info, const char *name,
                                                     float *out);
typedef OrtStatus *(*KernelInfoGetAttribute_int64_f)(const OrtKernelInfo *info, const char *name,
                                                     int64_t *out);
typedef OrtStatus *(*KernelContext_GetInput_f)(const OrtKernelContext *ctx, size_t index,
                                               const OrtValue **out);
typedef OrtStatus *(*KernelContext_GetOutput_f)(OrtKernelContext *ctx, size_t index,
                                                const int64_t *dims, size_t count,
                                                OrtValue **out);
typedef OrtStatus *(*KernelContext_ParallelFor_f)(const OrtKernelContext *ctx,
                                                  void (*fn)(void *data, size_t index),
                                                  size_t total, size_t num_batch, void *data);
typedef OrtStatus *(*ShapeInferContext_GetInputTypeShape_f)(const OrtShapeInferContext *ctx,
                                                            size_t index,
                                                            OrtTensorTypeAndShapeInfo **info);
typedef OrtStatus *(*ShapeInferContext_SetOutputTypeShape_f)(const OrtShapeInferContext *ctx,
                                                             size_t index,
                                                             const OrtTensorTypeAndShapeInfo *info);
typedef OrtStatus *(*GetSymbolicDimensions_f)(const OrtTensorTypeAndShapeInfo *info,
                                              const char *dim_params[], size_t count);
typedef OrtStatus *(*SetSymbolicDimensions_f)(OrtTensorTypeAndShapeInfo *info,
                                              const char *dim_params[], size_t count);
typedef void (*ReleaseStatus_f)(OrtStatus *status);
typedef void (*ReleaseTensorTypeAndShapeInfo_f)(OrtTensorTypeAndShapeInfo *info);

#define FN(api, name) ((name##_f)(((void *const *)(api))[API_##name]))

/* OrtCustomOp: the fields up to the characteristics (version 8), then the later ones in
 * onnxruntime_c_api.h's order */
typedef struct CustomOp {
    uint32_t version;
    void *(*CreateKernel)(const struct CustomOp *op, const OrtApi *api, const OrtKernelInfo *info);
    const char *(*GetName)(const struct CustomOp *op);
    const char *(*GetExecutionProviderType)(const struct CustomOp *op);
    int (*GetInputType)(const struct CustomOp *op, size_t index);
    size_t (*GetInputTypeCount)(const struct CustomOp *op);
    int (*GetOutputType)(const struct CustomOp *op, size_t index);
    size_t (*GetOutputTypeCount)(const struct CustomOp *op);
    void (*KernelCompute)(void *kernel, OrtKernelContext *ctx);
    void (*KernelDestroy)(void *kernel);
    int (*GetInputCharacteristic)(const struct CustomOp *op, size_t index);
    int (*GetOutputCharacteristic)(const struct CustomOp *op, size_t index);
    int (*GetInputMemoryType)(const struct CustomOp *op, size_t index); /* 13 */
    void *variadic_and_v2[5]; /* 14-16: variadic arity and homogeneity, CreateKernelV2 */
    void *KernelComputeV2;                                                     /* 16 */
    OrtStatus *(*InferOutputShapeFn)(const struct CustomOp *op, OrtShapeInferContext *ctx);
    void *GetStartVersion, *GetEndVersion;                                     /* 17 */
    size_t (*GetMayInplace)(int **input_index, int **output_index);           /* 18 */
    void (*ReleaseMayInplace)(int *input_index, int *output_index);
    void *alias_map[2];
    void *later[8]; /* fields of versions after 18: never read at the versions used */
} CustomOp;

typedef struct DwOp {
    CustomOp base; /* first: onnxruntime hands back a pointer to it */
    const char *name;
    int x_type, y_type;
} DwOp;

#endif
