/* The float32 quantising op of rknnrt's kernel library (inputcast.c), registered by dwconv.c. */

#ifndef RKNNRT_INPUTCAST_H
#define RKNNRT_INPUTCAST_H

#include "ort_abi.h"

#define QUANTIZE_OPS 2

/* op `rknnrt.kernels::QuantizeFloat_<t>` number `index` (< QUANTIZE_OPS) */
const CustomOp *quantize_op(int index);

#endif
