/* Op `rknnrt.kernels::WindowMean`: the mean of each pooling window of a float32 tensor
 * x [N, C, H, W] (padded already), in the order a vendor file's AveragePool defines it:
 *
 *     y[n, c, oy, ox] = (((x[.., oy sh, ox sw] + x[.., oy sh, ox sw + 1]) + ...) + x[.., oy sh
 *                        + kh - 1, ox sw + kw - 1]) / counts[oy, ox]
 *
 * the window's values summed in float32 row by row from its first value, then divided by the
 * position's count (counts float32 [1, 1, Ho, Wo], which gives the output's size). That is the
 * Slice / Add / Div graph model/vendor_rknn/window_ops.py writes, which onnxruntime runs as
 * kh x kw strided copies and adds (core/program/window_means.py puts this op in its place; the
 * same bits: tests/perf/test_window_means.py). onnxruntime's own AveragePool sums in another
 * order on some shapes. Attributes: kernel_h, kernel_w, stride_h, stride_w. Built with
 * -ffp-contract=off: every sum and the division are single IEEE operations. */

#include <stdint.h>
#include <stdlib.h>

#include "api_kernel.h"
#include "winmean.h"

typedef struct MeanKernel {
    const OrtApi *api;
    int64_t kh, kw, sh, sw;
} MeanKernel;

static void *create_kernel(const CustomOp *op, const OrtApi *api, const OrtKernelInfo *info) {
    (void)op;
    MeanKernel *k = (MeanKernel *)calloc(1, sizeof(MeanKernel));
    if (k != NULL)
        *k = (MeanKernel){api, attr_int64(api, info, "kernel_h", 0),
                          attr_int64(api, info, "kernel_w", 0),
                          attr_int64(api, info, "stride_h", 0),
                          attr_int64(api, info, "stride_w", 0)};
    return k;
}

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const MeanKernel *k = (const MeanKernel *)kernel;
    const OrtApi *api = k->api;
    const OrtValue *in[2];
    if (kernel_inputs(api, ctx, in, 2))
        return;
    int64_t xd[4], cd[4];
    size_t xr = 0, cr = 0;
    if (tensor_dims(api, in[0], xd, 4, &xr) || tensor_dims(api, in[1], cd, 4, &cr) || xr != 4 ||
        cr != 4 || cd[0] != 1 || cd[1] != 1 || k->kh < 1 || k->kw < 1 || k->sh < 1 ||
        k->sw < 1)
        return;
    const int64_t ho = cd[2], wo = cd[3];
    /* every window inside x (the graph's Slices ended there) */
    if (ho < 1 || wo < 1 || (ho - 1) * k->sh + k->kh > xd[2] || (wo - 1) * k->sw + k->kw > xd[3])
        return;
    const int64_t dims[4] = {xd[0], xd[1], ho, wo};
    int64_t count = 0;
    OrtValue *out = output_like(api, ctx, dims, 4, &count);
    if (out == NULL)
        return;
    void *x = NULL, *c = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in[0], &x) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[1], &c) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL || count == 0)
        return;
    const float *xs = (const float *)x, *counts = (const float *)c;
    float *ys = (float *)y;
    const int64_t h = xd[2], w = xd[3], planes = xd[0] * xd[1];
    for (int64_t p = 0; p < planes; p++) {
        const float *plane = xs + p * h * w;
        float *outp = ys + p * ho * wo;
        for (int64_t oy = 0; oy < ho; oy++) {
            for (int64_t ox = 0; ox < wo; ox++) {
                const float *corner = plane + oy * k->sh * w + ox * k->sw;
                float sum = corner[0];
                for (int64_t j = 1; j < k->kw; j++)
                    sum = sum + corner[j];
                for (int64_t i = 1; i < k->kh; i++)
                    for (int64_t j = 0; j < k->kw; j++)
                        sum = sum + corner[i * w + j];
                outp[oy * wo + ox] = sum / counts[oy * wo + ox];
            }
        }
    }
}

static const char *op_name(const CustomOp *op) { (void)op; return "WindowMean"; }
static size_t op_inputs(const CustomOp *op) { (void)op; return 2; }
static size_t op_one(const CustomOp *op) { (void)op; return 1; }
static int op_float(const CustomOp *op, size_t i) { (void)op; (void)i; return T_FLOAT; }

static const CustomOp op = {8, create_kernel, op_name, any_provider, op_float, op_inputs,
                            op_float, op_one, compute, api_kernel_destroy, required, required};

const CustomOp *winmean_op(void) { return &op; }
