/* A depthwise convolution's job (dw_arith.h's dw_begin, dw_do_rows, dw_end, dw_run): the
 * input framed with its padding, the interior weights packed once per node (the kernel's
 * cache), then output rows over dw_arith.c's paths, from several threads on disjoint rows. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dw_arith.h"
#include "cpu.h"
#include "dw_paths.h"

/* One convolution's shared state: the (framed) input, the packed weights, the interior
 * geometry; dw_do_rows may then run on disjoint output rows from several threads. */
struct DwJob {
    DwParams k;
    Shape s;
    const void *x;
    const int32_t *w, *bias;
    const float *m;
    void *y;
    int level, fast, npairs, paired; /* paired: <= 16 channels, two pixels a vector */
    int64_t ow_lo, ow_hi, interior_end, blocks;
    float lo, hi;
    int16_t *packed;
    int32_t *bias_adj;
    int64_t *rel;
    uint8_t *frame;
    void *memory;
    float m_twice[32]; /* paired: m's channels in lanes 0-15 and again in 16-31 */
};

struct DwPacked {
    const int32_t *w_key, *bias_key; /* the inputs they were packed from */
    int64_t xz, c, kh, kw;
    int width, paired;
    int16_t *packed;
    int32_t *bias_adj;
};

void dw_cache_free(DwPacked *packed) { free(packed); }

static int64_t packings; /* interior packings made in this process (tests read it) */

__attribute__((visibility("default"))) int64_t rknnrt_dw_packings(void) {
    return __atomic_load_n(&packings, __ATOMIC_RELAXED);
}

/* the cached packing when it was made from these inputs for this geometry, else NULL */
static const DwPacked *cached(DwPacked *const *cache, const DwParams *k, const Shape *s,
                              const int32_t *w, const int32_t *bias, int width, int paired) {
    const DwPacked *hit = cache ? __atomic_load_n(cache, __ATOMIC_ACQUIRE) : NULL;
    if (hit == NULL || hit->w_key != w || hit->bias_key != bias || hit->xz != k->xz ||
        hit->c != s->c || hit->kh != s->kh || hit->kw != s->kw || hit->width != width ||
        hit->paired != paired)
        return NULL;
    return hit;
}

/* a copy of a job's fresh packing, published in an empty *cache (a lost race frees it) */
static void publish(DwPacked **cache, const DwParams *k, const Shape *s, const int32_t *w,
                    const int32_t *bias, int width, int paired, const int16_t *packed,
                    size_t packed_n, const int32_t *bias_adj, size_t bias_n) {
    if (cache == NULL || __atomic_load_n(cache, __ATOMIC_ACQUIRE) != NULL)
        return;
    DwPacked *made = (DwPacked *)malloc(sizeof(DwPacked) + packed_n * sizeof(int16_t) +
                                        bias_n * sizeof(int32_t));
    if (made == NULL)
        return; /* (the next run packs again) */
    *made = (DwPacked){w, bias, k->xz, s->c, s->kh, s->kw, width, paired, NULL, NULL};
    made->packed = (int16_t *)(made + 1);
    made->bias_adj = (int32_t *)(made->packed + packed_n);
    memcpy(made->packed, packed, packed_n * sizeof(int16_t));
    memcpy(made->bias_adj, bias_adj, bias_n * sizeof(int32_t));
    DwPacked *empty = NULL;
    if (!__atomic_compare_exchange_n(cache, &empty, made, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        free(made);
}

/* the paired path's packing (interior_avx512_pairs): the <= 16 channels' weights and bias in
 * lanes 0-15 of a 32-channel block and again in 16-31; 0, or -1 when memory runs out */
static int pack_twice(const Shape *s, const int32_t *w, const int32_t *bias, int64_t xz,
                      int npairs, int16_t *packed, int32_t *bias_adj) {
    const int64_t taps = s->kh * s->kw;
    int32_t *twice = (int32_t *)calloc((size_t)(taps + 1) * 32, sizeof(int32_t));
    if (twice == NULL)
        return -1;
    for (int64_t c = 0; c < 32; c++) {
        if (c % 16 >= s->c)
            continue;
        for (int64_t t = 0; t < taps; t++)
            twice[t * 32 + c] = w[t * s->c + c % 16];
        twice[taps * 32 + c] = bias[c % 16];
    }
    Shape wide = *s;
    wide.c = 32;
    pack_interior(&wide, twice, twice + taps * 32, xz, npairs, 32, packed, bias_adj);
    free(twice);
    return 0;
}

DwJob *dw_begin(const DwParams *kp, const Shape *sp, const void *x, const int32_t *w,
                const int32_t *bias, const float *m, void *y, int level, DwPacked **cache) {
    DwJob *j = (DwJob *)calloc(1, sizeof(DwJob));
    if (j == NULL)
        return NULL;
    j->k = *kp;
    j->s = *sp;
    j->x = x, j->w = w, j->bias = bias, j->m = m, j->y = y, j->level = level;
    const DwParams *k = &j->k;
    Shape *s = &j->s;
    const int64_t ntaps = s->kh * s->kw;
    j->npairs = (int)((ntaps + 1) / 2);
    const size_t padded = (size_t)((s->c + 31) / 32) * 32; /* channels of the widest path */
    j->memory = malloc((size_t)(ntaps + 1) * sizeof(int64_t) +
                       (size_t)j->npairs * padded * 2 * sizeof(int16_t) + padded * sizeof(int32_t));
    if (j->memory == NULL) {
        free(j);
        return NULL;
    }
    j->rel = (int64_t *)j->memory; /* interior offsets, + 1 for an odd count's zero pair */
    j->packed = (int16_t *)(j->rel + ntaps + 1);
    j->bias_adj = (int32_t *)(j->packed + (size_t)j->npairs * padded * 2);
    j->lo = (float)((k->y_signed ? -128 : 0) - k->yz);
    j->hi = (float)((k->y_signed ? 127 : 255) - k->yz);
#ifdef DW_X86
    if (level >= 2 && cpu_avx512_vnni())
        j->fast = 2;
    else if (level >= 1 && cpu_avx2_fma() && s->c >= 16)
        j->fast = 1;
    /* On the AVX-512 path the input is first copied into a frame of padding holding xz, which
     * contributes (xz - xz) * w = 0 as a padded tap does: every pixel is then an interior one
     * (small maps are mostly border). The copy is H*W*C bytes against KH*KW times that work. */
    if (j->fast == 2 && (k->pt | k->pl | k->pb | k->pr) != 0) {
        const int64_t fh = s->h + k->pt + k->pb, fw = s->w + k->pl + k->pr;
        j->frame = (uint8_t *)malloc((size_t)(s->n * fh * fw * s->c));
        if (j->frame != NULL) {
            /* the padding rows and columns hold xz, the rows between are the input's */
            const int pad = (int)(uint8_t)k->xz;
            const size_t row = (size_t)(fw * s->c), left = (size_t)(k->pl * s->c);
            const size_t right = (size_t)(k->pr * s->c), inside = (size_t)(s->w * s->c);
            for (int64_t n = 0; n < s->n; n++) {
                uint8_t *image = j->frame + (size_t)(n * fh) * row;
                memset(image, pad, (size_t)k->pt * row);
                memset(image + (size_t)(k->pt + s->h) * row, pad, (size_t)k->pb * row);
                for (int64_t h = 0; h < s->h; h++) {
                    uint8_t *r = image + (size_t)(h + k->pt) * row;
                    memset(r, pad, left);
                    memcpy(r + left, (const uint8_t *)x + (size_t)(n * s->h + h) * inside,
                           inside);
                    memset(r + left + inside, pad, right);
                }
            }
            j->k.pt = j->k.pl = j->k.pb = j->k.pr = 0;
            s->h = fh, s->w = fw;
            j->x = j->frame;
        }
    }
    if (j->fast) {
        const int width = j->fast == 2 ? 32 : 16;
        j->paired = j->fast == 2 && s->c <= 16;
        if (j->paired)
            for (int64_t c = 0; c < 32; c++)
                j->m_twice[c] = c % 16 < s->c ? m[c % 16] : 0.0f;
        const DwPacked *hit = cached(cache, k, s, w, bias, width, j->paired);
        if (hit != NULL) {
            j->packed = hit->packed;
            j->bias_adj = hit->bias_adj;
        } else {
            int failed = 0;
            if (j->paired)
                failed = pack_twice(s, w, bias, k->xz, j->npairs, j->packed, j->bias_adj);
            else
                pack_interior(s, w, bias, k->xz, j->npairs, width, j->packed, j->bias_adj);
            if (failed) {
                free(j->frame);
                free(j->memory);
                free(j);
                return NULL;
            }
            __atomic_add_fetch(&packings, 1, __ATOMIC_RELAXED);
            publish(cache, k, s, w, bias, width, j->paired, j->packed,
                    (size_t)j->npairs * padded * 2, j->bias_adj, padded);
        }
        for (int64_t i = 0; i < s->kh; i++)
            for (int64_t jj = 0; jj < s->kw; jj++)
                j->rel[i * s->kw + jj] = (i * k->dh * s->w + jj * k->dw) * s->c;
        j->rel[ntaps] = 0;
    }
#endif
    j->blocks = s->c / 16;
    j->interior_end = j->fast == 2 ? s->c : j->blocks * 16; /* channels done inside */
    /* the columns whose every tap is inside the input: [ow_lo, ow_hi) */
    int64_t ow_lo = (k->pl + k->sw - 1) / k->sw;
    int64_t ow_hi = s->w - (s->kw - 1) * k->dw + k->pl; /* iw0 + reach < W */
    ow_hi = ow_hi <= 0 ? 0 : (ow_hi - 1) / k->sw + 1;
    if (ow_hi > s->ow)
        ow_hi = s->ow;
    if (ow_lo > ow_hi)
        ow_lo = ow_hi;
    j->ow_lo = ow_lo, j->ow_hi = ow_hi;
    return j;
}

int64_t dw_rows_total(const DwJob *j) { return j->s.n * j->s.oh; }

void dw_end(DwJob *j) {
    if (j == NULL)
        return;
    free(j->frame);
    free(j->memory);
    free(j);
}

/* output rows [r0, r1) of all (n, oh) rows: each writes only its own outputs */
void dw_do_rows(const DwJob *j, int64_t r0, int64_t r1) {
    const DwParams *k = &j->k;
    const Shape *s = &j->s;
    const void *x = j->x;
    const int32_t *w = j->w, *bias = j->bias;
    const float *m = j->m;
    void *y = j->y;
    const float lo = j->lo, hi = j->hi;
    const int64_t ntap_all = s->kh * s->kw, ow_lo = j->ow_lo, ow_hi = j->ow_hi;
    int64_t small[128];
    int64_t *taps = 2 * ntap_all <= 128 ? small : (int64_t *)malloc(2 * ntap_all * sizeof(int64_t));
    if (taps == NULL)
        return;
    int64_t *tap_w = taps + ntap_all;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = r / s->oh, oh = r % s->oh;
        {
            const int64_t ih0 = oh * k->sh - k->pt;
            const int rows_in = ih0 >= 0 && ih0 + (s->kh - 1) * k->dh < s->h;
            const int row_fast = j->fast && rows_in && ow_lo < ow_hi;
#ifdef DW_X86
            if (row_fast) {
                const int64_t iw0 = ow_lo * k->sw - k->pl;
                const int64_t base = ((n * s->h + ih0) * s->w + iw0) * s->c;
                const size_t out = (size_t)(((n * s->oh + oh) * s->ow + ow_lo) * s->c);
                if (j->paired)
                    interior_avx512_pairs(k, (const uint8_t *)x + base, j->rel, j->npairs,
                                          j->packed, s->c, j->bias_adj, j->m_twice, y,
                                          (int64_t)out, lo, hi, ow_hi - ow_lo, k->sw * s->c,
                                          s->c);
                else if (j->fast == 2)
                    interior_avx512(k, (const uint8_t *)x + base, j->rel, j->npairs, j->packed,
                                    s->c, j->bias_adj, m, y, (int64_t)out, lo, hi,
                                    ow_hi - ow_lo, k->sw * s->c, s->c);
                else
                    interior_avx2(k, (const uint8_t *)x + base, j->rel, j->npairs, j->packed,
                                  j->blocks, j->bias_adj, m, y, (int64_t)out, lo, hi,
                                  ow_hi - ow_lo, k->sw * s->c, s->c);
            }
#endif
            if (row_fast && ow_lo == 0 && ow_hi == s->ow && j->interior_end == s->c)
                continue; /* (a framed input's rows: every pixel done inside) */
            for (int64_t ow = 0; ow < s->ow; ow++) {
                const int64_t iw0 = ow * k->sw - k->pl;
                const size_t out = (size_t)(((n * s->oh + oh) * s->ow + ow) * s->c);
                const int64_t c0 = row_fast && ow >= ow_lo && ow < ow_hi ? j->interior_end : 0;
                if (c0 == s->c)
                    continue;
                int ntaps = 0;
                for (int64_t i = 0; i < s->kh; i++) {
                    const int64_t ih = ih0 + i * k->dh;
                    if (ih < 0 || ih >= s->h)
                        continue;
                    for (int64_t jj = 0; jj < s->kw; jj++) {
                        const int64_t iw = iw0 + jj * k->dw;
                        if (iw < 0 || iw >= s->w)
                            continue;
                        taps[ntaps] = ((n * s->h + ih) * s->w + iw) * s->c;
                        tap_w[ntaps] = (i * s->kw + jj) * s->c;
                        ntaps++;
                    }
                }
                int64_t c = c0;
#ifdef DW_X86
                if (j->level >= 1 && cpu_avx2_fma())
                    c = pixel_avx2(k, s, x, w, bias, m, y, taps, tap_w, ntaps, out, c, lo, hi);
#endif
                pixel_scalar(k, s, x, w, bias, m, y, taps, tap_w, ntaps, out, c, lo, hi);
            }
        }
    }
    if (taps != small)
        free(taps);
}

int dw_run(const DwParams *k, const Shape *s, const void *x, const int32_t *w,
           const int32_t *bias, const float *m, void *y, int level) {
    DwJob *j = dw_begin(k, s, x, w, bias, m, y, level, NULL);
    if (j == NULL)
        return -1;
    dw_do_rows(j, 0, dw_rows_total(j));
    dw_end(j);
    return 0;
}
