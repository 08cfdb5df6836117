/* Ops `rknnrt.kernels::ChannelMul_<t>` (t: u8 or s8): a byte tensor x in channels-last order
 * [N, ..., C] times a per-channel byte gate g (N x C or C values, any shape), requantised,
 *
 *     y[n, ..., c] = saturate(round(float((x - zx) * (g[n, c] - zg)) * ratio + zy))
 *
 * which is what onnxruntime's QLinearMul computes on x86 (MLAS's SSE2 kernel: the integer
 * product, converted to float32, times ratio = xs * gs / ys, plus zy, rounded by the CPU's mode,
 * nearest even, then saturated). An int8 program's squeeze-and-excitation multiply (MobileNetV3,
 * EfficientNet: DequantizeLinear(x) * DequantizeLinear(gate) -> QuantizeLinear, the gate
 * [N, C, 1, 1]) reaches onnxruntime as such a QLinearMul in NHWC, whose broadcast calls MLAS
 * once per pixel for C values (1.5-2 ns an element); this op does the same arithmetic in one
 * pass (core/program/channel_muls.py; the bytes are the same: tests/perf/test_channel_muls.py).
 * Inputs: x, g, p = (ratio, zx, zg, zy) (float32 [4]). The rewrite admits only a ratio that
 * keeps every product * ratio + zy inside int32 and normal, so no conversion overflows.
 * AVX-512 and AVX2 paths (chosen by cpuid at run time) compute the same operations 16 or 8
 * elements at a time; the scalar path runs everywhere else and on the elements left over. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "api_kernel.h"
#include "chanmul.h"
#include "cpu.h"

#define EXPORT __attribute__((visibility("default")))

/* One run's job. The gate repeats every C elements of the channels-last stream; `period`
 * elements (a multiple of 16 and of C) of it are laid out per image as floats, fg = g - zg and
 * fz = zx fg, so the vector paths read the stream straight through: x fg - fz is the integer
 * product exactly (both products and the difference are integers below 2^24). */
typedef struct MulJob {
    const uint8_t *x, *g;
    uint8_t *y;
    int64_t per_image; /* elements of one image: pixels x C */
    int64_t channels, images, g_images, period, periods_per_image, chunk, total;
    float ratio, zy;
    int32_t zx, zg, lo, hi;
    int is_signed;
    float *fg, *fz; /* [g_images][period] each */
} MulJob;

static int max_level = 2; /* set by rknnrt_chanmul_max_level: the tests' narrower paths */

EXPORT void rknnrt_chanmul_max_level(int level) { max_level = level; }

static inline int32_t byte_value(const uint8_t *p, int64_t i, int is_signed) {
    return is_signed ? (int32_t)(int8_t)p[i] : (int32_t)p[i];
}

/* elements [i0, i1) of one image's stream (x, y at the image), scalar */
static void run_scalar(const MulJob *j, const uint8_t *x, const uint8_t *g, uint8_t *y,
                       int64_t i0, int64_t i1) {
    int64_t c = i0 % j->channels;
    for (int64_t i = i0; i < i1; i++, c = c + 1 == j->channels ? 0 : c + 1) {
        const int32_t prod = (byte_value(x, i, j->is_signed) - j->zx) *
                             (byte_value(g, c, j->is_signed) - j->zg);
        float v = (float)prod * j->ratio;
        v = v + j->zy;
        int32_t q = (int32_t)nearbyintf(v);
        q = q < j->lo ? j->lo : (q > j->hi ? j->hi : q);
        y[i] = (uint8_t)q;
    }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* elements [i0, i1) of one image, i0 and i1 - i0 multiples of 16, 16 at a time
 * (VCVTPS2DQ rounds by MXCSR: nearest even, as nearbyintf in the default mode; the signed
 * saturating narrowing is MLAS's packs, and for uint8 after max(., 0) its packus) */
__attribute__((target("avx512f"))) static void run_avx512(const MulJob *j, const uint8_t *x,
                                                          uint8_t *y, const float *fg,
                                                          const float *fz, int64_t i0,
                                                          int64_t i1) {
    /* (locals: the byte stores may alias the job, which the compiler would reload each time) */
    const __m512 ratio = _mm512_set1_ps(j->ratio), zy = _mm512_set1_ps(j->zy);
    const __m512i zero = _mm512_setzero_si512();
    const int64_t period = j->period;
    const int is_signed = j->is_signed;
    int64_t k = i0 % period;
    for (int64_t i = i0; i < i1; i += 16, k = k + 16 == period ? 0 : k + 16) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(x + i));
        const __m512 xf = _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(b)
                                                       : _mm512_cvtepu8_epi32(b));
        const __m512 prod = _mm512_sub_ps(_mm512_mul_ps(xf, _mm512_loadu_ps(fg + k)),
                                          _mm512_loadu_ps(fz + k));
        const __m512i q = _mm512_cvtps_epi32(_mm512_add_ps(_mm512_mul_ps(prod, ratio), zy));
        if (is_signed)
            _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtsepi32_epi8(q));
        else
            _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtusepi32_epi8(_mm512_max_epi32(q, zero)));
    }
}

/* the same, 8 at a time */
__attribute__((target("avx2"))) static void run_avx2(const MulJob *j, const uint8_t *x,
                                                     uint8_t *y, const float *fg,
                                                     const float *fz, int64_t i0, int64_t i1) {
    const __m256 ratio = _mm256_set1_ps(j->ratio), zy = _mm256_set1_ps(j->zy);
    const int64_t period = j->period;
    const int is_signed = j->is_signed;
    int64_t k = i0 % period;
    for (int64_t i = i0; i < i1; i += 8, k = k + 8 == period ? 0 : k + 8) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(x + i));
        const __m256 xf = _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(b)
                                                       : _mm256_cvtepu8_epi32(b));
        const __m256 prod = _mm256_sub_ps(_mm256_mul_ps(xf, _mm256_loadu_ps(fg + k)),
                                          _mm256_loadu_ps(fz + k));
        const __m256i q = _mm256_cvtps_epi32(_mm256_add_ps(_mm256_mul_ps(prod, ratio), zy));
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q),
                                          _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(y + i),
                         is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w));
    }
}
#endif

/* periods [chunk * i, chunk * (i + 1)) of all images' streams, each image's part in one go */
static void run_chunk(void *data, size_t i) {
    const MulJob *j = (const MulJob *)data;
    const int64_t p0 = (int64_t)i * j->chunk;
    const int64_t p1 = p0 + j->chunk < j->total ? p0 + j->chunk : j->total;
    for (int64_t p = p0; p < p1;) {
        const int64_t n = p / j->periods_per_image, gi = n % j->g_images;
        const int64_t last = (n + 1) * j->periods_per_image < p1 ? (n + 1) * j->periods_per_image
                                                                 : p1;
        const int64_t e0 = (p - n * j->periods_per_image) * j->period;
        int64_t e1 = (last - n * j->periods_per_image) * j->period;
        e1 = e1 < j->per_image ? e1 : j->per_image;
        const uint8_t *x = j->x + n * j->per_image;
        uint8_t *y = j->y + n * j->per_image;
        int64_t e = e0;
#if defined(__x86_64__) || defined(__i386__)
        const float *fg = j->fg + gi * j->period, *fz = j->fz + gi * j->period;
        const int64_t whole = e0 + (e1 - e0) / 16 * 16;
        if (max_level >= 2 && cpu_avx512f())
            run_avx512(j, x, y, fg, fz, e0, e = whole);
        else if (max_level >= 1 && cpu_avx2())
            run_avx2(j, x, y, fg, fz, e0, e = whole);
#endif
        run_scalar(j, x, j->g + gi * j->channels, y, e, e1);
        p = last;
    }
}

static const OrtApi *parallel_api; /* the table with KernelContext_ParallelFor, or NULL */

void chanmul_set_parallel_api(const OrtApi *api) { parallel_api = api; }

typedef struct MulOp {
    CustomOp base;
    const char *name;
    int type;
} MulOp;

typedef struct MulKernel {
    const OrtApi *api;
    int is_signed;
} MulKernel;

static void *create_kernel(const CustomOp *op, const OrtApi *api, const OrtKernelInfo *info) {
    (void)info;
    MulKernel *k = (MulKernel *)calloc(1, sizeof(MulKernel));
    if (k != NULL)
        *k = (MulKernel){api, ((const MulOp *)op)->type == T_INT8};
    return k;
}

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const MulKernel *k = (const MulKernel *)kernel;
    const OrtApi *api = k->api;
    const OrtValue *in[3];
    if (kernel_inputs(api, ctx, in, 3))
        return;
    int64_t dims[16], gd[16], pd[16];
    size_t rank = 0, gr = 0, pr = 0;
    if (tensor_dims(api, in[0], dims, 16, &rank) || tensor_dims(api, in[1], gd, 16, &gr) ||
        tensor_dims(api, in[2], pd, 16, &pr))
        return;
    if (rank < 2 || pr != 1 || pd[0] != 4 || dims[0] <= 0 || dims[rank - 1] <= 0)
        return;
    int64_t pixels = 1, g_count = 1;
    for (size_t i = 1; i + 1 < rank; i++)
        pixels *= dims[i] > 0 ? dims[i] : 0;
    for (size_t i = 0; i < gr; i++)
        g_count *= gd[i] > 0 ? gd[i] : 0;
    const int64_t images = dims[0], channels = dims[rank - 1];
    if (g_count != channels && g_count != images * channels)
        return;
    OrtValue *out = NULL;
    if (FN(api, KernelContext_GetOutput)(ctx, 0, dims, rank, &out) != NULL || out == NULL)
        return;
    void *x = NULL, *g = NULL, *p = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in[0], &x) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[1], &g) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[2], &p) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL || pixels == 0)
        return;
    const float *params = (const float *)p;
    MulJob job = {(const uint8_t *)x, (const uint8_t *)g, (uint8_t *)y, pixels * channels,
                  channels, images, g_count / channels, 0, 0, 0, 0, params[0], params[3],
                  (int32_t)params[1], (int32_t)params[2], k->is_signed ? -128 : 0,
                  k->is_signed ? 127 : 255, k->is_signed, NULL, NULL};
    int64_t period = channels;
    while (period % 16)
        period += channels;
    job.period = period;
    job.fg = (float *)malloc((size_t)(2 * job.g_images * period) * sizeof(float));
    if (job.fg == NULL)
        return;
    job.fz = job.fg + job.g_images * period;
    for (int64_t n = 0; n < job.g_images; n++)
        for (int64_t e = 0; e < period; e++) {
            const float fg = (float)(byte_value(job.g, n * channels + e % channels, k->is_signed) -
                                     job.zg);
            job.fg[n * period + e] = fg;
            job.fz[n * period + e] = (float)job.zx * fg; /* exact: |zx fg| < 2^16 */
        }
    job.periods_per_image = (job.per_image + period - 1) / period;
    job.total = images * job.periods_per_image;
    /* chunks of at least 16 K elements over the session's threads (inline with one thread) */
    int64_t count = 0;
    job.chunk = chunk_units(job.total, images * job.per_image, 16384, &count);
    run_chunks(api, parallel_api, ctx, run_chunk, (size_t)count, &job);
    free(job.fg);
}

static void destroy_kernel(void *kernel) { free(kernel); }
static const char *op_name(const CustomOp *op) { return ((const MulOp *)op)->name; }
static size_t op_inputs(const CustomOp *op) { (void)op; return 3; }
static size_t op_outputs(const CustomOp *op) { (void)op; return 1; }
static int op_input_type(const CustomOp *op, size_t i) {
    return i == 2 ? T_FLOAT : ((const MulOp *)op)->type;
}
static int op_output_type(const CustomOp *op, size_t i) {
    (void)i;
    return ((const MulOp *)op)->type;
}

#define MUL_OP(NAME, T)                                                                        \
    {{8, create_kernel, op_name, any_provider, op_input_type, op_inputs, op_output_type,      \
      op_outputs, compute, destroy_kernel, required, required},                                \
     NAME, T}

static MulOp ops[CHANMUL_OPS] = {
    MUL_OP("ChannelMul_u8", T_UINT8),
    MUL_OP("ChannelMul_s8", T_INT8),
};

const CustomOp *chanmul_op(int index) { return &ops[index].base; }
