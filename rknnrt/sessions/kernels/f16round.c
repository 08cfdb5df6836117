/* Op `rknnrt.kernels::RoundFloat16`: float32 x -> float32 y of the same shape, each element
 * rounded to the nearest float16 value (ties to even; beyond the float16 range an infinity;
 * a NaN stays a NaN with the low 13 bits of its payload cleared and the quiet bit set). These
 * are the values of onnxruntime's Cast(float16) then Cast(float32), which a float16 program
 * applies to every stored tensor (core/program/fp16_round.py): one pass over the tensor in
 * place of two and no float16 intermediate. The F16C path (VCVTPS2PH, round to nearest even,
 * then VCVTPH2PS) is chosen at run time by cpuid on x86; the scalar path (every other CPU)
 * computes the same bits. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define F16_X86 1
#endif

#include "api_kernel.h"
#include "cpu.h"
#include "f16round.h"

#define EXPORT __attribute__((visibility("default")))

static float round_scalar(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = x & 0x80000000u, a = x ^ sign;
    if (a > 0x7f800000u) { /* NaN: as VCVTPS2PH/VCVTPH2PS leave it */
        x = sign | 0x7fc00000u | (a & 0x007fe000u);
    } else if (a >= 0x477ff000u) { /* 65520 and beyond (or an infinity) round to infinity */
        x = sign | 0x7f800000u;
    } else if (a >= 0x38800000u) { /* a float16 normal: keep 10 mantissa bits, ties to even */
        a = (a + 0x0fffu + ((a >> 13) & 1u)) & ~0x1fffu;
        x = sign | a;
    } else { /* a float16 subnormal or zero: a multiple of 2^-24, exact in float32 steps */
        float v = nearbyintf(f * 16777216.0f) * (1.0f / 16777216.0f);
        return v;
    }
    memcpy(&f, &x, 4);
    return f;
}

#ifdef F16_X86
__attribute__((target("avx,f16c"))) static void round_f16c(const float *x, float *y,
                                                           int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    if (i < count) { /* the tail through the same instructions */
        float in[8] = {0}, out[8];
        memcpy(in, x + i, (size_t)(count - i) * sizeof(float));
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(out, _mm256_cvtph_ps(h));
        memcpy(y + i, out, (size_t)(count - i) * sizeof(float));
    }
}

#endif

EXPORT void f16round_run(const float *x, float *y, int64_t count, int level) {
#ifdef F16_X86
    if (level >= 1 && cpu_f16c()) {
        round_f16c(x, y, count);
        return;
    }
#else
    (void)level;
#endif
    for (int64_t i = 0; i < count; i++)
        y[i] = round_scalar(x[i]);
}

#ifdef F16_X86
__attribute__((target("avx,f16c"))) static void add_round_f16c(const float *a, const float *b,
                                                               float *y, int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 sum = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT)));
    }
    for (; i < count; i++) { /* the tail through the same instructions, one lane used */
        __m128 sum = _mm_add_ss(_mm_set_ss(a[i]), _mm_set_ss(b[i]));
        y[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT)));
    }
}
#endif

/* y[i] = float32(float16(a[i] + b[i])), the sum one IEEE addition; y may be a or b */
void f16round_add_run(const float *a, const float *b, float *y, int64_t count, int level) {
#ifdef F16_X86
    if (level >= 1 && cpu_f16c()) {
        add_round_f16c(a, b, y, count);
        return;
    }
#else
    (void)level;
#endif
    for (int64_t i = 0; i < count; i++)
        y[i] = round_scalar(a[i] + b[i]);
}

/* Op `rknnrt.kernels::HalfTable`: y[i] = table[the float16 bits of round16(x[i])], the table
 * 65536 float32 values: a float16 program's chain of element-wise ops from one rounded tensor
 * to the next rounding, as onnxruntime computed it for every float16 input
 * (core/program/fp16_tables.py). The rounding of x is RoundFloat16's (x already rounded: the
 * same value), so a rounding whose only readers are the chain's is the op's too. Levels: 2
 * AVX-512 gathers, 1 AVX2 and F16C gathers, 0 scalar (the same bits). */

/* the float16 bits of round16(f), as VCVTPS2PH gives them */
static uint32_t half_index(float f) {
    const float r = round_scalar(f); /* a float16 value, an infinity or a NaN */
    uint32_t x;
    memcpy(&x, &r, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) /* an infinity, or a NaN (its quiet bit and payload's top bits) */
        return sign | 0x7c00u | ((a >> 13) & 0x3ffu);
    if (a >= 0x38800000u) /* a normal: the exponent rebiased by 112, 10 mantissa bits */
        return sign | (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu);
    float magnitude; /* a subnormal or zero: a whole number of 2^-24 below 1024 */
    memcpy(&magnitude, &a, 4);
    return sign | (uint32_t)(magnitude * 16777216.0f);
}

static void table_scalar(const float *x, const float *table, float *y, int64_t count) {
    for (int64_t i = 0; i < count; i++)
        y[i] = table[half_index(x[i])];
}

#ifdef F16_X86
__attribute__((target("avx512f"))) static int64_t table_avx512(const float *x, const float *table,
                                                              float *y, int64_t count) {
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
        const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm512_storeu_ps(y + i, _mm512_i32gather_ps(_mm512_cvtepu16_epi32(h), table, 4));
    }
    return i;
}

__attribute__((target("avx2,f16c"))) static int64_t table_avx2(const float *x, const float *table,
                                                              float *y, int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(y + i, _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4));
    }
    return i;
}
#endif

/* y[i] = table[half bits of round16(x[i])]; y may be x; `level` as the op's */
void f16table_run(const float *x, const float *table, float *y, int64_t count, int level) {
    int64_t done = 0;
#ifdef F16_X86
    if (level >= 2 && cpu_avx512f())
        done = table_avx512(x, table, y, count);
    else if (level >= 1 && cpu_avx2() && cpu_f16c())
        done = table_avx2(x, table, y, count);
#else
    (void)level;
#endif
    table_scalar(x + done, table, y + done, count - done);
}

static int table_level = 2; /* set by rknnrt_f16table_max_level: the tests' narrower paths */

EXPORT void rknnrt_f16table_max_level(int level) { table_level = level; }

static int max_level = 1; /* set by rknnrt_f16round_max_level: the tests' scalar path */

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
    const float *a, *b; /* b: the addend (AddRoundFloat16), else NULL */
    const float *table; /* HalfTable's table, else NULL */
    float *y;
    int64_t count, chunk;
} RoundJob;

static void round_chunk(void *data, size_t i) {
    const RoundJob *j = (const RoundJob *)data;
    const int64_t start = (int64_t)i * j->chunk;
    const int64_t n = j->count - start < j->chunk ? j->count - start : j->chunk;
    if (j->table != NULL)
        f16table_run(j->a + start, j->table, j->y + start, n, table_level);
    else if (j->b != NULL)
        f16round_add_run(j->a + start, j->b + start, j->y + start, n, max_level);
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
    RoundJob job = {(const float *)x, NULL, NULL, (float *)y, count, 0};
    if (count > 0)
        run_rounding(api, ctx, &job);
}

/* Op `rknnrt.kernels::AddRoundFloat16`: y = round16(a + b) for a and b of one shape (a float16
 * program's Add and the rounding pair after it: core/program/fp16_blocked_ops.py places it
 * where onnxruntime's layout has proven the shapes equal; others leave the output unset). */
static void compute_add(void *kernel, OrtKernelContext *ctx) {
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
    int64_t count = 0;
    OrtValue *out = output_like(api, ctx, dims, rank, &count);
    if (out == NULL)
        return;
    void *a = NULL, *b = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in[0], &a) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[1], &b) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL)
        return;
    if (a == y || b == y)
        __atomic_fetch_add(&in_place_runs, 1, __ATOMIC_RELAXED);
    RoundJob job = {(const float *)a, (const float *)b, NULL, (float *)y, count, 0};
    if (count > 0)
        run_rounding(api, ctx, &job);
}

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
    int64_t count = 0;
    OrtValue *out = output_like(api, ctx, dims, rank, &count);
    if (out == NULL)
        return;
    void *x = NULL, *table = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in[0], &x) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[1], &table) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL)
        return;
    if (x == y)
        __atomic_fetch_add(&in_place_runs, 1, __ATOMIC_RELAXED);
    RoundJob job = {(const float *)x, NULL, (const float *)table, (float *)y, count, 0};
    if (count > 0)
        run_rounding(api, ctx, &job);
}

static const char *table_name(const CustomOp *op) { (void)op; return "HalfTable"; }
static const char *add_name(const CustomOp *op) { (void)op; return "AddRoundFloat16"; }
static size_t op_two(const CustomOp *op) { (void)op; return 2; }
static const char *op_name(const CustomOp *op) { (void)op; return "RoundFloat16"; }
static size_t op_one(const CustomOp *op) { (void)op; return 1; }
static int op_float(const CustomOp *op, size_t i) { (void)op; (void)i; return T_FLOAT; }

static const CustomOp op = {8, api_kernel_create, op_name, any_provider, op_float, op_one,
                            op_float, op_one, compute, api_kernel_destroy, required, required};
static const CustomOp add_op = {8, api_kernel_create, add_name, any_provider, op_float, op_two,
                                op_float, op_one, compute_add, api_kernel_destroy, required,
                                required};
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

const CustomOp *f16round_op(const OrtApiBase *base) { return versioned(base, &op, &op_in_place); }

const CustomOp *f16table_op(const OrtApiBase *base) {
    return versioned(base, &table_op, &table_op_in_place);
}
