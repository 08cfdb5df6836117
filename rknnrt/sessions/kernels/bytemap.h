/* The byte-table ops of rknnrt's kernel library (bytemap.c), registered by dwconv.c. */

#ifndef RKNNRT_BYTEMAP_H
#define RKNNRT_BYTEMAP_H

#include "ort_abi.h"

#define BYTEMAP_OPS 8

/* op number `index` (< BYTEMAP_OPS): `rknnrt.kernels::ByteMap_<x><y>` (0-3), then
 * `ByteTable_<x><y>` (4-7) */
const CustomOp *bytemap_op(int index);

#endif
