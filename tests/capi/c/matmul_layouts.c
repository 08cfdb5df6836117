/* The matmul API in every B layout (NORM, NATIVE, TP_NORM) x AC layout (NORM, NATIVE) for every
 * type the emulated platform (RKNNRT_PLATFORM) creates, at two shapes, against a reference
 * loop; the mixed float-output types with per-channel B scales. Then dynamic shapes: B bound
 * once while K and N stay ("feature + const"), and TP_NORM B bound per shape ("two features").
 * Layouts written by this program, from the header's descriptions:
 *   int4: two a byte, the element of even flat index in the low nibble;
 *   TP_NORM B: row-major [N, K] (int4: packed along that order);
 *   native A/C: [X/sub, rows, sub] with sub = io_attr.X.dims[2];
 *   native B: rknn_B_normal_layout_to_native_layout of the normal [K, N] bytes.
 * Prints "case <type> B<layout> AC<layout> <M>x<K>x<N> ok|WRONG" and "wrong <n>". */
#include <math.h>

#include "rt_matmul.h"

static size_t elem_bytes(enum kind k) { return k == F32 || k == I32 ? 4 : k == I8 ? 1 : 2; }

static int per_channel(int t) { return t == 5 || t == 6 || t == 7 || t == 8 || t == 12 || t == 15; }
static double b_scale(int n) { return 1.0 / (1 + n % 4); }
static int a_val(int m, int k) { return (m * 7 + k * 3) % 5 - 2; }
static int b_val(int k, int n) { return (k * 5 + n * 11 + 1) % 7 - 3; }

/* B [K, N] in `layout` into `dst` (io_attr.B.size bytes) */
static void write_b(rknn_matmul_info* info, enum kind kb, int K, int N, int layout, void* dst, size_t size)
{
    memset(dst, 0, size);
    if (layout == RKNN_MM_LAYOUT_TP_NORM) {
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) put((unsigned char*)dst, kb, (size_t)n * K + k, b_val(k, n));
        return;
    }
    unsigned char* normal = (unsigned char*)calloc((size_t)K * N * 2 + 1, 1);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) put(normal, kb, (size_t)k * N + n, b_val(k, n));
    if (layout == RKNN_MM_LAYOUT_NATIVE) CHECK_RET(rknn_B_normal_layout_to_native_layout(normal, dst, K, N, info), 0);
    else memcpy(dst, normal, size);
    free(normal);
}

static void write_a(enum kind ka, int M, int K, int native, const rknn_matmul_tensor_attr* attr, void* dst)
{
    memset(dst, 0, attr->size);
    int sub = native ? (int)attr->dims[2] : K;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            size_t at = native ? (size_t)(k / sub) * M * sub + (size_t)m * sub + k % sub : (size_t)m * K + k;
            put((unsigned char*)dst, ka, at, a_val(m, k));
        }
}

static int check_c(int t, enum kind kc, int M, int K, int N, int native, const rknn_matmul_tensor_attr* attr,
                   const void* c)
{
    int wrong = 0, sub = native ? (int)attr->dims[2] : N;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            long sum = 0;
            for (int k = 0; k < K; k++) sum += (long)a_val(m, k) * b_val(k, n);
            double want = per_channel(t) ? (double)(float)b_scale(n) * sum : (double)sum;
            if (kc == I8) want = want > 127 ? 127 : want < -128 ? -128 : want;
            size_t at = native ? (size_t)(n / sub) * M * sub + (size_t)m * sub + n % sub : (size_t)m * N + n;
            double got = get((const unsigned char*)c, kc, at);
            double tol = kc == F32 ? 1e-5 : kc == F16 ? 1e-3 : kc == BF16 ? 8e-3 : 0;
            if (fabs(got - want) > tol * fabs(want) + tol) {
                if (wrong++ < 2) fprintf(stderr, "type %d C[%d][%d] = %g, expected %g\n", t, m, n, got, want);
            }
        }
    return wrong;
}

static void set_b_scales(rknn_matmul_ctx ctx, int t, int N)
{
    if (!per_channel(t)) return;
    rknn_quant_params q;
    memset(&q, 0, sizeof q);
    strcpy(q.name, "B");
    q.scale_len = N;
    q.scale = (float*)malloc(sizeof(float) * (size_t)N);
    for (int n = 0; n < N; n++) q.scale[n] = (float)b_scale(n);
    CHECK_RET(rknn_matmul_set_quant_params(ctx, &q), 0);
    free(q.scale);
}

static void fill_info(rknn_matmul_info* info, int t, int M, int K, int N, int b_layout, int ac_layout)
{
    memset(info, 0, sizeof *info);
    info->M = M; info->K = K; info->N = N; info->type = (rknn_matmul_type)t;
    info->B_layout = (int16_t)b_layout;
    info->AC_layout = (int16_t)ac_layout;
    info->B_quant_type = per_channel(t) ? RKNN_QUANT_TYPE_PER_CHANNEL_SYM : RKNN_QUANT_TYPE_PER_LAYER_SYM;
}

/* -1: not created on this platform; otherwise the number of wrong elements */
static int run_case(int t, int M, int K, int N, int b_layout, int ac_layout)
{
    enum kind ka, kb, kc;
    kinds((rknn_matmul_type)t, &ka, &kb, &kc);
    rknn_matmul_info info;
    fill_info(&info, t, M, K, N, b_layout, ac_layout);
    rknn_matmul_io_attr io;
    memset(&io, 0, sizeof io);
    rknn_matmul_ctx ctx = 0;
    if (rknn_matmul_create(&ctx, &info, &io) != RKNN_SUCC) return -1;
    CHECK(io.C.size >= (uint32_t)(M * N) * elem_bytes(kc) || ac_layout);
    rknn_tensor_mem* A = rknn_create_mem(ctx, io.A.size);
    rknn_tensor_mem* B = rknn_create_mem(ctx, io.B.size);
    rknn_tensor_mem* C = rknn_create_mem(ctx, io.C.size);
    CHECK(A && B && C);
    set_b_scales(ctx, t, N);
    write_a(ka, M, K, ac_layout, &io.A, A->virt_addr);
    write_b(&info, kb, K, N, b_layout, B->virt_addr, io.B.size);
    CHECK_RET(rknn_matmul_set_io_mem(ctx, A, &io.A), 0);
    CHECK_RET(rknn_matmul_set_io_mem(ctx, B, &io.B), 0);
    CHECK_RET(rknn_matmul_set_io_mem(ctx, C, &io.C), 0);
    CHECK_RET(rknn_matmul_run(ctx), 0);
    int wrong = check_c(t, kc, M, K, N, ac_layout, &io.C, C->virt_addr);
    rknn_destroy_mem(ctx, A);
    rknn_destroy_mem(ctx, B);
    rknn_destroy_mem(ctx, C);
    CHECK_RET(rknn_matmul_destroy(ctx), 0);
    return wrong;
}

/* feature + const (b_layout NORM/NATIVE: B once, M varies) or two features (TP_NORM: K, N vary,
 * B bound per shape) */
static int run_dynamic(int t, int b_layout)
{
    enum kind ka, kb, kc;
    kinds((rknn_matmul_type)t, &ka, &kb, &kc);
    rknn_matmul_shape shapes[3] = {{1, 64, 64}, {4, 64, 64}, {8, 64, 64}};
    if (b_layout == RKNN_MM_LAYOUT_TP_NORM) {
        shapes[1].K = 128; shapes[2].N = 128; shapes[2].K = 32;
    }
    rknn_matmul_info info;
    fill_info(&info, t, 0, 0, 0, b_layout, RKNN_MM_LAYOUT_NORM);
    rknn_matmul_io_attr io[3];
    memset(io, 0, sizeof io);
    rknn_matmul_ctx ctx = 0;
    if (rknn_matmul_create_dynamic_shape(&ctx, &info, 3, shapes, io) != RKNN_SUCC) return -1;
    uint32_t big[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        big[0] = io[i].A.size > big[0] ? io[i].A.size : big[0];
        big[1] = io[i].B.size > big[1] ? io[i].B.size : big[1];
        big[2] = io[i].C.size > big[2] ? io[i].C.size : big[2];
    }
    rknn_tensor_mem* A = rknn_create_mem(ctx, big[0]);
    rknn_tensor_mem* B = rknn_create_mem(ctx, big[1]);
    rknn_tensor_mem* C = rknn_create_mem(ctx, big[2]);
    CHECK(A && B && C);
    set_b_scales(ctx, t, 64);
    int wrong = 0;
    CHECK_RET(rknn_matmul_set_dynamic_shape(ctx, &shapes[0]), 0);
    if (b_layout != RKNN_MM_LAYOUT_TP_NORM) {
        info.K = 64; info.N = 64;
        write_b(&info, kb, 64, 64, b_layout, B->virt_addr, io[0].B.size);
        CHECK_RET(rknn_matmul_set_io_mem(ctx, B, &io[0].B), 0);
    }
    for (int s = 0; s < 3; s++) {
        int M = shapes[s].M, K = shapes[s].K, N = shapes[s].N;
        CHECK_RET(rknn_matmul_set_dynamic_shape(ctx, &shapes[s]), 0);
        write_a(ka, M, K, 0, &io[s].A, A->virt_addr);
        CHECK_RET(rknn_matmul_set_io_mem(ctx, A, &io[s].A), 0);
        if (b_layout == RKNN_MM_LAYOUT_TP_NORM) {
            if (N != 64) set_b_scales(ctx, t, N);
            info.K = K; info.N = N;
            write_b(&info, kb, K, N, b_layout, B->virt_addr, io[s].B.size);
            CHECK_RET(rknn_matmul_set_io_mem(ctx, B, &io[s].B), 0);
        }
        CHECK_RET(rknn_matmul_set_io_mem(ctx, C, &io[s].C), 0);
        CHECK_RET(rknn_matmul_run(ctx), 0);
        wrong += check_c(t, kc, M, K, N, 0, &io[s].C, C->virt_addr);
    }
    rknn_destroy_mem(ctx, A);
    rknn_destroy_mem(ctx, B);
    rknn_destroy_mem(ctx, C);
    CHECK_RET(rknn_matmul_destroy(ctx), 0);
    return wrong;
}

int main(void)
{
    static const int types[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15};
    static const int shapes[2][3] = {{4, 64, 64}, {33, 128, 256}};
    static const char* layout_names[] = {"NORM", "NATIVE", "TP_NORM"};
    int wrong = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int t = types[i];
        for (int bl = 0; bl < 3; bl++)
            for (int ac = 0; ac < 2; ac++)
                for (int s = 0; s < 2; s++) {
                    int w = run_case(t, shapes[s][0], shapes[s][1], shapes[s][2], bl, ac);
                    if (w < 0) continue;
                    printf("case %d B%s AC%s %dx%dx%d %s\n", t, layout_names[bl], layout_names[ac], shapes[s][0],
                           shapes[s][1], shapes[s][2], w ? "WRONG" : "ok");
                    wrong += w;
                }
        for (int bl = 0; bl < 3; bl++) {
            int w = run_dynamic(t, bl);
            if (w < 0) continue;
            printf("dynamic %d B%s %s\n", t, layout_names[bl], w ? "WRONG" : "ok");
            wrong += w;
        }
    }
    printf("wrong %d\n", wrong);
    return wrong ? 1 : 0;
}
