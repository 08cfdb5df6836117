/* im2d_buffer.h: importing and wrapping buffers (librga 1.10 names and signatures). */
#ifndef RKNNRT_IM2D_BUFFER_H
#define RKNNRT_IM2D_BUFFER_H
#define _im2d_buffer_h_

#include "im2d_type.h"

IM_EXPORT_API rga_buffer_handle_t importbuffer_fd(int fd, im_handle_param_t* param);
IM_EXPORT_API rga_buffer_handle_t importbuffer_virtualaddr(void* va, im_handle_param_t* param);
IM_EXPORT_API rga_buffer_handle_t importbuffer_physicaladdr(uint64_t pa, im_handle_param_t* param);
IM_EXPORT_API IM_STATUS releasebuffer_handle(rga_buffer_handle_t handle);

IM_C_API rga_buffer_t wrapbuffer_handle_t(rga_buffer_handle_t handle, int width, int height, int wstride,
                                          int hstride, int format);
IM_C_API rga_buffer_t wrapbuffer_virtualaddr_t(void* vir_addr, int width, int height, int wstride, int hstride,
                                               int format);
IM_C_API rga_buffer_t wrapbuffer_physicaladdr_t(void* phy_addr, int width, int height, int wstride, int hstride,
                                                int format);
IM_C_API rga_buffer_t wrapbuffer_fd_t(int fd, int width, int height, int wstride, int hstride, int format);

IM_EXPORT_API void imsetAlphaBit(rga_buffer_t* buf, uint8_t alpha0, uint8_t alpha1);
IM_EXPORT_API void imsetOpacity(rga_buffer_t* buf, uint8_t alpha);
IM_EXPORT_API void imsetColorSpace(rga_buffer_t* buf, IM_COLOR_SPACE_MODE mode);

#ifdef __cplusplus
/* by size in bytes, or by width/height stride and format */
IM_API rga_buffer_handle_t importbuffer_fd(int fd, int size);
IM_API rga_buffer_handle_t importbuffer_virtualaddr(void* va, int size);
IM_API rga_buffer_handle_t importbuffer_physicaladdr(uint64_t pa, int size);
IM_API rga_buffer_handle_t importbuffer_fd(int fd, int width, int height, int format);
IM_API rga_buffer_handle_t importbuffer_virtualaddr(void* va, int width, int height, int format);
IM_API rga_buffer_handle_t importbuffer_physicaladdr(uint64_t pa, int width, int height, int format);
IM_API rga_buffer_t wrapbuffer_handle(rga_buffer_handle_t handle, int width, int height, int format);
IM_API rga_buffer_t wrapbuffer_handle(rga_buffer_handle_t handle, int width, int height, int format, int wstride,
                                      int hstride);

static inline rga_buffer_t wrapbuffer_virtualaddr(void* va, int width, int height, int format)
{
    return wrapbuffer_virtualaddr_t(va, width, height, width, height, format);
}
static inline rga_buffer_t wrapbuffer_virtualaddr(void* va, int width, int height, int format, int wstride,
                                                  int hstride)
{
    return wrapbuffer_virtualaddr_t(va, width, height, wstride, hstride, format);
}
static inline rga_buffer_t wrapbuffer_physicaladdr(void* pa, int width, int height, int format)
{
    return wrapbuffer_physicaladdr_t(pa, width, height, width, height, format);
}
static inline rga_buffer_t wrapbuffer_physicaladdr(void* pa, int width, int height, int format, int wstride,
                                                   int hstride)
{
    return wrapbuffer_physicaladdr_t(pa, width, height, wstride, hstride, format);
}
static inline rga_buffer_t wrapbuffer_fd(int fd, int width, int height, int format)
{
    return wrapbuffer_fd_t(fd, width, height, width, height, format);
}
static inline rga_buffer_t wrapbuffer_fd(int fd, int width, int height, int format, int wstride, int hstride)
{
    return wrapbuffer_fd_t(fd, width, height, wstride, hstride, format);
}
#else
/* wrapbuffer_X(addr, width, height, format[, wstride, hstride]) */
#define RGA__WRAP(fn, addr, width, height, format, ...)                                        \
    ({                                                                                         \
        rga_buffer_t __rga_buf;                                                                \
        memset(&__rga_buf, 0, sizeof __rga_buf);                                               \
        if (RGA_ARGC(int, ##__VA_ARGS__) == 0)                                                 \
            __rga_buf = fn(addr, width, height, width, height, format);                        \
        else if (RGA_ARGC(int, ##__VA_ARGS__) == 2)                                            \
            __rga_buf = fn(addr, width, height, RGA_ARG(int, 0, ##__VA_ARGS__),                \
                           RGA_ARG(int, 1, ##__VA_ARGS__), format);                            \
        else printf("invalid parameter\n");                                                    \
        __rga_buf;                                                                             \
    })
#define wrapbuffer_handle(handle, width, height, format, ...)                                  \
    RGA__WRAP(wrapbuffer_handle_t, handle, width, height, format, ##__VA_ARGS__)
#define wrapbuffer_virtualaddr(va, width, height, format, ...)                                 \
    RGA__WRAP(wrapbuffer_virtualaddr_t, va, width, height, format, ##__VA_ARGS__)
#define wrapbuffer_physicaladdr(pa, width, height, format, ...)                                \
    RGA__WRAP(wrapbuffer_physicaladdr_t, pa, width, height, format, ##__VA_ARGS__)
#define wrapbuffer_fd(fd, width, height, format, ...)                                          \
    RGA__WRAP(wrapbuffer_fd_t, fd, width, height, format, ##__VA_ARGS__)
#endif

#endif
