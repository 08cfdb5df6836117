/* Op `rknnrt.kernels::ConvInt8_u8<y>` (y: u8, s8, or f for float32): a dense int8 convolution
 * (group 1) with per-channel weight zero points, in NHWC, on VNNI's u8 x s8 dot products
 * (core/program/qconv_kernel.py emits it and says why).
 *
 *   inputs  x [N,H,W,C] uint8 (or any rank [..., C] for a 1x1 conv without strides or pads),
 *           w int8 [OCB, K4, 16, 4]: weight s[c][k] of output channel c = 16 b + i at
 *             (b, k / 4, i, k % 4), k = (kh * KW + kw) * C + ci, zero beyond OC and K,
 *           q int32 [2, 16 OCB]: -z[c] (the weights' zero point in s's terms), then
 *             bias[c] - xz * sum_k s[c][k] + K * xz * z[c],
 *           m float32 [16 OCB] ((xs * ws[c]) / ys, or xs * ws[c] for a float32 y)
 *   attrs   kernel_h, kernel_w, channels (OC), x_zero_point, y_zero_point, stride_h/_w,
 *           pad_top/_left/_bottom/_right, dilation_h/_w, activation: int64; alpha, beta,
 *           y_scale: float (read with an activation)
 *   output  y [N,OH,OW,OC] (or [..., OC])
 * per output pixel and channel c, with x = xz where the window leaves the image,
 *   acc = sum_k (x_k - xz)(s[c][k] - z[c]) + bias[c]
 *       = sum_k x_k s[c][k] - z[c] sum_k x_k + q[1][c]         (int32, wrapping: the rewrite
 *         admits only convs whose every acc fits int32, so the wrapped sum is acc itself)
 * then y = saturate(nearbyintf(float(acc) * m[c]) + yz) (clamped before rounding, as
 * onnxruntime's QLinearConv requantises: the same bytes), or float(acc) * m[c] for a float y.
 * With an activation (1 HardSwish, 2 SiLU; an int8 y, m[c] = xs * ws[c]) the product goes
 * through it and QuantizeLinear's division by y_scale before that rounding (epilogue.h): a
 * float island's activation -> QuantizeLinear in the same pass.
 * `ConvInt8Add_u8<y>` (y: u8, s8) takes a fifth input, a uint8 addend laid out as y, and the
 * attributes skip_scale, skip_zero_point, clip_min, clip_max, y_scale: a residual's float
 * program after a conv whose output is not stored, DequantizeLinear of the addend -> Add ->
 * Relu or Clip -> QuantizeLinear, in onnxruntime's float32 steps:
 *   y = saturate(nearbyintf(min(max(float(acc) * m[c] + float(skip - sz) * ss, clip_min),
 *       clip_max) / y_scale) + yz), m[c] = xs * ws[c].
 * A scalar path runs everywhere; an AVX-512 VNNI path (VPDPBUSD, cpuid at run time) computes
 * the same integers 6 pixels x 64 channels at a time, an AVX-VNNI path (its 256-bit VEX form,
 * on CPUs that have it without AVX-512) 6 pixels x 16 channels. rknnrt_qconv_vnni() says which
 * runs: 2, 1, or 0 for the scalar one. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_kernel.h"
#include "cpu.h"
#include "epilogue.h"
#include "qconv.h"
#include "qconv_job.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct QcKernel {
    const OrtApi *api;
    QcParams p;
} QcKernel;

/* set by rknnrt_qconv_max_level: the tests' narrower paths (2 AVX-512 VNNI, 1 AVX-VNNI, 0
 * scalar) */
static int max_level = 2;

EXPORT void rknnrt_qconv_max_level(int level) { max_level = level; }

static int32_t row_sum_scalar(const uint8_t *row, int64_t k) {
    uint32_t s = 0;
    for (int64_t i = 0; i < k; i++)
        s += row[i];
    return (int32_t)s;
}

/* a residual's float program after the conv's value f: Add, Clip (or Relu), QuantizeLinear's
 * division */
static inline float residual_scalar(const QcParams *p, float f, uint8_t skip) {
    f = f + (float)((int32_t)skip - (int32_t)p->sz) * p->ss;
    f = f > p->clo ? f : p->clo;
    f = f < p->chi ? f : p->chi;
    return f / p->act.ys;
}

/* acc -> y for channels [c0, c1) of pixel q (the scalar epilogue, and the reference) */
static void emit_scalar(const QcJob *j, const uint32_t *dots, int64_t q, int64_t c0, int64_t c1,
                        int32_t colsum) {
    const QcParams *p = j->p;
    const float lo = (p->y_type == T_INT8 ? -128.0f : 0.0f) - (float)p->yz;
    const float hi = (p->y_type == T_INT8 ? 127.0f : 255.0f) - (float)p->yz;
    for (int64_t c = c0; c < c1; c++) {
        const int32_t acc = (int32_t)(dots[c - c0] + (uint32_t)j->zneg[c] * (uint32_t)colsum +
                                      (uint32_t)j->corr[c]);
        float f = (float)acc * j->m[c];
        const int64_t at = q * p->oc + c;
        if (p->y_type == T_FLOAT) {
            ((float *)j->y)[at] = f;
            continue;
        }
        if (p->act.kind)
            f = epilogue_scaled(&p->act, f);
        if (p->residual)
            f = residual_scalar(p, f, j->skip[at]);
        f = f < lo ? lo : (f > hi ? hi : f);
        const int32_t v = (int32_t)nearbyintf(f) + (int32_t)p->yz;
        if (p->y_type == T_INT8)
            ((int8_t *)j->y)[at] = (int8_t)v;
        else
            ((uint8_t *)j->y)[at] = (uint8_t)v;
    }
}

static void rows_scalar(const QcJob *j, const uint8_t *a, int64_t lda, int64_t q, int64_t count,
                        uint32_t *dots) {
    for (int64_t i = 0; i < count; i++) {
        const uint8_t *row = a + i * lda;
        for (int64_t c = 0; c < j->p->oc; c++) {
            const int8_t *wb = j->wp + (c / 16) * j->k4 * 64 + (c % 16) * 4;
            uint32_t s = 0;
            for (int64_t k = 0; k < j->k; k++)
                s += (uint32_t)((int32_t)row[k] * (int32_t)wb[(k / 4) * 64 + k % 4]);
            dots[c] = s;
        }
        emit_scalar(j, dots, q + i, 0, j->p->oc, row_sum_scalar(row, j->k));
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

VNNI static int32_t row_sum_vnni(const uint8_t *row, int64_t k) {
    __m512i s = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + 64 <= k; i += 64)
        s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_loadu_si512(row + i),
                                                _mm512_setzero_si512()));
    if (i < k) {
        const __mmask64 mask = ((__mmask64)-1) >> (64 - (k - i));
        s = _mm512_add_epi64(s, _mm512_sad_epu8(_mm512_maskz_loadu_epi8(mask, row + i),
                                                _mm512_setzero_si512()));
    }
    return (int32_t)_mm512_reduce_add_epi64(s);
}

/* tile_MR_NR: the dot products of MR rows with NR blocks of 16 channels, into out[MR][64] */
#define DEFINE_TILE(MR, NR)                                                                   \
    VNNI static void tile_##MR##_##NR(const uint8_t *a, int64_t lda, const int8_t *w,        \
                                      int64_t wstride, int64_t k4, int32_t *out) {           \
        __m512i acc[MR][NR];                                                                  \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++)                                  \
            _Pragma("GCC unroll 4") for (int b = 0; b < NR; b++)                              \
                acc[i][b] = _mm512_setzero_si512();                                           \
        for (int64_t k = 0; k < k4; k++) {                                                    \
            __m512i wv[NR];                                                                   \
            _Pragma("GCC unroll 4") for (int b = 0; b < NR; b++)                              \
                wv[b] = _mm512_loadu_si512(w + b * wstride + k * 64);                         \
            _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                            \
                int32_t four;                                                                 \
                memcpy(&four, a + i * lda + k * 4, 4);                                        \
                const __m512i av = _mm512_set1_epi32(four);                                   \
                _Pragma("GCC unroll 4") for (int b = 0; b < NR; b++)                          \
                    acc[i][b] = _mm512_dpbusd_epi32(acc[i][b], av, wv[b]);                    \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++)                                  \
            _Pragma("GCC unroll 4") for (int b = 0; b < NR; b++)                              \
                _mm512_storeu_si512(out + i * 64 + b * 16, acc[i][b]);                        \
    }

#define DEFINE_TILES(MR) DEFINE_TILE(MR, 1) DEFINE_TILE(MR, 2) DEFINE_TILE(MR, 3) DEFINE_TILE(MR, 4)
DEFINE_TILES(1) DEFINE_TILES(2) DEFINE_TILES(3) DEFINE_TILES(4) DEFINE_TILES(5) DEFINE_TILES(6)

typedef void (*TileFn)(const uint8_t *, int64_t, const int8_t *, int64_t, int64_t, int32_t *);
#define TILE_ROW(MR) {tile_##MR##_1, tile_##MR##_2, tile_##MR##_3, tile_##MR##_4}
static const TileFn tiles[6][4] = {TILE_ROW(1), TILE_ROW(2), TILE_ROW(3),
                                   TILE_ROW(4), TILE_ROW(5), TILE_ROW(6)};

/* out[MR][64] (blocks ob .. ob + nr of pixels q ..) -> y, as emit_scalar computes it */
VNNI static void emit_vnni(const QcJob *j, const int32_t *out, int mr, int nr, int64_t q,
                           int64_t ob, const int32_t *colsum) {
    const QcParams *p = j->p;
    const __m512 lo = _mm512_set1_ps((p->y_type == T_INT8 ? -128.0f : 0.0f) - (float)p->yz);
    const __m512 hi = _mm512_set1_ps((p->y_type == T_INT8 ? 127.0f : 255.0f) - (float)p->yz);
    const __m512i yz = _mm512_set1_epi32((int32_t)p->yz);
    const __m512i sz = _mm512_set1_epi32((int32_t)p->sz);
    const __m512 ss = _mm512_set1_ps(p->ss), clo = _mm512_set1_ps(p->clo);
    const __m512 chi = _mm512_set1_ps(p->chi), ys = _mm512_set1_ps(p->act.ys);
    for (int i = 0; i < mr; i++) {
        const __m512i cs = _mm512_set1_epi32(colsum[i]);
        for (int b = 0; b < nr; b++) {
            const int64_t c = (ob + b) * 16, left = p->oc - c;
            if (left <= 0)
                break;
            const __mmask16 mask = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
            __m512i v = _mm512_loadu_si512(out + i * 64 + b * 16);
            if (j->any_z)
                v = _mm512_add_epi32(v, _mm512_mullo_epi32(_mm512_loadu_si512(j->zneg + c), cs));
            v = _mm512_add_epi32(v, _mm512_loadu_si512(j->corr + c));
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_loadu_ps(j->m + c));
            const int64_t at = (q + i) * p->oc + c;
            if (p->y_type == T_FLOAT) {
                _mm512_mask_storeu_ps((float *)j->y + at, mask, f);
                continue;
            }
            if (p->act.kind)
                f = epilogue_scaled16(&p->act, f);
            if (p->residual) { /* the scalar path's steps, lane by lane */
                const __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, j->skip + at));
                f = _mm512_add_ps(f, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(b, sz)), ss));
                f = _mm512_div_ps(_mm512_min_ps(_mm512_max_ps(f, clo), chi), ys);
            }
            f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
            const __m512i r = _mm512_add_epi32(_mm512_cvtps_epi32(f), yz); /* nearest even */
            if (p->y_type == T_INT8)
                _mm512_mask_cvtsepi32_storeu_epi8((int8_t *)j->y + at, mask, r);
            else
                _mm512_mask_cvtusepi32_storeu_epi8((uint8_t *)j->y + at, mask, r);
        }
    }
}

VNNI static void rows_vnni(const QcJob *j, const uint8_t *a, int64_t lda, int64_t q,
                           int64_t count) {
    int32_t colsum[TILE_PIXELS] = {0};
    int32_t out[6 * 64] __attribute__((aligned(64)));
    for (int64_t i = 0; j->any_z && i < count; i++)
        colsum[i] = row_sum_vnni(a + i * lda, j->k);
    const int64_t wstride = j->k4 * 64;
    for (int64_t ob = 0; ob < j->ocb; ob += 4) {
        const int nr = (int)(j->ocb - ob < 4 ? j->ocb - ob : 4);
        for (int64_t i = 0; i < count; i += 6) {
            const int mr = (int)(count - i < 6 ? count - i : 6);
            tiles[mr - 1][nr - 1](a + i * lda, lda, j->wp + ob * wstride, wstride, j->k4, out);
            emit_vnni(j, out, mr, nr, q + i, ob, colsum + i);
        }
    }
}

#else
static int cpu_avx512_vnni(void) { return 0; }
static int cpu_avx_vnni(void) { return 0; }
#endif

/* the widest VNNI path this CPU runs, within max_level */
static int vnni_level(int most) {
    if (most >= 2 && cpu_avx512_vnni())
        return 2;
    return most >= 1 && cpu_avx_vnni() ? 1 : 0;
}

EXPORT int rknnrt_qconv_vnni(void) { return vnni_level(2); }

/* output pixels [q0, q1) */
static void do_pixels(const QcJob *j, int64_t q0, int64_t q1) {
    const int64_t lda = j->direct ? j->c : j->k4 * 4;
    uint8_t *rows = j->direct ? NULL : (uint8_t *)malloc((size_t)(TILE_PIXELS * lda + ROW_SLACK));
    uint32_t *dots = j->vnni ? NULL : (uint32_t *)malloc((size_t)j->p->oc * sizeof(uint32_t));
    if ((!j->direct && rows == NULL) || (!j->vnni && dots == NULL)) {
        free(rows);
        free(dots);
        return; /* out of memory: the output stays as allocated (cannot be reported here) */
    }
    for (int64_t q = q0; q < q1; q += TILE_PIXELS) {
        const int64_t count = q1 - q < TILE_PIXELS ? q1 - q : TILE_PIXELS;
        const uint8_t *a = j->x + q * j->c;
        if (!j->direct) {
            gather_rows(j, q, count, rows, lda);
            a = rows;
        }
#if defined(__x86_64__)
        if (j->vnni == 2) {
            rows_vnni(j, a, lda, q, count);
            continue;
        }
        if (j->vnni == 1) {
            qconv_rows_avx(j, a, lda, q, count);
            continue;
        }
#endif
        rows_scalar(j, a, lda, q, count, dots);
    }
    free(rows);
    free(dots);
}

typedef struct Chunks {
    const QcJob *job;
    int64_t count;
} Chunks;

static void run_chunk(void *data, size_t i) {
    const Chunks *c = (const Chunks *)data;
    const int64_t n = c->job->pixels;
    do_pixels(c->job, n * (int64_t)i / c->count, n * ((int64_t)i + 1) / c->count);
}

static const OrtApi *parallel_api; /* the table with KernelContext_ParallelFor, or NULL */

void qconv_set_parallel_api(const OrtApi *api) { parallel_api = api; }

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself; the
     * rewrite makes every input consistent */
    const QcKernel *kn = (const QcKernel *)kernel;
    const OrtApi *api = kn->api;
    const QcParams *p = &kn->p;
    const OrtValue *in[5];
    if (kernel_inputs(api, ctx, in, p->residual ? 5 : 4))
        return;
    int64_t xd[8], wd[4], qd[2], md[1];
    size_t xr = 0, wr = 0, qr = 0, mr = 0;
    if (tensor_dims(api, in[0], xd, 8, &xr) || tensor_dims(api, in[1], wd, 4, &wr) ||
        tensor_dims(api, in[2], qd, 2, &qr) || tensor_dims(api, in[3], md, 1, &mr) || xr < 2 ||
        wr != 4 || wd[2] != 16 || wd[3] != 4 || p->oc <= 0 || p->oc > wd[0] * 16 || qr != 2 ||
        qd[0] != 2 || qd[1] != wd[0] * 16 || mr != 1 || md[0] != wd[0] * 16)
        return;
    QcJob j = {0};
    j.p = p;
    j.c = xd[xr - 1];
    const int plain = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 &&
                      p->pl == 0 && p->pb == 0 && p->pr == 0;
    int64_t yd[8];
    memcpy(yd, xd, sizeof(int64_t) * xr);
    if (xr == 4) {
        j.h = xd[1];
        j.w = xd[2];
        j.oh = (j.h + p->pt + p->pb - (p->dh * (p->kh - 1) + 1)) / p->sh + 1;
        j.ow = (j.w + p->pl + p->pr - (p->dw * (p->kw - 1) + 1)) / p->sw + 1;
        j.oh = j.oh < 0 ? 0 : j.oh;
        j.ow = j.ow < 0 ? 0 : j.ow;
        yd[1] = j.oh;
        yd[2] = j.ow;
        j.pixels = xd[0] * j.oh * j.ow;
    } else {
        if (!plain)
            return;
        j.pixels = 1;
        for (size_t i = 0; i + 1 < xr; i++)
            j.pixels *= xd[i];
        j.h = 1;
        j.w = j.oh = j.ow = j.pixels;
    }
    yd[xr - 1] = p->oc;
    j.k = p->kh * p->kw * j.c;
    j.k4 = (j.k + 3) / 4;
    j.ocb = wd[0];
    if (wd[1] != j.k4)
        return;
    j.direct = plain && j.c % 4 == 0;
    if (p->residual) { /* the addend is laid out as y */
        int64_t sd[8];
        size_t sr = 0;
        if (tensor_dims(api, in[4], sd, 8, &sr) || sr != xr || memcmp(sd, yd, sr * sizeof(int64_t)))
            return;
        void *skip = NULL;
        if (FN(api, GetTensorMutableData)((OrtValue *)in[4], &skip) != NULL)
            return;
        j.skip = (const uint8_t *)skip;
    }
    OrtValue *out = NULL;
    if (FN(api, KernelContext_GetOutput)(ctx, 0, yd, xr, &out) != NULL || out == NULL)
        return;
    void *d[5];
    for (size_t i = 0; i < 4; i++)
        if (FN(api, GetTensorMutableData)((OrtValue *)in[i], &d[i]) != NULL)
            return;
    if (FN(api, GetTensorMutableData)(out, &d[4]) != NULL)
        return;
    j.x = (const uint8_t *)d[0];
    j.wp = (const int8_t *)d[1];
    j.zneg = (const int32_t *)d[2];
    j.corr = j.zneg + j.ocb * 16;
    j.m = (const float *)d[3];
    j.y = d[4];
    for (int64_t c = 0; c < p->oc && !j.any_z; c++)
        j.any_z = j.zneg[c] != 0;
    j.vnni = vnni_level(max_level);
    if (j.pixels <= 0)
        return;
    Chunks chunks = {&j, (j.pixels + TILE_PIXELS - 1) / TILE_PIXELS};
    chunks.count = chunks.count < 32 ? chunks.count : 32;
    run_chunks(api, parallel_api, ctx, run_chunk, (size_t)chunks.count, &chunks);
}

typedef struct QcOp {
    CustomOp base;
    const char *name;
    int y_type;
    int residual; /* ConvInt8Add_*: a fifth input, the uint8 addend */
} QcOp;

static int64_t at_least_one(int64_t v) { return v < 1 ? 1 : v; }

static void *create_kernel(const CustomOp *op, const OrtApi *api, const OrtKernelInfo *info) {
    QcKernel *k = (QcKernel *)calloc(1, sizeof(QcKernel));
    if (k == NULL)
        return NULL;
    k->api = api;
    QcParams *p = &k->p;
    p->y_type = ((const QcOp *)op)->y_type;
    p->kh = at_least_one(attr_int64(api, info, "kernel_h", 1));
    p->kw = at_least_one(attr_int64(api, info, "kernel_w", 1));
    p->oc = attr_int64(api, info, "channels", 0);
    p->xz = attr_int64(api, info, "x_zero_point", 0);
    p->yz = attr_int64(api, info, "y_zero_point", 0);
    p->sh = at_least_one(attr_int64(api, info, "stride_h", 1));
    p->sw = at_least_one(attr_int64(api, info, "stride_w", 1));
    p->pt = attr_int64(api, info, "pad_top", 0);
    p->pl = attr_int64(api, info, "pad_left", 0);
    p->pb = attr_int64(api, info, "pad_bottom", 0);
    p->pr = attr_int64(api, info, "pad_right", 0);
    p->dh = at_least_one(attr_int64(api, info, "dilation_h", 1));
    p->dw = at_least_one(attr_int64(api, info, "dilation_w", 1));
    const int64_t activation = attr_int64(api, info, "activation", 0);
    p->act.kind = p->y_type == T_FLOAT ? ACT_NONE : epilogue_kind(activation);
    p->act.alpha = attr_float(api, info, "alpha", 1.0f / 6.0f);
    p->act.beta = attr_float(api, info, "beta", 0.5f);
    p->act.ys = attr_float(api, info, "y_scale", 1.0f);
    p->residual = ((const QcOp *)op)->residual;
    if (p->residual) {
        p->act.kind = ACT_NONE;
        p->sz = attr_int64(api, info, "skip_zero_point", 0);
        p->ss = attr_float(api, info, "skip_scale", 1.0f);
        p->clo = attr_float(api, info, "clip_min", -INFINITY);
        p->chi = attr_float(api, info, "clip_max", INFINITY);
    }
    return k;
}

static const char *op_name(const CustomOp *op) { return ((const QcOp *)op)->name; }
static size_t op_inputs(const CustomOp *op) { return ((const QcOp *)op)->residual ? 5 : 4; }
static size_t op_outputs(const CustomOp *op) { (void)op; return 1; }

static int op_input_type(const CustomOp *op, size_t i) {
    static const int types[5] = {T_UINT8, T_INT8, T_INT32, T_FLOAT, T_UINT8};
    (void)op;
    return types[i < 5 ? i : 0];
}

static int op_output_type(const CustomOp *op, size_t i) {
    (void)i;
    return ((const QcOp *)op)->y_type;
}

#define QC_OP(NAME, YT, RES)                                                                   \
    {{8, create_kernel, op_name, any_provider, op_input_type, op_inputs, op_output_type,       \
      op_outputs, compute, api_kernel_destroy, required, required, {0}},                       \
     NAME, YT, RES}

static QcOp ops[QCONV_OPS] = {
    QC_OP("ConvInt8_u8u8", T_UINT8, 0),
    QC_OP("ConvInt8_u8s8", T_INT8, 0),
    QC_OP("ConvInt8_u8f", T_FLOAT, 0), /* a conv whose output is not stored: float(acc) * m */
    QC_OP("ConvInt8Add_u8u8", T_UINT8, 1), /* a residual's conv, Add, Clip, QuantizeLinear */
    QC_OP("ConvInt8Add_u8s8", T_INT8, 1),
};

const CustomOp *qconv_op(int i) { return i >= 0 && i < QCONV_OPS ? &ops[i].base : NULL; }
