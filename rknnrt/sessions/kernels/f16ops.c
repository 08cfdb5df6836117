/* The float16 rounding ops of rknnrt's kernel library, on f16round.c's arithmetic:
 *   `rknnrt.kernels::RoundFloat16`: float32 x -> float32 y of the same shape, each element
 *     rounded to float16 (onnxruntime's Cast(float16) then Cast(float32), which a float16
 *     program applies to every stored tensor: core/program/fp16_round.py), one pass in place
 *     of two and no float16 intermediate;
 *   `AddRoundFloat16`, `AddReluRoundFloat16`: round16(a + b), round16(Relu(a + b)) (an Add, its
 *     Relu and the rounding after them: core/program/fp16_blocked_ops.py);
 *   `HalfTable`: y = table[the float16 bits of round16(x)] (core/program/fp16_tables.py).
 * Each over the session's threads, its output allowed to take an input's buffer where this
 * onnxruntime declares ops at version 18. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_kernel.h"
#include "f16round.h"

#define EXPORT __attribute__((visibility("default")))

static int table_level = 2; /* set by rknnrt_f16table_max_level: the tests' narrower paths */

EXPORT void rknnrt_f16table_max_level(int level) { table_level = level; }

static int max_level = 2; /* set by rknnrt_f16round_max_level: the tests' narrower paths */

EXPORT void rknnrt_f16round_max_level(int level) { max_level = level; }
int f16round_max_level(void) { return max_level; }

static int64_t in_place_runs; /* runs whose output took the input's buffer: the tests' witness */

EXPORT int64_t rknnrt_f16round_in_place_runs(void) {
    return __atomic_load_n(&in_place_runs, __ATOMIC_RELAXED);
}

/* A tensor's rounding in chunks over the session's threads: at least 64 K values a chunk (a
 * chunk is one memory pass; handing it to a thread costs a few microseconds), at most 32. */
static const OrtApi *parallel_api; /* the table with KernelContext_ParallelFor, or NULL */

void f16round_set_parallel_api(const OrtApi *api) { parallel_api = api; }

typedef struct RoundJob {
    const float *a, *b; /* b: the addend (AddRoundFloat16, AddReluRoundFloat16), else NULL */
    const float *table; /* HalfTable's table, else NULL */
    float *y;
    int64_t count, chunk;
    int relu; /* AddReluRoundFloat16 */
} RoundJob;

static void round_chunk(void *data, size_t i) {
    const RoundJob *j = (const RoundJob *)data;
    const int64_t start = (int64_t)i * j->chunk;
    const int64_t n = j->count - start < j->chunk ? j->count - start : j->chunk;
    if (j->table != NULL)
        f16table_run(j->a + start, j->table, j->y + start, n, table_level);
    else if (j->b != NULL)
        f16round_add_run(j->a + start, j->b + start, j->y + start, n, j->relu, max_level);
    else
        f16round_run(j->a + start, j->y + start, n, max_level);
}

static void run_rounding(const OrtApi *api, OrtKernelContext *ctx, RoundJob *j) {
    int64_t chunks = 0; /* in whole vectors of 16 values */
    j->chunk = chunk_units((j->count + 15) / 16, j->count, 65536, &chunks) * 16;
    run_chunks(api, parallel_api, ctx, round_chunk, (size_t)chunks, j);
}

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const OrtApi *api = ((const ApiKernel *)kernel)->api;
    const OrtValue *in = NULL;
    if (kernel_inputs(api, ctx, &in, 1))
        return;
    int64_t dims[16];
    size_t rank = 0;
    if (tensor_dims(api, in, dims, 16, &rank))
        return;
    int64_t count = 0;
    OrtValue *out = output_like(api, ctx, dims, rank, &count);
    if (out == NULL)
        return;
    void *x = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in, &x) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL)
        return;
    if (x == y)
        __atomic_fetch_add(&in_place_runs, 1, __ATOMIC_RELAXED);
    RoundJob job = {(const float *)x, NULL, NULL, (float *)y, count, 0, 0};
    if (count > 0)
        run_rounding(api, ctx, &job);
}

/* The two-input ops' common part, once their inputs are checked: the output shaped as
 * in[0] (dims, rank), the three buffers and the job over them. in[1] is the addend, or with
 * `table` HalfTable's table (which the output never takes). */
static void run_two_inputs(const OrtApi *api, OrtKernelContext *ctx, const OrtValue *const *in,
                           const int64_t *dims, size_t rank, int table, int relu) {
    int64_t count = 0;
    OrtValue *out = output_like(api, ctx, dims, rank, &count);
    if (out == NULL)
        return;
    void *a = NULL, *b = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in[0], &a) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[1], &b) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL)
        return;
    if (a == y || (!table && b == y))
        __atomic_fetch_add(&in_place_runs, 1, __ATOMIC_RELAXED);
    RoundJob job = {(const float *)a, table ? NULL : (const float *)b,
                    table ? (const float *)b : NULL, (float *)y, count, 0, relu};
    if (count > 0)
        run_rounding(api, ctx, &job);
}

/* AddRoundFloat16 (`relu` 0) and AddReluRoundFloat16: y = round16(a + b), round16(Relu(a + b))
 * for a and b of one shape (a float16 program's Add, its Relu and the rounding pair after them:
 * core/program/fp16_blocked_ops.py places them where onnxruntime's layout has proven the
 * shapes equal; others leave the output unset). */
static void add_rounded(void *kernel, OrtKernelContext *ctx, int relu) {
    const OrtApi *api = ((const ApiKernel *)kernel)->api;
    const OrtValue *in[2];
    if (kernel_inputs(api, ctx, in, 2))
        return;
    int64_t dims[16], other[16];
    size_t rank = 0, other_rank = 0;
    if (tensor_dims(api, in[0], dims, 16, &rank) ||
        tensor_dims(api, in[1], other, 16, &other_rank) ||
        rank != other_rank || memcmp(dims, other, rank * sizeof(int64_t)) != 0)
        return;
    run_two_inputs(api, ctx, in, dims, rank, 0, relu);
}

static void compute_add(void *kernel, OrtKernelContext *ctx) { add_rounded(kernel, ctx, 0); }
static void compute_add_relu(void *kernel, OrtKernelContext *ctx) { add_rounded(kernel, ctx, 1); }

/* HalfTable's node: x of any shape, a table of TABLE_SIZE values (others leave the output
 * unset, and onnxruntime reports the node) */
#define TABLE_SIZE 65536

static void compute_table(void *kernel, OrtKernelContext *ctx) {
    const OrtApi *api = ((const ApiKernel *)kernel)->api;
    const OrtValue *in[2];
    if (kernel_inputs(api, ctx, in, 2))
        return;
    int64_t dims[16], table_dims[16];
    size_t rank = 0, table_rank = 0;
    if (tensor_dims(api, in[0], dims, 16, &rank) ||
        tensor_dims(api, in[1], table_dims, 16, &table_rank) || table_rank != 1 ||
        table_dims[0] != TABLE_SIZE)
        return;
    run_two_inputs(api, ctx, in, dims, rank, 1, 0);
}

static const char *table_name(const CustomOp *op) { (void)op; return "HalfTable"; }
static const char *add_name(const CustomOp *op) { (void)op; return "AddRoundFloat16"; }
static const char *add_relu_name(const CustomOp *op) { (void)op; return "AddReluRoundFloat16"; }
static size_t op_two(const CustomOp *op) { (void)op; return 2; }
static const char *op_name(const CustomOp *op) { (void)op; return "RoundFloat16"; }
static size_t op_one(const CustomOp *op) { (void)op; return 1; }
static int op_float(const CustomOp *op, size_t i) { (void)op; (void)i; return T_FLOAT; }

static const CustomOp op = {8, api_kernel_create, op_name, any_provider, op_float, op_one,
                            op_float, op_one, compute, api_kernel_destroy, required, required};
static const CustomOp add_op = {8, api_kernel_create, add_name, any_provider, op_float, op_two,
                                op_float, op_one, compute_add, api_kernel_destroy, required,
                                required};
static const CustomOp add_relu_op = {8, api_kernel_create, add_relu_name, any_provider, op_float,
                                     op_two, op_float, op_one, compute_add_relu,
                                     api_kernel_destroy, required, required};
static const CustomOp table_op = {8, api_kernel_create, table_name, any_provider, op_float,
                                  op_two, op_float, op_one, compute_table, api_kernel_destroy,
                                  required, required};

/* Version 18: the output may take the input's buffer where onnxruntime's planner sees no later
 * reader of the input. In place, a rounding writes back the lines it has just read instead of
 * a second tensor's: 1.2 M values in 0.17 ms where a fresh output took 0.34 (a C loop), and
 * MobileNetV2 fp16's 53 roundings 1.01 ms where they took 1.68 (benchmarks/real_arch.py's
 * machine, one thread). compute() serves either case: the F16C loop reads a block before
 * writing it, the scalar loop an element. */
#define MAY_INPLACE_VERSION 18

static int input_memory_default(const CustomOp *op, size_t i) { (void)op; (void)i; return 0; }

static size_t may_inplace(int **input_index, int **output_index) {
    *input_index = (int *)calloc(1, sizeof(int)); /* input 0 -> output 0 */
    *output_index = (int *)calloc(1, sizeof(int));
    if (*input_index == NULL || *output_index == NULL) {
        free(*input_index);
        free(*output_index);
        *input_index = *output_index = NULL;
        return 0;
    }
    return 1;
}

/* the sum may take either input's buffer: the second (a conv's fresh output in a residual
 * add) first */
static size_t may_inplace_add(int **input_index, int **output_index) {
    *input_index = (int *)calloc(2, sizeof(int));
    *output_index = (int *)calloc(2, sizeof(int)); /* both -> output 0 */
    if (*input_index == NULL || *output_index == NULL) {
        free(*input_index);
        free(*output_index);
        *input_index = *output_index = NULL;
        return 0;
    }
    (*input_index)[0] = 1;
    return 2;
}

static void release_inplace(int *input_index, int *output_index) {
    free(input_index);
    free(output_index);
}

static const OrtApi *shape_api; /* GetApi(MAY_INPLACE_VERSION), set before the op is added */

/* the output's type and shape are the input's: without them the planner cannot grant the
 * buffer (a blocked program's tensors have no recorded shapes). A dimension the input's shape
 * leaves unknown (-1 and no name) is given a name of its own, unique in the process: set as
 * -1 it would be recorded as a dimension of value -1. */
#define SHAPE_RANK_MAX 16
static uint64_t unknown_dims;

static OrtStatus *same_shape(const CustomOp *op, OrtShapeInferContext *ctx) {
    (void)op;
    const OrtApi *api = __atomic_load_n(&shape_api, __ATOMIC_ACQUIRE);
    OrtTensorTypeAndShapeInfo *info = NULL; /* the context's own: not released here */
    OrtStatus *st = FN(api, ShapeInferContext_GetInputTypeShape)(ctx, 0, &info);
    if (st != NULL || info == NULL)
        return st;
    size_t rank = 0;
    int64_t dims[SHAPE_RANK_MAX];
    const char *names[SHAPE_RANK_MAX];
    char made[SHAPE_RANK_MAX][40];
    if ((st = FN(api, GetDimensionsCount)(info, &rank)) != NULL)
        return st;
    if (rank <= SHAPE_RANK_MAX) {
        if ((st = FN(api, GetDimensions)(info, dims, rank)) != NULL ||
            (st = FN(api, GetSymbolicDimensions)(info, names, rank)) != NULL)
            return st;
        int renamed = 0;
        for (size_t i = 0; i < rank; i++) {
            if (dims[i] >= 0 || (names[i] != NULL && names[i][0] != '\0'))
                continue;
            uint64_t k = __atomic_fetch_add(&unknown_dims, 1, __ATOMIC_RELAXED);
            snprintf(made[i], sizeof made[i], "rknnrt_round16_%llu", (unsigned long long)k);
            names[i] = made[i];
            renamed = 1;
        }
        if (renamed && (st = FN(api, SetSymbolicDimensions)(info, names, rank)) != NULL)
            return st;
    }
    return FN(api, ShapeInferContext_SetOutputTypeShape)(ctx, 0, info);
}

/* the version-18 form of an op of n float32 inputs and one output */
#define IN_PLACE_OP(NAME, INPUTS, COMPUTE, MAY_INPLACE)                                        \
    {.version = MAY_INPLACE_VERSION, .CreateKernel = api_kernel_create, .GetName = NAME,       \
     .GetExecutionProviderType = any_provider, .GetInputType = op_float,                       \
     .GetInputTypeCount = INPUTS, .GetOutputType = op_float, .GetOutputTypeCount = op_one,     \
     .KernelCompute = COMPUTE, .KernelDestroy = api_kernel_destroy,                            \
     .GetInputCharacteristic = required, .GetOutputCharacteristic = required,                  \
     .GetInputMemoryType = input_memory_default, .InferOutputShapeFn = same_shape,             \
     .GetMayInplace = MAY_INPLACE, .ReleaseMayInplace = release_inplace}

static const CustomOp op_in_place = IN_PLACE_OP(op_name, op_one, compute, may_inplace);
static const CustomOp add_op_in_place = IN_PLACE_OP(add_name, op_two, compute_add, may_inplace_add);
static const CustomOp add_relu_op_in_place = IN_PLACE_OP(add_relu_name, op_two, compute_add_relu,
                                                         may_inplace_add);
static const CustomOp table_op_in_place = IN_PLACE_OP(table_name, op_two, compute_table,
                                                      may_inplace);

/* `in_place` where this onnxruntime has the API of version 18 (1.18 and later), else `plain` */
static const CustomOp *versioned(const OrtApiBase *base, const CustomOp *plain,
                                 const CustomOp *in_place) {
    const OrtApi *api = base->GetApi(MAY_INPLACE_VERSION);
    if (api == NULL)
        return plain;
    __atomic_store_n(&shape_api, api, __ATOMIC_RELEASE); /* the same table at every call */
    return in_place;
}

const CustomOp *f16round_add_op(const OrtApiBase *base) {
    return versioned(base, &add_op, &add_op_in_place);
}

const CustomOp *f16round_add_relu_op(const OrtApiBase *base) {
    return versioned(base, &add_relu_op, &add_relu_op_in_place);
}

const CustomOp *f16round_op(const OrtApiBase *base) { return versioned(base, &op, &op_in_place); }

const CustomOp *f16table_op(const OrtApiBase *base) {
    return versioned(base, &table_op, &table_op_in_place);
}
