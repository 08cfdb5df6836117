/* The vendor's custom CPU op scenario as a C application: a model with a cstSigmoid node
 * (attribute "scale"), the op registered from C, one input computed here, the output printed.
 * usage: cst_sigmoid_app MODEL_PATH [RUNS] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rknn_api.h"
#include "rknn_custom_op.h"

typedef struct {
    float scale;
    int computed;
} sigmoid_state;

static int sigmoid_init(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                        rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    (void)inputs; (void)outputs;
    if (n_inputs != 1 || n_outputs != 1) return -1;
    rknn_custom_op_attr scale, name;
    memset(&scale, 0, sizeof scale);
    memset(&name, 0, sizeof name);
    rknn_custom_op_get_op_attr(op_ctx, "scale", &scale);
    rknn_custom_op_get_op_attr(op_ctx, "name", &name);
    if (scale.n_elems != 1 || scale.dtype != RKNN_TENSOR_FLOAT32) return -1;
    if (name.dtype != RKNN_TENSOR_UINT8 || strcmp((const char*)name.data, "my_sigmoid") != 0) return -1;
    sigmoid_state* state = calloc(1, sizeof *state);
    if (!state) return -1;
    state->scale = *(const float*)scale.data;
    op_ctx->priv_data = state;
    return 0;
}

static int sigmoid_compute(rknn_custom_op_context* op_ctx, rknn_custom_op_tensor* inputs, uint32_t n_inputs,
                           rknn_custom_op_tensor* outputs, uint32_t n_outputs)
{
    if (n_inputs != 1 || n_outputs != 1 || inputs[0].attr.type != RKNN_TENSOR_FLOAT32) return -1;
    sigmoid_state* state = op_ctx->priv_data;
    const float* in = (const float*)((char*)inputs[0].mem.virt_addr + inputs[0].mem.offset);
    float* out = (float*)((char*)outputs[0].mem.virt_addr + outputs[0].mem.offset);
    for (uint32_t i = 0; i < outputs[0].attr.n_elems; i++) out[i] = 1.0f / (1.0f + expf(-state->scale * in[i]));
    state->computed++;
    return 0;
}

static int sigmoid_destroy(rknn_custom_op_context* op_ctx)
{
    sigmoid_state* state = op_ctx->priv_data;
    printf("computed %d\n", state ? state->computed : -1);
    free(state);
    op_ctx->priv_data = NULL;
    return 0;
}

int main(int argc, char** argv)
{
    if (argc < 2) return 2;
    int runs = argc > 2 ? atoi(argv[2]) : 1;
    rknn_context ctx = 0;
    if (rknn_init(&ctx, argv[1], 0, 0, NULL) != RKNN_SUCC) return 3;
    rknn_custom_op op;
    memset(&op, 0, sizeof op);
    op.version = 1;
    op.target = RKNN_TARGET_TYPE_CPU;
    strcpy(op.op_type, "cstSigmoid");
    op.init = sigmoid_init;
    op.compute = sigmoid_compute;
    op.destroy = sigmoid_destroy;
    int ret = rknn_register_custom_ops(ctx, &op, 1);
    if (ret != RKNN_SUCC) { printf("register %d\n", ret); return 4; }
    ret = rknn_register_custom_ops(ctx, &op, 1);  /* a second time: refused, ctx unchanged */
    printf("second register %d\n", ret);
    float x[1 * 3 * 8 * 8];
    for (int i = 0; i < 192; i++) x[i] = 1.5f * sinf((float)i);
    rknn_input input;
    memset(&input, 0, sizeof input);
    input.index = 0;
    input.buf = x;
    input.size = sizeof x;
    input.type = RKNN_TENSOR_FLOAT32;
    input.fmt = RKNN_TENSOR_NCHW;
    rknn_output output;
    for (int r = 0; r < runs; r++) {
        if (rknn_inputs_set(ctx, 1, &input) != RKNN_SUCC) return 5;
        if (rknn_run(ctx, NULL) != RKNN_SUCC) return 6;
        memset(&output, 0, sizeof output);
        output.want_float = 1;
        if (rknn_outputs_get(ctx, 1, &output, NULL) != RKNN_SUCC) return 7;
        if (r == runs - 1) {
            const float* y = output.buf;
            printf("y");
            for (uint32_t i = 0; i < output.size / 4; i++) printf(" %.7g", y[i]);
            printf("\n");
        }
        rknn_outputs_release(ctx, 1, &output);
    }
    return rknn_destroy(ctx) == RKNN_SUCC ? 0 : 8;
}
