/* Ops of a float16 program's squeeze-and-excitation blocks kept in onnxruntime's blocked
 * channel layout (NCHWc: a [N, Cp, H, W] tensor, Cp = C rounded up to the block, stored as
 * [N][Cp / block][H][W][block]; core/program/fp16_blocked_ops.py puts them in place):
 *
 *   GlobalMeanBlocked(x blocked [N, Cp, H, W]) -> blocked [N, Cp, 1, 1]
 *       each channel's mean with the sums of onnxruntime's plain (NCHW) GlobalAveragePool
 *       (MLAS's global pooling kernel): four partial sums, pixel p into sum p % 4, over the
 *       first 4 * floor(HW / 4) pixels, then (s0 + s2) + (s1 + s3), then the remaining
 *       pixels one by one, then divided by float(HW). Its blocked kernel sums in another
 *       order (other float32 bits). With round = 1 each mean is rounded to float16 after
 *       (f16round.c's rounding: the Cast pair a float16 program puts after the pool);
 *   MulRoundBlocked(a blocked, b blocked) -> blocked
 *       round16(a * b) (f16round.c's rounding), the inputs broadcast as ONNX Mul broadcasts
 *       4-D tensors of the same channels (a dimension of 1 against any): the graph's
 *       ReorderOutputs -> Mul -> Cast pair -> ReorderInput. The padded channels are 0, as
 *       ReorderInput writes them.
 *
 * Attributes: block (both); channels, the real ones (MulRoundBlocked); round
 * (GlobalMeanBlocked). Built with
 * -ffp-contract=off: every sum, product and the division are single IEEE operations; the loops
 * run across a block's channels, each channel's order as above (tests/perf/
 * test_fp16_blocked_ops.py: the bits of onnxruntime's nodes). */

#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BLOCKED_X86 1
#endif

#include "api_kernel.h"
#include "blocked.h"
#include "cpu.h"
#include "f16round.h"

#define MAX_BLOCK 64

typedef struct BlockKernel {
    const OrtApi *api;
    int64_t block, channels; /* channels: the real ones (MulRoundBlocked) */
    int64_t round;           /* GlobalMeanBlocked: its means rounded to float16 */
} BlockKernel;

static void *create_kernel(const CustomOp *op, const OrtApi *api, const OrtKernelInfo *info) {
    (void)op;
    BlockKernel *k = (BlockKernel *)calloc(1, sizeof(BlockKernel));
    if (k != NULL)
        *k = (BlockKernel){api, attr_int64(api, info, "block", 0),
                           attr_int64(api, info, "channels", 0),
                           attr_int64(api, info, "round", 0)};
    return k;
}

static int block_ok(int64_t block) { return block >= 1 && block <= MAX_BLOCK; }

/* The sums of one plane (hw pixels of B lanes) as the plain pool orders them, B known where
 * inlined: the lanes' loops become vector adds. */
static inline __attribute__((always_inline)) void mean_plane(const float *in, int64_t hw,
                                                            int64_t B, float *y) {
    float s0[MAX_BLOCK], s1[MAX_BLOCK], s2[MAX_BLOCK], s3[MAX_BLOCK];
    for (int64_t j = 0; j < B; j++)
        s0[j] = s1[j] = s2[j] = s3[j] = 0.0f;
    const int64_t whole = hw / 4 * 4;
    for (int64_t p = 0; p < whole; p += 4, in += 4 * B)
        for (int64_t j = 0; j < B; j++) {
            s0[j] = s0[j] + in[j];
            s1[j] = s1[j] + in[B + j];
            s2[j] = s2[j] + in[2 * B + j];
            s3[j] = s3[j] + in[3 * B + j];
        }
    for (int64_t j = 0; j < B; j++)
        s0[j] = (s0[j] + s2[j]) + (s1[j] + s3[j]);
    for (int64_t p = whole; p < hw; p++, in += B)
        for (int64_t j = 0; j < B; j++)
            s0[j] = s0[j] + in[j];
    const float count = (float)hw;
    for (int64_t j = 0; j < B; j++)
        y[j] = s0[j] / count;
}

#define MEAN_PLANES(SUFFIX, TARGET)                                                            \
    TARGET static void mean_planes_##SUFFIX(const float *x, int64_t planes, int64_t hw,        \
                                            int64_t block, float *y) {                         \
        for (int64_t q = 0; q < planes; q++) {                                                 \
            const float *in = x + q * hw * block;                                              \
            if (block == 16)                                                                   \
                mean_plane(in, hw, 16, y + q * 16);                                            \
            else if (block == 8)                                                               \
                mean_plane(in, hw, 8, y + q * 8);                                              \
            else                                                                               \
                mean_plane(in, hw, block, y + q * block);                                      \
        }                                                                                      \
    }
MEAN_PLANES(base, )
#ifdef BLOCKED_X86
MEAN_PLANES(avx2, __attribute__((target("avx2"))))
#endif

/* y[q][j] = the mean of x[q][p][j] over p < hw in the plain pool's order, for planes q
 * (N x Cp / block) and lanes j < block */
static void global_mean_planes(const float *x, int64_t planes, int64_t hw, int64_t block,
                               float *y) {
#ifdef BLOCKED_X86
    if (cpu_avx2()) {
        mean_planes_avx2(x, planes, hw, block, y);
        return;
    }
#endif
    mean_planes_base(x, planes, hw, block, y);
}

/* the stride of a dimension of `d` entries against the output's `o`: 0 where it broadcasts */
static int64_t step(int64_t d, int64_t o, int64_t stride) { return d == 1 && o != 1 ? 0 : stride; }

#ifdef BLOCKED_X86
/* out[p * 16 + j] = round16(a[p * as + j] * b[p * bs + j]) for p < n: AVX2 and F16C, the
 * rounding VCVTPS2PH's (f16round.c's F16C path) */
__attribute__((target("avx2,f16c"))) static void mul_round_row16(const float *a, int64_t as,
                                                                const float *b, int64_t bs,
                                                                int64_t n, float *out) {
    if (bs == 0 || as == 0) { /* a gate: its 16 lanes loaded once */
        const float *g = bs == 0 ? b : a, *x = bs == 0 ? a : b;
        const int64_t xs = bs == 0 ? as : bs;
        const __m256 glo = _mm256_loadu_ps(g), ghi = _mm256_loadu_ps(g + 8);
        for (int64_t p = 0; p < n; p++, x += xs, out += 16) {
            /* the operands in the graph's order: a product is the same either way */
            __m256 lo = _mm256_mul_ps(_mm256_loadu_ps(x), glo);
            __m256 hi = _mm256_mul_ps(_mm256_loadu_ps(x + 8), ghi);
            _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)));
            _mm256_storeu_ps(out + 8,
                             _mm256_cvtph_ps(_mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT)));
        }
        return;
    }
    for (int64_t p = 0; p < n; p++, a += as, b += bs, out += 16) {
        __m256 lo = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
        __m256 hi = _mm256_mul_ps(_mm256_loadu_ps(a + 8), _mm256_loadu_ps(b + 8));
        _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)));
        _mm256_storeu_ps(out + 8,
                         _mm256_cvtph_ps(_mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT)));
    }
}
#endif

typedef struct MulJob {
    const float *a, *b;
    const int64_t *yd;
    int64_t as[4], bs[4], block, cb, real_lanes_last, chunk;
    int level, fast;
    float *y;
} MulJob;

/* output planes q0 .. q1 - 1 (q = n * cb + channel block) */
static void mul_round_planes(const MulJob *j, int64_t q0, int64_t q1) {
    const int64_t *yd = j->yd, *as = j->as, *bs = j->bs, block = j->block;
    /* a plane whose rows follow one another in both inputs is one row */
    const int flat = as[2] == yd[3] * as[3] && bs[2] == yd[3] * bs[3];
    const int64_t rows = flat ? 1 : yd[2], width = flat ? yd[2] * yd[3] : yd[3];
    for (int64_t q = q0; q < q1; q++) {
        const int64_t n = q / j->cb, c = q % j->cb;
        const int64_t lanes = c == j->cb - 1 ? j->real_lanes_last : block;
        float *out = j->y + q * yd[2] * yd[3] * block, *plane = out;
        for (int64_t h = 0; h < rows; h++) {
            const float *pa = j->a + n * as[0] + c * as[1] + h * as[2];
            const float *pb = j->b + n * bs[0] + c * bs[1] + h * bs[2];
#ifdef BLOCKED_X86
            if (j->fast && lanes == 16) {
                mul_round_row16(pa, as[3], pb, bs[3], width, out);
                out += width * 16;
                continue;
            }
#endif
            for (int64_t w = 0; w < width; w++, out += block) {
                int64_t i = 0;
                for (; i < lanes; i++)
                    out[i] = pa[w * as[3] + i] * pb[w * bs[3] + i];
                for (; i < block; i++)
                    out[i] = 0.0f;
            }
        }
        if (!j->fast || lanes != block) /* rounded while the plane is in the caches */
            f16round_run(plane, plane, out - plane, j->level);
    }
}

static void mul_round_chunk(void *data, size_t i) {
    const MulJob *j = (const MulJob *)data;
    const int64_t q0 = (int64_t)i * j->chunk, total = j->yd[0] * j->cb;
    mul_round_planes(j, q0, q0 + j->chunk < total ? q0 + j->chunk : total);
}

static void mul_job(MulJob *j, const float *a, const int64_t *ad, const float *b,
                    const int64_t *bd, const int64_t *yd, int64_t block, int64_t channels_real,
                    float *y) {
    /* strides in floats of dims n, channel block, h, w (a block's lanes are contiguous) */
    const int64_t *d[2] = {ad, bd};
    int64_t *s[2] = {j->as, j->bs};
    for (int i = 0; i < 2; i++) {
        const int64_t w = block, h = d[i][3] * w, c = d[i][2] * h, n = d[i][1] / block * c;
        s[i][0] = step(d[i][0], yd[0], n);
        s[i][1] = c; /* the channels are never broadcast */
        s[i][2] = step(d[i][2], yd[2], h);
        s[i][3] = step(d[i][3], yd[3], w);
    }
    j->a = a, j->b = b, j->yd = yd, j->y = y, j->block = block, j->cb = yd[1] / block;
    j->real_lanes_last = channels_real - (j->cb - 1) * block;
    j->level = f16round_max_level();
#ifdef BLOCKED_X86
    j->fast = block == 16 && j->level >= 1 && cpu_avx2() && cpu_f16c();
#else
    j->fast = 0;
#endif
}

static const OrtApi *parallel_api; /* the table with KernelContext_ParallelFor, or NULL */

void blocked_set_parallel_api(const OrtApi *api) { parallel_api = api; }

typedef struct MeanJob {
    const float *x;
    float *y;
    int64_t planes, hw, block, chunk;
} MeanJob;

static void mean_chunk(void *data, size_t i) {
    const MeanJob *j = (const MeanJob *)data;
    const int64_t q0 = (int64_t)i * j->chunk;
    const int64_t n = q0 + j->chunk < j->planes ? j->chunk : j->planes - q0;
    global_mean_planes(j->x + q0 * j->hw * j->block, n, j->hw, j->block, j->y + q0 * j->block);
}

static void *data_of(const OrtApi *api, const OrtValue *value) {
    void *p = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)value, &p) != NULL)
        return NULL;
    return p;
}

static void global_mean(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const BlockKernel *k = (const BlockKernel *)kernel;
    const OrtApi *api = k->api;
    const OrtValue *x = NULL;
    int64_t xd[4];
    size_t xr = 0;
    if (!block_ok(k->block) || kernel_inputs(api, ctx, &x, 1) || tensor_dims(api, x, xd, 4, &xr) ||
        xr != 4 || xd[1] % k->block != 0 || xd[2] < 1 || xd[3] < 1)
        return;
    const int64_t dims[4] = {xd[0], xd[1], 1, 1};
    int64_t total = 0;
    OrtValue *out = output_like(api, ctx, dims, 4, &total);
    if (out == NULL || total == 0)
        return;
    MeanJob job = {(const float *)data_of(api, x), (float *)data_of(api, out),
                   xd[0] * (xd[1] / k->block), xd[2] * xd[3], k->block, 0};
    if (job.x == NULL || job.y == NULL)
        return;
    int64_t count = 0;
    job.chunk = chunk_units(job.planes, job.planes * job.hw * job.block, 16384, &count);
    run_chunks(api, parallel_api, ctx, mean_chunk, (size_t)count, &job);
    if (k->round) /* N x Cp values: one short pass on this thread */
        f16round_run(job.y, job.y, total, f16round_max_level());
}

static void mul_round(void *kernel, OrtKernelContext *ctx) {
    const BlockKernel *k = (const BlockKernel *)kernel;
    const OrtApi *api = k->api;
    const OrtValue *in[2];
    int64_t ad[4], bd[4], yd[4];
    size_t ar = 0, br = 0;
    if (!block_ok(k->block) || kernel_inputs(api, ctx, in, 2) ||
        tensor_dims(api, in[0], ad, 4, &ar) || tensor_dims(api, in[1], bd, 4, &br) || ar != 4 ||
        br != 4 || ad[1] != bd[1] || ad[1] % k->block != 0 || k->channels < 1 ||
        k->channels > ad[1] || k->channels <= ad[1] - k->block)
        return;
    for (int i = 0; i < 4; i++) {
        if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
            return;
        yd[i] = ad[i] == 1 ? bd[i] : ad[i];
    }
    int64_t total = 0;
    OrtValue *out = output_like(api, ctx, yd, 4, &total);
    if (out == NULL || total == 0)
        return;
    const float *as = (const float *)data_of(api, in[0]), *bs = (const float *)data_of(api, in[1]);
    float *y = (float *)data_of(api, out);
    if (as == NULL || bs == NULL || y == NULL)
        return;
    MulJob job;
    mul_job(&job, as, ad, bs, bd, yd, k->block, k->channels, y);
    int64_t count = 0;
    job.chunk = chunk_units(yd[0] * job.cb, total, 16384, &count);
    run_chunks(api, parallel_api, ctx, mul_round_chunk, (size_t)count, &job);
}

static const char *mean_name(const CustomOp *op) { (void)op; return "GlobalMeanBlocked"; }
static const char *mul_name(const CustomOp *op) { (void)op; return "MulRoundBlocked"; }
static size_t two(const CustomOp *op) { (void)op; return 2; }
static size_t one(const CustomOp *op) { (void)op; return 1; }
static int float_type(const CustomOp *op, size_t i) { (void)op; (void)i; return T_FLOAT; }
static int input_memory_default(const CustomOp *op, size_t i) { (void)op; (void)i; return 0; }

/* Output shapes, so that onnxruntime knows the shapes after these nodes (its planner lets a
 * later RoundFloat16 take its input's buffer only then; f16round.c). An input whose rank is
 * not 4 (its shape not known) leaves the output's unknown too. */
#define SHAPE_VERSION 17
static const OrtApi *shape_api; /* GetApi(SHAPE_VERSION), set before the ops are added */

/* input i's info (the context's own, not released here), its dims and their names; 1 when
 * the rank is not 4 */
static int input_shape(const OrtApi *api, OrtShapeInferContext *ctx, size_t i,
                       OrtTensorTypeAndShapeInfo **info, int64_t *dims, const char **names,
                       OrtStatus **st) {
    size_t rank = 0;
    *info = NULL;
    if ((*st = FN(api, ShapeInferContext_GetInputTypeShape)(ctx, i, info)) != NULL ||
        *info == NULL || (*st = FN(api, GetDimensionsCount)(*info, &rank)) != NULL || rank != 4)
        return 1;
    if ((*st = FN(api, GetDimensions)(*info, dims, 4)) != NULL ||
        (*st = FN(api, GetSymbolicDimensions)(*info, names, 4)) != NULL)
        return 1;
    return 0;
}

static OrtStatus *set_output(const OrtApi *api, OrtShapeInferContext *ctx,
                             OrtTensorTypeAndShapeInfo *info, const int64_t *dims,
                             const char **names) {
    OrtStatus *st = FN(api, SetDimensions)(info, dims, 4);
    if (st == NULL)
        st = FN(api, SetSymbolicDimensions)(info, names, 4);
    return st != NULL ? st : FN(api, ShapeInferContext_SetOutputTypeShape)(ctx, 0, info);
}

static OrtStatus *mean_shape(const CustomOp *op, OrtShapeInferContext *ctx) {
    (void)op;
    const OrtApi *api = __atomic_load_n(&shape_api, __ATOMIC_ACQUIRE);
    OrtTensorTypeAndShapeInfo *info;
    int64_t dims[4];
    const char *names[4];
    OrtStatus *st = NULL;
    if (input_shape(api, ctx, 0, &info, dims, names, &st))
        return st;
    dims[2] = dims[3] = 1;
    names[2] = names[3] = "";
    return set_output(api, ctx, info, dims, names);
}

static OrtStatus *mul_shape(const CustomOp *op, OrtShapeInferContext *ctx) {
    (void)op;
    const OrtApi *api = __atomic_load_n(&shape_api, __ATOMIC_ACQUIRE);
    OrtTensorTypeAndShapeInfo *a, *b;
    int64_t ad[4], bd[4];
    const char *an[4], *bn[4];
    OrtStatus *st = NULL;
    if (input_shape(api, ctx, 0, &a, ad, an, &st) || input_shape(api, ctx, 1, &b, bd, bn, &st))
        return st;
    for (int i = 0; i < 4; i++)
        if (ad[i] == 1 && bd[i] != 1) { /* broadcast: the other's dimension */
            ad[i] = bd[i];
            an[i] = bn[i];
        }
    return set_output(api, ctx, a, ad, an);
}

#define OP_FIELDS(NAME, INPUTS, COMPUTE)                                                        \
    .CreateKernel = create_kernel, .GetName = NAME, .GetExecutionProviderType = any_provider,  \
    .GetInputType = float_type, .GetInputTypeCount = INPUTS, .GetOutputType = float_type,      \
    .GetOutputTypeCount = one, .KernelCompute = COMPUTE, .KernelDestroy = api_kernel_destroy,  \
    .GetInputCharacteristic = required, .GetOutputCharacteristic = required

static const CustomOp plain_ops[BLOCKED_OPS] = {
    {.version = 8, OP_FIELDS(mean_name, one, global_mean)},
    {.version = 8, OP_FIELDS(mul_name, two, mul_round)},
};
static const CustomOp shaped_ops[BLOCKED_OPS] = {
    {.version = SHAPE_VERSION, OP_FIELDS(mean_name, one, global_mean),
     .GetInputMemoryType = input_memory_default, .InferOutputShapeFn = mean_shape},
    {.version = SHAPE_VERSION, OP_FIELDS(mul_name, two, mul_round),
     .GetInputMemoryType = input_memory_default, .InferOutputShapeFn = mul_shape},
};

const CustomOp *blocked_op(const OrtApiBase *base, int i) {
    const OrtApi *api = base->GetApi(SHAPE_VERSION);
    if (api == NULL) /* an onnxruntime before 1.17: no output shapes */
        return &plain_ops[i];
    __atomic_store_n(&shape_api, api, __ATOMIC_RELEASE);
    return &shaped_ops[i];
}
