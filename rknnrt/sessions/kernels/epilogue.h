/* The activation-then-QuantizeLinear epilogue the int8 conv kernels (qconv.c, dw_arith.c) may
 * apply to a conv's float32 output v before requantising it: onnxruntime's own float32 steps,
 * in its order, so that the bytes are its own (tests/perf/test_conv_epilogue.py):
 *   HardSwish (HardSigmoid then Mul):  h = max(min(alpha * v + beta, 1), 0), v * h;
 *   SiLU (Sigmoid then Mul, which onnxruntime fuses into QuickGelu): v * s with s its
 *     logistic's rational function of v clamped to [-18, 18], evaluated by fused
 *     multiply-adds, then clamped to [0, 1] (its Sigmoid op alone returns 1.0000001 for some
 *     inputs near 18; QuickGelu's logistic does not); where an onnxruntime computes otherwise,
 *     core/program/conv_epilogue.py's probe keeps SiLU out;
 *   Sigmoid alone (a squeeze-and-excitation gate): that rational function bounded below by 0
 *     only, as onnxruntime's Sigmoid op computes it (probed the same way);
 * then QuantizeLinear's division by the scale: act(v) / ys, which the caller clamps, rounds
 * half to even and offsets by the zero point. Never contracted beyond the FMAs written here
 * (-ffp-contract=off). rknnrt_activation_run computes act(v) alone, for that probe. */

#ifndef RKNNRT_EPILOGUE_H
#define RKNNRT_EPILOGUE_H

#include <math.h>
#include <stdint.h>

enum { ACT_NONE = 0, ACT_HARDSWISH = 1, ACT_SILU = 2, ACT_SIGMOID = 3 };

typedef struct Epilogue {
    int kind;
    float alpha, beta, ys;
} Epilogue;

/* the logistic's constants (onnxruntime's MLAS, after Eigen) */
#define LOGISTIC_RANGE 18.0f
#define LOGISTIC_P {4.37031012579801e-11f, 1.15627324459942e-07f, 6.08574864600143e-05f, \
                    8.51377133304701e-03f, 2.48287947061529e-01f}
#define LOGISTIC_Q {6.10247389755681e-13f, 5.76102136993427e-09f, 6.29106785017040e-06f, \
                    1.70198817374094e-03f, 1.16817656904453e-01f, 9.93151921023180e-01f}

/* an `activation` attribute's kind: one known here, else none (the rewrite writes only these) */
static inline int epilogue_kind(int64_t attribute) {
    return attribute == ACT_HARDSWISH || attribute == ACT_SILU || attribute == ACT_SIGMOID
               ? (int)attribute
               : ACT_NONE;
}

/* `ceiling`: QuickGelu's bound of the result by 1 (SiLU); Sigmoid's op bounds it by 0 alone */
static inline float logistic_scalar(float v, int ceiling) {
    static const float P[5] = LOGISTIC_P, Q[6] = LOGISTIC_Q;
    v = v > -LOGISTIC_RANGE ? v : -LOGISTIC_RANGE;
    v = v < LOGISTIC_RANGE ? v : LOGISTIC_RANGE;
    const float v2 = v * v;
    float p = fmaf(v2, P[0], P[1]), q = fmaf(v2, Q[0], Q[1]);
    for (int i = 2; i < 5; i++)
        p = fmaf(p, v2, P[i]);
    for (int i = 2; i < 6; i++)
        q = fmaf(q, v2, Q[i]);
    float r = (p * v) / q + 0.5f;
    if (ceiling)
        r = r < 1.0f ? r : 1.0f;
    return r > 0.0f ? r : 0.0f;
}

static inline float activation_scalar(const Epilogue *e, float v) {
    if (e->kind == ACT_SILU)
        return v * logistic_scalar(v, 1);
    if (e->kind == ACT_SIGMOID)
        return logistic_scalar(v, 0);
    float h = e->alpha * v + e->beta;
    h = h < 1.0f ? h : 1.0f;
    h = h > 0.0f ? h : 0.0f;
    return v * h;
}

static inline float epilogue_scaled(const Epilogue *e, float v) {
    return activation_scalar(e, v) / e->ys;
}

#if defined(__x86_64__)
#include <immintrin.h>

#define EPILOGUE_VECTOR(NAME, TARGET, V, SET1, ADD, MUL, DIV, MIN, MAX, FMA, ZERO)              \
    __attribute__((target(TARGET))) static inline V NAME(const Epilogue *e, V v) {             \
        V a;                                                                                   \
        if (e->kind == ACT_SILU || e->kind == ACT_SIGMOID) {                                   \
            static const float P[5] = LOGISTIC_P, Q[6] = LOGISTIC_Q;                           \
            V c = MIN(MAX(v, SET1(-LOGISTIC_RANGE)), SET1(LOGISTIC_RANGE));                    \
            V c2 = MUL(c, c), p = FMA(c2, SET1(P[0]), SET1(P[1]));                             \
            V q = FMA(c2, SET1(Q[0]), SET1(Q[1]));                                             \
            for (int i = 2; i < 5; i++)                                                        \
                p = FMA(p, c2, SET1(P[i]));                                                    \
            for (int i = 2; i < 6; i++)                                                        \
                q = FMA(q, c2, SET1(Q[i]));                                                    \
            V s = ADD(DIV(MUL(p, c), q), SET1(0.5f));                                          \
            a = e->kind == ACT_SIGMOID ? MAX(s, ZERO())                                        \
                                       : MUL(v, MAX(MIN(s, SET1(1.0f)), ZERO()));              \
        } else {                                                                               \
            V h = ADD(MUL(SET1(e->alpha), v), SET1(e->beta));                                  \
            a = MUL(v, MAX(MIN(h, SET1(1.0f)), ZERO()));                                       \
        }                                                                                      \
        return DIV(a, SET1(e->ys));                                                            \
    }

/* MAX(x, bound) / MIN(x, bound) with x first: x's lanes where they compare as the scalar
 * ternaries above do */
EPILOGUE_VECTOR(epilogue_scaled8, "avx2,fma", __m256, _mm256_set1_ps, _mm256_add_ps,
                _mm256_mul_ps, _mm256_div_ps, _mm256_min_ps, _mm256_max_ps, _mm256_fmadd_ps,
                _mm256_setzero_ps)
EPILOGUE_VECTOR(epilogue_scaled16, "avx512f", __m512, _mm512_set1_ps, _mm512_add_ps,
                _mm512_mul_ps, _mm512_div_ps, _mm512_min_ps, _mm512_max_ps, _mm512_fmadd_ps,
                _mm512_setzero_ps)
#endif

#endif
