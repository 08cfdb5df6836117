/* Ops `rknnrt.kernels::ByteMap_<x><y>` (x, y: u8 or s8): a 4-D byte tensor to another in NHWC
 * through a 256-entry table indexed by x's bits,
 *
 *     y[n, h, w, c] = table[x[n, c, h, w]]
 *
 * in one pass. An int8 program's requantisation DequantizeLinear -> QuantizeLinear with
 * per-tensor parameters is such a table (core/program/byte_maps.py computes it), and with the
 * Transpose to NHWC of rknnrt's conv kernels after it, this op: a 3-channel image's int8 input
 * was three passes of onnxruntime (DequantizeLinear, QuantizeLinear, Transpose), 0.12 ms for
 * 1x3x224x224. A table that adds a constant modulo 256
 * (same scales, the zero point moved: int8 -> uint8 is + 128) runs as byte additions (SSE2), a
 * 3-channel NHWC interleave 16 pixels at a time (SSSE3 shuffles, where the CPU has AVX2); every
 * other case as table reads (64 bytes a step on CPUs with AVX-512 VBMI: two two-table
 * permutes of 128 entries each and a blend on the index's top bit). Each path writes
 * table[x]: the bytes cannot differ. Inputs: x, table (uint8 [256]).
 *
 * Ops `rknnrt.kernels::ByteTable_<x><y>`: y = table[x] in x's own layout and shape, any rank
 * (an int8 program's DequantizeLinear -> activation -> QuantizeLinear: core/program/
 * byte_tables.py computes the table). */

#include <stdint.h>
#include <stdlib.h>

#include "api_kernel.h"
#include "bytemap.h"
#include "cpu.h"

#define EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BYTEMAP_X86 1
#endif

/* k when table[i] == (i + k) mod 256 for every i, else -1 */
static int table_shift(const uint8_t *table) {
    const int k = table[0];
    for (int i = 1; i < 256; i++)
        if (table[i] != (uint8_t)(i + k))
            return -1;
    return k;
}

#ifdef BYTEMAP_X86
/* y = table[x] 64 bytes a step: table[0..127] and table[128..255] each as two registers,
 * VPERMI2B picks by the index's low 7 bits, its top bit picks the half; returns the bytes
 * done */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static int64_t
map_vbmi(const uint8_t *x, uint8_t *y, int64_t n, const uint8_t *table) {
    const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
    const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i idx = _mm512_loadu_si512(x + i);
        const __m512i low = _mm512_permutex2var_epi8(t0, idx, t1);
        const __m512i high = _mm512_permutex2var_epi8(t2, idx, t3);
        _mm512_storeu_si512(y + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high));
    }
    return i;
}
#endif

static int max_level = 1; /* set by rknnrt_bytemap_max_level: 0 keeps the tests' table reads */

EXPORT void rknnrt_bytemap_max_level(int level) { max_level = level; }

static void map_plain(const uint8_t *x, uint8_t *y, int64_t n, const uint8_t *table, int shift) {
    int64_t i = 0;
    if (shift >= 0) {
#ifdef BYTEMAP_X86
        const __m128i k = _mm_set1_epi8((char)shift);
        for (; i + 16 <= n; i += 16)
            _mm_storeu_si128((__m128i *)(y + i),
                             _mm_add_epi8(_mm_loadu_si128((const __m128i *)(x + i)), k));
#endif
        for (; i < n; i++)
            y[i] = (uint8_t)(x[i] + shift);
        return;
    }
#ifdef BYTEMAP_X86
    if (max_level >= 1 && cpu_avx512_vbmi())
        i = map_vbmi(x, y, n, table);
#endif
    for (; i < n; i++)
        y[i] = table[x[i]];
}

#ifdef BYTEMAP_X86
/* pixels [0, count - count % 16) of three planes interleaved (y[3p + c] = table[plane c][p]),
 * 16 pixels (48 bytes) at a time; returns the pixels done */
__attribute__((target("ssse3"))) static int64_t interleave3(const uint8_t *x0, const uint8_t *x1,
                                                            const uint8_t *x2, uint8_t *y,
                                                            int64_t count,
                                                            const uint8_t *table, int shift) {
    /* out byte j of 48 is plane j % 3's pixel j / 3: one pshufb mask per plane and 16 bytes */
    int8_t masks[3][3][16];
    for (int v = 0; v < 3; v++)
        for (int j = 0; j < 16; j++)
            for (int c = 0; c < 3; c++)
                masks[v][c][j] = (int8_t)((16 * v + j) % 3 == c ? (16 * v + j) / 3 : -128);
    __m128i m[3][3];
    for (int v = 0; v < 3; v++)
        for (int c = 0; c < 3; c++)
            m[v][c] = _mm_loadu_si128((const __m128i *)masks[v][c]);
    const __m128i k = _mm_set1_epi8((char)(shift >= 0 ? shift : 0));
    uint8_t mapped[3][16];
    int64_t p = 0;
    for (; p + 16 <= count; p += 16) {
        __m128i a, b, c;
        if (shift >= 0) {
            a = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(x0 + p)), k);
            b = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(x1 + p)), k);
            c = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(x2 + p)), k);
        } else {
            for (int j = 0; j < 16; j++) {
                mapped[0][j] = table[x0[p + j]];
                mapped[1][j] = table[x1[p + j]];
                mapped[2][j] = table[x2[p + j]];
            }
            a = _mm_loadu_si128((const __m128i *)mapped[0]);
            b = _mm_loadu_si128((const __m128i *)mapped[1]);
            c = _mm_loadu_si128((const __m128i *)mapped[2]);
        }
        for (int v = 0; v < 3; v++) {
            __m128i o = _mm_or_si128(_mm_shuffle_epi8(a, m[v][0]), _mm_shuffle_epi8(b, m[v][1]));
            o = _mm_or_si128(o, _mm_shuffle_epi8(c, m[v][2]));
            _mm_storeu_si128((__m128i *)(y + 3 * p + 16 * v), o);
        }
    }
    return p;
}
#endif

/* y (N, H*W, C) from x (N, C, H*W) */
static void map_nhwc(const uint8_t *x, uint8_t *y, int64_t n, int64_t c, int64_t hw,
                     const uint8_t *table, int shift) {
    for (int64_t b = 0; b < n; b++) {
        const uint8_t *xb = x + b * c * hw;
        uint8_t *yb = y + b * c * hw;
        int64_t done = 0;
#ifdef BYTEMAP_X86
        if (c == 3 && cpu_avx2())
            done = interleave3(xb, xb + hw, xb + 2 * hw, yb, hw, table, shift);
#endif
        for (int64_t ch = 0; ch < c; ch++) {
            const uint8_t *xc = xb + ch * hw;
            for (int64_t p = done; p < hw; p++)
                yb[p * c + ch] = table[xc[p]];
        }
    }
}

typedef struct ByteMapOp {
    CustomOp base;
    const char *name;
    int x_type, y_type, plain; /* plain: ByteTable, y = table[x] in x's own layout */
} ByteMapOp;

typedef struct ByteMapKernel {
    const OrtApi *api;
    int plain;
} ByteMapKernel;

static void *create_kernel(const CustomOp *op, const OrtApi *api, const OrtKernelInfo *info) {
    (void)info;
    ByteMapKernel *k = (ByteMapKernel *)calloc(1, sizeof(ByteMapKernel));
    if (k != NULL)
        *k = (ByteMapKernel){api, ((const ByteMapOp *)op)->plain};
    return k;
}

static void destroy_kernel(void *kernel) { free(kernel); }

static void compute(void *kernel, OrtKernelContext *ctx) {
    /* a failure can only leave the output unset, which onnxruntime reports itself */
    const OrtApi *api = ((const ByteMapKernel *)kernel)->api;
    const int plain = ((const ByteMapKernel *)kernel)->plain;
    const OrtValue *in[2];
    if (kernel_inputs(api, ctx, in, 2))
        return;
    int64_t dims[16], td[16];
    size_t rank = 0, tr = 0;
    if (tensor_dims(api, in[0], dims, 16, &rank) || tensor_dims(api, in[1], td, 16, &tr))
        return;
    if (tr != 1 || td[0] != 256 || (!plain && rank != 4))
        return;
    int64_t count = 1;
    for (size_t i = 0; i < rank; i++)
        count *= dims[i] > 0 ? dims[i] : 0;
    int64_t nhwc[4] = {0, 0, 0, 0};
    if (!plain) /* (rank 4 here) */
        nhwc[0] = dims[0], nhwc[1] = dims[2], nhwc[2] = dims[3], nhwc[3] = dims[1];
    OrtValue *out = NULL;
    if (FN(api, KernelContext_GetOutput)(ctx, 0, plain ? dims : nhwc, rank, &out) != NULL ||
        out == NULL)
        return;
    void *x = NULL, *table = NULL, *y = NULL;
    if (FN(api, GetTensorMutableData)((OrtValue *)in[0], &x) != NULL ||
        FN(api, GetTensorMutableData)((OrtValue *)in[1], &table) != NULL ||
        FN(api, GetTensorMutableData)(out, &y) != NULL || count == 0)
        return;
    const int shift = table_shift((const uint8_t *)table);
    if (!plain && dims[1] > 1)
        map_nhwc((const uint8_t *)x, (uint8_t *)y, dims[0], dims[1], dims[2] * dims[3],
                 (const uint8_t *)table, shift);
    else /* ByteTable, or one channel: NCHW and NHWC are the same bytes */
        map_plain((const uint8_t *)x, (uint8_t *)y, count, (const uint8_t *)table, shift);
}

static const char *op_name(const CustomOp *op) { return ((const ByteMapOp *)op)->name; }
static size_t op_inputs(const CustomOp *op) { (void)op; return 2; }
static size_t op_outputs(const CustomOp *op) { (void)op; return 1; }
static int op_input_type(const CustomOp *op, size_t i) {
    return i ? T_UINT8 : ((const ByteMapOp *)op)->x_type;
}
static int op_output_type(const CustomOp *op, size_t i) {
    (void)i;
    return ((const ByteMapOp *)op)->y_type;
}

#define BYTEMAP_OP(NAME, XT, YT, PLAIN)                                                        \
    {{8, create_kernel, op_name, any_provider, op_input_type, op_inputs, op_output_type,       \
      op_outputs, compute, destroy_kernel, required, required},                                \
     NAME, XT, YT, PLAIN}

static ByteMapOp ops[BYTEMAP_OPS] = {
    BYTEMAP_OP("ByteMap_u8u8", T_UINT8, T_UINT8, 0),
    BYTEMAP_OP("ByteMap_u8s8", T_UINT8, T_INT8, 0),
    BYTEMAP_OP("ByteMap_s8u8", T_INT8, T_UINT8, 0),
    BYTEMAP_OP("ByteMap_s8s8", T_INT8, T_INT8, 0),
    BYTEMAP_OP("ByteTable_u8u8", T_UINT8, T_UINT8, 1),
    BYTEMAP_OP("ByteTable_u8s8", T_UINT8, T_INT8, 1),
    BYTEMAP_OP("ByteTable_s8u8", T_INT8, T_UINT8, 1),
    BYTEMAP_OP("ByteTable_s8s8", T_INT8, T_INT8, 1),
};

const CustomOp *bytemap_op(int index) { return &ops[index].base; }
