/* rknn_dup_context: N threads, one duplicated context each, against one thread.
 * argv: model image.u8 n_threads runs_per_thread   (RKNNRT_NUM_THREADS=1: one onnxruntime
 * thread per context). Prints each thread's last output and the wall time of both phases. */
#include <pthread.h>
#include <time.h>
#include "rt_test.h"

#define MAX_THREADS 16

typedef struct {
    rknn_context ctx;
    int runs;
    unsigned char* image;
    size_t image_size;
    float result[4096];
    uint32_t n_result;
} job_t;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void* worker(void* arg)
{
    job_t* job = (job_t*)arg;
    for (int i = 0; i < job->runs; i++) {
        rknn_input in;
        memset(&in, 0, sizeof in);
        in.buf = job->image; in.size = (uint32_t)job->image_size;
        in.type = RKNN_TENSOR_UINT8; in.fmt = RKNN_TENSOR_NHWC;
        CHECK_RET(rknn_inputs_set(job->ctx, 1, &in), RKNN_SUCC);
        CHECK_RET(rknn_run(job->ctx, NULL), RKNN_SUCC);
        rknn_output out;
        memset(&out, 0, sizeof out);
        out.want_float = 1;
        CHECK_RET(rknn_outputs_get(job->ctx, 1, &out, NULL), RKNN_SUCC);
        CHECK(out.size / 4 <= 4096);
        job->n_result = out.size / 4;
        memcpy(job->result, out.buf, out.size);
        CHECK_RET(rknn_outputs_release(job->ctx, 1, &out), RKNN_SUCC);
    }
    return NULL;
}

int main(int argc, char** argv)
{
    CHECK(argc == 5);
    int n_threads = atoi(argv[3]), runs = atoi(argv[4]);
    CHECK(n_threads >= 1 && n_threads <= MAX_THREADS && runs >= 1);
    size_t model_size, image_size;
    unsigned char* model = rt_read_file(argv[1], &model_size);
    unsigned char* image = rt_read_file(argv[2], &image_size);
    static job_t jobs[MAX_THREADS];
    CHECK_RET(rknn_init(&jobs[0].ctx, model, (uint32_t)model_size, 0, NULL), RKNN_SUCC);
    for (int t = 1; t < n_threads; t++)
        CHECK_RET(rknn_dup_context(&jobs[0].ctx, &jobs[t].ctx), RKNN_SUCC);
    for (int t = 0; t < n_threads; t++) {
        jobs[t].image = image; jobs[t].image_size = image_size; jobs[t].runs = runs;
        CHECK(t == 0 || jobs[t].ctx != jobs[0].ctx);
    }
    jobs[0].runs = 1;
    worker(&jobs[0]); /* warm-up */
    float single[4096];
    uint32_t n_single = jobs[0].n_result;
    memcpy(single, jobs[0].result, n_single * 4);

    jobs[0].runs = runs * n_threads; /* the same total work on one thread */
    double t0 = now();
    worker(&jobs[0]);
    double one = now() - t0;
    jobs[0].runs = runs;

    pthread_t ids[MAX_THREADS];
    t0 = now();
    for (int t = 0; t < n_threads; t++) CHECK(pthread_create(&ids[t], NULL, worker, &jobs[t]) == 0);
    for (int t = 0; t < n_threads; t++) pthread_join(ids[t], NULL);
    double many = now() - t0;
    int identical = 1;
    for (int t = 0; t < n_threads; t++)
        identical &= jobs[t].n_result == n_single && memcmp(jobs[t].result, single, n_single * 4) == 0;
    rt_print_floats("single", single, n_single);
    printf("identical %d\n", identical);
    printf("frames %d seconds_1_thread %.6f seconds_%d_threads %.6f speedup %.3f\n",
           runs * n_threads, one, n_threads, many, one / many);
    for (int t = n_threads - 1; t >= 0; t--) CHECK_RET(rknn_destroy(jobs[t].ctx), RKNN_SUCC);
    free(model); free(image);
    printf("ALL OK\n");
    return identical ? 0 : 1;
}
