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

#endif
