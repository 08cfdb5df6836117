/* The depthwise kernel's arithmetic paths (dw_arith.c), as dw_job.c calls them. Internal: the
 * library exports none of them (-fvisibility=hidden). */

#ifndef RKNNRT_DW_PATHS_H
#define RKNNRT_DW_PATHS_H

#include <stddef.h>
#include <stdint.h>

#include "dw_arith.h"

#if defined(__x86_64__) || defined(__i386__)
#define DW_X86 1
#endif

/* channels [c0, C) of one output pixel whose taps are listed, scalar */
void pixel_scalar(const DwParams *k, const Shape *s, const void *x, const int32_t *w,
                  const int32_t *bias, const float *m, void *y, const int64_t *taps,
                  const int64_t *tap_w, int ntaps, size_t out, int64_t c0, float lo, float hi);

/* the interior path's weights and bias, `width` channels a block (16: AVX2, 32: AVX-512) */
void pack_interior(const Shape *s, const int32_t *w, const int32_t *bias, int64_t xz,
                   int npairs, int width, int16_t *packed, int32_t *bias_adj);

#ifdef DW_X86
/* channels [c, C - C % 8) of one listed-tap pixel; returns where it stopped */
int64_t pixel_avx2(const DwParams *k, const Shape *s, const void *x, const int32_t *w,
                   const int32_t *bias, const float *m, void *y, const int64_t *taps,
                   const int64_t *tap_w, int ntaps, size_t out, int64_t c, float lo_f,
                   float hi_f);

/* `count` interior pixels of one output row, every tap inside */
void interior_avx2(const DwParams *k, const void *x, const int64_t *rel, int npairs,
                   const int16_t *packed, int64_t blocks, const int32_t *bias_adj,
                   const float *m, void *y, int64_t e0, float lo_f, float hi_f, int64_t count,
                   int64_t x_step, int64_t y_step);
/* the same for at most 16 channels, two pixels a vector (packed, bias_adj, m: 32 lanes, the
 * channels twice) */
void interior_avx512_pairs(const DwParams *k, const void *x, const int64_t *rel, int npairs,
                           const int16_t *packed, int64_t channels, const int32_t *bias_adj,
                           const float *m, void *y, int64_t e0, float lo_f, float hi_f,
                           int64_t count, int64_t x_step, int64_t y_step);
void interior_avx512(const DwParams *k, const void *x, const int64_t *rel, int npairs,
                     const int16_t *packed, int64_t channels, const int32_t *bias_adj,
                     const float *m, void *y, int64_t e0, float lo_f, float hi_f, int64_t count,
                     int64_t x_step, int64_t y_step);
#endif

#endif
