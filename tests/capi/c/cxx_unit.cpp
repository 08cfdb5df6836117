// A C++11 translation unit using all three headers: the extern "C" guards must give C linkage
// (it links against librknnrt.so) and the headers must compile warning-free as C++.
#include <cstdio>
#include <cstring>
#include <vector>

#include "rknn_api.h"
#include "rknn_custom_op.h"
#include "rknn_matmul_api.h"

int main(int argc, char** argv)
{
    if (argc != 2) return 2;
    std::FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 2;
    std::fseek(f, 0, SEEK_END);
    std::vector<unsigned char> model(static_cast<size_t>(std::ftell(f)));
    std::fseek(f, 0, SEEK_SET);
    if (std::fread(model.data(), 1, model.size(), f) != model.size()) return 2;
    std::fclose(f);
    rknn_context ctx = 0;
    if (rknn_init(&ctx, model.data(), static_cast<uint32_t>(model.size()), 0, nullptr) != RKNN_SUCC) return 1;
    rknn_input_output_num io;
    if (rknn_query(ctx, RKNN_QUERY_IN_OUT_NUM, &io, sizeof io) != RKNN_SUCC) return 1;
    rknn_tensor_attr attr;
    std::memset(&attr, 0, sizeof attr);
    if (rknn_query(ctx, RKNN_QUERY_OUTPUT_ATTR, &attr, sizeof attr) != RKNN_SUCC) return 1;
    std::vector<unsigned char> image(64 * 64 * 3, 128);
    rknn_input in = {};
    in.buf = image.data();
    in.size = static_cast<uint32_t>(image.size());
    in.type = RKNN_TENSOR_UINT8;
    in.fmt = RKNN_TENSOR_NHWC;
    std::vector<float> result(attr.n_elems);
    rknn_output out = {};
    out.want_float = 1;
    out.is_prealloc = 1;
    out.buf = result.data();
    out.size = static_cast<uint32_t>(result.size() * sizeof(float));
    if (rknn_inputs_set(ctx, 1, &in) || rknn_run(ctx, nullptr) || rknn_outputs_get(ctx, 1, &out, nullptr))
        return 1;
    rknn_matmul_info info = {};
    info.M = 4; info.K = 32; info.N = 32;
    info.type = RKNN_INT8_MM_INT8_TO_INT32;
    rknn_matmul_io_attr io_attr = {};
    rknn_matmul_ctx mm = 0;
    if (rknn_matmul_create(&mm, &info, &io_attr) != RKNN_SUCC || rknn_matmul_destroy(mm) != RKNN_SUCC) return 1;
    float sum = 0;
    for (float v : result) sum += v;
    std::printf("cxx io %u %u output %s n_elems %u sum %.4f C %s\n", io.n_input, io.n_output, attr.name,
                attr.n_elems, sum, io_attr.C.name);
    rknn_outputs_release(ctx, 1, &out);
    return rknn_destroy(ctx) == RKNN_SUCC ? 0 : 1;
}
