/* Element helpers of the matmul C tests: the A/B/C element kinds of each rknn_matmul_type and
 * reading/writing one element of a row-major matrix in memory. */
#ifndef RT_MATMUL_H
#define RT_MATMUL_H
#include "rknn_matmul_api.h"
#include "rt_test.h"

enum kind { F16, I8, I4, F32, I32, I16, BF16 };

static inline void kinds(rknn_matmul_type t, enum kind* a, enum kind* b, enum kind* c)
{
    switch (t) {
    case RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT32: *a = F16; *b = F16; *c = F32; break;
    case RKNN_INT8_MM_INT8_TO_INT32: *a = I8; *b = I8; *c = I32; break;
    case RKNN_INT8_MM_INT8_TO_INT8: *a = I8; *b = I8; *c = I8; break;
    case RKNN_FLOAT16_MM_FLOAT16_TO_FLOAT16: *a = F16; *b = F16; *c = F16; break;
    case RKNN_FLOAT16_MM_INT8_TO_FLOAT32: *a = F16; *b = I8; *c = F32; break;
    case RKNN_FLOAT16_MM_INT8_TO_FLOAT16: *a = F16; *b = I8; *c = F16; break;
    case RKNN_FLOAT16_MM_INT4_TO_FLOAT32: *a = F16; *b = I4; *c = F32; break;
    case RKNN_FLOAT16_MM_INT4_TO_FLOAT16: *a = F16; *b = I4; *c = F16; break;
    case RKNN_INT8_MM_INT8_TO_FLOAT32: *a = I8; *b = I8; *c = F32; break;
    case RKNN_INT4_MM_INT4_TO_INT16: *a = I4; *b = I4; *c = I16; break;
    case RKNN_INT8_MM_INT4_TO_INT32: *a = I8; *b = I4; *c = I32; break;
    case RKNN_FLOAT16_MM_INT4_TO_BFLOAT16: *a = F16; *b = I4; *c = BF16; break;
    case RKNN_INT8_MM_INT4_TO_FLOAT16: *a = I8; *b = I4; *c = F16; break;
    default: CHECK(0);
    }
}

/* element i of a row-major matrix stored as `k` (int4: two per byte, even index low nibble) */
static inline void put(unsigned char* buf, enum kind k, size_t i, int v)
{
    if (k == F16) { uint16_t h = rt_f32_to_f16((float)v); memcpy(buf + 2 * i, &h, 2); }
    else if (k == I8) buf[i] = (unsigned char)(int8_t)v;
    else if (k == I4) {
        unsigned char nib = (unsigned char)(v & 0xf);
        buf[i / 2] = (unsigned char)(i % 2 ? (buf[i / 2] & 0x0f) | (nib << 4) : (buf[i / 2] & 0xf0) | nib);
    } else CHECK(0);
}

static inline double get(const unsigned char* buf, enum kind k, size_t i)
{
    switch (k) {
    case F32: { float f; memcpy(&f, buf + 4 * i, 4); return f; }
    case F16: { uint16_t h; memcpy(&h, buf + 2 * i, 2); return rt_f16_to_f32(h); }
    case BF16: { uint16_t h; memcpy(&h, buf + 2 * i, 2); return rt_bf16_to_f32(h); }
    case I32: { int32_t v; memcpy(&v, buf + 4 * i, 4); return v; }
    case I16: { int16_t v; memcpy(&v, buf + 2 * i, 2); return v; }
    case I8: return (int8_t)buf[i];
    default: CHECK(0); return 0;
    }
}

#endif
