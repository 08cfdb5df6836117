/* The float16 rounding ops of rknnrt's kernel library (f16ops.c, on f16round.c's arithmetic),
 * registered by dwconv.c. */

#ifndef RKNNRT_F16ROUND_H
#define RKNNRT_F16ROUND_H

#include <stdint.h>

#include "ort_abi.h"

/* the op `rknnrt.kernels::RoundFloat16`: declared at version 18, its output allowed to take
 * its input's buffer, where this onnxruntime has that version's API */
const CustomOp *f16round_op(const OrtApiBase *base);

/* the op `rknnrt.kernels::AddRoundFloat16` (round16(a + b)), declared as RoundFloat16 is, its
 * output allowed to take either input's buffer */
const CustomOp *f16round_add_op(const OrtApiBase *base);

/* the op `rknnrt.kernels::HalfTable` (y = table[float16 bits of round16(x)], a table of 65536
 * float32 values), declared as RoundFloat16 is, its output allowed to take x's buffer */
const CustomOp *f16table_op(const OrtApiBase *base);

/* the op `rknnrt.kernels::AddReluRoundFloat16` (round16(Relu(a + b))), declared as
 * AddRoundFloat16 is */
const CustomOp *f16round_add_relu_op(const OrtApiBase *base);

/* y[i] = float32(float16(a[i] + b[i])), the sum one IEEE addition, with `relu` onnxruntime's
 * Relu of it first (max(0, s), a -0 or NaN kept); y may be a or b */
void f16round_add_run(const float *a, const float *b, float *y, int64_t count, int relu,
                      int level);

/* y[i] = table[float16 bits of round16(x[i])]; y may be x; `level`: 2 AVX-512, 1 AVX2 + F16C,
 * 0 scalar */
void f16table_run(const float *x, const float *table, float *y, int64_t count, int level);

/* the API table whose KernelContext_ParallelFor spreads a rounding over the session's threads
 * (NULL: it runs on the calling thread) */
void f16round_set_parallel_api(const OrtApi *api);

/* y[i] = float32(float16(x[i])), ties to even; `level`: 0 scalar, 1 F16C, 2 AVX-512 (each
 * where the CPU has it, else the next narrower) */
void f16round_run(const float *x, float *y, int64_t count, int level);

/* the level the ops run at (2 unless the tests' rknnrt_f16round_max_level lowered it) */
int f16round_max_level(void);

#endif
