/* The blocked-layout ops of rknnrt's kernel library (blocked.c), registered by dwconv.c. */

#ifndef RKNNRT_BLOCKED_H
#define RKNNRT_BLOCKED_H

#include <stdint.h>

#include "ort_abi.h"

/* op i: 0 `rknnrt.kernels::GlobalMeanBlocked`, 1 `rknnrt.kernels::MulRoundBlocked`; declared
 * at version 17, with their output shapes, where this onnxruntime has that version's API */
#define BLOCKED_OPS 2
const CustomOp *blocked_op(const OrtApiBase *base, int i);
/* the API table whose KernelContext_ParallelFor spreads the ops' planes over the session's
 * threads (NULL: they run on the calling thread) */
void blocked_set_parallel_api(const OrtApi *api);

/* y[q][j] = the mean of x[q][p][j] over p < hw in the plain pool's order (blocked.c), for
 * planes q (N x Cp / block) and lanes j < block */
void blocked_global_mean(const float *x, int64_t planes, int64_t hw, int64_t block, float *y);
/* blocked y (dims yd) = round16(a (dims ad) * b (dims bd)), broadcast; lanes from
 * channels_real on 0 */
void blocked_mul_round(const float *a, const int64_t *ad, const float *b, const int64_t *bd,
                       const int64_t *yd, int64_t block, int64_t channels_real, float *y);

#endif
