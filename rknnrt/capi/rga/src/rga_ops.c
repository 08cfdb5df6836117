/* Operations of rknnrt's librga stand-in: the checks imcheck makes (RGA2's limits, developer
 * guide: 2x2 .. 8192x8192, scale 1/16 ~ 16, width-stride and even-size alignment per format)
 * and the one-shot im2d calls, all through rga_run. */
#include <stdlib.h>
#include <string.h>

#include "rga_internal.h"

static int empty(im_rect r) { return r.x == 0 && r.y == 0 && r.width == 0 && r.height == 0; }

static IM_STATUS check_buffer(const rga_buffer_t* b, const char* what, const rga_format** fmt)
{
    if (!b->vir_addr && !b->phy_addr && b->fd <= 0 && !b->handle)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s: invalid buffer, it has no virtual address, fd or handle", what);
    const rga_format* f = rga_format_of(b->format);
    if (!f)
        return rga_fail(IM_STATUS_NOT_SUPPORTED, "%s: format 0x%x is not supported (RGBA/RGBX/BGRA/BGRX/ARGB/ABGR 8888, "
                        "RGB/BGR 888, NV12, NV21, I420, YV12, YUV400)", what, b->format);
    if (b->width < RGA_MIN_SIDE || b->height < RGA_MIN_SIDE || b->width > RGA_MAX_SIDE || b->height > RGA_MAX_SIDE)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s: %dx%d is outside 2x2 .. 8192x8192", what, b->width, b->height);
    if (b->wstride < b->width || b->hstride < b->height)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s: stride %dx%d smaller than the image %dx%d", what, b->wstride,
                        b->hstride, b->width, b->height);
    if (b->wstride % f->align)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s, Error width stride not align to %d, wstride = %d, format = 0x%x(%s)",
                        what, f->align, b->wstride, b->format, f->name);
    if (f->even && (b->hstride % 2 || b->width % 2 || b->height % 2))
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s, Error yuv not align to 2, width = %d, height = %d, hstride = %d, "
                        "format = 0x%x(%s)", what, b->width, b->height, b->hstride, b->format, f->name);
    *fmt = f;
    return IM_STATUS_NOERROR;
}

static IM_STATUS check_rect(const rga_buffer_t* b, const rga_format* f, im_rect* r, const char* what, int min)
{
    if (empty(*r)) {
        r->width = b->width;
        r->height = b->height;
    }
    if (r->x < 0 || r->y < 0 || r->width < min || r->height < min || r->x + r->width > b->wstride ||
        r->y + r->height > b->hstride)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s rect[x,y,w,h] = [%d, %d, %d, %d] is outside the image (wstride = %d, "
                        "hstride = %d)", what, r->x, r->y, r->width, r->height, b->wstride, b->hstride);
    if (f->even && (r->x % 2 || r->y % 2 || r->width % 2 || r->height % 2))
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s, Error yuv not align to 2, rect[x,y,w,h] = [%d, %d, %d, %d], "
                        "format = 0x%x(%s)", what, r->x, r->y, r->width, r->height, b->format, f->name);
    return IM_STATUS_NOERROR;
}

static int turned(int usage)
{
    int rot = usage & IM_HAL_TRANSFORM_ROT_MASK;
    return rot == IM_HAL_TRANSFORM_ROT_90 || rot == IM_HAL_TRANSFORM_ROT_270;
}

IM_STATUS rga_check(const rga_buffer_t* src, const rga_buffer_t* dst, im_rect* srect, im_rect* drect, int usage,
                    const char* op)
{
    const int supported = IM_HAL_TRANSFORM_MASK | IM_SYNC | IM_ASYNC | IM_CROP | IM_COLOR_FILL;
    if (usage & ~supported)
        return rga_fail(IM_STATUS_NOT_SUPPORTED, "%s: usage 0x%x asks for a function the CPU stand-in lacks (only "
                        "copy, scale, crop, colour conversion, rotate, flip and colour fill)", op, usage & ~supported);
    int rot = usage & IM_HAL_TRANSFORM_ROT_MASK;
    if (rot && rot != IM_HAL_TRANSFORM_ROT_90 && rot != IM_HAL_TRANSFORM_ROT_180 && rot != IM_HAL_TRANSFORM_ROT_270)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s: rotation 0x%x is not one of 90, 180, 270", op, rot);
    const rga_format *fs = NULL, *fd = NULL;
    IM_STATUS st = check_buffer(dst, "dst", &fd);
    if (st != IM_STATUS_NOERROR) return st;
    if ((st = check_rect(dst, fd, drect, "dst", usage & IM_COLOR_FILL ? 1 : RGA_MIN_SIDE)) != IM_STATUS_NOERROR) return st;
    if (usage & IM_COLOR_FILL) return IM_STATUS_NOERROR;
    if ((st = check_buffer(src, "src", &fs)) != IM_STATUS_NOERROR) return st;
    if ((st = check_rect(src, fs, srect, "src", RGA_MIN_SIDE)) != IM_STATUS_NOERROR) return st;
    int sw = turned(usage) ? srect->height : srect->width, sh = turned(usage) ? srect->width : srect->height;
    double fx = (double)drect->width / sw, fy = (double)drect->height / sh;
    if (fx > RGA_SCALE_MAX || fy > RGA_SCALE_MAX || fx < 1 / RGA_SCALE_MAX || fy < 1 / RGA_SCALE_MAX)
        return rga_fail(IM_STATUS_NOT_SUPPORTED, "%s: scale %.4f x %.4f is outside 1/16 ~ 16 (src %dx%d, dst %dx%d)", op,
                        fx, fy, srect->width, srect->height, drect->width, drect->height);
    return IM_STATUS_NOERROR;
}

IM_STATUS rga_run(const rga_buffer_t* src, const rga_buffer_t* dst, im_rect srect, im_rect drect, int usage,
                  int color, const char* op)
{
    rga_clear_error();
    IM_STATUS st = rga_check(src, dst, &srect, &drect, usage, op);
    if (st != IM_STATUS_NOERROR) return st;
    const rga_format* fd = rga_format_of(dst->format);
    int mode = dst->color_space_mode ? dst->color_space_mode : src->color_space_mode;
    rga_access out, in;
    if ((st = rga_open(dst, "dst", &out)) != IM_STATUS_SUCCESS) return st;
    rga_image img = {0, 0, NULL}, sized = {0, 0, NULL}, done = {0, 0, NULL};
    if (usage & IM_COLOR_FILL) {
        float px[4];
        rga_color_pixel((uint32_t)color, fd->space, mode, px);
        img.w = drect.width;
        img.h = drect.height;
        img.px = (float*)malloc(sizeof(float) * 4 * (size_t)img.w * img.h);
        if (!img.px) st = rga_fail(IM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate the fill", op);
        else
            for (size_t i = 0; i < (size_t)img.w * img.h; i++) memcpy(img.px + 4 * i, px, sizeof px);
        if (img.px) rga_encode(&img, dst, fd, out.base, drect);
        free(img.px);
        rga_close(&out);
        return st == IM_STATUS_NOERROR || st == IM_STATUS_SUCCESS ? IM_STATUS_SUCCESS : st;
    }
    const rga_format* fs = rga_format_of(src->format);
    if ((st = rga_open(src, "src", &in)) != IM_STATUS_SUCCESS) {
        rga_close(&out);
        return st;
    }
    st = rga_decode(src, fs, in.base, srect, &img);
    if (st == IM_STATUS_SUCCESS) {
        rga_convert_space(&img, fs->space, fd->space, mode);
        int w = turned(usage) ? drect.height : drect.width, h = turned(usage) ? drect.width : drect.height;
        st = rga_resize(&img, w, h, &sized);
    }
    if (st == IM_STATUS_SUCCESS) st = rga_transform(&sized, usage, &done);
    if (st == IM_STATUS_SUCCESS) rga_encode(&done, dst, fd, out.base, drect);
    free(img.px);
    free(sized.px);
    free(done.px);
    rga_close(&in);
    rga_close(&out);
    return st;
}

/* -- the C API ------------------------------------------------------------------------------ */
static const im_rect WHOLE = {0, 0, 0, 0};

RGA_EXPORT IM_STATUS imcheck_t(const rga_buffer_t src, const rga_buffer_t dst, const rga_buffer_t pat,
                               const im_rect src_rect, const im_rect dst_rect, const im_rect pat_rect,
                               const int mode_usage)
{
    (void)pat;
    (void)pat_rect;
    im_rect s = src_rect, d = dst_rect;
    rga_clear_error();
    return rga_check(&src, &dst, &s, &d, mode_usage, "imcheck");
}

RGA_EXPORT void rga_check_perpare(rga_buffer_t* src, rga_buffer_t* dst, rga_buffer_t* pat, im_rect* src_rect,
                                  im_rect* dst_rect, im_rect* pat_rect, int mode_usage)
{
    (void)src; (void)dst; (void)pat; (void)src_rect; (void)dst_rect; (void)pat_rect; (void)mode_usage;
}

RGA_EXPORT IM_STATUS improcess(rga_buffer_t src, rga_buffer_t dst, rga_buffer_t pat, im_rect srect, im_rect drect,
                               im_rect prect, int usage)
{
    (void)pat;
    (void)prect;
    return rga_run(&src, &dst, srect, drect, usage, dst.color, "improcess");
}

RGA_EXPORT IM_STATUS imcopy_t(const rga_buffer_t src, rga_buffer_t dst, int sync)
{
    (void)sync;
    if (src.width != dst.width || src.height != dst.height)
        return rga_fail(IM_STATUS_INVALID_PARAM, "imcopy: src %dx%d and dst %dx%d differ; use imresize", src.width,
                        src.height, dst.width, dst.height);
    return rga_run(&src, &dst, WHOLE, WHOLE, 0, 0, "imcopy");
}

RGA_EXPORT IM_STATUS imresize_t(const rga_buffer_t src, rga_buffer_t dst, double fx, double fy, int interpolation,
                                int sync)
{
    (void)sync;
    (void)interpolation; /* the guide: only RGA1 takes an interpolation; RGA2/3 choose by direction */
    if (fx > 0 && fy > 0) {
        const rga_format* f = rga_format_of(dst.format);
        int w = (int)(src.width * fx), h = (int)(src.height * fy);
        if (f && f->even) { /* the guide: YUV sizes are aligned down */
            w &= ~1;
            h &= ~1;
        }
        dst.width = w;
        dst.height = h;
    }
    return rga_run(&src, &dst, WHOLE, WHOLE, 0, 0, "imresize");
}

RGA_EXPORT IM_STATUS imcrop_t(const rga_buffer_t src, rga_buffer_t dst, im_rect rect, int sync)
{
    (void)sync;
    return rga_run(&src, &dst, rect, WHOLE, 0, 0, "imcrop");
}

RGA_EXPORT IM_STATUS imtranslate_t(const rga_buffer_t src, rga_buffer_t dst, int x, int y, int sync)
{
    (void)sync;
    if (src.width != dst.width || src.height != dst.height)
        return rga_fail(IM_STATUS_INVALID_PARAM, "imtranslate: src %dx%d and dst %dx%d must be the same size",
                        src.width, src.height, dst.width, dst.height);
    if (x < 0 || y < 0 || x >= src.width - 1 || y >= src.height - 1)
        return rga_fail(IM_STATUS_INVALID_PARAM, "imtranslate: offset (%d, %d) leaves nothing of %dx%d", x, y,
                        src.width, src.height);
    im_rect s = {0, 0, src.width - x, src.height - y}, d = {x, y, src.width - x, src.height - y};
    return rga_run(&src, &dst, s, d, 0, 0, "imtranslate");
}

RGA_EXPORT IM_STATUS imcvtcolor_t(rga_buffer_t src, rga_buffer_t dst, int sfmt, int dfmt, int mode, int sync)
{
    (void)sync;
    src.format = sfmt;
    dst.format = dfmt;
    if (mode) dst.color_space_mode = mode;
    return rga_run(&src, &dst, WHOLE, WHOLE, 0, 0, "imcvtcolor");
}

RGA_EXPORT IM_STATUS imrotate_t(const rga_buffer_t src, rga_buffer_t dst, int rotation, int sync)
{
    (void)sync;
    if (rotation != IM_HAL_TRANSFORM_ROT_90 && rotation != IM_HAL_TRANSFORM_ROT_180 &&
        rotation != IM_HAL_TRANSFORM_ROT_270)
        return rga_fail(IM_STATUS_INVALID_PARAM, "imrotate: rotation %d is not IM_HAL_TRANSFORM_ROT_90/180/270",
                        rotation);
    return rga_run(&src, &dst, WHOLE, WHOLE, rotation, 0, "imrotate");
}

RGA_EXPORT IM_STATUS imflip_t(const rga_buffer_t src, rga_buffer_t dst, int mode, int sync)
{
    (void)sync;
    if (mode != IM_HAL_TRANSFORM_FLIP_H && mode != IM_HAL_TRANSFORM_FLIP_V && mode != IM_HAL_TRANSFORM_FLIP_H_V)
        return rga_fail(IM_STATUS_INVALID_PARAM, "imflip: mode %d is not IM_HAL_TRANSFORM_FLIP_H/V/H_V", mode);
    return rga_run(&src, &dst, WHOLE, WHOLE, mode, 0, "imflip");
}

RGA_EXPORT IM_STATUS imfill_t(rga_buffer_t dst, im_rect rect, int color, int sync)
{
    (void)sync;
    rga_buffer_t none;
    memset(&none, 0, sizeof none);
    return rga_run(&none, &dst, WHOLE, rect, IM_COLOR_FILL, color, "imfill");
}

RGA_EXPORT IM_STATUS imrectangle_t(rga_buffer_t dst, im_rect rect, uint32_t color, int thickness, int sync)
{
    (void)sync;
    if (thickness < 0) return imfill_t(dst, rect, (int)color, 1); /* negative: filled */
    if (thickness == 0 || 2 * thickness > rect.width || 2 * thickness > rect.height)
        return rga_fail(IM_STATUS_INVALID_PARAM, "imrectangle: thickness %d does not fit rect %dx%d", thickness,
                        rect.width, rect.height);
    im_rect sides[4] = {{rect.x, rect.y, rect.width, thickness},
                        {rect.x, rect.y + rect.height - thickness, rect.width, thickness},
                        {rect.x, rect.y + thickness, thickness, rect.height - 2 * thickness},
                        {rect.x + rect.width - thickness, rect.y + thickness, thickness, rect.height - 2 * thickness}};
    for (int i = 0; i < 4; i++) {
        if (sides[i].width <= 0 || sides[i].height <= 0) continue;
        IM_STATUS st = imfill_t(dst, sides[i], (int)color, 1);
        if (st != IM_STATUS_SUCCESS) return st;
    }
    return IM_STATUS_SUCCESS;
}
