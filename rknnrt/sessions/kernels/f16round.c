/* The arithmetic of the float16 rounding ops (f16ops.c): each float32 value rounded to the
 * nearest float16 value (ties to even; beyond the float16 range an infinity; a NaN stays a
 * NaN with the low 13 bits of its payload cleared and the quiet bit set). These are the values
 * of onnxruntime's Cast(float16) then Cast(float32), which a float16 program applies to every
 * stored tensor (core/program/fp16_round.py). The F16C path (VCVTPS2PH, round to nearest even,
 * then VCVTPH2PS) and its 16-lane AVX-512 form are chosen at run time by cpuid on x86; the
 * scalar path (every other CPU) computes the same bits. Also the sum before a rounding (with its Relu), and HalfTable's
 * lookup by a rounded value's float16 bits. */

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define F16_X86 1
#endif

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

/* the same instructions at 16 lanes (AVX-512F's forms of VCVTPS2PH and VCVTPH2PS), the tail
 * through masked loads and stores: ~2x the 8-lane loop on tensors a core's cache holds */
__attribute__((target("avx512f"))) static void round_avx512(const float *x, float *y,
                                                            int64_t count) {
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(h));
    }
    if (i < count) {
        const __mmask16 m = (__mmask16)((1u << (count - i)) - 1u);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(h));
    }
}
#endif

/* the widest rounding path this CPU runs: 2 AVX-512, 1 F16C, 0 scalar (the tests' witness) */
EXPORT int rknnrt_f16round_widest(void) {
#ifdef F16_X86
    return cpu_avx512f() ? 2 : cpu_f16c() ? 1 : 0;
#else
    return 0;
#endif
}

EXPORT void f16round_run(const float *x, float *y, int64_t count, int level) {
#ifdef F16_X86
    if (level >= 2 && cpu_avx512f()) {
        round_avx512(x, y, count);
        return;
    }
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
/* relu: onnxruntime's Relu of the sum, max(0, s) with s kept where it is not below 0 (a -0 or
 * a NaN stays), as std::max(s, 0) and MAXPS(0, s) give it */
__attribute__((target("avx,f16c"))) static void add_round_f16c(const float *a, const float *b,
                                                               float *y, int64_t count,
                                                               int relu) {
    const __m256 zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 sum = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        if (relu)
            sum = _mm256_max_ps(zero, sum);
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT)));
    }
    for (; i < count; i++) { /* the tail through the same instructions, one lane used */
        __m128 sum = _mm_add_ss(_mm_set_ss(a[i]), _mm_set_ss(b[i]));
        if (relu)
            sum = _mm_max_ss(_mm_setzero_ps(), sum);
        y[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT)));
    }
}

__attribute__((target("avx512f"))) static void add_round_avx512(const float *a, const float *b,
                                                                float *y, int64_t count,
                                                                int relu) {
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t i = 0; i < count; i += 16) {
        const __mmask16 m = count - i >= 16 ? (__mmask16)0xFFFF
                                            : (__mmask16)((1u << (count - i)) - 1u);
        __m512 sum = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i),
                                   _mm512_maskz_loadu_ps(m, b + i));
        if (relu)
            sum = _mm512_max_ps(zero, sum);
        __m256i h = _mm512_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(h));
    }
}
#endif

void f16round_add_run(const float *a, const float *b, float *y, int64_t count, int relu,
                      int level) {
#ifdef F16_X86
    if (level >= 2 && cpu_avx512f()) {
        add_round_avx512(a, b, y, count, relu);
        return;
    }
    if (level >= 1 && cpu_f16c()) {
        add_round_f16c(a, b, y, count, relu);
        return;
    }
#else
    (void)level;
#endif
    for (int64_t i = 0; i < count; i++) {
        float sum = a[i] + b[i];
        if (relu)
            sum = sum < 0.0f ? 0.0f : sum;
        y[i] = round_scalar(sum);
    }
}

/* HalfTable (f16ops.c): y[i] = table[the float16 bits of round16(x[i])], the table
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
