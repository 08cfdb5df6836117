/* An input's float32 data converted for the program in one pass that also looks for NaN
 * (core/program/input_casts.py calls these through ctypes, not through onnxruntime):
 *
 *   rknnrt_quantize_f32: y = saturate(round_half_even(x / scale) + zp) as int8 or uint8,
 *     the division in float32 (model/numerics.quantize, onnxruntime's QuantizeLinear);
 *   rknnrt_half_f32: y = x rounded to float16, nearest even (numpy's astype, F16C's
 *     VCVTPS2PH, 16 lanes with AVX-512).
 *
 * Each returns 1 as soon as it meets a NaN (y is then partly written: the caller converts the
 * array again with numpy, whose NaN bits differ from the CPU's), else 0. The Python side had
 * needed two passes for this (np.isnan(x.max()), then onnxruntime's op through a session and
 * an IO binding: 0.14 ms for a 1x3x224x224 input read cold after a run). AVX-512, AVX2(+F16C)
 * paths chosen by cpuid; the scalar path computes the same values everywhere else. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_kernel.h"
#include "cpu.h"
#include "inputcast.h"

#define EXPORT __attribute__((visibility("default")))

static int max_level = 2; /* set by rknnrt_inputcast_max_level: the tests' narrower paths */

EXPORT void rknnrt_inputcast_max_level(int level) { max_level = level; }

/* elements [i0, n) scalar; 1 on a NaN, or with `nan_min` the type's minimum for it */
static int quantize_scalar(const float *x, int64_t i0, int64_t n, float scale, int32_t zp,
                           int is_signed, int nan_min, uint8_t *y) {
    const float lo = (float)((is_signed ? -128 : 0) - zp);
    const float hi = (float)((is_signed ? 127 : 255) - zp);
    for (int64_t i = i0; i < n; i++) {
        float v = x[i];
        if (v != v) {
            if (!nan_min)
                return 1;
            y[i] = (uint8_t)((int32_t)lo + zp); /* the type's minimum */
            continue;
        }
        v = v / scale;
        v = v < lo ? lo : (v > hi ? hi : v); /* integer bounds: clamp, then round */
        y[i] = (uint8_t)((int32_t)nearbyintf(v) + zp);
    }
    return 0;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* 16 at a time; returns the elements done, or -1 on a NaN (with `nan_min`: VMAXPS returns
 * its second operand for a NaN, the lower bound, so NaN becomes the type's minimum) */
__attribute__((target("avx512f"))) static int64_t quantize_avx512(const float *x, int64_t n,
                                                                  float scale, int32_t zp,
                                                                  int is_signed, int nan_min,
                                                                  uint8_t *y) {
    const __m512 s = _mm512_set1_ps(scale);
    const __m512 lo = _mm512_set1_ps((float)((is_signed ? -128 : 0) - zp));
    const __m512 hi = _mm512_set1_ps((float)((is_signed ? 127 : 255) - zp));
    const __m512i z = _mm512_set1_epi32(zp);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        if (!nan_min && _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q))
            return -1;
        const __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(v, s), lo), hi);
        /* VCVTPS2DQ rounds by MXCSR (nearest even, as nearbyintf); in range after + zp */
        const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(t), z);
        _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(q));
    }
    return i;
}

__attribute__((target("avx2"))) static int64_t quantize_avx2(const float *x, int64_t n,
                                                             float scale, int32_t zp,
                                                             int is_signed, int nan_min,
                                                             uint8_t *y) {
    const __m256 s = _mm256_set1_ps(scale);
    const __m256 lo = _mm256_set1_ps((float)((is_signed ? -128 : 0) - zp));
    const __m256 hi = _mm256_set1_ps((float)((is_signed ? 127 : 255) - zp));
    const __m256i z = _mm256_set1_epi32(zp);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (!nan_min && _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            return -1;
        const __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v, s), lo), hi);
        const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(t), z);
        /* in [-128, 255]: the packs keep the values; the low byte is the result either way */
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q),
                                          _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(y + i),
                         is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w));
    }
    return i;
}

/* the same conversion 16 a step (AVX-512F's VCVTPS2PH) */
__attribute__((target("avx512f"))) static int64_t half_avx512(const float *x, int64_t n,
                                                              uint16_t *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q))
            return -1;
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

__attribute__((target("avx2,f16c"))) static int64_t half_f16c(const float *x, int64_t n,
                                                              uint16_t *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            return -1;
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}
#endif

static int quantize(const float *x, int64_t n, float scale, int32_t zp, int is_signed,
                    int nan_min, uint8_t *y) {
    int64_t done = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (max_level >= 2 && cpu_avx512f())
        done = quantize_avx512(x, n, scale, zp, is_signed, nan_min, y);
    else if (max_level >= 1 && cpu_avx2())
        done = quantize_avx2(x, n, scale, zp, is_signed, nan_min, y);
    if (done < 0)
        return 1;
#endif
    return quantize_scalar(x, done, n, scale, zp, is_signed, nan_min, y);
}

EXPORT int rknnrt_quantize_f32(const float *x, int64_t n, float scale, int32_t zp,
                               int is_signed, uint8_t *y) {
    return quantize(x, n, scale, zp, is_signed, 0, y);
}

/* Ops `rknnrt.kernels::QuantizeFloat_<t>` (t: u8 or s8): QuantizeLinear(x, scale, zp) of a
 * float32 tensor with per-tensor parameters, p = (scale, zp) (float32 [2]), the same values
 * (a NaN: the type's minimum, as MLAS's). core/program/softmax_quantize.py puts one after a
 * Softmax so that onnxruntime does not fuse DequantizeLinear -> Softmax -> QuantizeLinear into
 * its QLinearSoftmax, which scales by floor(1 / ys) and sums its lookup table one element at
 * a time (other bytes than the nodes' definition, and 3x slower). */
typedef struct QuantizeOp {
    CustomOp base;
    const char *name;
    int type;
} QuantizeOp;

typedef struct QuantizeKernel {
    const OrtApi *api;
    int is_signed;
} QuantizeKernel;

static void *create_kernel(const CustomOp *op, const OrtApi *api, const OrtKernelInfo *info) {
    (void)info;
    QuantizeKernel *k = (QuantizeKernel *)calloc(1, sizeof(QuantizeKernel));
    if (k != NULL)
        *k = (QuantizeKernel){api, ((const QuantizeOp *)op)->type == T_INT8};
    return k;
}

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const QuantizeKernel *k = (const QuantizeKernel *)kernel;
    const OrtApi *api = k->api;
    const OrtValue *in[2];
    if (kernel_inputs(api, ctx, in, 2))
        return;
    int64_t dims[16], pd[16];
    size_t rank = 0, pr = 0;
    if (tensor_dims(api, in[0], dims, 16, &rank) || tensor_dims(api, in[1], pd, 16, &pr) ||
        pr != 1 || pd[0] != 2)
        return;
    int64_t count = 0;
    OrtValue *out = output_like(api, ctx, dims, rank, &count);
    if (out == NULL)
        return;
    void *x = NULL, *p = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in[0], &x) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[1], &p) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL || count == 0)
        return;
    const float *params = (const float *)p;
    quantize((const float *)x, count, params[0], (int32_t)params[1], k->is_signed, 1,
             (uint8_t *)y);
}

static void destroy_kernel(void *kernel) { free(kernel); }
static const char *op_name(const CustomOp *op) { return ((const QuantizeOp *)op)->name; }
static size_t op_inputs(const CustomOp *op) { (void)op; return 2; }
static size_t op_outputs(const CustomOp *op) { (void)op; return 1; }
static int op_input_type(const CustomOp *op, size_t i) { (void)op; (void)i; return T_FLOAT; }
static int op_output_type(const CustomOp *op, size_t i) {
    (void)i;
    return ((const QuantizeOp *)op)->type;
}

#define QUANTIZE_OP(NAME, T)                                                                   \
    {{8, create_kernel, op_name, any_provider, op_input_type, op_inputs, op_output_type,      \
      op_outputs, compute, destroy_kernel, required, required},                                \
     NAME, T}

static QuantizeOp ops[QUANTIZE_OPS] = {
    QUANTIZE_OP("QuantizeFloat_u8", T_UINT8),
    QUANTIZE_OP("QuantizeFloat_s8", T_INT8),
};

const CustomOp *quantize_op(int index) { return &ops[index].base; }

/* float32 -> float16 bits, nearest even, for a value that is not a NaN (the scalar path) */
static uint16_t half_bits(float value) {
    uint32_t f;
    memcpy(&f, &value, 4);
    const uint32_t sign = (f >> 16) & 0x8000u, a = f & 0x7FFFFFFFu;
    if (a >= 0x47800000u) /* >= 65536 (or inf): inf; 65520 <= |x| < 65536 rounds below */
        return (uint16_t)(sign | 0x7C00u);
    if (a >= 0x38800000u) { /* normal in float16: drop 13 bits, nearest even */
        const uint32_t m = a - 0x38000000u; /* rebias the exponent by 112 */
        const uint32_t round = (m >> 12) & 1u, sticky = (m & 0xFFFu) != 0, odd = (m >> 13) & 1u;
        /* (a carry into the exponent, up to inf, is the right result) */
        return (uint16_t)(sign | ((m >> 13) + (round & (sticky | odd))));
    }
    if (a < 0x33000000u) /* below half the smallest subnormal: zero */
        return (uint16_t)sign;
    /* subnormal in float16: the value in units of 2^-24, nearest even */
    const uint32_t e = a >> 23, mant = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e; /* in units of 2^-24 the value is mant / 2^shift */
    const uint32_t q = mant >> shift, rest = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    return (uint16_t)(sign | (q + (rest > half || (rest == half && (q & 1u)))));
}

EXPORT int rknnrt_half_f32(const float *x, int64_t n, uint16_t *y) {
    int64_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (max_level >= 2 && cpu_avx512f())
        i = half_avx512(x, n, y);
    else if (max_level >= 1 && cpu_f16c())
        i = half_f16c(x, n, y);
    if (i < 0)
        return 1;
#endif
    for (; i < n; i++) {
        if (x[i] != x[i])
            return 1;
        y[i] = half_bits(x[i]);
    }
    return 0;
}
