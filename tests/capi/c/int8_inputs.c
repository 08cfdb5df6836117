/* The general API on an int8-quantised model: every buffer type it accepts (uint8, int8,
 * float32, float16), NHWC and NCHW, outputs as float32 and in the model's int8, and a
 * pass_through input quantised here with the queried scale and zero point.
 * argv: int8 model, image.u8 (NHWC 1x64x64x3) */
#include <math.h>
#include "rt_test.h"

static rknn_context ctx;
static unsigned char* image;
static size_t image_size;

static void run_case(const char* label, rknn_tensor_type type, rknn_tensor_format fmt)
{
    size_t esize = type == RKNN_TENSOR_FLOAT32 ? 4 : type == RKNN_TENSOR_FLOAT16 ? 2 : 1;
    unsigned char* buf = (unsigned char*)malloc(image_size * esize);
    for (size_t h = 0; h < 64; h++)
        for (size_t w = 0; w < 64; w++)
            for (size_t c = 0; c < 3; c++) {
                size_t src = (h * 64 + w) * 3 + c, dst = fmt == RKNN_TENSOR_NHWC ? src : (c * 64 + h) * 64 + w;
                /* int8 buffers hold the pixel values halved, so they fit */
                float v = type == RKNN_TENSOR_INT8 ? (float)(image[src] / 2) : (float)image[src];
                if (type == RKNN_TENSOR_FLOAT32) memcpy(buf + dst * 4, &v, 4);
                else if (type == RKNN_TENSOR_FLOAT16) { uint16_t hv = rt_f32_to_f16(v); memcpy(buf + dst * 2, &hv, 2); }
                else if (type == RKNN_TENSOR_INT8) buf[dst] = (unsigned char)(int8_t)v;
                else buf[dst] = image[src];
            }
    rknn_input in;
    memset(&in, 0, sizeof in);
    in.buf = buf; in.size = (uint32_t)(image_size * esize); in.type = type; in.fmt = fmt;
    CHECK_RET(rknn_inputs_set(ctx, 1, &in), RKNN_SUCC);
    free(buf);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    rknn_output out[2];
    memset(out, 0, sizeof out);
    out[0].want_float = 1;
    CHECK_RET(rknn_outputs_get(ctx, 1, out, NULL), RKNN_SUCC);
    rt_print_floats(label, (const float*)out[0].buf, out[0].size / 4);
    CHECK_RET(rknn_outputs_release(ctx, 1, out), RKNN_SUCC);
}

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t model_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    image = rt_read_file(argv[2], &image_size);
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    rknn_tensor_attr a;
    memset(&a, 0, sizeof a);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &a, sizeof a), RKNN_SUCC);
    printf("input type=%s qnt=%s\n", get_type_string(a.type), get_qnt_type_string(a.qnt_type));
    run_case("uint8_nhwc", RKNN_TENSOR_UINT8, RKNN_TENSOR_NHWC);
    run_case("uint8_nchw", RKNN_TENSOR_UINT8, RKNN_TENSOR_NCHW);
    run_case("int8_nhwc", RKNN_TENSOR_INT8, RKNN_TENSOR_NHWC);
    run_case("float32_nchw", RKNN_TENSOR_FLOAT32, RKNN_TENSOR_NCHW);

    /* output in the model's own type (want_float = 0): int8, or float16 when the last layer
     * runs in float16 (a softmax), converted to float here */
    rknn_tensor_attr oa;
    memset(&oa, 0, sizeof oa);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &oa, sizeof oa), RKNN_SUCC);
    rknn_output out;
    memset(&out, 0, sizeof out);
    CHECK_RET(rknn_outputs_get(ctx, 1, &out, NULL), RKNN_SUCC);
    printf("raw_output type=%s size=%u\n", get_type_string(oa.type), out.size);
    float own[64];
    CHECK(oa.n_elems <= 64);
    for (uint32_t i = 0; i < oa.n_elems; i++) {
        if (oa.type == RKNN_TENSOR_FLOAT16) own[i] = rt_f16_to_f32(((uint16_t*)out.buf)[i]);
        else if (oa.type == RKNN_TENSOR_INT8) own[i] = (((int8_t*)out.buf)[i] - oa.zp) * oa.scale;
        else CHECK(0);
    }
    CHECK(out.size == oa.n_elems * (oa.type == RKNN_TENSOR_FLOAT16 ? 2u : 1u));
    rt_print_floats("own_type_output", own, oa.n_elems);
    CHECK_RET(rknn_outputs_release(ctx, 1, &out), RKNN_SUCC);

    /* pass_through: quantise (x - mean) / std with the input's scale and zero point here */
    rknn_tensor_attr na;
    memset(&na, 0, sizeof na);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR, &na, sizeof na), RKNN_SUCC);
    CHECK(na.type == RKNN_TENSOR_INT8 && na.fmt == RKNN_TENSOR_NHWC && na.size == image_size);
    static const float mean[3] = {123.675f, 116.28f, 103.53f}, stdv[3] = {58.395f, 57.12f, 57.375f};
    int8_t* q = (int8_t*)malloc(image_size);
    for (size_t i = 0; i < image_size; i++) {
        float x = ((float)image[i] - mean[i % 3]) / stdv[i % 3];
        float v = roundf(x / na.scale) + (float)na.zp;
        q[i] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    }
    rknn_input in;
    memset(&in, 0, sizeof in);
    in.buf = q; in.size = (uint32_t)image_size; in.pass_through = 1;
    CHECK_RET(rknn_inputs_set(ctx, 1, &in), RKNN_SUCC);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    memset(&out, 0, sizeof out);
    out.want_float = 1;
    CHECK_RET(rknn_outputs_get(ctx, 1, &out, NULL), RKNN_SUCC);
    rt_print_floats("pass_through", (const float*)out.buf, out.size / 4);
    CHECK_RET(rknn_outputs_release(ctx, 1, &out), RKNN_SUCC);
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);
    free(q); free(model); free(image);
    printf("ALL OK\n");
    return 0;
}
