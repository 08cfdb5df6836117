/* The window rows of qconv.c's dense int8 conv (im2col into a tile's rows; qconv_job.h says
 * what gather_rows writes). */

#include <string.h>

#include "qconv_job.h"

void gather_rows(const QcJob *j, int64_t q, int64_t count, uint8_t *rows, int64_t lda) {
    const QcParams *p = j->p;
    const int64_t per_image = j->oh * j->ow;
    int64_t n = q / per_image, r = q % per_image, oy = r / j->ow, ox = r % j->ow;
    const size_t span = (size_t)(p->kw * j->c); /* a window row, when dense and inside */
    const int64_t total = j->pixels / per_image * j->h * j->w * j->c; /* the input's bytes */
    const size_t chunks16 = span <= 64 ? (span + 15) / 16 : 0; /* a short row in 16-byte copies */
    const int64_t row_step = p->dh * j->w * j->c; /* input bytes between window rows */
    const int64_t pad = j->k4 * 4 - j->k;
    for (int64_t i = 0; i < count; i++) {
        uint8_t *row = rows + i * lda, *at = row;
        const int64_t ix0 = ox * p->sw - p->pl, ix1 = ix0 + (p->kw - 1) * p->dw;
        const int64_t iy0 = oy * p->sh - p->pt, iy1 = iy0 + (p->kh - 1) * p->dh;
        const int inside_x = p->dw == 1 && ix0 >= 0 && ix1 < j->w;
        const int64_t first = ((n * j->h + iy0) * j->w + ix0) * j->c;
        if (chunks16 && inside_x && iy0 >= 0 && iy1 < j->h &&
            first + (p->kh - 1) * row_step + (int64_t)chunks16 * 16 <= total) {
            const uint8_t *src = j->x + first;
            if (chunks16 == 1) /* a constant-size copy per row: 3x3 stems ~10 % faster */
                for (int64_t ky = 0; ky < p->kh; ky++, src += row_step, at += span)
                    memcpy(at, src, 16);
            else
                for (int64_t ky = 0; ky < p->kh; ky++, src += row_step, at += span)
                    for (size_t b = 0; b < chunks16; b++)
                        memcpy(at + b * 16, src + b * 16, 16);
        } else {
            for (int64_t ky = 0; ky < p->kh; ky++) {
                const int64_t iy = iy0 + ky * p->dh;
                if (inside_x && iy >= 0 && iy < j->h) {
                    const int64_t from = ((n * j->h + iy) * j->w + ix0) * j->c;
                    if (chunks16 && from + chunks16 * 16 <= total)
                        for (size_t b = 0; b < chunks16; b++)
                            memcpy(at + b * 16, j->x + from + b * 16, 16);
                    else
                        memcpy(at, j->x + from, span);
                    at += span;
                    continue;
                }
                for (int64_t kx = 0; kx < p->kw; kx++, at += j->c) {
                    const int64_t ix = ix0 + kx * p->dw;
                    if (iy < 0 || iy >= j->h || ix < 0 || ix >= j->w)
                        memset(at, (int)p->xz, (size_t)j->c);
                    else
                        memcpy(at, j->x + ((n * j->h + iy) * j->w + ix) * j->c, (size_t)j->c);
                }
            }
        }
        for (int64_t t = 0; t < pad; t++) /* at most 3 bytes: no call */
            row[j->k + t] = 0;
        if (++ox == j->ow) {
            ox = 0;
            if (++oy == j->oh) {
                oy = 0;
                n++;
            }
        }
    }
}
