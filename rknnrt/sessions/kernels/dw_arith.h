/* The depthwise kernel's arithmetic, shared by dw_arith.c and the onnxruntime side (dwconv.c).
 * No onnxruntime type appears here. */

#ifndef RKNNRT_DW_ARITH_H
#define RKNNRT_DW_ARITH_H

#include <stdint.h>

#include "epilogue.h"

typedef struct DwParams {
    int x_signed, y_signed, y_float; /* y_float: the island form, y = float(acc) * m */
    int64_t xz, yz, sh, sw, pt, pl, pb, pr, dh, dw;
    Epilogue act; /* kind set: y = requantised act(float(acc) * m) / ys (epilogue.h) */
} DwParams;

typedef struct Shape {
    int64_t n, h, w, c, kh, kw, oh, ow;
} Shape;

/* y (N, OH, OW, C) from x (N, H, W, C), w (KH, KW, C) int32, bias (C) int32, m (C) float32;
 * `level`: the widest path allowed (0 scalar, 1 AVX2, 2 AVX-512). Returns 0, or -1 when
 * memory runs out (then y is not written). */
int dw_run(const DwParams *k, const Shape *s, const void *x, const int32_t *w,
           const int32_t *bias, const float *m, void *y, int level);

/* the same in parts: dw_begin lays out what every row reads (NULL: out of memory); dw_do_rows
 * computes output rows [r0, r1) of the N * OH rows and may run concurrently on disjoint
 * ranges; dw_end frees. */
typedef struct DwJob DwJob;
/* A kernel's packed interior weights (immutable once made): dw_begin packs them at a node's
 * first run and publishes them in *cache (atomically: concurrent first runs each pack, one
 * copy is kept), and later runs with the same weight and bias inputs (onnxruntime hands a
 * constant initializer's same buffer to every run) read them from there; `cache` NULL packs
 * every time. dw_cache_free frees a kernel's. */
typedef struct DwPacked DwPacked;
DwJob *dw_begin(const DwParams *k, const Shape *s, const void *x, const int32_t *w,
                const int32_t *bias, const float *m, void *y, int level, DwPacked **cache);
void dw_cache_free(DwPacked *packed);
int64_t dw_rows_total(const DwJob *j);
void dw_do_rows(const DwJob *j, int64_t r0, int64_t r1);
void dw_end(DwJob *j);

#endif
