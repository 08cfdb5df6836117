/* Op `rknnrt.kernels::RoundFloat16`: float32 x -> float32 y of the same shape, each element
 * rounded to the nearest float16 value (ties to even; beyond the float16 range an infinity;
 * a NaN stays a NaN with the low 13 bits of its payload cleared and the quiet bit set). These
 * are the values of onnxruntime's Cast(float16) then Cast(float32), which a float16 program
 * applies to every stored tensor (core/program/fp16_round.py): one pass over the tensor in
 * place of two and no float16 intermediate. The F16C path (VCVTPS2PH, round to nearest even,
 * then VCVTPH2PS) is chosen at run time by cpuid on x86; the scalar path (every other CPU)
 * computes the same bits. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define F16_X86 1
#endif

#include "api_kernel.h"
#include "cpu.h"
#include "f16round.h"

#define EXPORT __attribute__((visibility("default")))

static float round_scalar(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = x & 0x80000000u, a = x ^ sign;
    if (a > 0x7f800000u) { /* NaN: as VCVTPS2PH/VCVTPH2PS leave it */
        x = sign | 0x7fc00000u | (a & 0x007fe000u);
    } else if (a >= 0x477ff000u) { /* 65520 and beyond (or an infinity) round to infinity */
        x = sign | 0x7f800000u;
    } else if (a >= 0x38800000u) { /* a float16 normal: keep 10 mantissa bits, ties to even */
        a = (a + 0x0fffu + ((a >> 13) & 1u)) & ~0x1fffu;
        x = sign | a;
    } else { /* a float16 subnormal or zero: a multiple of 2^-24, exact in float32 steps */
        float v = nearbyintf(f * 16777216.0f) * (1.0f / 16777216.0f);
        return v;
    }
    memcpy(&f, &x, 4);
    return f;
}

#ifdef F16_X86
__attribute__((target("avx,f16c"))) static void round_f16c(const float *x, float *y,
                                                           int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    if (i < count) { /* the tail through the same instructions */
        float in[8] = {0}, out[8];
        memcpy(in, x + i, (size_t)(count - i) * sizeof(float));
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(out, _mm256_cvtph_ps(h));
        memcpy(y + i, out, (size_t)(count - i) * sizeof(float));
    }
}

#endif

EXPORT void f16round_run(const float *x, float *y, int64_t count, int level) {
#ifdef F16_X86
    if (level >= 1 && cpu_f16c()) {
        round_f16c(x, y, count);
        return;
    }
#else
    (void)level;
#endif
    for (int64_t i = 0; i < count; i++)
        y[i] = round_scalar(x[i]);
}

static int max_level = 1; /* set by rknnrt_f16round_max_level: the tests' scalar path */

EXPORT void rknnrt_f16round_max_level(int level) { max_level = level; }

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const OrtApi *api = ((const ApiKernel *)kernel)->api;
    const OrtValue *in = NULL;
    if (FN(api, KernelContext_GetInput)(ctx, 0, &in) != NULL || in == NULL)
        return;
    int64_t dims[16];
    size_t rank = 0;
    if (tensor_dims(api, in, dims, 16, &rank))
        return;
    int64_t count = 1;
    for (size_t i = 0; i < rank; i++)
        count *= dims[i] > 0 ? dims[i] : 0;
    OrtValue *out = NULL;
    if (FN(api, KernelContext_GetOutput)(ctx, 0, dims, rank, &out) != NULL || out == NULL)
        return;
    void *x = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in, &x) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL)
        return;
    if (count > 0)
        f16round_run((const float *)x, (float *)y, count, max_level);
}

static const char *op_name(const CustomOp *op) { (void)op; return "RoundFloat16"; }
static size_t op_one(const CustomOp *op) { (void)op; return 1; }
static int op_float(const CustomOp *op, size_t i) { (void)op; (void)i; return T_FLOAT; }

static const CustomOp op = {8, api_kernel_create, op_name, any_provider, op_float, op_one,
                            op_float, op_one, compute, api_kernel_destroy, required, required,
                            {0}};

const CustomOp *f16round_op(void) { return &op; }
