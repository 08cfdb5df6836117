/* Four threads make the process's very first rknn calls at the same moment: the interpreter
 * must start once, and every call must get its real answer. argv: model */
#include <pthread.h>
#include "rt_test.h"

static pthread_barrier_t start;
static const char* model_path;
static int results[4];

static void* first_call(void* arg)
{
    int i = (int)(intptr_t)arg;
    rknn_input_output_num io;
    pthread_barrier_wait(&start);
    if (i % 2) {
        results[i] = rknn_query(0, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io);
    } else {
        rknn_context ctx = 0;
        results[i] = rknn_init(&ctx, (void*)model_path, 0, 0, NULL);
        if (results[i] == RKNN_SUCC) {
            CHECK_RET(rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io), RKNN_SUCC);
            CHECK(io.n_input == 1 && io.n_output == 1);
            CHECK_RET(rknn_destroy(ctx), RKNN_SUCC);
        }
    }
    return NULL;
}

int main(int argc, char** argv)
{
    CHECK(argc == 2);
    model_path = argv[1];
    pthread_t ids[4];
    pthread_barrier_init(&start, NULL, 4);
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&ids[i], NULL, first_call, (void*)(intptr_t)i) == 0);
    for (int i = 0; i < 4; i++) pthread_join(ids[i], NULL);
    printf("results %d %d %d %d\n", results[0], results[1], results[2], results[3]);
    return 0;
}
