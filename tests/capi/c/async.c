/* Non-blocking runs with rknn_wait, frame ids, and RKNN_FLAG_ASYNC_MASK pipelining.
 * argv: model image.u8 */
#include "rt_test.h"

static void set_input(rknn_context ctx, unsigned char* image, size_t size)
{
    rknn_input in;
    memset(&in, 0, sizeof in);
    in.buf = image; in.size = (uint32_t)size; in.type = RKNN_TENSOR_UINT8; in.fmt = RKNN_TENSOR_NHWC;
    CHECK_RET(rknn_inputs_set(ctx, 1, &in), RKNN_SUCC);
}

static void get_output(const char* label, rknn_context ctx, uint64_t* frame_id)
{
    rknn_output out;
    memset(&out, 0, sizeof out);
    out.want_float = 1;
    rknn_output_extend ext;
    memset(&ext, 0, sizeof ext);
    CHECK_RET(rknn_outputs_get(ctx, 1, &out, &ext), RKNN_SUCC);
    *frame_id = ext.frame_id;
    rt_print_floats(label, (const float*)out.buf, out.size / 4);
    CHECK_RET(rknn_outputs_release(ctx, 1, &out), RKNN_SUCC);
}

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t model_size, image_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    unsigned char* image = rt_read_file(argv[2], &image_size);
    rknn_context ctx;
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    uint64_t frame;

    set_input(ctx, image, image_size);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    get_output("blocking", ctx, &frame);

    /* non_block = 1 returns at once; rknn_wait waits for that frame */
    rknn_run_extend run_ext;
    memset(&run_ext, 0, sizeof run_ext);
    run_ext.non_block = 1;
    set_input(ctx, image, image_size);
    CHECK_RET(rknn_run(ctx, &run_ext), RKNN_SUCC);
    uint64_t started = run_ext.frame_id;
    rknn_run_extend wait_ext;
    memset(&wait_ext, 0, sizeof wait_ext);
    wait_ext.timeout_ms = 10000;
    CHECK_RET(rknn_wait(ctx, &wait_ext), RKNN_SUCC);
    printf("frames started %llu waited %llu\n", (unsigned long long)started,
           (unsigned long long)wait_ext.frame_id);
    CHECK(wait_ext.frame_id == started);
    get_output("non_block", ctx, &frame);
    CHECK(frame == started);
    CHECK_RET(rknn_wait(ctx, NULL), RKNN_SUCC); /* nothing in flight: returns at once */
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);

    /* ASYNC_MASK: outputs_get returns the previous frame's result */
    rknn_context actx;
    CHECK_RET(rknn_init(&actx, model, (uint32_t)model_size, RKNN_FLAG_ASYNC_MASK, NULL), RKNN_SUCC);
    for (int i = 0; i < 3; i++) {
        set_input(actx, image, image_size);
        CHECK_RET(rknn_run(actx, NULL), RKNN_SUCC);
        char label[32];
        snprintf(label, sizeof label, "async_%d", i);
        get_output(label, actx, &frame);
        printf("async_frame_%d %llu\n", i, (unsigned long long)frame);
    }
    CHECK_RET(rknn_destroy(actx), RKNN_SUCC);
    free(model); free(image);
    printf("ALL OK\n");
    return 0;
}
