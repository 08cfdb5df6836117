/* Zero-copy: rknn_create_mem, native layouts, w_stride rows, mmap of the fd, mem_sync.
 * argv: model image.u8 */
#include <sys/mman.h>
#include "rt_test.h"

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t model_size, image_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    unsigned char* image = rt_read_file(argv[2], &image_size);
    rknn_context ctx;
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);

    rknn_tensor_attr in_attr;
    memset(&in_attr, 0, sizeof in_attr);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR, &in_attr, sizeof in_attr), RKNN_SUCC);
    printf("native_input fmt=%s dims=%u,%u,%u,%u w_stride=%u\n", get_format_string(in_attr.fmt),
           in_attr.dims[0], in_attr.dims[1], in_attr.dims[2], in_attr.dims[3], in_attr.w_stride);
    CHECK(in_attr.fmt == RKNN_TENSOR_NHWC);
    uint32_t H = in_attr.dims[1], W = in_attr.dims[2], C = in_attr.dims[3];
    uint32_t stride = in_attr.w_stride ? in_attr.w_stride : W;
    in_attr.type = RKNN_TENSOR_UINT8; /* the NPU normalises and quantises */
    rknn_tensor_mem* in = rknn_create_mem(ctx, stride * H * C);
    CHECK(in != NULL && in->flags == RKNN_TENSOR_MEMORY_FLAGS_ALLOC_INSIDE);
    for (uint32_t h = 0; h < H; h++)
        memcpy((unsigned char*)in->virt_addr + (size_t)h * stride * C, image + (size_t)h * W * C, (size_t)W * C);
    /* the fd is a real descriptor: a second mapping sees the bytes written through virt_addr */
    unsigned char* again = (unsigned char*)mmap(NULL, in->size, PROT_READ, MAP_SHARED, in->fd, 0);
    CHECK(again != MAP_FAILED);
    CHECK(memcmp(again, in->virt_addr, in->size) == 0);
    munmap(again, in->size);
    CHECK_RET(rknn_mem_sync(ctx, in, RKNN_MEMORY_SYNC_TO_DEVICE), RKNN_SUCC);

    rknn_tensor_attr out_attr;
    memset(&out_attr, 0, sizeof out_attr);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_NATIVE_OUTPUT_ATTR, &out_attr, sizeof out_attr), RKNN_SUCC);
    printf("native_output fmt=%s type=%s size=%u\n", get_format_string(out_attr.fmt),
           get_type_string(out_attr.type), out_attr.size);
    out_attr.type = RKNN_TENSOR_FLOAT32;
    rknn_tensor_mem* out = rknn_create_mem(ctx, out_attr.n_elems * 4);
    CHECK(out != NULL);
    CHECK_RET(rknn_set_io_mem(ctx, in, &in_attr), RKNN_SUCC);
    CHECK_RET(rknn_set_io_mem(ctx, out, &out_attr), RKNN_SUCC);
    for (int frame = 0; frame < 2; frame++) { /* bound once, run many times */
        CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
        CHECK_RET(rknn_mem_sync(ctx, out, RKNN_MEMORY_SYNC_FROM_DEVICE), RKNN_SUCC);
        rt_print_floats(frame ? "zero_copy_again" : "zero_copy", (const float*)out->virt_addr, out_attr.n_elems);
    }
    /* memory wrapped by physical address: rknnrt's own phys_addr maps back to the buffer */
    rknn_tensor_mem* by_phys = rknn_create_mem_from_phys(ctx, out->phys_addr, out->virt_addr, out->size);
    CHECK(by_phys != NULL && by_phys->flags == RKNN_TENSOR_MEMORY_FLAGS_FROM_PHYS);
    CHECK(memcmp(by_phys->virt_addr, out->virt_addr, out->size) == 0);
    CHECK_RET(rknn_destroy_mem(ctx, by_phys), RKNN_SUCC);
    CHECK_RET(rknn_destroy_mem(ctx, in), RKNN_SUCC);
    CHECK_RET(rknn_destroy_mem(ctx, out), RKNN_SUCC);
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);
    free(model); free(image);
    printf("ALL OK\n");
    return 0;
}
