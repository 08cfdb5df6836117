/* The C side of benchmarks/capi.py (compiled against `rknnrt sdk` output).
 *   capi_bench first MODEL            time of the first call (interpreter start) and rknn_init
 *   capi_bench query MODEL CALLS      per-call time of rknn_query(IN_OUT_NUM), each call timed
 *   capi_bench infer MODEL RUNS       per-run time of inputs_set(FLOAT32 NCHW) + run +
 *                                     outputs_get(want_float) + outputs_release
 * Prints "key value" lines; times in microseconds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rknn_api.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(double* v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

__attribute__((noinline)) static int plain_c_call(rknn_context ctx, void* info)
{
    __asm__ volatile("" ::: "memory");
    return ctx == 0 && info == NULL;
}

int main(int argc, char** argv)
{
    if (argc < 3) return 2;
    const char* mode = argv[1];
    rknn_context ctx = 0;
    rknn_input_output_num io;
    if (strcmp(mode, "first") == 0) {
        double t0 = now_us();
        int ret = rknn_query(0, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io); /* starts Python */
        double t1 = now_us();
        if (ret != RKNN_ERR_CTX_INVALID) return 1;
        if (rknn_init(&ctx, argv[2], 0, 0, NULL) != RKNN_SUCC) return 1;
        printf("first_call_us %.1f\ninit_us %.1f\n", t1 - t0, now_us() - t1);
        return rknn_destroy(ctx);
    }
    if (rknn_init(&ctx, argv[2], 0, 0, NULL) != RKNN_SUCC) return 1;
    int n = argc > 3 ? atoi(argv[3]) : 1000;
    double* times = (double*)malloc(sizeof(double) * (size_t)n);
    if (strcmp(mode, "query") == 0) {
        for (int i = 0; i < 1000; i++) rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io);
        for (int i = 0; i < n; i++) {
            double t0 = now_us();
            if (rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io) != RKNN_SUCC) return 1;
            times[i] = now_us() - t0;
        }
        printf("query_median_us %.4f\n", median(times, n));
        for (int i = 0; i < n; i++) {
            double t0 = now_us();
            plain_c_call(ctx, &io);
            times[i] = now_us() - t0;
        }
        printf("plain_c_call_median_us %.4f\n", median(times, n));
    } else if (strcmp(mode, "infer") == 0) {
        rknn_tensor_attr attr;
        memset(&attr, 0, sizeof attr);
        if (rknn_query(ctx, RKNN_QUERY_INPUT_ATTR, &attr, sizeof attr) != RKNN_SUCC) return 1;
        float* data = (float*)malloc(sizeof(float) * attr.n_elems);
        srand(1);
        for (uint32_t i = 0; i < attr.n_elems; i++) data[i] = (float)rand() / RAND_MAX;
        rknn_input in;
        memset(&in, 0, sizeof in);
        in.buf = data; in.size = attr.n_elems * 4; in.type = RKNN_TENSOR_FLOAT32;
        in.fmt = attr.n_dims == 4 ? RKNN_TENSOR_NCHW : RKNN_TENSOR_UNDEFINED;
        for (int i = -3; i < n; i++) { /* 3 warm-up runs */
            double t0 = now_us();
            rknn_output out;
            memset(&out, 0, sizeof out);
            out.want_float = 1;
            if (rknn_inputs_set(ctx, 1, &in) || rknn_run(ctx, NULL) || rknn_outputs_get(ctx, 1, &out, NULL))
                return 1;
            rknn_outputs_release(ctx, 1, &out);
            if (i >= 0) times[i] = now_us() - t0;
        }
        printf("infer_median_us %.1f\n", median(times, n));
    }
    free(times);
    return rknn_destroy(ctx);
}
