/* The zoo's flow: RGA resizes a camera-sized RGB888 picture straight into the model's
 * zero-copy input (the fd of rknn_create_mem, rows w_stride apart), the NPU runs, and the
 * output is read in NC1HWC2. Prints "resized" (the input bytes) and "output" (NCHW floats).
 * argv: fp16 conv model (16x16x3 -> 20x16x16), picture.rgb (40x24 RGB888) */
#include "im2d.h"
#include "rt_test.h"

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t model_size, size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    unsigned char* pic = rt_read_file(argv[2], &size);
    CHECK(size == 40 * 24 * 3);
    rknn_context ctx;
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    rknn_tensor_attr in_attr, out_attr;
    memset(&in_attr, 0, sizeof in_attr);
    memset(&out_attr, 0, sizeof out_attr);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR, &in_attr, sizeof in_attr), RKNN_SUCC);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_NATIVE_OUTPUT_ATTR, &out_attr, sizeof out_attr), RKNN_SUCC);
    CHECK(out_attr.fmt == RKNN_TENSOR_NC1HWC2);
    int Hm = (int)in_attr.dims[1], Wm = (int)in_attr.dims[2];
    int stride = in_attr.w_stride ? (int)in_attr.w_stride : Wm;
    in_attr.type = RKNN_TENSOR_UINT8;
    rknn_tensor_mem* in = rknn_create_mem(ctx, in_attr.size_with_stride);
    rknn_tensor_mem* outm = rknn_create_mem(ctx, out_attr.size_with_stride);
    CHECK(in && outm);

    rga_buffer_t src = wrapbuffer_virtualaddr(pic, 40, 24, RK_FORMAT_RGB_888);
    rga_buffer_t dst = wrapbuffer_fd_t(in->fd, Wm, Hm, stride, Hm, RK_FORMAT_RGB_888);
    im_rect none = {0, 0, 0, 0};
    int ret = imcheck(src, dst, none, none);
    if (ret != IM_STATUS_NOERROR) {
        fprintf(stderr, "imcheck: %s\n", imStrError((IM_STATUS)ret));
        return 1;
    }
    CHECK_RET(imresize(src, dst), IM_STATUS_SUCCESS);
    printf("resized");
    for (int h = 0; h < Hm; h++)
        for (int i = 0; i < Wm * 3; i++) printf(" %u", ((unsigned char*)in->virt_addr)[h * stride * 3 + i]);
    printf("\n");

    CHECK_RET(rknn_set_io_mem(ctx, in, &in_attr), RKNN_SUCC);
    CHECK_RET(rknn_set_io_mem(ctx, outm, &out_attr), RKNN_SUCC);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    CHECK_RET(rknn_mem_sync(ctx, outm, RKNN_MEMORY_SYNC_FROM_DEVICE), RKNN_SUCC);
    uint32_t C1 = out_attr.dims[1], H = out_attr.dims[2], W = out_attr.dims[3], C2 = out_attr.dims[4], C = 20;
    CHECK(C1 * C2 >= C);
    const uint16_t* data = (const uint16_t*)outm->virt_addr;
    float* nchw = (float*)malloc(sizeof(float) * C * H * W);
    for (uint32_t c = 0; c < C; c++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t w = 0; w < W; w++)
                nchw[(c * H + h) * W + w] = rt_f16_to_f32(data[(((c / C2) * H + h) * W + w) * C2 + c % C2]);
    rt_print_floats("output", nchw, (size_t)C * H * W);
    rknn_destroy_mem(ctx, in);
    rknn_destroy_mem(ctx, outm);
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);
    free(nchw); free(model); free(pic);
    printf("ALL OK\n");
    return 0;
}
