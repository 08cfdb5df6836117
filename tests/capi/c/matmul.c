/* The matmul API for every rknn_matmul_type, checked against a reference loop in C.
 * Inputs are small integers (|a|,|b| <= 2, K = 32), so every product sum is exact in every
 * output type (|sum| <= 128: int8 saturates at 127, as the reference does). Types the
 * emulated platform (RKNNRT_PLATFORM) does not support must fail at rknn_matmul_create.
 * Prints "type <n> <name> created|refused" per type; exits 1 on any wrong element. */
#include "rt_matmul.h"

static int run_type(rknn_matmul_type type, int b_native)
{
    const int M = 4, K = 32, N = 64;
    enum kind ka, kb, kc;
    kinds(type, &ka, &kb, &kc);
    rknn_matmul_info info;
    memset(&info, 0, sizeof info);
    info.M = M; info.K = K; info.N = N; info.type = type;
    info.B_layout = b_native ? RKNN_MM_LAYOUT_NATIVE : RKNN_MM_LAYOUT_NORM;
    info.AC_layout = RKNN_MM_LAYOUT_NORM;
    rknn_matmul_io_attr io;
    memset(&io, 0, sizeof io);
    rknn_matmul_ctx ctx = 0;
    int ret = rknn_matmul_create(&ctx, &info, &io);
    printf("type %d %s%s %s\n", (int)type, get_matmul_type_string(type), b_native ? " native_B" : "",
           ret == RKNN_SUCC ? "created" : "refused");
    if (ret != RKNN_SUCC) return 0;
    CHECK(io.A.n_dims == 2 && io.A.dims[0] == (uint32_t)M && io.A.dims[1] == (uint32_t)K);
    CHECK(io.C.dims[0] == (uint32_t)M && io.C.dims[1] == (uint32_t)N);
    rknn_tensor_mem* A = rknn_create_mem(ctx, io.A.size);
    rknn_tensor_mem* B = rknn_create_mem(ctx, io.B.size);
    rknn_tensor_mem* C = rknn_create_mem(ctx, io.C.size);
    CHECK(A && B && C);
    int a[4][32], b[32][64];
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) { a[m][k] = (m * 7 + k * 3) % 5 - 2; put((unsigned char*)A->virt_addr, ka, (size_t)m * K + k, a[m][k]); }
    unsigned char* b_normal = (unsigned char*)calloc((size_t)K * N * 2, 1);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) { b[k][n] = (k * 5 + n * 11 + 1) % 5 - 2; put(b_normal, kb, (size_t)k * N + n, b[k][n]); }
    if (b_native) CHECK_RET(rknn_B_normal_layout_to_native_layout(b_normal, B->virt_addr, K, N, &info), RKNN_SUCC);
    else memcpy(B->virt_addr, b_normal, io.B.size);
    free(b_normal);
    CHECK_RET(rknn_matmul_set_io_mem(ctx, A, &io.A), RKNN_SUCC);
    CHECK_RET(rknn_matmul_set_io_mem(ctx, B, &io.B), RKNN_SUCC);
    CHECK_RET(rknn_matmul_set_io_mem(ctx, C, &io.C), RKNN_SUCC);
    CHECK_RET(rknn_matmul_run(ctx), RKNN_SUCC);
    int wrong = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            long sum = 0;
            for (int k = 0; k < K; k++) sum += (long)a[m][k] * b[k][n];
            if (kc == I8) sum = sum > 127 ? 127 : sum < -128 ? -128 : sum;
            double got = get((const unsigned char*)C->virt_addr, kc, (size_t)m * N + n);
            if (got != (double)sum) {
                if (wrong++ < 3) fprintf(stderr, "%s C[%d][%d] = %g, expected %ld\n", get_matmul_type_string(type), m, n, got, sum);
            }
        }
    CHECK_RET(rknn_destroy_mem(ctx, A), RKNN_SUCC);
    CHECK_RET(rknn_destroy_mem(ctx, B), RKNN_SUCC);
    CHECK_RET(rknn_destroy_mem(ctx, C), RKNN_SUCC);
    CHECK_RET(rknn_matmul_destroy(ctx), RKNN_SUCC);
    return wrong;
}

int main(void)
{
    static const rknn_matmul_type all[] = {
        RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32, RKNN_INT8_MM_INT8_TO_INT32, RKNN_INT8_MM_INT8_TO_INT8,
        RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16, RKNN_FLOAT16_MM_INT8_TO_FLOAT32, RKNN_FLOAT16_MM_INT8_TO_FLOAT16,
        RKNN_FLOAT16_MM_INT4_TO_FLOAT32, RKNN_FLOAT16_MM_INT4_TO_FLOAT16, RKNN_INT8_MM_INT8_TO_FLOAT32,
        RKNN_INT4_MM_INT4_TO_INT16, RKNN_INT8_MM_INT4_TO_INT32, RKNN_FLOAT16_MM_INT4_TO_BFLOAT16,
        RKNN_INT8_MM_INT4_TO_FLOAT16};
    int wrong = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wrong += run_type(all[i], 0);
    wrong += run_type(RKNN_INT8_MM_INT8_TO_INT32, 1);
    wrong += run_type(RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32, 1);
    printf("wrong %d\n", wrong);
    return wrong ? 1 : 0;
}
