/* The CPU facts the Python side asks the library for (cpu.h answers them; core/program reads
 * them through ctypes to choose between rknnrt's kernels and onnxruntime's). */

#include "cpu.h"

#define EXPORT __attribute__((visibility("default")))

/* 1 where onnxruntime's int8 GEMMs run on AMX (core/program/qconv_kernel.fused_depth) */
EXPORT int rknnrt_cpu_amx_int8(void) {
#if defined(__x86_64__) || defined(__i386__)
    return cpu_amx_int8();
#else
    return 0;
#endif
}
