/* The CPU features the library's vector paths need, asked of cpuid once per process (and per
 * file: each keeps its own answer) when a path is first chosen. x86 only; elsewhere the
 * scalar paths run. */

#ifndef RKNNRT_CPU_H
#define RKNNRT_CPU_H

#if defined(__x86_64__) || defined(__i386__)
#define CPU_FEATURE(NAME, TEST)                                                                \
    static inline int NAME(void) {                                                             \
        static int known = -1;                                                                 \
        if (known < 0) {                                                                       \
            __builtin_cpu_init();                                                              \
            known = (TEST) ? 1 : 0;                                                            \
        }                                                                                      \
        return known;                                                                          \
    }

CPU_FEATURE(cpu_avx2, __builtin_cpu_supports("avx2"))
/* the AVX2 paths of the convs (epilogue.h's FMAs) */
CPU_FEATURE(cpu_avx2_fma, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
CPU_FEATURE(cpu_f16c, __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c"))
CPU_FEATURE(cpu_avx512f, __builtin_cpu_supports("avx512f"))
/* the 256-bit VNNI path of the dense convs (VEX VPDPBUSD: CPUs with AVX-VNNI, some without
 * AVX-512) */
CPU_FEATURE(cpu_avx_vnni, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                              __builtin_cpu_supports("avxvnni"))
/* the byte tables' 64-lane lookup (VPERMI2B) */
CPU_FEATURE(cpu_avx512_vbmi, __builtin_cpu_supports("avx512f") &&
                                 __builtin_cpu_supports("avx512bw") &&
                                 __builtin_cpu_supports("avx512vbmi"))
/* the AVX-512 paths of the convs */
CPU_FEATURE(cpu_avx512_vnni,
            __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))

#include <cpuid.h>

/* AMX tiles with int8 (cpuid 7.0 EDX bits 24, 25) that the OS enables (XCR0 bits 17, 18,
 * read only where OSXSAVE says XGETBV may run): where onnxruntime's int8 GEMMs use AMX */
static inline int cpu_amx_int8(void) {
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d, lo = 0, hi = 0;
        known = 0;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1u) && (d >> 25 & 1u) &&
            __get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1u)) {
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            known = (lo & 0x60000u) == 0x60000u;
        }
    }
    return known;
}
#endif

#endif
