/* rknnrt's onnxruntime custom-op library: int8 depthwise convolution with per-channel weight
 * zero points, the arithmetic of onnxruntime's QLinearConv without its slow depthwise path
 * (rknnrt/core/program/int8_depthwise.py says why; rknnrt/sessions/kernels/__init__.py builds
 * this file and registers it).
 *
 * Op `rknnrt.kernels::DepthwiseConvInt8_<x><y>` (x: u8 or s8; y: u8, s8, or f for float32),
 * NHWC:
 *   inputs  x [N,H,W,C] (x type), w [KH,KW,C] int32 (weights minus their zero points),
 *           bias [C] int32, m [C] float32 ((xs * ws[c]) / ys, or xs * ws[c] for a float y)
 *   attrs   x_zero_point, y_zero_point, strides (stride_h, stride_w), pads (pad_top,
 *           pad_left, pad_bottom, pad_right), dilations (dilation_h, dilation_w), activation:
 *           int64; alpha, beta, y_scale: float (with an activation, 1 HardSwish or 2 SiLU: an
 *           int8 y, m = xs * ws, and the product through it and QuantizeLinear first,
 *           epilogue.h)
 *   output  y [N,OH,OW,C] (y type)
 * per channel c: acc = sum (x - xz) * w[c] + bias[c] in int32 (padding contributes 0), then
 * y = saturate(nearbyintf(float(acc) * m[c]) + yz), the float32 product rounded half to even
 * (the default rounding mode) and clamped to the output type, as QLinearConv computes it.
 * For a float32 y (a conv whose output is not stored, core/program/int8_islands.py) it is the
 * product float(acc) * m[c] itself, m[c] = xs * ws[c], and y_zero_point is not read.
 *
 * The arithmetic is dw_arith.c (scalar, AVX2 and AVX-512 paths chosen at run time, so a cached
 * build suits every x86-64 CPU); onnxruntime's C API as declared in ort_abi.h. RegisterCustomOps
 * also adds the library's other ops, f16round.c's RoundFloat16, affine.c's ChannelAffineU8,
 * bytemap.c's ByteMap_<x><y> and ByteTable_<x><y>, chanmul.c's ChannelMul_<t>, inputcast.c's
 * QuantizeFloat_<t>, winmean.c's WindowMean and qconv.c's dense ConvInt8_u8<y>, to the domain.
 */

#include <stdlib.h>

#include "dw_arith.h"
#include "affine.h"
#include "api_kernel.h"
#include "bytemap.h"
#include "chanmul.h"
#include "inputcast.h"
#include "winmean.h"
#include "blocked.h"
#include "f16round.h"
#include "ort_abi.h"
#include "qconv.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct Kernel {
    const OrtApi *api;
    DwParams p;
    DwPacked *packed; /* the node's packed weights, made at its first run (dw_arith.h) */
} Kernel;

static int max_level = 2; /* set by rknnrt_dw_max_level: the tests' narrower paths */
static const OrtApi *parallel_api; /* the table with KernelContext_ParallelFor, or NULL */

typedef struct Chunks {
    const DwJob *job;
    int64_t rows, count;
} Chunks;

/* chunk i of the output rows, on one of onnxruntime's intra-op threads */
static void run_chunk(void *data, size_t i) {
    const Chunks *c = (const Chunks *)data;
    dw_do_rows(c->job, c->rows * (int64_t)i / c->count, c->rows * ((int64_t)i + 1) / c->count);
}

EXPORT void rknnrt_dw_max_level(int level) { max_level = level; }

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* onnxruntime's legacy custom-op compute returns nothing: a failure can only be a missing
     * output, which onnxruntime reports itself. The rewrite makes every input consistent. */
    const Kernel *k = (const Kernel *)kernel;
    const OrtApi *api = k->api;
    const OrtValue *in[4];
    if (kernel_inputs(api, ctx, in, 4))
        return;
    int64_t xd[4], wd[3];
    size_t xr = 0, wr = 0;
    if (tensor_dims(api, in[0], xd, 4, &xr) || tensor_dims(api, in[1], wd, 3, &wr) ||
        xr != 4 || wr != 3 || wd[2] != xd[3])
        return;
    Shape s = {xd[0], xd[1], xd[2], xd[3], wd[0], wd[1], 0, 0};
    s.oh = (s.h + k->p.pt + k->p.pb - (k->p.dh * (s.kh - 1) + 1)) / k->p.sh + 1;
    s.ow = (s.w + k->p.pl + k->p.pr - (k->p.dw * (s.kw - 1) + 1)) / k->p.sw + 1;
    if (s.oh < 0)
        s.oh = 0;
    if (s.ow < 0)
        s.ow = 0;
    int64_t yd[4] = {s.n, s.oh, s.ow, s.c};
    OrtValue *out = NULL;
    if (FN(api, KernelContext_GetOutput)(ctx, 0, yd, 4, &out) != NULL || out == NULL)
        return;
    void *p[5];
    for (int i = 0; i < 4; i++)
        if (FN(api, GetTensorMutableData)((OrtValue *)in[i], &p[i]) != NULL)
            return;
    if (FN(api, GetTensorMutableData)(out, &p[4]) != NULL)
        return;
    DwJob *job = dw_begin(&k->p, &s, p[0], (const int32_t *)p[1], (const int32_t *)p[2],
                          (const float *)p[3], p[4], max_level, &((Kernel *)kernel)->packed);
    if (job == NULL)
        return;
    /* rows in chunks over the session's intra-op threads (inline with one thread) */
    Chunks chunks = {job, dw_rows_total(job), 0};
    chunks.count = chunks.rows < 32 ? chunks.rows : 32;
    run_chunks(api, parallel_api, ctx, run_chunk, (size_t)chunks.count, &chunks);
    dw_end(job);
}

static void *create_kernel(const CustomOp *op, const OrtApi *api, const OrtKernelInfo *info) {
    const DwOp *d = (const DwOp *)op;
    Kernel *k = (Kernel *)calloc(1, sizeof(Kernel));
    if (k == NULL)
        return NULL;
    k->api = api;
    k->p.x_signed = d->x_type == T_INT8;
    k->p.y_signed = d->y_type == T_INT8;
    k->p.y_float = d->y_type == T_FLOAT;
    k->p.xz = attr_int64(api, info, "x_zero_point", 0);
    k->p.yz = attr_int64(api, info, "y_zero_point", 0);
    k->p.sh = attr_int64(api, info, "stride_h", 1);
    k->p.sw = attr_int64(api, info, "stride_w", 1);
    k->p.pt = attr_int64(api, info, "pad_top", 0);
    k->p.pl = attr_int64(api, info, "pad_left", 0);
    k->p.pb = attr_int64(api, info, "pad_bottom", 0);
    k->p.pr = attr_int64(api, info, "pad_right", 0);
    k->p.dh = attr_int64(api, info, "dilation_h", 1);
    k->p.dw = attr_int64(api, info, "dilation_w", 1);
    const int64_t activation = attr_int64(api, info, "activation", 0);
    k->p.act.kind = d->y_type == T_FLOAT ? ACT_NONE : epilogue_kind(activation);
    k->p.act.alpha = attr_float(api, info, "alpha", 1.0f / 6.0f);
    k->p.act.beta = attr_float(api, info, "beta", 0.5f);
    k->p.act.ys = attr_float(api, info, "y_scale", 1.0f);
    if (k->p.sh < 1)
        k->p.sh = 1;
    if (k->p.sw < 1)
        k->p.sw = 1;
    if (k->p.dh < 1)
        k->p.dh = 1;
    if (k->p.dw < 1)
        k->p.dw = 1;
    return k;
}

static void destroy_kernel(void *kernel) {
    if (kernel != NULL)
        dw_cache_free(((Kernel *)kernel)->packed);
    free(kernel);
}
static const char *op_name(const CustomOp *op) { return ((const DwOp *)op)->name; }
static const char *op_provider(const CustomOp *op) { (void)op; return NULL; }
static size_t op_inputs(const CustomOp *op) { (void)op; return 4; }
static size_t op_outputs(const CustomOp *op) { (void)op; return 1; }

static int op_input_type(const CustomOp *op, size_t i) {
    static const int rest[4] = {0, T_INT32, T_INT32, T_FLOAT};
    return i == 0 ? ((const DwOp *)op)->x_type : rest[i < 4 ? i : 0];
}

static int op_required(const CustomOp *op, size_t i) {
    (void)op;
    (void)i;
    return 0; /* INPUT_OUTPUT_REQUIRED */
}

static int op_output_type(const CustomOp *op, size_t i) {
    (void)i;
    return ((const DwOp *)op)->y_type;
}

#define DW_OP(NAME, XT, YT)                                                                    \
    {{8, create_kernel, op_name, op_provider, op_input_type, op_inputs, op_output_type,       \
      op_outputs, compute, destroy_kernel, op_required, op_required, {0}},                     \
     NAME, XT, YT}

static DwOp ops[6] = {
    DW_OP("DepthwiseConvInt8_u8u8", T_UINT8, T_UINT8),
    DW_OP("DepthwiseConvInt8_u8s8", T_UINT8, T_INT8),
    DW_OP("DepthwiseConvInt8_s8u8", T_INT8, T_UINT8),
    DW_OP("DepthwiseConvInt8_s8s8", T_INT8, T_INT8),
    DW_OP("DepthwiseConvInt8_u8f", T_UINT8, T_FLOAT), /* island form: y = float(acc) * m */
    DW_OP("DepthwiseConvInt8_s8f", T_INT8, T_FLOAT),
};

EXPORT OrtStatus *RegisterCustomOps(OrtSessionOptions *options, const OrtApiBase *base) {
    const OrtApi *api = base->GetApi(API_VERSION_USED);
    parallel_api = base->GetApi(API_VERSION_PARALLEL);
    if (api == NULL)
        return NULL; /* cannot happen on onnxruntime >= 1.13; nothing to report through */
    /* one domain per session options: onnxruntime keeps the pointer for their lifetime */
    OrtCustomOpDomain *domain = NULL;
    OrtStatus *st = FN(api, CreateCustomOpDomain)("rknnrt.kernels", &domain);
    for (int i = 0; !st && i < 6; i++)
        st = FN(api, CustomOpDomain_Add)(domain, &ops[i].base);
    if (!st)
        st = FN(api, CustomOpDomain_Add)(domain, f16round_op(base));
    if (!st)
        st = FN(api, CustomOpDomain_Add)(domain, f16round_add_op(base));
    if (!st)
        st = FN(api, CustomOpDomain_Add)(domain, f16round_add_relu_op(base));
    if (!st)
        st = FN(api, CustomOpDomain_Add)(domain, f16table_op(base));
    if (!st)
        st = FN(api, CustomOpDomain_Add)(domain, affine_op());
    for (int i = 0; !st && i < BYTEMAP_OPS; i++)
        st = FN(api, CustomOpDomain_Add)(domain, bytemap_op(i));
    chanmul_set_parallel_api(parallel_api);
    for (int i = 0; !st && i < CHANMUL_OPS; i++)
        st = FN(api, CustomOpDomain_Add)(domain, chanmul_op(i));
    for (int i = 0; !st && i < QUANTIZE_OPS; i++)
        st = FN(api, CustomOpDomain_Add)(domain, quantize_op(i));
    if (!st)
        st = FN(api, CustomOpDomain_Add)(domain, winmean_op());
    blocked_set_parallel_api(parallel_api);
    f16round_set_parallel_api(parallel_api);
    for (int i = 0; !st && i < BLOCKED_OPS; i++)
        st = FN(api, CustomOpDomain_Add)(domain, blocked_op(base, i));
    qconv_set_parallel_api(parallel_api);
    for (int i = 0; !st && i < QCONV_OPS; i++)
        st = FN(api, CustomOpDomain_Add)(domain, qconv_op(i));
    if (!st)
        st = FN(api, AddCustomOpDomain)(options, domain);
    return st;
}
