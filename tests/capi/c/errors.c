/* Error paths: NULL pointers, bad and destroyed contexts, wrong indices, bad commands. Each
 * must return the vendor's code (never crash); the Python side counts the E RKNN: lines.
 * argv: model */
#include "rt_test.h"
#include "rknn_matmul_api.h"

int main(int argc, char** argv)
{
    CHECK(argc == 2);
    size_t model_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    rknn_context ctx = 0;
    int expected_errors = 0;
#define EXPECT(call, code) do { CHECK_RET(call, code); expected_errors++; } while (0)

    EXPECT(rknn_init(NULL, model, (uint32_t)model_size, 0, NULL), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_init(&ctx, NULL, (uint32_t)model_size, 0, NULL), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_init(&ctx, (void*)"/nonexistent/model.rknn", 0, 0, NULL), RKNN_ERR_FAIL);
    unsigned char junk[64] = {0};
    EXPECT(rknn_init(&ctx, junk, sizeof junk, 0, NULL), RKNN_ERR_MODEL_INVALID);
    CHECK_RET(rknn_init(&ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);

    rknn_input_output_num io;
    EXPECT(rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, NULL, sizeof io), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, 4), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_query(ctx, (rknn_query_cmd)99, &io, sizeof io), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_query(0, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io), RKNN_ERR_CTX_INVALID);
    EXPECT(rknn_query(ctx + 977, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io), RKNN_ERR_CTX_INVALID);
    rknn_tensor_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.index = 7; /* the model has one input */
    EXPECT(rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &attr, sizeof attr), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &attr, sizeof attr), RKNN_ERR_PARAM_INVALID);

    rknn_input in;
    memset(&in, 0, sizeof in);
    in.index = 3; in.buf = junk; in.size = sizeof junk; in.type = RKNN_TENSOR_UINT8; in.fmt = RKNN_TENSOR_NHWC;
    EXPECT(rknn_inputs_set(ctx, 1, NULL), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_inputs_set(ctx, 1, &in), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_run(ctx, NULL), RKNN_ERR_INPUT_INVALID); /* nothing set */
    rknn_output out;
    memset(&out, 0, sizeof out);
    EXPECT(rknn_outputs_get(ctx, 1, NULL, NULL), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_set_io_mem(ctx, NULL, &attr), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_destroy_mem(ctx, NULL), RKNN_ERR_PARAM_INVALID);
    CHECK(rknn_create_mem(0, 64) == NULL); expected_errors++;
    CHECK(rknn_create_mem_from_mb_blk(ctx, junk, 0) == NULL); expected_errors++;
    rknn_tensor_mem* mem = rknn_create_mem(ctx, 64);
    CHECK(mem != NULL);
    CHECK_RET(rknn_destroy_mem(ctx, mem), RKNN_SUCC);

    rknn_matmul_ctx mm = 0;
    EXPECT(rknn_matmul_create(&mm, NULL, NULL), RKNN_ERR_PARAM_INVALID);
    EXPECT(rknn_matmul_run(ctx), RKNN_ERR_CTX_INVALID); /* a model context is not a matmul one */
    EXPECT(rknn_matmul_destroy(12345), RKNN_ERR_CTX_INVALID);

    rknn_context dup = 0;
    CHECK_RET(rknn_dup_context(&ctx, &dup), RKNN_SUCC);
    CHECK_RET(rknn_destroy(dup), RKNN_SUCC);
    CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);
    EXPECT(rknn_destroy(ctx), RKNN_ERR_CTX_INVALID);
    EXPECT(rknn_run(ctx, NULL), RKNN_ERR_CTX_INVALID);
    EXPECT(rknn_dup_context(&ctx, &dup), RKNN_ERR_CTX_INVALID);
    free(model);
    printf("expected_errors %d\n", expected_errors);
    printf("ALL OK\n");
    return 0;
}
