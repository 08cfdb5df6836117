/* The vendor document's three rknn_init memory examples.
 * argv: model second_model weightless_model image.u8 */
#include "rt_test.h"

static rknn_tensor_attr query_attr(rknn_context ctx, rknn_query_cmd cmd)
{
    rknn_tensor_attr a;
    memset(&a, 0, sizeof a);
    CHECK_RET(rknn_query(ctx, cmd, &a, sizeof a), RKNN_SUCC);
    return a;
}

static rknn_mem_size mem_size(rknn_context ctx)
{
    rknn_mem_size m;
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_MEM_SIZE, &m, sizeof m), RKNN_SUCC);
    return m;
}

/* weights, the given internal memory and native IO memory for a MEM_ALLOC_OUTSIDE context */
static void bind_outside(rknn_context ctx, rknn_tensor_mem* internal, rknn_tensor_mem** in,
                         rknn_tensor_mem** out)
{
    rknn_tensor_mem* weights = rknn_create_mem(ctx, mem_size(ctx).total_weight_size);
    CHECK(weights != NULL);
    CHECK_RET(rknn_set_weight_mem(ctx, weights), RKNN_SUCC);
    CHECK_RET(rknn_set_internal_mem(ctx, internal), RKNN_SUCC);
    rknn_tensor_attr ia = query_attr(ctx, RKNN_QUERY_NATIVE_INPUT_ATTR);
    ia.type = RKNN_TENSOR_UINT8;
    *in = rknn_create_mem(ctx, ia.n_elems);
    rknn_tensor_attr oa = query_attr(ctx, RKNN_QUERY_NATIVE_OUTPUT_ATTR);
    CHECK(oa.type == RKNN_TENSOR_FLOAT32);
    *out = rknn_create_mem(ctx, oa.size);
    CHECK(*in != NULL && *out != NULL);
    CHECK_RET(rknn_set_io_mem(ctx, *in, &ia), RKNN_SUCC);
    CHECK_RET(rknn_set_io_mem(ctx, *out, &oa), RKNN_SUCC);
}

static void general_run(const char* label, rknn_context ctx, unsigned char* image, size_t size)
{
    rknn_input in;
    memset(&in, 0, sizeof in);
    in.buf = image; in.size = (uint32_t)size; in.type = RKNN_TENSOR_UINT8; in.fmt = RKNN_TENSOR_NHWC;
    CHECK_RET(rknn_inputs_set(ctx, 1, &in), RKNN_SUCC);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
    rknn_output out;
    memset(&out, 0, sizeof out);
    out.want_float = 1;
    CHECK_RET(rknn_outputs_get(ctx, 1, &out, NULL), RKNN_SUCC);
    rt_print_floats(label, (const float*)out.buf, out.size / 4);
    CHECK_RET(rknn_outputs_release(ctx, 1, &out), RKNN_SUCC);
}

int main(int argc, char** argv)
{
    CHECK(argc == 5);
    size_t size_m, size_s, size_w, size_i;
    unsigned char* model = rt_read_file(argv[1], &size_m);
    unsigned char* second = rt_read_file(argv[2], &size_s);
    unsigned char* weightless = rt_read_file(argv[3], &size_w);
    unsigned char* image = rt_read_file(argv[4], &size_i);

    /* 1. two models run in series share one internal buffer, wrapped by fd for each */
    rknn_context a, b;
    CHECK_RET(rknn_init(&a, model, (uint32_t)size_m, RKNN_FLAG_MEM_ALLOC_OUTSIDE, NULL), RKNN_SUCC);
    CHECK_RET(rknn_init(&b, second, (uint32_t)size_s, RKNN_FLAG_MEM_ALLOC_OUTSIDE, NULL), RKNN_SUCC);
    uint32_t ia = mem_size(a).total_internal_size, ib = mem_size(b).total_internal_size;
    CHECK(ia != ib);
    rknn_tensor_mem* shared = rknn_create_mem(a, ia > ib ? ia : ib);
    CHECK(shared != NULL && shared->fd >= 0);
    rknn_tensor_mem* for_a = rknn_create_mem_from_fd(a, shared->fd, shared->virt_addr, ia, 0);
    rknn_tensor_mem* for_b = rknn_create_mem_from_fd(b, shared->fd, shared->virt_addr, ib, 0);
    CHECK(for_a != NULL && for_b != NULL);
    CHECK(for_a->flags == RKNN_TENSOR_MEMORY_FLAGS_FROM_FD && for_a->fd == shared->fd);
    rknn_tensor_mem *in_a, *out_a, *in_b, *out_b;
    bind_outside(a, for_a, &in_a, &out_a);
    bind_outside(b, for_b, &in_b, &out_b);
    memcpy(in_a->virt_addr, image, size_i);
    memcpy(in_b->virt_addr, image, size_i);
    CHECK_RET(rknn_run(a, NULL), RKNN_SUCC);
    CHECK_RET(rknn_run(b, NULL), RKNN_SUCC);
    rt_print_floats("series_a", (const float*)out_a->virt_addr, out_a->size / 4);
    rt_print_floats("series_b", (const float*)out_b->virt_addr, out_b->size / 4);
    CHECK_RET(rknn_destroy_mem(a, for_a), RKNN_SUCC);
    CHECK_RET(rknn_destroy_mem(b, for_b), RKNN_SUCC);
    CHECK_RET(rknn_destroy_mem(a, shared), RKNN_SUCC);
    CHECK_RET(rknn_destroy(a), RKNN_SUCC); /* frees the rest made on a, with a warning */
    CHECK_RET(rknn_destroy(b), RKNN_SUCC);

    /* 2. a weightless model borrows the weights of a context of the full model */
    rknn_context donor, borrower;
    CHECK_RET(rknn_init(&donor, model, (uint32_t)size_m, 0, NULL), RKNN_SUCC);
    rknn_init_extend ext;
    memset(&ext, 0, sizeof ext);
    ext.ctx = donor;
    CHECK_RET(rknn_init(&borrower, weightless, (uint32_t)size_w, RKNN_FLAG_SHARE_WEIGHT_MEM, &ext), RKNN_SUCC);
    CHECK(size_w + 15000 < size_m);
    general_run("weightless", borrower, image, size_i);
    general_run("donor", donor, image, size_i);
    CHECK_RET(rknn_destroy(borrower), RKNN_SUCC);
    CHECK_RET(rknn_destroy(donor), RKNN_SUCC);

    /* 3. the model read in place from runtime memory made without a context */
    rknn_tensor_mem* model_mem = rknn_create_mem2(0, size_m + 128, RKNN_MEM_FLAG_ALLOC_NO_CONTEXT);
    CHECK(model_mem != NULL);
    memcpy((char*)model_mem->virt_addr + 128, model, size_m);
    memset(&ext, 0, sizeof ext);
    ext.real_model_offset = 128;
    ext.real_model_size = (uint32_t)size_m;
    ext.model_buffer_fd = model_mem->fd;
    ext.model_buffer_flags = model_mem->flags;
    rknn_context zc;
    CHECK_RET(rknn_init(&zc, (char*)model_mem->virt_addr + 128, (uint32_t)size_m,
                        RKNN_FLAG_MODEL_BUFFER_ZERO_COPY, &ext), RKNN_SUCC);
    general_run("zero_copy_model", zc, image, size_i);
    rknn_mem_size zs = mem_size(zc);
    printf("zero_copy_dma %llu\n", (unsigned long long)zs.total_dma_allocated_size);
    CHECK_RET(rknn_destroy_mem(zc, model_mem), RKNN_SUCC); /* the documented order */
    CHECK_RET(rknn_destroy(zc), RKNN_SUCC);

    free(model); free(second); free(weightless); free(image);
    printf("ALL OK\n");
    return 0;
}
