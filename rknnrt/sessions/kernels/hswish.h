/* The HardSwish-then-QuantizeLinear epilogue the int8 conv kernels (qconv.c, dw_arith.c) may
 * apply to a conv's float32 output v: onnxruntime's HardSwish is HardSigmoid then Mul,
 *     h = max(min(alpha * v + beta, 1), 0),   v * h
 * and its QuantizeLinear divides by the scale: (v * h) / ys, which the caller clamps, rounds
 * half to even and offsets by the zero point as for any requantisation. Each step is one
 * float32 operation in onnxruntime's order (never contracted: -ffp-contract=off), so the bytes
 * are its own (tests/perf/test_conv_hardswish.py). */

#ifndef RKNNRT_HSWISH_H
#define RKNNRT_HSWISH_H

typedef struct HardSwish {
    int on;
    float alpha, beta, ys;
} HardSwish;

static inline float hswish_scaled(const HardSwish *a, float v) {
    float h = a->alpha * v + a->beta;
    h = h < 1.0f ? h : 1.0f;
    h = h > 0.0f ? h : 0.0f;
    return (v * h) / a->ys;
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) static inline __m256 hswish_scaled8(const HardSwish *a,
                                                                    __m256 v) {
    __m256 h = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(a->alpha), v),
                             _mm256_set1_ps(a->beta));
    h = _mm256_max_ps(_mm256_min_ps(h, _mm256_set1_ps(1.0f)), _mm256_setzero_ps());
    return _mm256_div_ps(_mm256_mul_ps(v, h), _mm256_set1_ps(a->ys));
}

__attribute__((target("avx512f"))) static inline __m512 hswish_scaled16(const HardSwish *a,
                                                                        __m512 v) {
    __m512 h = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(a->alpha), v),
                             _mm512_set1_ps(a->beta));
    h = _mm512_max_ps(_mm512_min_ps(h, _mm512_set1_ps(1.0f)), _mm512_setzero_ps());
    return _mm512_div_ps(_mm512_mul_ps(v, h), _mm512_set1_ps(a->ys));
}
#endif

#endif
