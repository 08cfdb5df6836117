/* A vendor .rknn file with custom ops, run as the vendor's custom-op demo runs it: rknn_init,
 * one run before registration (must fail), rknn_register_custom_ops with C callbacks, then a
 * run; the attributes each init read and every output are printed.
 * usage: vendor_custom_app MODEL IN0.f32 IN1.f32 OPS
 *   IN*.f32: raw float32 NCHW inputs; OPS: "dual" (cstDualResidual) or "both" (also
 *   cstChannelAffine, tests/vendor/make_custom_fixtures.py documents both). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rknn_api.h"
#include "rknn_custom_op.h"

static const float* in_at(rknn_custom_op_tensor* t) { return (const float*)((char*)t->mem.virt_addr + t->mem.offset); }
static float* out_at(rknn_custom_op_tensor* t) { return (float*)((char*)t->mem.virt_addr + t->mem.offset); }

static int get_attr(rknn_custom_op_context* op_ctx, const char* name, rknn_custom_op_attr* attr)
{
    memset(attr, 0, sizeof *attr);
    rknn_custom_op_get_op_attr(op_ctx, name, attr);
    printf("attr %s %d %u", name, (int)attr->dtype, attr->n_elems);
    for (uint32_t i = 0; i < attr->n_elems && attr->data; i++) {
        if (attr->dtype == RKNN_TENSOR_FLOAT32) printf(" %.7g", ((const float*)attr->data)[i]);
        else if (attr->dtype == RKNN_TENSOR_INT64) printf(" %lld", (long long)((const int64_t*)attr->data)[i]);
        else if (attr->dtype == RKNN_TENSOR_UINT8) printf(" %u", ((const uint8_t*)attr->data)[i]);
    }
    printf("\n");
    return attr->n_elems > 0 ? 0 : -1;
}

static int dual_init(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                     rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    (void)inputs; (void)outputs;
    rknn_custom_op_attr alpha;
    if (n_inputs != 2 || n_outputs != 2 || get_attr(op_ctx, "alpha", &alpha) != 0) return -1;
    return alpha.dtype == RKNN_TENSOR_FLOAT32 ? 0 : -1;
}

/* (x alpha - y, y alpha - x), as the vendor demo's compute_custom_dual_residual_float32 */
static int dual_compute(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                        rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    if (n_inputs != 2 || n_outputs != 2 || inputs[0].attr.type != RKNN_TENSOR_FLOAT32) return -1;
    rknn_custom_op_attr attr;
    memset(&attr, 0, sizeof attr);
    rknn_custom_op_get_op_attr(op_ctx, "alpha", &attr);
    float alpha = attr.n_elems == 1 ? *(const float*)attr.data : 0.f;
    const float *x = in_at(&inputs[0]), *y = in_at(&inputs[1]);
    float *a = out_at(&outputs[0]), *b = out_at(&outputs[1]);
    for (uint32_t i = 0; i < outputs[0].attr.n_elems; i++) {
        a[i] = x[i] * alpha - y[i];
        b[i] = y[i] * alpha - x[i];
    }
    return 0;
}

static int affine_init(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                       rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    (void)inputs; (void)outputs;
    rknn_custom_op_attr a;
    if (n_inputs != 1 || n_outputs != 1) return -1;
    const char* names[] = {"scale", "shift", "reverse", "tag", "name"};
    for (int k = 0; k < 5; k++)
        if (get_attr(op_ctx, names[k], &a) != 0) return -1;
    return 0;
}

/* out[c] = x[c'] scale[c] + shift[c], c' = C - 1 - c if reverse else c (NCHW, N = 1) */
static int affine_compute(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                          rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    if (n_inputs != 1 || n_outputs != 1 || inputs[0].attr.n_dims != 4) return -1;
    rknn_custom_op_attr scale, shift, reverse;
    memset(&scale, 0, sizeof scale);
    memset(&shift, 0, sizeof shift);
    memset(&reverse, 0, sizeof reverse);
    rknn_custom_op_get_op_attr(op_ctx, "scale", &scale);
    rknn_custom_op_get_op_attr(op_ctx, "shift", &shift);
    rknn_custom_op_get_op_attr(op_ctx, "reverse", &reverse);
    uint32_t c = inputs[0].attr.dims[1], hw = inputs[0].attr.dims[2] * inputs[0].attr.dims[3];
    if (scale.n_elems != c || shift.n_elems != c || reverse.n_elems != 1) return -1;
    int rev = ((const int64_t*)reverse.data)[0] != 0;
    const float* x = in_at(&inputs[0]);
    float* y = out_at(&outputs[0]);
    for (uint32_t k = 0; k < c; k++) {
        uint32_t src = rev ? c - 1 - k : k;
        float s = ((const float*)scale.data)[k], t = (float)((const int64_t*)shift.data)[k];
        for (uint32_t i = 0; i < hw; i++) y[k * hw + i] = x[src * hw + i] * s + t;
    }
    return 0;
}

static float* load(const char* path, size_t* size)
{
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    float* data = malloc(*size);
    if (data && fread(data, 1, *size, f) != *size) { free(data); data = NULL; }
    fclose(f);
    return data;
}

int main(int argc, char** argv)
{
    if (argc < 5) return 2;
    rknn_context ctx = 0;
    if (rknn_init(&ctx, argv[1], 0, 0, NULL) != RKNN_SUCC) return 3;
    size_t sizes[2];
    float* data[2] = {load(argv[2], &sizes[0]), load(argv[3], &sizes[1])};
    if (!data[0] || !data[1]) return 4;
    rknn_input inputs[2];
    memset(inputs, 0, sizeof inputs);
    for (int i = 0; i < 2; i++) {
        inputs[i].index = i;
        inputs[i].buf = data[i];
        inputs[i].size = (uint32_t)sizes[i];
        inputs[i].type = RKNN_TENSOR_FLOAT32;
        inputs[i].fmt = RKNN_TENSOR_NCHW;
    }
    if (rknn_inputs_set(ctx, 2, inputs) != RKNN_SUCC) return 5;
    printf("unregistered %d\n", rknn_run(ctx, NULL));
    rknn_destroy(ctx);  /* a run closes registration: a fresh context, as the demo makes */
    if (rknn_init(&ctx, argv[1], 0, 0, NULL) != RKNN_SUCC) return 3;
    rknn_custom_op ops[2];
    memset(ops, 0, sizeof ops);
    for (int k = 0; k < 2; k++) { ops[k].version = 1; ops[k].target = RKNN_TARGET_TYPE_CPU; }
    strcpy(ops[0].op_type, "cstDualResidual");
    ops[0].init = dual_init;
    ops[0].compute = dual_compute;
    strcpy(ops[1].op_type, "cstChannelAffine");
    ops[1].init = affine_init;
    ops[1].compute = affine_compute;
    int n_ops = strcmp(argv[4], "both") == 0 ? 2 : 1;
    int ret = rknn_register_custom_ops(ctx, ops, n_ops);
    printf("register %d\n", ret);
    if (ret != RKNN_SUCC) return 6;
    if (rknn_inputs_set(ctx, 2, inputs) != RKNN_SUCC) return 5;
    printf("run %d\n", rknn_run(ctx, NULL));
    rknn_input_output_num io;
    if (rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io) != RKNN_SUCC || io.n_output > 4) return 7;
    rknn_output outputs[4];
    memset(outputs, 0, sizeof outputs);
    for (uint32_t i = 0; i < io.n_output; i++) { outputs[i].index = i; outputs[i].want_float = 1; }
    if (rknn_outputs_get(ctx, io.n_output, outputs, NULL) != RKNN_SUCC) return 8;
    for (uint32_t i = 0; i < io.n_output; i++) {
        printf("out%u", i);
        for (uint32_t k = 0; k < outputs[i].size / 4; k++) printf(" %.9g", ((const float*)outputs[i].buf)[k]);
        printf("\n");
    }
    rknn_outputs_release(ctx, io.n_output, outputs);
    free(data[0]);
    free(data[1]);
    return rknn_destroy(ctx) == RKNN_SUCC ? 0 : 9;
}
