/* A plugin-style host: the library is dlopen()ed with RTLD_LOCAL and used through dlsym, as
 * hosts that load inference back-ends at run time do. argv: path/to/librknnrt.so model */
#include <dlfcn.h>
#include "rt_test.h"

typedef int (*init_fn)(rknn_context*, void*, uint32_t, uint32_t, rknn_init_extend*);
typedef int (*query_fn)(rknn_context, rknn_query_cmd, void*, uint32_t);
typedef int (*destroy_fn)(rknn_context);

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    init_fn init = (init_fn)dlsym(lib, "rknn_init");
    query_fn query = (query_fn)dlsym(lib, "rknn_query");
    destroy_fn destroy = (destroy_fn)dlsym(lib, "rknn_destroy");
    CHECK(init != NULL && query != NULL && destroy != NULL);
    CHECK(dlsym(lib, "rknnrt_ready") == NULL); /* helpers stay private */
    rknn_context ctx;
    CHECK_RET(init(&ctx, argv[2], 0, 0, NULL), RKNN_SUCC); /* numpy and onnxruntime load here */
    rknn_input_output_num io;
    CHECK_RET(query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io), RKNN_SUCC);
    rknn_mem_size ms;
    CHECK_RET(query(ctx, RKNN_QUERY_MEM_SIZE, &ms, sizeof ms), RKNN_SUCC);
    printf("dlopen io %u %u weights %u\n", io.n_input, io.n_output, ms.total_weight_size);
    CHECK_RET(destroy(ctx), RKNN_SUCC);
    printf("ALL OK\n");
    return 0;
}
