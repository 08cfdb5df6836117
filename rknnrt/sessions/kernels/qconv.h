/* The dense int8 conv ops of rknnrt's kernel library (qconv.c), registered by dwconv.c. */

#ifndef RKNNRT_QCONV_H
#define RKNNRT_QCONV_H

#include "ort_abi.h"

#define QCONV_OPS 5

/* op i of `rknnrt.kernels::ConvInt8_u8u8`, `_u8s8`, `_u8f`, `ConvInt8Add_u8u8`, `_u8s8` (NULL
 * beyond QCONV_OPS) */
const CustomOp *qconv_op(int i);

/* the API table whose KernelContext_ParallelFor the ops use, or NULL (inline) */
void qconv_set_parallel_api(const OrtApi *api);

#endif
