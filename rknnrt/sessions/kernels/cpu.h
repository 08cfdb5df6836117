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
/* the AVX-512 paths of the convs */
CPU_FEATURE(cpu_avx512_vnni,
            __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
#endif

#endif
