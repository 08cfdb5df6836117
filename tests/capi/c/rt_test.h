/* Helpers shared by the C tests: checks that print what failed, fp16/bf16 conversion. */
#ifndef RT_TEST_H
#define RT_TEST_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rknn_api.h"

#define CHECK(expr)                                                                  \
    do {                                                                             \
        if (!(expr)) {                                                               \
            fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #expr);  \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

#define CHECK_RET(call, expected)                                                         \
    do {                                                                                  \
        int rt_ret_ = (call);                                                             \
        if (rt_ret_ != (expected)) {                                                      \
            fprintf(stderr, "CHECK FAILED %s:%d: %s returned %d, expected %d\n", __FILE__, \
                    __LINE__, #call, rt_ret_, (int)(expected));                           \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static inline uint16_t rt_f32_to_f16(float value)
{
    uint32_t x;
    memcpy(&x, &value, 4);
    uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (exp <= 0) return (uint16_t)sign; /* the tests use no subnormals */
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fff; /* round to nearest even */
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half++;
    return (uint16_t)half;
}

static inline float rt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    if (exp == 0) {
        float v = (float)mant / 1024.0f / 16384.0f;
        return sign ? -v : v;
    }
    if (exp == 31) x = sign | 0x7f800000 | (mant << 13);
    else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float out;
    memcpy(&out, &x, 4);
    return out;
}

static inline float rt_bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float out;
    memcpy(&out, &x, 4);
    return out;
}

static inline unsigned char* rt_read_file(const char* path, size_t* size)
{
    FILE* f = fopen(path, "rb");
    CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* data = (unsigned char*)malloc((size_t)n);
    CHECK(fread(data, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return data;
}

static inline void rt_print_floats(const char* label, const float* v, size_t n)
{
    printf("%s", label);
    for (size_t i = 0; i < n; i++) printf(" %.9g", v[i]);
    printf("\n");
}

#endif
