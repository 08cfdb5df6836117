/* Internals of rknnrt's CPU stand-in for librga: formats, memory access, errors, pixels. */
#ifndef RKNNRT_RGA_INTERNAL_H
#define RKNNRT_RGA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "im2d.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RGA_EXPORT __attribute__((visibility("default")))
#define RGA_MAX_SIDE 8192 /* RGA2 maximum input/output resolution (developer guide) */
#define RGA_MIN_SIDE 2
#define RGA_SCALE_MAX 16.0 /* RGA2: 1/16 ~ 16 */

/* What the stand-in knows of a format: how it is stored and in which colour space. */
typedef struct {
    int format;
    const char* name;
    int space;      /* 0 RGB, 1 YUV */
    int bytes;      /* bytes per pixel of the first plane (packed RGB: 3 or 4) */
    int r, g, b, a; /* byte offsets in a packed RGB pixel; a < 0: no alpha */
    int planar;     /* YUV: 0 gray, 1 semi-planar (interleaved chroma), 2 three planes */
    int cb_first;   /* YUV 4:2:0: Cb before Cr */
    int align;      /* width-stride alignment in pixels (RGA2 table) */
    int even;       /* x, y, width, height, hstride must be even */
} rga_format;

const rga_format* rga_format_of(int format);
size_t rga_frame_bytes(const rga_format* f, int wstride, int hstride);

/* The bytes behind an rga_buffer_t for one operation (an fd is mapped for its duration). */
typedef struct {
    uint8_t* base;
    size_t size; /* 0: unknown (a plain virtual address) */
    void* map;
    size_t map_len;
} rga_access;

IM_STATUS rga_open(const rga_buffer_t* buf, const char* what, rga_access* out);
void rga_close(rga_access* acc);
rga_buffer_handle_t rga_import_fd(int fd, size_t size);
rga_buffer_handle_t rga_import_va(void* va, size_t size);
rga_buffer_handle_t rga_import_pa(uint64_t pa);

/* Errors: one "E RGA:" line on stderr and the text imStrError_t returns. */
IM_STATUS rga_fail(IM_STATUS status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void rga_clear_error(void);

/* Float images: `ch` = 4 interleaved channels (R G B A or Y U V A) at w x h. */
typedef struct {
    int w, h;
    float* px;
} rga_image;

IM_STATUS rga_decode(const rga_buffer_t* buf, const rga_format* f, const uint8_t* base, im_rect r, rga_image* out);
void rga_encode(const rga_image* img, const rga_buffer_t* buf, const rga_format* f, uint8_t* base, im_rect r);
void rga_convert_space(rga_image* img, int from, int to, int mode);
IM_STATUS rga_resize(const rga_image* src, int w, int h, rga_image* out);
IM_STATUS rga_transform(const rga_image* src, int usage, rga_image* out);
void rga_color_pixel(uint32_t color, int space, int mode, float px[4]);

/* The core of every operation: src rect -> dst rect with a transform, or a fill. */
IM_STATUS rga_run(const rga_buffer_t* src, const rga_buffer_t* dst, im_rect srect, im_rect drect, int usage,
                  int color, const char* op);
IM_STATUS rga_check(const rga_buffer_t* src, const rga_buffer_t* dst, im_rect* srect, im_rect* drect, int usage,
                    const char* op);

#ifdef __cplusplus
}
#endif
#endif
