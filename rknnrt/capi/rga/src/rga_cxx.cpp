// The C++ overloads of the im2d API (default arguments, sizes by bytes or by format), each
// forwarding to the C function of the same operation.
#include "rga_internal.h"

#define RGA_CXX __attribute__((visibility("default")))

static void no_fence(int* release_fence_fd)
{
    if (release_fence_fd) *release_fence_fd = -1; // synchronous: nothing to wait for
}

RGA_CXX IM_STATUS imcopy(const rga_buffer_t src, rga_buffer_t dst, int sync, int* fence)
{
    no_fence(fence);
    return imcopy_t(src, dst, sync);
}

RGA_CXX IM_STATUS imresize(const rga_buffer_t src, rga_buffer_t dst, double fx, double fy, int interpolation, int sync,
                           int* fence)
{
    no_fence(fence);
    return imresize_t(src, dst, fx, fy, interpolation, sync);
}

RGA_CXX IM_STATUS imcrop(const rga_buffer_t src, rga_buffer_t dst, im_rect rect, int sync, int* fence)
{
    no_fence(fence);
    return imcrop_t(src, dst, rect, sync);
}

RGA_CXX IM_STATUS imtranslate(const rga_buffer_t src, rga_buffer_t dst, int x, int y, int sync, int* fence)
{
    no_fence(fence);
    return imtranslate_t(src, dst, x, y, sync);
}

RGA_CXX IM_STATUS imcvtcolor(rga_buffer_t src, rga_buffer_t dst, int sfmt, int dfmt, int mode, int sync, int* fence)
{
    no_fence(fence);
    return imcvtcolor_t(src, dst, sfmt, dfmt, mode, sync);
}

RGA_CXX IM_STATUS imrotate(const rga_buffer_t src, rga_buffer_t dst, int rotation, int sync, int* fence)
{
    no_fence(fence);
    return imrotate_t(src, dst, rotation, sync);
}

RGA_CXX IM_STATUS imflip(const rga_buffer_t src, rga_buffer_t dst, int mode, int sync, int* fence)
{
    no_fence(fence);
    return imflip_t(src, dst, mode, sync);
}

RGA_CXX IM_STATUS imfill(rga_buffer_t dst, im_rect rect, int color, int sync, int* fence)
{
    no_fence(fence);
    return imfill_t(dst, rect, color, sync);
}

RGA_CXX IM_STATUS imrectangle(rga_buffer_t dst, im_rect rect, uint32_t color, int thickness, int sync, int* fence)
{
    no_fence(fence);
    return imrectangle_t(dst, rect, color, thickness, sync);
}

RGA_CXX IM_STATUS improcess(rga_buffer_t src, rga_buffer_t dst, rga_buffer_t pat, im_rect srect, im_rect drect,
                            im_rect prect, int acquire_fence_fd, int* fence, im_opt_t* opt, int usage)
{
    (void)acquire_fence_fd;
    no_fence(fence);
    if (opt && (usage & IM_COLOR_FILL)) dst.color = opt->color;
    return improcess(src, dst, pat, srect, drect, prect, usage);
}

RGA_CXX IM_STATUS imcheckHeader(im_api_version_t header_version)
{
    if (header_version >> 24 != RGA_API_MAJOR_VERSION)
        return rga_fail(IM_STATUS_ERROR_VERSION, "header version 0x%x, library 0x%x", header_version,
                        (unsigned)RGA_CURRENT_API_VERSION);
    return IM_STATUS_SUCCESS;
}

static size_t format_bytes(int width, int height, int format)
{
    const rga_format* f = rga_format_of(format);
    return f ? rga_frame_bytes(f, width, height) : (size_t)width * height * 4;
}

RGA_CXX rga_buffer_handle_t importbuffer_fd(int fd, int size) { return rga_import_fd(fd, size > 0 ? (size_t)size : 0); }
RGA_CXX rga_buffer_handle_t importbuffer_virtualaddr(void* va, int size)
{
    return rga_import_va(va, size > 0 ? (size_t)size : 0);
}
RGA_CXX rga_buffer_handle_t importbuffer_physicaladdr(uint64_t pa, int size)
{
    (void)size;
    return rga_import_pa(pa);
}
RGA_CXX rga_buffer_handle_t importbuffer_fd(int fd, int width, int height, int format)
{
    return rga_import_fd(fd, format_bytes(width, height, format));
}
RGA_CXX rga_buffer_handle_t importbuffer_virtualaddr(void* va, int width, int height, int format)
{
    return rga_import_va(va, format_bytes(width, height, format));
}
RGA_CXX rga_buffer_handle_t importbuffer_physicaladdr(uint64_t pa, int width, int height, int format)
{
    (void)width;
    (void)height;
    (void)format;
    return rga_import_pa(pa);
}
RGA_CXX rga_buffer_t wrapbuffer_handle(rga_buffer_handle_t handle, int width, int height, int format)
{
    return wrapbuffer_handle_t(handle, width, height, width, height, format);
}
RGA_CXX rga_buffer_t wrapbuffer_handle(rga_buffer_handle_t handle, int width, int height, int format, int wstride,
                                       int hstride)
{
    return wrapbuffer_handle_t(handle, width, height, wstride, hstride, format);
}
