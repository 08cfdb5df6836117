/* The per-channel requantised multiply ops of rknnrt's kernel library (chanmul.c), registered
 * by dwconv.c. */

#ifndef RKNNRT_CHANMUL_H
#define RKNNRT_CHANMUL_H

#include "ort_abi.h"

#define CHANMUL_OPS 2

/* op `rknnrt.kernels::ChannelMul_<t>` number `index` (< CHANMUL_OPS) */
const CustomOp *chanmul_op(int index);

/* onnxruntime's API table with KernelContext_ParallelFor (or NULL), for the ops' chunks */
void chanmul_set_parallel_api(const OrtApi *api);

#endif
