/* Zero-copy outputs in the native layouts of a 4-D output (NC1HWC2 and NHWC, float16 as the
 * model computes) and in NCHW float32, converted back to NCHW floats here; then the general
 * API with pass_through native input. argv: fp16 conv model, image.u8 (NHWC) */
#include "rt_test.h"

static rknn_tensor_attr query(rknn_context ctx, rknn_query_cmd cmd)
{
    rknn_tensor_attr a;
    memset(&a, 0, sizeof a);
    CHECK_RET(rknn_query(ctx, cmd, &a, sizeof a), RKNN_SUCC);
    return a;
}

/* NCHW floats of a float16 output held in `fmt` (NC1HWC2 dims [N,C1,H,W,C2] or NHWC) */
static void print_native(const char* label, const uint16_t* data, rknn_tensor_attr a, uint32_t C)
{
    uint32_t H = a.fmt == RKNN_TENSOR_NC1HWC2 ? a.dims[2] : a.dims[1];
    uint32_t W = a.fmt == RKNN_TENSOR_NC1HWC2 ? a.dims[3] : a.dims[2];
    float* out = (float*)malloc(sizeof(float) * C * H * W);
    for (uint32_t c = 0; c < C; c++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t w = 0; w < W; w++) {
                size_t at;
                if (a.fmt == RKNN_TENSOR_NC1HWC2) {
                    uint32_t C2 = a.dims[4];
                    at = (((size_t)(c / C2) * H + h) * W + w) * C2 + c % C2;
                } else {
                    at = ((size_t)h * W + w) * C + c;
                }
                out[((size_t)c * H + h) * W + w] = rt_f16_to_f32(data[at]);
            }
    rt_print_floats(label, out, (size_t)C * H * W);
    free(out);
}

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t model_size, image_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    unsigned char* image = rt_read_file(argv[2], &image_size);
    rknn_context ctx;
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    rknn_tensor_attr in_attr = query(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR);
    rknn_tensor_attr normal = query(ctx, RKNN_QUERY_OUTPUT_ATTR);
    uint32_t C = normal.dims[1];
    CHECK(in_attr.fmt == RKNN_TENSOR_NHWC && in_attr.w_stride == in_attr.dims[2]);
    in_attr.type = RKNN_TENSOR_UINT8;
    rknn_tensor_mem* in = rknn_create_mem(ctx, in_attr.n_elems);
    memcpy(in->virt_addr, image, image_size);
    CHECK_RET(rknn_set_io_mem(ctx, in, &in_attr), RKNN_SUCC);

    rknn_query_cmd natives[2] = {RKNN_QUERY_NATIVE_OUTPUT_ATTR, RKNN_QUERY_NATIVE_NHWC_OUTPUT_ATTR};
    const char* labels[2] = {"nc1hwc2", "nhwc"};
    for (int i = 0; i < 2; i++) {
        rknn_tensor_attr a = query(ctx, natives[i]);
        printf("%s_attr fmt=%s type=%s n_dims=%u size=%u\n", labels[i], get_format_string(a.fmt),
               get_type_string(a.type), a.n_dims, a.size);
        rknn_tensor_mem* out = rknn_create_mem(ctx, a.size);
        CHECK_RET(rknn_set_io_mem(ctx, out, &a), RKNN_SUCC);
        CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
        print_native(labels[i], (const uint16_t*)out->virt_addr, a, C);
        CHECK_RET(rknn_destroy_mem(ctx, out), RKNN_SUCC);
    }
    normal.type = RKNN_TENSOR_FLOAT32; /* NCHW float32: the runtime converts */
    rknn_tensor_mem* out = rknn_create_mem(ctx, normal.n_elems * 4);
    CHECK_RET(rknn_set_io_mem(ctx, out, &normal), RKNN_SUCC);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    rt_print_floats("nchw_f32", (const float*)out->virt_addr, normal.n_elems);
    CHECK_RET(rknn_destroy_mem(ctx, out), RKNN_SUCC);
    CHECK_RET(rknn_destroy_mem(ctx, in), RKNN_SUCC);
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);

    /* general API, pass_through: already normalised float16 in the native NHWC layout */
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    in_attr = query(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR);
    CHECK(in_attr.type == RKNN_TENSOR_FLOAT16);
    uint16_t* native = (uint16_t*)malloc(in_attr.size);
    for (size_t i = 0; i < image_size; i++) native[i] = rt_f32_to_f16(image[i] / 255.0f);
    rknn_input inp;
    memset(&inp, 0, sizeof inp);
    inp.buf = native; inp.size = in_attr.size; inp.pass_through = 1;
    CHECK_RET(rknn_inputs_set(ctx, 1, &inp), RKNN_SUCC);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    rknn_output o;
    memset(&o, 0, sizeof o);
    o.want_float = 1;
    CHECK_RET(rknn_outputs_get(ctx, 1, &o, NULL), RKNN_SUCC);
    rt_print_floats("pass_through", (const float*)o.buf, o.size / 4);
    CHECK_RET(rknn_outputs_release(ctx, 1, &o), RKNN_SUCC);
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);
    free(native); free(model); free(image);
    printf("ALL OK\n");
    return 0;
}
