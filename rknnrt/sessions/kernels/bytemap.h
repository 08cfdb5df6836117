/* The byte-table ops of rknnrt's kernel library (bytemap.c), registered by dwconv.c. */

#ifndef RKNNRT_BYTEMAP_H
#define RKNNRT_BYTEMAP_H

#include "ort_abi.h"

#define BYTEMAP_OPS 4

/* op `rknnrt.kernels::ByteMap_<x><y>` number `index` (< BYTEMAP_OPS) */
const CustomOp *bytemap_op(int index);

#endif
