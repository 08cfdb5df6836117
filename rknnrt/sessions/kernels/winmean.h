/* The pooling-window mean of rknnrt's kernel library (winmean.c), registered by dwconv.c. */

#ifndef RKNNRT_WINMEAN_H
#define RKNNRT_WINMEAN_H

#include "ort_abi.h"

/* op `rknnrt.kernels::WindowMean` */
const CustomOp *winmean_op(void);

#endif
