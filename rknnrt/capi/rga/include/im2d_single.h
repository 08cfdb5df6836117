/* im2d_single.h: one-shot image operations (librga 1.10 names and signatures). C++ gets the
 * overloads with default arguments, C the *_t functions and macros taking optional arguments. */
#ifndef RKNNRT_IM2D_SINGLE_H
#define RKNNRT_IM2D_SINGLE_H
#define _im2d_single_h_

#include "im2d_type.h"

IM_C_API IM_STATUS improcess(rga_buffer_t src, rga_buffer_t dst, rga_buffer_t pat, im_rect srect, im_rect drect,
                             im_rect prect, int usage);
IM_C_API IM_STATUS imcopy_t(const rga_buffer_t src, rga_buffer_t dst, int sync);
IM_C_API IM_STATUS imresize_t(const rga_buffer_t src, rga_buffer_t dst, double fx, double fy, int interpolation,
                              int sync);
IM_C_API IM_STATUS imcrop_t(const rga_buffer_t src, rga_buffer_t dst, im_rect rect, int sync);
IM_C_API IM_STATUS imtranslate_t(const rga_buffer_t src, rga_buffer_t dst, int x, int y, int sync);
IM_C_API IM_STATUS imcvtcolor_t(rga_buffer_t src, rga_buffer_t dst, int sfmt, int dfmt, int mode, int sync);
IM_C_API IM_STATUS imrotate_t(const rga_buffer_t src, rga_buffer_t dst, int rotation, int sync);
IM_C_API IM_STATUS imflip_t(const rga_buffer_t src, rga_buffer_t dst, int mode, int sync);
IM_C_API IM_STATUS imfill_t(rga_buffer_t dst, im_rect rect, int color, int sync);
IM_C_API IM_STATUS imrectangle_t(rga_buffer_t dst, im_rect rect, uint32_t color, int thickness, int sync);

#ifdef __cplusplus
IM_API IM_STATUS imcopy(const rga_buffer_t src, rga_buffer_t dst, int sync = 1, int* release_fence_fd = NULL);
IM_API IM_STATUS imresize(const rga_buffer_t src, rga_buffer_t dst, double fx = 0, double fy = 0,
                          int interpolation = 0, int sync = 1, int* release_fence_fd = NULL);
IM_API IM_STATUS imcrop(const rga_buffer_t src, rga_buffer_t dst, im_rect rect, int sync = 1,
                        int* release_fence_fd = NULL);
IM_API IM_STATUS imtranslate(const rga_buffer_t src, rga_buffer_t dst, int x, int y, int sync = 1,
                             int* release_fence_fd = NULL);
IM_API IM_STATUS imcvtcolor(rga_buffer_t src, rga_buffer_t dst, int sfmt, int dfmt, int mode = IM_COLOR_SPACE_DEFAULT,
                            int sync = 1, int* release_fence_fd = NULL);
IM_API IM_STATUS imrotate(const rga_buffer_t src, rga_buffer_t dst, int rotation, int sync = 1,
                          int* release_fence_fd = NULL);
IM_API IM_STATUS imflip(const rga_buffer_t src, rga_buffer_t dst, int mode, int sync = 1,
                        int* release_fence_fd = NULL);
IM_API IM_STATUS imfill(rga_buffer_t dst, im_rect rect, int color, int sync = 1, int* release_fence_fd = NULL);
IM_API IM_STATUS imrectangle(rga_buffer_t dst, im_rect rect, uint32_t color, int thickness, int sync = 1,
                             int* release_fence_fd = NULL);
IM_API IM_STATUS improcess(rga_buffer_t src, rga_buffer_t dst, rga_buffer_t pat, im_rect srect, im_rect drect,
                           im_rect prect, int acquire_fence_fd, int* release_fence_fd, im_opt_t* opt_ptr,
                           int usage);
#else
#define RGA__TOO_MANY(ret) (printf("invalid parameter\n"), (ret))
#define imcopy(src, dst, ...)                                                                  \
    (RGA_ARGC(int, ##__VA_ARGS__) > 1 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imcopy_t(src, dst, RGA_ARGC(int, ##__VA_ARGS__) ? RGA_ARG(int, 0, ##__VA_ARGS__) : 1))
/* imresize(src, dst[, fx, fy[, interpolation[, sync]]]); the C form defaults to INTER_LINEAR */
#define imresize(src, dst, ...)                                                                \
    ({                                                                                         \
        int __rga_n = RGA_ARGC(double, ##__VA_ARGS__);                                         \
        IM_STATUS __rga_ret = IM_STATUS_INVALID_PARAM;                                         \
        if (__rga_n == 0 || (__rga_n >= 2 && __rga_n <= 4))                                    \
            __rga_ret = imresize_t(src, dst, RGA_ARG(double, 0, ##__VA_ARGS__),                \
                                   RGA_ARG(double, 1, ##__VA_ARGS__),                          \
                                   __rga_n >= 3 ? (int)RGA_ARG(double, 2, ##__VA_ARGS__) : INTER_LINEAR, \
                                   __rga_n >= 4 ? (int)RGA_ARG(double, 3, ##__VA_ARGS__) : 1); \
        else printf("invalid parameter\n");                                                    \
        __rga_ret;                                                                             \
    })
#define impyramid(src, dst, direction)                                                         \
    imresize_t(src, dst, (direction) == IM_UP_SCALE ? 0.5 : 2, (direction) == IM_UP_SCALE ? 0.5 : 2, \
               INTER_LINEAR, 1)
#define imcvtcolor(src, dst, sfmt, dfmt, ...)                                                  \
    (RGA_ARGC(int, ##__VA_ARGS__) > 2 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imcvtcolor_t(src, dst, sfmt, dfmt, RGA_ARG(int, 0, ##__VA_ARGS__),                      \
                    RGA_ARGC(int, ##__VA_ARGS__) == 2 ? RGA_ARG(int, 1, ##__VA_ARGS__) : 1))
#define imcrop(src, dst, rect, ...)                                                            \
    (RGA_ARGC(int, ##__VA_ARGS__) > 1 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imcrop_t(src, dst, rect, RGA_ARGC(int, ##__VA_ARGS__) ? RGA_ARG(int, 0, ##__VA_ARGS__) : 1))
#define imtranslate(src, dst, x, y, ...)                                                       \
    (RGA_ARGC(int, ##__VA_ARGS__) > 1 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imtranslate_t(src, dst, x, y, RGA_ARGC(int, ##__VA_ARGS__) ? RGA_ARG(int, 0, ##__VA_ARGS__) : 1))
#define imrotate(src, dst, rotation, ...)                                                      \
    (RGA_ARGC(int, ##__VA_ARGS__) > 1 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imrotate_t(src, dst, rotation, RGA_ARGC(int, ##__VA_ARGS__) ? RGA_ARG(int, 0, ##__VA_ARGS__) : 1))
#define imflip(src, dst, mode, ...)                                                            \
    (RGA_ARGC(int, ##__VA_ARGS__) > 1 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imflip_t(src, dst, mode, RGA_ARGC(int, ##__VA_ARGS__) ? RGA_ARG(int, 0, ##__VA_ARGS__) : 1))
#define imfill(buf, rect, color, ...)                                                          \
    (RGA_ARGC(int, ##__VA_ARGS__) > 1 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imfill_t(buf, rect, color, RGA_ARGC(int, ##__VA_ARGS__) ? RGA_ARG(int, 0, ##__VA_ARGS__) : 1))
#define imrectangle(buf, rect, color, thickness, ...)                                          \
    (RGA_ARGC(int, ##__VA_ARGS__) > 1 ? RGA__TOO_MANY(IM_STATUS_INVALID_PARAM)                 \
     : imrectangle_t(buf, rect, color, thickness,                                               \
                     RGA_ARGC(int, ##__VA_ARGS__) ? RGA_ARG(int, 0, ##__VA_ARGS__) : 1))
#endif

#endif
