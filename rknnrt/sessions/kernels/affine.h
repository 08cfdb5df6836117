/* The per-channel affine int8 op of rknnrt's kernel library (affine.c), registered by dwconv.c. */

#ifndef RKNNRT_AFFINE_H
#define RKNNRT_AFFINE_H

#include <stdint.h>

#include "ort_abi.h"

/* the op `rknnrt.kernels::ChannelAffineU8` */
const CustomOp *affine_op(void);

/* y = QuantizeLinear(Relu?(DequantizeLinear(x) * a[c] + b[c])) on uint8 x and y of `planes`
 * planes (n, c) of `size` elements each, channel c = plane % channels; p: x scale, x zero
 * point, y scale, y zero point, relu (0 or 1) */
void affine_run(const uint8_t *x, uint8_t *y, const float *p, const float *a, const float *b,
                int64_t planes, int64_t channels, int64_t size);

#endif
