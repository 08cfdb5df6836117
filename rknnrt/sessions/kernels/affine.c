/* Op `rknnrt.kernels::ChannelAffineU8`: uint8 x [N, C, ...] -> uint8 y of the same shape,
 *
 *     y = QuantizeLinear(Relu?(DequantizeLinear(x, xs, xz) * a[c] + b[c]), ys, yz)
 *
 * one pass over the tensor in place of onnxruntime's four or five (an int8 vendor file's
 * standalone BatchNormalization, y = x A + B, after a DenseNet's Concats:
 * core/program/int8_affine.py). Each step is the float32 operation onnxruntime's op performs:
 * float(x - xz) * xs, then * a[c], then + b[c] (never fused: -ffp-contract=off), max(0, .),
 * then / ys, clamped to [-yz, 255 - yz] and rounded to the nearest even integer, + yz; the
 * bytes are the same (tests/perf/test_int8_affine.py). Inputs: x, p = (xs, xz, ys, yz, relu)
 * (float32 [5]), a and b (float32 [C]). An AVX2 path (chosen by cpuid at run time) computes the
 * same operations 8 elements at a time; the scalar path runs everywhere else. */

#include <math.h>
#include <stdlib.h>

#include "api_kernel.h"
#include "cpu.h"
#include "affine.h"

#define EXPORT __attribute__((visibility("default")))

/* one plane's elements [i0, n): the scalar path (and the AVX2 path's tail) */
static void plane_scalar(const uint8_t *xp, uint8_t *yp, int64_t i0, int64_t n, const float *p,
                         float ac, float bc) {
    const float xs = p[0], xz = p[1], ys = p[2], yz = p[3];
    const int relu = p[4] != 0.0f;
    const float lo = 0.0f - yz, hi = 255.0f - yz;
    for (int64_t i = i0; i < n; i++) {
        float v = ((float)xp[i] - xz) * xs; /* (x - xz) is exact in float32 */
        v = v * ac;
        v = v + bc;
        if (relu && !(v > 0.0f))
            v = 0.0f; /* (the rewrite admits finite constants only: v is never a NaN) */
        float t = v / ys;
        t = t < lo ? lo : (t > hi ? hi : t); /* integer bounds: clamp, then round */
        yp[i] = (uint8_t)(nearbyintf(t) + yz);
    }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* the same operations on 8 elements at a time (VCVTPS2DQ rounds by MXCSR: nearest even, as
 * nearbyintf in the default mode) */
__attribute__((target("avx2"))) static void plane_avx2(const uint8_t *xp, uint8_t *yp,
                                                       int64_t n, const float *p, float ac,
                                                       float bc) {
    const __m256 xs = _mm256_set1_ps(p[0]), xz = _mm256_set1_ps(p[1]), ys = _mm256_set1_ps(p[2]);
    const __m256 lo = _mm256_set1_ps(0.0f - p[3]), hi = _mm256_set1_ps(255.0f - p[3]);
    const __m256 va = _mm256_set1_ps(ac), vb = _mm256_set1_ps(bc), zero = _mm256_setzero_ps();
    const __m256i yz = _mm256_set1_epi32((int32_t)p[3]);
    const int relu = p[4] != 0.0f;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i bytes = _mm_loadl_epi64((const __m128i *)(xp + i));
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        v = _mm256_mul_ps(_mm256_sub_ps(v, xz), xs);
        v = _mm256_add_ps(_mm256_mul_ps(v, va), vb);
        if (relu)
            v = _mm256_max_ps(v, zero);
        __m256 t = _mm256_div_ps(v, ys);
        t = _mm256_min_ps(_mm256_max_ps(t, lo), hi);
        __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(t), yz); /* in [0, 255] */
        __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(yp + i), _mm_packus_epi16(w, w));
    }
    plane_scalar(xp, yp, i, n, p, ac, bc);
}

#endif

static int max_level = 1; /* set by rknnrt_affine_max_level: the tests' scalar path */

EXPORT void rknnrt_affine_max_level(int level) { max_level = level; }

void affine_run(const uint8_t *x, uint8_t *y, const float *p, const float *a, const float *b,
                int64_t planes, int64_t channels, int64_t size) {
    for (int64_t plane = 0; plane < planes; plane++) {
        const float ac = a[plane % channels], bc = b[plane % channels];
#if defined(__x86_64__) || defined(__i386__)
        if (max_level >= 1 && cpu_avx2()) {
            plane_avx2(x + plane * size, y + plane * size, size, p, ac, bc);
            continue;
        }
#endif
        plane_scalar(x + plane * size, y + plane * size, 0, size, p, ac, bc);
    }
}

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const OrtApi *api = ((const ApiKernel *)kernel)->api;
    const OrtValue *in[4];
    if (kernel_inputs(api, ctx, in, 4))
        return;
    int64_t dims[16], pd[16], ad[16], bd[16];
    size_t rank = 0, pr = 0, ar = 0, br = 0;
    if (tensor_dims(api, in[0], dims, 16, &rank) || tensor_dims(api, in[1], pd, 16, &pr) ||
        tensor_dims(api, in[2], ad, 16, &ar) || tensor_dims(api, in[3], bd, 16, &br))
        return;
    if (rank < 2 || pr != 1 || pd[0] != 5 || ar != 1 || br != 1 || ad[0] != dims[1] ||
        bd[0] != dims[1] || dims[1] <= 0)
        return;
    int64_t size = 1, planes = dims[0] * dims[1];
    for (size_t i = 2; i < rank; i++)
        size *= dims[i] > 0 ? dims[i] : 0;
    OrtValue *out = NULL;
    if (FN(api, KernelContext_GetOutput)(ctx, 0, dims, rank, &out) != NULL || out == NULL)
        return;
    void *data[5] = {NULL, NULL, NULL, NULL, NULL};
    for (size_t i = 0; i < 4; i++)
        if (FN(api, GetTensorMutableData)((OrtValue *)in[i], &data[i]) != NULL)
            return;
    if (FN(api, GetTensorMutableData)(out, &data[4]) != NULL)
        return;
    if (planes > 0 && size > 0)
        affine_run((const uint8_t *)data[0], (uint8_t *)data[4], (const float *)data[1],
                   (const float *)data[2], (const float *)data[3], planes, dims[1], size);
}

static const char *op_name(const CustomOp *op) { (void)op; return "ChannelAffineU8"; }
static size_t op_inputs(const CustomOp *op) { (void)op; return 4; }
static size_t op_outputs(const CustomOp *op) { (void)op; return 1; }
static int op_input_type(const CustomOp *op, size_t i) { (void)op; return i ? T_FLOAT : T_UINT8; }
static int op_output_type(const CustomOp *op, size_t i) { (void)op; (void)i; return T_UINT8; }

static const CustomOp op = {8, api_kernel_create, op_name, any_provider, op_input_type, op_inputs,
                            op_output_type, op_outputs, compute, api_kernel_destroy, required,
                            required, {0}};

const CustomOp *affine_op(void) { return &op; }
