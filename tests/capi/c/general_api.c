/* The general API with every input type and format the float model accepts, preallocated and
 * runtime-allocated outputs, want_float 0/1, queries; prints each result line
 * for the Python side to compare. argv: model image.u8 (NHWC 1x64x64x3) */
#include "rt_test.h"

static rknn_context ctx;
static unsigned char* image;
static uint32_t H, W, C;

static void run_case(const char* label, rknn_tensor_type type, rknn_tensor_format fmt)
{
    size_t n = (size_t)H * W * C, esize = type == RKNN_TENSOR_FLOAT32 ? 4 : type == RKNN_TENSOR_FLOAT16 ? 2 : 1;
    unsigned char* buf = (unsigned char*)malloc(n * esize);
    for (uint32_t h = 0; h < H; h++)
        for (uint32_t w = 0; w < W; w++)
            for (uint32_t c = 0; c < C; c++) {
                size_t src = ((size_t)h * W + w) * C + c;
                size_t dst = fmt == RKNN_TENSOR_NHWC ? src : ((size_t)c * H + h) * W + w;
                float v = image[src];
                if (type == RKNN_TENSOR_FLOAT32) memcpy(buf + dst * 4, &v, 4);
                else if (type == RKNN_TENSOR_FLOAT16) { uint16_t hv = rt_f32_to_f16(v); memcpy(buf + dst * 2, &hv, 2); }
                else buf[dst] = image[src];
            }
    rknn_input in;
    memset(&in, 0, sizeof in);
    in.index = 0; in.buf = buf; in.size = (uint32_t)(n * esize); in.type = type; in.fmt = fmt;
    CHECK_RET(rknn_inputs_set(ctx, 1, &in), RKNN_SUCC);
    free(buf); /* inputs_set copied it */
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    rknn_output out;
    memset(&out, 0, sizeof out);
    out.want_float = 1;
    rknn_output_extend ext;
    CHECK_RET(rknn_outputs_get(ctx, 1, &out, &ext), RKNN_SUCC);
    CHECK(out.buf != NULL && out.size == 10 * sizeof(float));
    rt_print_floats(label, (const float*)out.buf, out.size / 4);
    CHECK_RET(rknn_outputs_release(ctx, 1, &out), RKNN_SUCC);
}

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t model_size, image_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    image = rt_read_file(argv[2], &image_size);
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    free(model); /* the runtime keeps its own copy */

    rknn_input_output_num io;
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io), RKNN_SUCC);
    printf("io %u %u\n", io.n_input, io.n_output);
    rknn_tensor_attr a;
    memset(&a, 0, sizeof a);
    a.index = 0;
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &a, sizeof a), RKNN_SUCC);
    printf("input %s n_dims=%u dims=%u,%u,%u,%u fmt=%s type=%s qnt=%s size=%u\n", a.name, a.n_dims,
           a.dims[0], a.dims[1], a.dims[2], a.dims[3], get_format_string(a.fmt),
           get_type_string(a.type), get_qnt_type_string(a.qnt_type), a.size);
    H = a.dims[1]; W = a.dims[2]; C = a.dims[3];
    CHECK(image_size == (size_t)H * W * C);
    memset(&a, 0, sizeof a);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &a, sizeof a), RKNN_SUCC);
    printf("output %s n_dims=%u dims=%u,%u fmt=%s type=%s\n", a.name, a.n_dims, a.dims[0],
           a.dims[1], get_format_string(a.fmt), get_type_string(a.type));
    rknn_custom_string cs;
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_CUSTOM_STRING, &cs, sizeof cs), RKNN_SUCC);
    printf("custom_string %s\n", cs.string);
    rknn_sdk_version ver;
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_SDK_VERSION, &ver, sizeof ver), RKNN_SUCC);
    printf("api_version %s\n", ver.api_version);

    run_case("uint8_nhwc", RKNN_TENSOR_UINT8, RKNN_TENSOR_NHWC);
    run_case("uint8_nchw", RKNN_TENSOR_UINT8, RKNN_TENSOR_NCHW);
    run_case("float32_nhwc", RKNN_TENSOR_FLOAT32, RKNN_TENSOR_NHWC);
    run_case("float32_nchw", RKNN_TENSOR_FLOAT32, RKNN_TENSOR_NCHW);
    run_case("float16_nhwc", RKNN_TENSOR_FLOAT16, RKNN_TENSOR_NHWC);
    run_case("float16_nchw", RKNN_TENSOR_FLOAT16, RKNN_TENSOR_NCHW);

    /* types a float model refuses: one error each, nothing set */
    rknn_input bad;
    memset(&bad, 0, sizeof bad);
    bad.buf = image; bad.size = (uint32_t)image_size; bad.type = RKNN_TENSOR_INT8; bad.fmt = RKNN_TENSOR_NHWC;
    CHECK_RET(rknn_inputs_set(ctx, 1, &bad), RKNN_ERR_PARAM_INVALID);
    bad.size = 10; bad.type = RKNN_TENSOR_UINT8;
    CHECK_RET(rknn_inputs_set(ctx, 1, &bad), RKNN_ERR_PARAM_INVALID); /* too small */

    /* preallocated output, model dtype (want_float=0 on a float32 model: float32 too) */
    rknn_input in;
    memset(&in, 0, sizeof in);
    in.buf = image; in.size = (uint32_t)image_size; in.type = RKNN_TENSOR_UINT8; in.fmt = RKNN_TENSOR_NHWC;
    CHECK_RET(rknn_inputs_set(ctx, 1, &in), RKNN_SUCC);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    float mine[10];
    rknn_output out;
    memset(&out, 0, sizeof out);
    out.is_prealloc = 1; out.want_float = 0; out.buf = mine; out.size = sizeof mine;
    CHECK_RET(rknn_outputs_get(ctx, 1, &out, NULL), RKNN_SUCC);
    CHECK(out.buf == mine); /* the caller's buffer, written in place */
    rt_print_floats("prealloc", mine, 10);
    CHECK_RET(rknn_outputs_release(ctx, 1, &out), RKNN_SUCC);

    /* pass_through with the native input layout and type */
    memset(&a, 0, sizeof a);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR, &a, sizeof a), RKNN_SUCC);
    printf("native_input fmt=%s type=%s size=%u w_stride=%u size_with_stride=%u\n",
           get_format_string(a.fmt), get_type_string(a.type), a.size, a.w_stride, a.size_with_stride);
    rknn_perf_run perf;
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_PERF_RUN, &perf, sizeof perf), RKNN_SUCC);
    CHECK(perf.run_duration > 0);
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);
    free(image);
    printf("ALL OK\n");
    return 0;
}
