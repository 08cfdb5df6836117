/* librga's older C API (RgaApi.h) over the im2d core of rknnrt's stand-in. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "RgaApi.h"
#include "rga_internal.h"

static int ready;

RGA_EXPORT int c_RkRgaInit(void)
{
    ready = 1;
    return 0;
}

RGA_EXPORT void c_RkRgaDeInit(void) { ready = 0; }

RGA_EXPORT void c_RkRgaGetContext(void** ctx)
{
    static int context;
    if (ctx) *ctx = &context;
}

/* an rga_info_t's image as an im2d buffer and rectangle */
static rga_buffer_t from_info(const rga_info_t* info, im_rect* rect)
{
    const rga_rect_t* r = &info->rect;
    rga_buffer_t b = info->virAddr ? wrapbuffer_virtualaddr_t(info->virAddr, r->wstride, r->hstride, r->wstride,
                                                              r->hstride, r->format)
                     : info->fd > 0 ? wrapbuffer_fd_t(info->fd, r->wstride, r->hstride, r->wstride, r->hstride, r->format)
                                    : wrapbuffer_physicaladdr_t(info->phyAddr, r->wstride, r->hstride, r->wstride,
                                                                r->hstride, r->format);
    if (info->handle > 0) b.handle = (rga_buffer_handle_t)info->handle;
    b.color_space_mode = info->color_space_mode;
    rect->x = r->xoffset;
    rect->y = r->yoffset;
    rect->width = r->width;
    rect->height = r->height;
    return b;
}

/* HAL_TRANSFORM_* of drmrga.h -> IM_HAL_TRANSFORM_* */
static int usage_of(int rotation)
{
    switch (rotation) {
    case 0: return 0;
    case HAL_TRANSFORM_ROT_90: return IM_HAL_TRANSFORM_ROT_90;
    case HAL_TRANSFORM_ROT_180: return IM_HAL_TRANSFORM_ROT_180;
    case HAL_TRANSFORM_ROT_270: return IM_HAL_TRANSFORM_ROT_270;
    case HAL_TRANSFORM_FLIP_H: return IM_HAL_TRANSFORM_FLIP_H;
    case HAL_TRANSFORM_FLIP_V: return IM_HAL_TRANSFORM_FLIP_V;
    case HAL_TRANSFORM_FLIP_H_V: return IM_HAL_TRANSFORM_FLIP_H_V;
    default: return -1;
    }
}

RGA_EXPORT int c_RkRgaBlit(rga_info_t* src, rga_info_t* dst, rga_info_t* src1)
{
    if (!src || !dst) {
        rga_fail(IM_STATUS_INVALID_PARAM, "c_RkRgaBlit: src or dst is NULL");
        return -EINVAL;
    }
    if (src1) {
        rga_fail(IM_STATUS_NOT_SUPPORTED, "c_RkRgaBlit: a second source (blending) is not supported");
        return -EINVAL;
    }
    int usage = usage_of(src->rotation);
    if (usage < 0) {
        rga_fail(IM_STATUS_INVALID_PARAM, "c_RkRgaBlit: rotation 0x%x is not a HAL_TRANSFORM_* value", src->rotation);
        return -EINVAL;
    }
    im_rect sr, dr;
    rga_buffer_t s = from_info(src, &sr), d = from_info(dst, &dr);
    return rga_run(&s, &d, sr, dr, usage, 0, "c_RkRgaBlit") == IM_STATUS_SUCCESS ? 0 : -EINVAL;
}

RGA_EXPORT int c_RkRgaColorFill(rga_info_t* dst)
{
    if (!dst) return -EINVAL;
    im_rect dr;
    rga_buffer_t d = from_info(dst, &dr), none;
    memset(&none, 0, sizeof none);
    return rga_run(&none, &d, dr, dr, IM_COLOR_FILL, dst->color, "c_RkRgaColorFill") == IM_STATUS_SUCCESS ? 0 : -EINVAL;
}

RGA_EXPORT int c_RkRgaFlush(void) { return 0; }

/* DRM buffer objects: a memfd stands in for the GEM buffer. */
RGA_EXPORT int c_RkRgaGetAllocBuffer(bo_t* bo, int width, int height, int bpp)
{
    if (!bo || width <= 0 || height <= 0 || bpp <= 0) return -EINVAL;
    memset(bo, 0, sizeof *bo);
    bo->pitch = (size_t)width * (size_t)bpp / 8;
    bo->size = bo->pitch * (size_t)height;
    bo->fd = memfd_create("rga-bo", MFD_CLOEXEC);
    if (bo->fd < 0) return -errno;
    if (ftruncate(bo->fd, (off_t)bo->size) != 0) {
        int err = errno;
        close(bo->fd);
        bo->fd = -1;
        return -err;
    }
    bo->handle = (unsigned)bo->fd;
    return 0;
}

RGA_EXPORT int c_RkRgaGetAllocBufferCache(bo_t* bo, int width, int height, int bpp)
{
    return c_RkRgaGetAllocBuffer(bo, width, height, bpp);
}

RGA_EXPORT int c_RkRgaGetMmap(bo_t* bo)
{
    if (!bo || bo->fd < 0) return -EINVAL;
    void* p = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED, bo->fd, 0);
    if (p == MAP_FAILED) return -errno;
    bo->ptr = p;
    return 0;
}

RGA_EXPORT int c_RkRgaUnmap(bo_t* bo)
{
    if (!bo || !bo->ptr) return -EINVAL;
    munmap(bo->ptr, bo->size);
    bo->ptr = NULL;
    return 0;
}

RGA_EXPORT int c_RkRgaFree(bo_t* bo)
{
    if (!bo || bo->fd < 0) return -EINVAL;
    if (bo->ptr) c_RkRgaUnmap(bo);
    close(bo->fd);
    bo->fd = -1;
    return 0;
}

RGA_EXPORT int c_RkRgaGetBufferFd(bo_t* bo, int* fd)
{
    if (!bo || !fd || bo->fd < 0) return -EINVAL;
    *fd = bo->fd;
    return 0;
}
