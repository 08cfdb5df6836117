/* RKNN_QUERY_PERF_DETAIL from C, as the custom-op demos call it: on a context made without
 * RKNN_FLAG_COLLECT_PERF_MASK it succeeds with an empty table (before and after a run); with
 * the flag it gives the layer table of the last run. argv: model image.u8 */
#include "rt_test.h"

static void run_once(rknn_context ctx, unsigned char* image, size_t size)
{
    rknn_input in;
    memset(&in, 0, sizeof in);
    in.buf = image; in.size = (uint32_t)size; in.type = RKNN_TENSOR_UINT8; in.fmt = RKNN_TENSOR_NHWC;
    CHECK_RET(rknn_inputs_set(ctx, 1, &in), RKNN_SUCC);
    CHECK_RET(rknn_run(ctx, NULL), RKNN_SUCC);
}

static void show(const char* label, rknn_context ctx)
{
    rknn_perf_detail detail;
    memset(&detail, 0x5a, sizeof detail);
    CHECK_RET(rknn_query(ctx, RKNN_QUERY_PERF_DETAIL, &detail, sizeof detail), RKNN_SUCC);
    CHECK(detail.perf_data != NULL);
    CHECK(strlen(detail.perf_data) == detail.data_len);
    printf("%s len=%llu table=%d\n", label, (unsigned long long)detail.data_len,
           strstr(detail.perf_data, "Total Operator Elapsed Per Frame Time(us):") != NULL);
}

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t model_size, image_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    unsigned char* image = rt_read_file(argv[2], &image_size);
    rknn_context plain, perf;
    CHECK_RET(rknn_init(&plain, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    CHECK_RET(rknn_init(&perf, model, (uint32_t)model_size, RKNN_FLAG_COLLECT_PERF_MASK, NULL), RKNN_SUCC);
    show("plain_before_run", plain);
    run_once(plain, image, image_size);
    show("plain_after_run", plain);
    run_once(perf, image, image_size);
    show("perf_after_run", perf);
    CHECK_RET(rknn_destroy(plain), RKNN_SUCC);
    CHECK_RET(rknn_destroy(perf), RKNN_SUCC);
    free(model);
    free(image);
    printf("done\n");
    return 0;
}
