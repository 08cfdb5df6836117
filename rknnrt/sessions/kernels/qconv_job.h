/* The state qconv.c's dense int8 conv shares with qconv_rows.c, which gathers its window rows,
 * and qconv_avx.c, its AVX-VNNI path (qconv.c says what the op computes). */

#ifndef RKNNRT_QCONV_JOB_H
#define RKNNRT_QCONV_JOB_H

#include <stdint.h>

#include "epilogue.h"

#define TILE_PIXELS 48 /* rows gathered at a time: a multiple of the 6-pixel micro-tile */
#define ROW_SLACK 16   /* bytes after the rows buffer that a 16-byte window copy may write */

typedef struct QcParams {
    int64_t kh, kw, oc, xz, yz, sh, sw, pt, pl, pb, pr, dh, dw;
    int y_type;
    Epilogue act; /* kind set: y = requantised act(float(acc) * m) / ys (epilogue.h) */
    /* a residual (ConvInt8Add_*): y = requantised min(max(float(acc) * m + float(skip - sz)
     * * ss, clo), chi) / act.ys, the Add, its Relu or Clip and QuantizeLinear of the float
     * program in their order; act.kind is then ACT_NONE */
    int residual;
    int64_t sz;
    float ss, clo, chi;
} QcParams;

typedef struct QcJob {
    const QcParams *p;
    int64_t h, w, c, oh, ow, k, k4, ocb, pixels;
    int direct; /* the rows are x itself: a 1x1 conv without strides or pads, C % 4 == 0 */
    const uint8_t *x;
    const int8_t *wp;
    const int32_t *zneg, *corr;
    const float *m;
    const uint8_t *skip; /* a residual's other addend, laid out as y */
    void *y;
    int vnni; /* the path: 2 AVX-512 VNNI, 1 AVX-VNNI, 0 scalar */
    int any_z; /* some channel's zero point is not 0 (else the row sums are not needed) */
} QcJob;

/* rows of output pixels q .. q + count - 1, lda bytes apart: each window's bytes in (kh, kw,
 * c) order, xz outside the image, zero up to a multiple of 4. A window row inside the image is
 * one copy; up to 64 bytes, whole 16-byte copies where the input has the bytes (a stem's 3
 * channels x 3: the bytes beyond the row are overwritten by the next copy or the zero fill, or
 * lie in the next row or the buffer's slack, ROW_SLACK). A window wholly inside takes a loop
 * of those copies alone; the pixel's place advances without divisions. A 3x3 stem of 3
 * channels at 224x224 (one thread): 0.25 -> 0.21 -> 0.13 ms (with the row sums skipped). */
void gather_rows(const QcJob *j, int64_t q, int64_t count, uint8_t *rows, int64_t lda);

/* y of output pixels q .. q + count - 1 (their rows a, lda bytes apart) on the AVX-VNNI path
 * (qconv_avx.c; x86-64 only, where the CPU has AVX-VNNI) */
void qconv_rows_avx(const QcJob *j, const uint8_t *a, int64_t lda, int64_t q, int64_t count);

#endif
