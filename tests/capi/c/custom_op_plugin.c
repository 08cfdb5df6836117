/* A CPU custom operator written in C, plugin style: out = alpha * (a + b), float32. alpha
 * comes from the op's attribute when the runtime has one, else 1. init allocates a call
 * counter in priv_data, destroy frees it. Built as a shared library by the tests. */
#include <stdlib.h>
#include <string.h>

#include "rknn_custom_op.h"

static int add_init(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                    rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    (void)inputs; (void)outputs;
    if (n_inputs != 2 || n_outputs != 1) return -1;
    op_ctx->priv_data = calloc(1, sizeof(int));
    return op_ctx->priv_data ? 0 : -1;
}

static int add_compute(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                       rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    if (n_inputs != 2 || n_outputs != 1) return -1;
    for (uint32_t i = 0; i < 2; i++)
        if (inputs[i].attr.type != RKNN_TENSOR_FLOAT32 || inputs[i].attr.n_elems != outputs[0].attr.n_elems)
            return -1;
    rknn_custom_op_attr alpha_attr;
    memset(&alpha_attr, 0, sizeof alpha_attr);
    rknn_custom_op_get_op_attr(op_ctx, "alpha", &alpha_attr);
    float alpha = 1.0f;
    if (alpha_attr.n_elems == 1 && alpha_attr.dtype == RKNN_TENSOR_FLOAT32) alpha = *(float*)alpha_attr.data;
    const float* a = (const float*)((char*)inputs[0].mem.virt_addr + inputs[0].mem.offset);
    const float* b = (const float*)((char*)inputs[1].mem.virt_addr + inputs[1].mem.offset);
    float* out = (float*)((char*)outputs[0].mem.virt_addr + outputs[0].mem.offset);
    for (uint32_t i = 0; i < outputs[0].attr.n_elems; i++) out[i] = alpha * (a[i] + b[i]);
    ++*(int*)op_ctx->priv_data;
    return 0;
}

static int add_destroy(rknn_custom_op_context* op_ctx)
{
    free(op_ctx->priv_data);
    op_ctx->priv_data = NULL;
    return 0;
}

RKNN_CUSTOM_OP_EXPORT rknn_custom_op* get_rknn_custom_op(void)
{
    static rknn_custom_op op;
    memset(&op, 0, sizeof op);
    op.version = 1;
    op.target = RKNN_TARGET_TYPE_CPU;
    strcpy(op.op_type, "cstAdd");
    op.init = add_init;
    op.compute = add_compute;
    op.destroy = add_destroy;
    return &op;
}
