/* The AVX-VNNI path of qconv.c's dense int8 conv: VPDPBUSD's 256-bit VEX form (CPUs with
 * AVX-VNNI, some without AVX-512: Intel's client CPUs from Alder Lake on), 6 pixels x 16
 * channels a tile. The same int32 sums and the same epilogue as qconv.c's scalar path
 * (emit_scalar), 8 channels at a time (epilogue.h's 8-lane form). */

#include <stdint.h>
#include <string.h>

#include "ort_abi.h"
#include "qconv_job.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX_VNNI __attribute__((target("avx2,fma,avxvnni")))

AVX_VNNI static int32_t row_sum_avx(const uint8_t *row, int64_t k) {
    __m256i s = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32)
        s = _mm256_add_epi64(s, _mm256_sad_epu8(_mm256_loadu_si256((const __m256i *)(row + i)),
                                                _mm256_setzero_si256()));
    int64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, s);
    uint32_t total = (uint32_t)(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
    for (; i < k; i++)
        total += row[i];
    return (int32_t)total;
}

/* avx_tile_MR: the dot products of MR rows with one block of 16 channels, into out[MR][64] */
#define DEFINE_AVX_TILE(MR)                                                                    \
    AVX_VNNI static void avx_tile_##MR(const uint8_t *a, int64_t lda, const int8_t *w,        \
                                       int64_t k4, int32_t *out) {                             \
        __m256i lo[MR], hi[MR];                                                                \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) lo[i] = hi[i] =                   \
            _mm256_setzero_si256();                                                            \
        for (int64_t k = 0; k < k4; k++) {                                                     \
            const __m256i wl = _mm256_loadu_si256((const __m256i *)(w + k * 64));              \
            const __m256i wh = _mm256_loadu_si256((const __m256i *)(w + k * 64 + 32));         \
            _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                             \
                int32_t four;                                                                  \
                memcpy(&four, a + i * lda + k * 4, 4);                                         \
                const __m256i av = _mm256_set1_epi32(four);                                    \
                lo[i] = _mm256_dpbusd_avx_epi32(lo[i], av, wl);                                \
                hi[i] = _mm256_dpbusd_avx_epi32(hi[i], av, wh);                                \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 6") for (int i = 0; i < MR; i++) {                                 \
            _mm256_storeu_si256((__m256i *)(out + i * 64), lo[i]);                             \
            _mm256_storeu_si256((__m256i *)(out + i * 64 + 8), hi[i]);                         \
        }                                                                                      \
    }
DEFINE_AVX_TILE(1) DEFINE_AVX_TILE(2) DEFINE_AVX_TILE(3) DEFINE_AVX_TILE(4) DEFINE_AVX_TILE(5)
DEFINE_AVX_TILE(6)

typedef void (*AvxTileFn)(const uint8_t *, int64_t, const int8_t *, int64_t, int32_t *);
static const AvxTileFn avx_tiles[6] = {avx_tile_1, avx_tile_2, avx_tile_3,
                                       avx_tile_4, avx_tile_5, avx_tile_6};

/* out[MR][64] (block ob of pixels q ..: its first 16 values a row) -> y, as emit_scalar */
AVX_VNNI static void emit_avx(const QcJob *j, const int32_t *out, int mr, int64_t q, int64_t ob,
                              const int32_t *colsum) {
    const QcParams *p = j->p;
    const __m256 lo = _mm256_set1_ps((p->y_type == T_INT8 ? -128.0f : 0.0f) - (float)p->yz);
    const __m256 hi = _mm256_set1_ps((p->y_type == T_INT8 ? 127.0f : 255.0f) - (float)p->yz);
    const __m256i yz = _mm256_set1_epi32((int32_t)p->yz);
    const __m256i sz = _mm256_set1_epi32((int32_t)p->sz);
    const __m256 ss = _mm256_set1_ps(p->ss), clo = _mm256_set1_ps(p->clo);
    const __m256 chi = _mm256_set1_ps(p->chi), ys = _mm256_set1_ps(p->act.ys);
    for (int i = 0; i < mr; i++) {
        const __m256i cs = _mm256_set1_epi32(colsum[i]);
        for (int h = 0; h < 2; h++) {
            const int64_t c = ob * 16 + h * 8, left = p->oc - c;
            if (left <= 0)
                break;
            __m256i v = _mm256_loadu_si256((const __m256i *)(out + i * 64 + h * 8));
            if (j->any_z) {
                const __m256i z = _mm256_loadu_si256((const __m256i *)(j->zneg + c));
                v = _mm256_add_epi32(v, _mm256_mullo_epi32(z, cs));
            }
            v = _mm256_add_epi32(v, _mm256_loadu_si256((const __m256i *)(j->corr + c)));
            __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(j->m + c));
            const int64_t at = (q + i) * p->oc + c, n = left < 8 ? left : 8;
            float fs[8];
            int32_t rs[8];
            if (p->y_type == T_FLOAT) {
                _mm256_storeu_ps(fs, f);
                memcpy((float *)j->y + at, fs, (size_t)n * sizeof(float));
                continue;
            }
            if (p->act.kind)
                f = epilogue_scaled8(&p->act, f);
            if (p->residual) { /* qconv.c's residual_scalar, lane by lane */
                uint8_t bytes[8] = {0};
                memcpy(bytes, j->skip + at, (size_t)n);
                const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)bytes));
                f = _mm256_add_ps(f, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(b, sz)), ss));
                f = _mm256_div_ps(_mm256_min_ps(_mm256_max_ps(f, clo), chi), ys);
            }
            f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
            /* nearest even, then in the type's range already: the bytes are the low ones */
            _mm256_storeu_si256((__m256i *)rs, _mm256_add_epi32(_mm256_cvtps_epi32(f), yz));
            uint8_t *dst = (uint8_t *)j->y + at;
            for (int64_t e = 0; e < n; e++)
                dst[e] = (uint8_t)rs[e];
        }
    }
}

AVX_VNNI void qconv_rows_avx(const QcJob *j, const uint8_t *a, int64_t lda, int64_t q,
                             int64_t count) {
    int32_t colsum[TILE_PIXELS] = {0};
    int32_t out[6 * 64] __attribute__((aligned(32)));
    for (int64_t i = 0; j->any_z && i < count; i++)
        colsum[i] = row_sum_avx(a + i * lda, j->k);
    const int64_t wstride = j->k4 * 64;
    for (int64_t ob = 0; ob < j->ocb; ob++)
        for (int64_t i = 0; i < count; i += 6) {
            const int mr = (int)(count - i < 6 ? count - i : 6);
            avx_tiles[mr - 1](a + i * lda, lda, j->wp + ob * wstride, j->k4, out);
            emit_avx(j, out, mr, q + i, ob, colsum + i);
        }
}
#endif
