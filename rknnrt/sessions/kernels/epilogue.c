/* rknnrt_activation_run: epilogue.h's activation alone on a float32 buffer, on one of its
 * paths (0 scalar, 1 AVX2 with FMA, 2 AVX-512; a path this CPU lacks falls back to the next),
 * for core/program/conv_epilogue.py's probe against onnxruntime's own ops. */

#include <stdint.h>

#include "cpu.h"
#include "epilogue.h"

#define EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static int64_t run16(const Epilogue *e, const float *v,
                                                        float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, epilogue_scaled16(e, _mm512_loadu_ps(v + i)));
    return i;
}

__attribute__((target("avx2,fma"))) static int64_t run8(const Epilogue *e, const float *v,
                                                        float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, epilogue_scaled8(e, _mm256_loadu_ps(v + i)));
    return i;
}
#endif

EXPORT void rknnrt_activation_run(const float *v, float *out, int64_t n, int kind, float alpha,
                                  float beta, int level) {
    const Epilogue e = {epilogue_kind(kind), alpha, beta, 1.0f}; /* / 1 is exact */
    int64_t i = 0;
#if defined(__x86_64__)
    if (level >= 2 && cpu_avx512f())
        i = run16(&e, v, out, n);
    else if (level >= 1 && cpu_avx2_fma())
        i = run8(&e, v, out, n);
#else
    (void)level;
#endif
    for (; i < n; i++)
        out[i] = epilogue_scaled(&e, v[i]);
}
