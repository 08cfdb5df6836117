/* The arithmetic paths of rknnrt's int8 depthwise kernel (dwconv.c says what it computes and
 * registers it with onnxruntime; dw_job.c runs a convolution over them): a scalar path and,
 * chosen at run time from cpuid, AVX2 and AVX-512 (BW, VL, VNNI) paths; all integer sums and
 * the same float32 product and rounding, so they agree bit for bit
 * (tests/perf/test_dw_kernel.py runs each). The vector paths take interior pixels two taps at a
 * time as int16 pairs (madd), with xz * sum(w) folded into the bias. */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dw_arith.h"
#include "dw_paths.h"

#ifdef DW_X86
#include <immintrin.h>
#endif


static inline int32_t load_x(const void *x, int is_signed, size_t i) {
    return is_signed ? (int32_t)((const int8_t *)x)[i] : (int32_t)((const uint8_t *)x)[i];
}

/* one output value: float32 product, nearest-even rounding, clamp, zero point */
static inline int32_t requantize(int32_t acc, float m, float lo, float hi, int32_t yz,
                                 const Epilogue *act) {
    float v = (float)acc * m;
    if (act->kind) /* the activation, then QuantizeLinear's division (epilogue.h) */
        v = epilogue_scaled(act, v);
    v = v < lo ? lo : (v > hi ? hi : v); /* bounds are integers: clamp then round is the same */
    return (int32_t)nearbyintf(v) + yz;
}

static inline void store_y(void *y, int is_signed, size_t i, int32_t v) {
    if (is_signed)
        ((int8_t *)y)[i] = (int8_t)v;
    else
        ((uint8_t *)y)[i] = (uint8_t)v;
}

/* channels [c0, c1) of one output pixel, scalar */
void pixel_scalar(const DwParams *k, const Shape *s, const void *x, const int32_t *w,
                         const int32_t *bias, const float *m, void *y, const int64_t *taps,
                         const int64_t *tap_w, int ntaps, size_t out, int64_t c0, float lo,
                         float hi) {
    for (int64_t c = c0; c < s->c; c++) {
        int32_t acc = bias[c];
        for (int t = 0; t < ntaps; t++)
            acc += (load_x(x, k->x_signed, (size_t)(taps[t] + c)) - (int32_t)k->xz) *
                   w[tap_w[t] + c];
        if (k->y_float)
            ((float *)y)[out + (size_t)c] = (float)acc * m[c];
        else
            store_y(y, k->y_signed, out + (size_t)c,
                    requantize(acc, m[c], lo, hi, (int32_t)k->yz, &k->act));
    }
}

#ifdef DW_X86
__attribute__((target("avx2,fma"))) static inline __m256i load8_x(const void *x, int is_signed,
                                                              int64_t i) {
    __m128i b = _mm_loadl_epi64((const __m128i *)((const uint8_t *)x + i));
    return is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
}

__attribute__((target("avx2,fma"))) static inline void store8_y(void *y, int64_t i, __m256i v,
                                                            int is_signed) {
    __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    __m128i h16 = _mm_packs_epi32(lo, hi); /* values are in range: no saturation happens */
    __m128i b = is_signed ? _mm_packs_epi16(h16, h16) : _mm_packus_epi16(h16, h16);
    _mm_storel_epi64((__m128i *)((uint8_t *)y + i), b);
}

__attribute__((target("avx2,fma"))) static inline __m256i requantize8(__m256i acc, const float *m,
                                                                  __m256 lo, __m256 hi,
                                                                  __m256i yz,
                                                                  const Epilogue *act) {
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_loadu_ps(m));
    if (act->kind)
        v = epilogue_scaled8(act, v);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    /* cvtps rounds by MXCSR: nearest-even by default, as nearbyintf */
    return _mm256_add_epi32(_mm256_cvtps_epi32(v), yz);
}

/* 8 outputs from their sums at element e: the float product, stored as it is (island form)
 * or requantised */
__attribute__((target("avx2,fma"))) static inline void emit8(const DwParams *k, void *y, int64_t e,
                                                         __m256i acc, const float *m, __m256 lo,
                                                         __m256 hi, __m256i yz) {
    if (k->y_float)
        _mm256_storeu_ps((float *)y + e,
                         _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_loadu_ps(m)));
    else
        store8_y(y, e, requantize8(acc, m, lo, hi, yz, &k->act), k->y_signed);
}

/* channels [c, C - C % 8) of one output pixel whose taps are listed (a border pixel), 16 then
 * 8 at a time, in int32 products; returns where it stopped */
__attribute__((target("avx2,fma"))) int64_t pixel_avx2(const DwParams *k, const Shape *s,
                                                          const void *x, const int32_t *w,
                                                          const int32_t *bias, const float *m,
                                                          void *y, const int64_t *taps,
                                                          const int64_t *tap_w, int ntaps,
                                                          size_t out, int64_t c, float lo_f,
                                                          float hi_f) {
    const __m256i xz = _mm256_set1_epi32((int32_t)k->xz), yz = _mm256_set1_epi32((int32_t)k->yz);
    const __m256 lo = _mm256_set1_ps(lo_f), hi = _mm256_set1_ps(hi_f);
    const int xs = k->x_signed;
    for (; c + 16 <= s->c; c += 16) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(bias + c));
        __m256i a1 = _mm256_loadu_si256((const __m256i *)(bias + c + 8));
        for (int t = 0; t < ntaps; t++) {
            const int64_t xi = taps[t] + c;
            const int32_t *wp = w + tap_w[t] + c;
            __m256i x0 = _mm256_sub_epi32(load8_x(x, xs, xi), xz);
            __m256i x1 = _mm256_sub_epi32(load8_x(x, xs, xi + 8), xz);
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(x0, _mm256_loadu_si256((const __m256i *)wp)));
            a1 = _mm256_add_epi32(
                a1, _mm256_mullo_epi32(x1, _mm256_loadu_si256((const __m256i *)(wp + 8))));
        }
        emit8(k, y, (int64_t)out + c, a0, m + c, lo, hi, yz);
        emit8(k, y, (int64_t)out + c + 8, a1, m + c + 8, lo, hi, yz);
    }
    for (; c + 8 <= s->c; c += 8) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(bias + c));
        for (int t = 0; t < ntaps; t++) {
            __m256i x0 = _mm256_sub_epi32(load8_x(x, xs, taps[t] + c), xz);
            a0 = _mm256_add_epi32(
                a0, _mm256_mullo_epi32(x0, _mm256_loadu_si256((const __m256i *)(w + tap_w[t] + c))));
        }
        emit8(k, y, (int64_t)out + c, a0, m + c, lo, hi, yz);
    }
    return c;
}

/* The interior pixels (every tap inside the input), 16 channels at a time: the products of
 * two taps summed by one madd of int16 pairs (|x|, |w - wz| <= 255: each pair sum fits int32),
 * x taken as it is and xz * sum(w - wz) taken off the bias once (bias_adj), which is the same
 * integer. `packed`: per tap pair and 16-channel block, the two taps' weights interleaved as
 * unpacklo/unpackhi interleave the two taps' x (an odd last tap pairs with a zero weight). */
__attribute__((target("avx2,fma"))) void interior_avx2(
    const DwParams *k, const void *x, const int64_t *rel, int npairs, const int16_t *packed,
    int64_t blocks, const int32_t *bias_adj, const float *m, void *y, int64_t e0, float lo_f,
    float hi_f, int64_t count, int64_t x_step, int64_t y_step) {
    const __m256i yz = _mm256_set1_epi32((int32_t)k->yz);
    const __m256 lo = _mm256_set1_ps(lo_f), hi = _mm256_set1_ps(hi_f);
    for (int64_t px = 0; px < count; px++) {
    const uint8_t *xb = (const uint8_t *)x + px * x_step;
    const int64_t e = e0 + px * y_step;
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t c = b * 16;
        __m256i a_lo = _mm256_setzero_si256(), a_hi = _mm256_setzero_si256();
        const int16_t *wp = packed + b * 32;
        for (int p = 0; p < npairs; p++, wp += blocks * 32) {
            __m128i r0 = _mm_loadu_si128((const __m128i *)(xb + rel[2 * p] + c));
            __m128i r1 = _mm_loadu_si128((const __m128i *)(xb + rel[2 * p + 1] + c));
            __m256i x0 = k->x_signed ? _mm256_cvtepi8_epi16(r0) : _mm256_cvtepu8_epi16(r0);
            __m256i x1 = k->x_signed ? _mm256_cvtepi8_epi16(r1) : _mm256_cvtepu8_epi16(r1);
            a_lo = _mm256_add_epi32(a_lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1),
                                                            _mm256_loadu_si256((const __m256i *)wp)));
            a_hi = _mm256_add_epi32(a_hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1),
                                                            _mm256_loadu_si256((const __m256i *)(wp + 16))));
        }
        /* unpack works within 128-bit lanes: a_lo holds channels 0-3, 8-11, a_hi 4-7, 12-15 */
        __m256i n0 = _mm256_permute2x128_si256(a_lo, a_hi, 0x20);
        __m256i n1 = _mm256_permute2x128_si256(a_lo, a_hi, 0x31);
        n0 = _mm256_add_epi32(n0, _mm256_loadu_si256((const __m256i *)(bias_adj + c)));
        n1 = _mm256_add_epi32(n1, _mm256_loadu_si256((const __m256i *)(bias_adj + c + 8)));
        emit8(k, y, e + c, n0, m + c, lo, hi, yz);
        emit8(k, y, e + c + 8, n1, m + c + 8, lo, hi, yz);
    }
    }
}

/* the interior path's weights and bias (the weights are an input: packed at a node's first run
 * and kept in its kernel's cache, dw_begin) */
void pack_interior(const Shape *s, const int32_t *w, const int32_t *bias, int64_t xz,
                          int npairs, int width, int16_t *packed, int32_t *bias_adj) {
    /* width 16 (AVX2: the blocks of whole 16 channels) or 32 (AVX-512: every channel, the
     * last block padded with zero weights and bias) */
    const int64_t taps = s->kh * s->kw;
    const int64_t blocks = width == 32 ? (s->c + 31) / 32 : s->c / 16;
    for (int64_t c = 0; c < blocks * width; c++) {
        int32_t sum = 0;
        for (int64_t t = 0; c < s->c && t < taps; t++)
            sum += w[t * s->c + c];
        bias_adj[c] = c < s->c ? bias[c] - (int32_t)xz * sum : 0;
    }
    for (int p = 0; p < npairs; p++) {
        for (int64_t b = 0; b < blocks; b++) {
            int16_t *out = packed + ((int64_t)p * blocks + b) * 2 * width;
            for (int q = 0; q < width; q++) {
                /* slot q of the low (then high) vector: 128-bit lane q / 4, fourth q % 4 of
                 * the lane's channels as unpacklo (unpackhi) interleaves two taps */
                const int half = q * 2 < width ? 0 : 1, r = half ? q - width / 2 : q;
                const int64_t ch = b * width + (r / 4) * 8 + half * 4 + r % 4;
                const int slot = half * width + r * 2;
                const int64_t t0 = 2 * p, t1 = 2 * p + 1;
                const int inside = ch < s->c;
                out[slot] = (int16_t)(inside ? w[t0 * s->c + ch] : 0);
                out[slot + 1] = (int16_t)(inside && t1 < taps ? w[t1 * s->c + ch] : 0);
            }
        }
    }
}

/* AVX-512 (BW, VL, VNNI) interior: 32 channels a block, vpdpwssd doing the madd and the add,
 * masked loads and stores for the last block (no channel is left to the border path); four
 * pixels at a time share each weight load and keep eight sums in flight (one pixel's chain
 * alone waits on vpdpwssd's latency). */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

AVX512 static inline void finish512(const DwParams *k, __m512i a_lo, __m512i a_hi,
                                     const int32_t *bias_adj, const float *m, void *y_base,
                                     int64_t first, int64_t second, __mmask16 m0, __mmask16 m1,
                                     __m512 lo, __m512 hi) {
    /* the block's 32 sums (bias_adj and m at its first channel): lanes 0-15 to elements
     * [first, +16) and 16-31 to [second, +16) of y, as masked (a block's two halves, or two
     * pixels' 16 channels: interior_avx512_pairs) */
    /* 64-bit pieces in channel order: low/high unpack halves of each 128-bit lane */
    const __m512i first_half = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i second_half = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    const __m512i yz = _mm512_set1_epi32((int32_t)k->yz);
    __m512i n0 = _mm512_permutex2var_epi64(a_lo, first_half, a_hi);
    __m512i n1 = _mm512_permutex2var_epi64(a_lo, second_half, a_hi);
    n0 = _mm512_add_epi32(n0, _mm512_loadu_si512((const void *)bias_adj));
    n1 = _mm512_add_epi32(n1, _mm512_loadu_si512((const void *)(bias_adj + 16)));
    __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(n0), _mm512_maskz_loadu_ps(m0, m));
    __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(n1), _mm512_maskz_loadu_ps(m1, m + 16));
    if (k->y_float) { /* island form: the product as it is */
        _mm512_mask_storeu_ps((float *)y_base + first, m0, v0);
        _mm512_mask_storeu_ps((float *)y_base + second, m1, v1);
        return;
    }
    uint8_t *y = (uint8_t *)y_base;
    if (k->act.kind) { /* the activation, then QuantizeLinear's division (epilogue.h) */
        v0 = epilogue_scaled16(&k->act, v0);
        v1 = epilogue_scaled16(&k->act, v1);
    }
    v0 = _mm512_min_ps(_mm512_max_ps(v0, lo), hi);
    v1 = _mm512_min_ps(_mm512_max_ps(v1, lo), hi);
    /* cvtps rounds by MXCSR (nearest-even by default); values are in range, so the
     * saturating narrowing stores change nothing */
    __m512i q0 = _mm512_add_epi32(_mm512_cvtps_epi32(v0), yz);
    __m512i q1 = _mm512_add_epi32(_mm512_cvtps_epi32(v1), yz);
    if (k->y_signed) {
        _mm512_mask_cvtsepi32_storeu_epi8(y + first, m0, q0);
        _mm512_mask_cvtsepi32_storeu_epi8(y + second, m1, q1);
    } else {
        _mm512_mask_cvtusepi32_storeu_epi8(y + first, m0, q0);
        _mm512_mask_cvtusepi32_storeu_epi8(y + second, m1, q1);
    }
}

/* a 32-channel block's sums to output element e (channel c): finish512 on its two halves */
#define FINISH_BLOCK(A_LO, A_HI, E)                                                            \
    finish512(k, A_LO, A_HI, bias_adj + c, m + c, y, (E) + c, (E) + c + 16, (__mmask16)mask,  \
              (__mmask16)(mask >> 16), lo, hi)

/* one pixel's two taps of a pair into its two sums */
#define STEP512(XB, A_LO, A_HI)                                                                \
    do {                                                                                       \
        __m256i r0_ = _mm256_maskz_loadu_epi8(mask, (XB) + o0);                               \
        __m256i r1_ = _mm256_maskz_loadu_epi8(mask, (XB) + o1);                               \
        __m512i x0_ = xs ? _mm512_cvtepi8_epi16(r0_) : _mm512_cvtepu8_epi16(r0_);             \
        __m512i x1_ = xs ? _mm512_cvtepi8_epi16(r1_) : _mm512_cvtepu8_epi16(r1_);             \
        A_LO = _mm512_dpwssd_epi32(A_LO, _mm512_unpacklo_epi16(x0_, x1_), w_lo);              \
        A_HI = _mm512_dpwssd_epi32(A_HI, _mm512_unpackhi_epi16(x0_, x1_), w_hi);              \
    } while (0)

AVX512 void interior_avx512(const DwParams *k, const void *x, const int64_t *rel,
                                   int npairs, const int16_t *packed, int64_t channels,
                                   const int32_t *bias_adj, const float *m, void *y,
                                   int64_t e0, float lo_f, float hi_f, int64_t count,
                                   int64_t x_step, int64_t y_step) {
    const int64_t blocks = (channels + 31) / 32;
    const __m512 lo = _mm512_set1_ps(lo_f), hi = _mm512_set1_ps(hi_f);
    const int xs = k->x_signed;
    int64_t px = 0;
    for (; px < count && count >= 4; px += 4) {
        if (px + 4 > count)
            px = count - 4; /* the last group overlaps the one before: same values again */
        const uint8_t *x0 = (const uint8_t *)x + px * x_step, *x1 = x0 + x_step,
                      *x2 = x1 + x_step, *x3 = x2 + x_step;
        const int64_t e = e0 + px * y_step;
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t c = b * 32, left = channels - c;
            const __mmask32 mask = left >= 32 ? 0xFFFFFFFFu : (((__mmask32)1 << left) - 1);
            __m512i l0 = _mm512_setzero_si512(), h0 = l0, l1 = l0, h1 = l0, l2 = l0, h2 = l0,
                    l3 = l0, h3 = l0;
            const int16_t *wp = packed + b * 64;
            for (int p = 0; p < npairs; p++, wp += blocks * 64) {
                const __m512i w_lo = _mm512_loadu_si512((const void *)wp);
                const __m512i w_hi = _mm512_loadu_si512((const void *)(wp + 32));
                const int64_t o0 = rel[2 * p] + c, o1 = rel[2 * p + 1] + c;
                STEP512(x0, l0, h0);
                STEP512(x1, l1, h1);
                STEP512(x2, l2, h2);
                STEP512(x3, l3, h3);
            }
            FINISH_BLOCK(l0, h0, e);
            FINISH_BLOCK(l1, h1, e + y_step);
            FINISH_BLOCK(l2, h2, e + 2 * y_step);
            FINISH_BLOCK(l3, h3, e + 3 * y_step);
        }
    }
    for (; px < count; px++) {
        const uint8_t *x0 = (const uint8_t *)x + px * x_step;
        const int64_t e = e0 + px * y_step;
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t c = b * 32, left = channels - c;
            const __mmask32 mask = left >= 32 ? 0xFFFFFFFFu : (((__mmask32)1 << left) - 1);
            __m512i l0 = _mm512_setzero_si512(), h0 = l0;
            const int16_t *wp = packed + b * 64;
            for (int p = 0; p < npairs; p++, wp += blocks * 64) {
                const __m512i w_lo = _mm512_loadu_si512((const void *)wp);
                const __m512i w_hi = _mm512_loadu_si512((const void *)(wp + 32));
                const int64_t o0 = rel[2 * p] + c, o1 = rel[2 * p + 1] + c;
                STEP512(x0, l0, h0);
            }
            FINISH_BLOCK(l0, h0, e);
        }
    }
}

/* pixel A's channels (`mask`) in the low half of a tap's bytes, B's in the high: one load where
 * they follow each other (16 channels, stride 1), else two */
AVX512 static inline __m256i pair_bytes(const uint8_t *a, const uint8_t *b, __mmask16 mask,
                                        int adjacent) {
    if (adjacent)
        return _mm256_loadu_si256((const __m256i *)a);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_maskz_loadu_epi8(mask, a)),
                                   _mm_maskz_loadu_epi8(mask, b), 1);
}

/* two pixels' taps of a pair (at most 16 channels each) into the pair's two sums */
#define PAIR_STEP512(XA, XB, A_LO, A_HI)                                                       \
    do {                                                                                       \
        __m256i r0_ = pair_bytes((XA) + o0, (XB) + o0, mask, adjacent);                        \
        __m256i r1_ = pair_bytes((XA) + o1, (XB) + o1, mask, adjacent);                        \
        __m512i x0_ = xs ? _mm512_cvtepi8_epi16(r0_) : _mm512_cvtepu8_epi16(r0_);             \
        __m512i x1_ = xs ? _mm512_cvtepi8_epi16(r1_) : _mm512_cvtepu8_epi16(r1_);             \
        A_LO = _mm512_dpwssd_epi32(A_LO, _mm512_unpacklo_epi16(x0_, x1_), w_lo);              \
        A_HI = _mm512_dpwssd_epi32(A_HI, _mm512_unpackhi_epi16(x0_, x1_), w_hi);              \
    } while (0)

/* The interior of a conv with at most 16 channels: two pixels a vector (a 32-channel block
 * would leave half its lanes empty), eight pixels at a time. `packed`, `bias_adj` and `m` hold
 * the channels twice (lanes 16-31 repeat 0-15: dw_job.c). */
AVX512 void interior_avx512_pairs(const DwParams *k, const void *x, const int64_t *rel,
                                  int npairs, const int16_t *packed, int64_t channels,
                                  const int32_t *bias_adj, const float *m, void *y,
                                  int64_t e0, float lo_f, float hi_f, int64_t count,
                                  int64_t x_step, int64_t y_step) {
    const __m512 lo = _mm512_set1_ps(lo_f), hi = _mm512_set1_ps(hi_f);
    const __mmask16 mask = channels >= 16 ? 0xFFFFu : (__mmask16)((1u << channels) - 1);
    const int xs = k->x_signed, adjacent = channels == 16 && x_step == 16;
    const uint8_t *xb = (const uint8_t *)x;
    int64_t px = 0;
    for (; px < count && count >= 8; px += 8) {
        if (px + 8 > count)
            px = count - 8; /* the last group overlaps the one before: same values again */
        const uint8_t *x0 = xb + px * x_step;
        __m512i l0 = _mm512_setzero_si512(), h0 = l0, l1 = l0, h1 = l0, l2 = l0, h2 = l0,
                l3 = l0, h3 = l0;
        const int16_t *wp = packed;
        for (int p = 0; p < npairs; p++, wp += 64) {
            const __m512i w_lo = _mm512_loadu_si512((const void *)wp);
            const __m512i w_hi = _mm512_loadu_si512((const void *)(wp + 32));
            const int64_t o0 = rel[2 * p], o1 = rel[2 * p + 1];
            PAIR_STEP512(x0, x0 + x_step, l0, h0);
            PAIR_STEP512(x0 + 2 * x_step, x0 + 3 * x_step, l1, h1);
            PAIR_STEP512(x0 + 4 * x_step, x0 + 5 * x_step, l2, h2);
            PAIR_STEP512(x0 + 6 * x_step, x0 + 7 * x_step, l3, h3);
        }
        const int64_t e = e0 + px * y_step;
        finish512(k, l0, h0, bias_adj, m, y, e, e + y_step, mask, mask, lo, hi);
        finish512(k, l1, h1, bias_adj, m, y, e + 2 * y_step, e + 3 * y_step, mask, mask, lo,
                  hi);
        finish512(k, l2, h2, bias_adj, m, y, e + 4 * y_step, e + 5 * y_step, mask, mask, lo,
                  hi);
        finish512(k, l3, h3, bias_adj, m, y, e + 6 * y_step, e + 7 * y_step, mask, mask, lo,
                  hi);
    }
    for (; px < count; px += 2) {
        if (px + 2 > count)
            px = count - 2 < 0 ? 0 : count - 2; /* overlapping, or one pixel twice */
        const int64_t second = px + 1 < count ? px + 1 : px;
        __m512i l0 = _mm512_setzero_si512(), h0 = l0;
        const int16_t *wp = packed;
        for (int p = 0; p < npairs; p++, wp += 64) {
            const __m512i w_lo = _mm512_loadu_si512((const void *)wp);
            const __m512i w_hi = _mm512_loadu_si512((const void *)(wp + 32));
            const int64_t o0 = rel[2 * p], o1 = rel[2 * p + 1];
            PAIR_STEP512(xb + px * x_step, xb + second * x_step, l0, h0);
        }
        finish512(k, l0, h0, bias_adj, m, y, e0 + px * y_step, e0 + second * y_step, mask, mask,
                  lo, hi);
        if (second == px)
            break;
    }
}

#endif
