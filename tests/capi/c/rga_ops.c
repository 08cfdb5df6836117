/* The RGA stand-in's operations on one RGB888 picture, each result appended to an output file
 * as "<label> <width> <height> <bytes>\n" + the bytes, for the Python side to compare with a
 * numpy reference of the documented behaviour; status codes of refused cases printed as
 * "status <label> <code>". argv: picture.rgb (64x48 RGB888), output file */
#include <sys/mman.h>
#include <unistd.h>

#include "RgaApi.h"
#include "RgaUtils.h"
#include "im2d.h"
#include "rt_test.h"

static FILE* out;
static unsigned char* pic;
enum { W = 64, H = 48 };

static void dump(const char* label, const void* data, int w, int h, size_t bytes)
{
    fprintf(out, "%s %d %d %zu\n", label, w, h, bytes);
    fwrite(data, 1, bytes, out);
}

static void run(const char* label, rga_buffer_t dst, void* mem, IM_STATUS status)
{
    if (status != IM_STATUS_SUCCESS) {
        fprintf(stderr, "%s: %d %s\n", label, (int)status, imStrError(status));
        exit(1);
    }
    dump(label, mem, dst.width, dst.height, (size_t)(get_bpp_from_format(dst.format) * dst.wstride * dst.hstride));
}

static void resize_to(const char* label, int w, int h, int format)
{
    size_t n = (size_t)(w * h * get_bpp_from_format(format));
    void* mem = calloc(n, 1);
    rga_buffer_t src = wrapbuffer_virtualaddr(pic, W, H, RK_FORMAT_RGB_888);
    rga_buffer_t dst = wrapbuffer_virtualaddr(mem, w, h, format);
    im_rect none = {0, 0, 0, 0};
    CHECK_RET(imcheck(src, dst, none, none), IM_STATUS_NOERROR);
    run(label, dst, mem, format == RK_FORMAT_RGB_888 ? imresize(src, dst) : imcvtcolor(src, dst, RK_FORMAT_RGB_888, format));
    free(mem);
}

static void status(const char* label, int code) { printf("status %s %d\n", label, code); }

int main(int argc, char** argv)
{
    CHECK(argc == 3);
    size_t size;
    pic = rt_read_file(argv[1], &size);
    CHECK(size == W * H * 3);
    out = fopen(argv[2], "wb");
    CHECK(out != NULL);

    resize_to("down", 32, 24, RK_FORMAT_RGB_888);
    resize_to("up", 96, 72, RK_FORMAT_RGB_888);
    resize_to("mixed", 80, 40, RK_FORMAT_RGB_888);
    resize_to("bgr", W, H, RK_FORMAT_BGR_888);
    resize_to("rgba", W, H, RK_FORMAT_RGBA_8888);
    resize_to("nv12", W, H, RK_FORMAT_YCbCr_420_SP);
    resize_to("nv21", W, H, RK_FORMAT_YCrCb_420_SP);
    resize_to("i420", W, H, RK_FORMAT_YCbCr_420_P);
    resize_to("gray", W, H, RK_FORMAT_YCbCr_400);

    /* NV12 back to RGB, and NV12 -> BGR resized */
    unsigned char* nv12 = (unsigned char*)malloc(W * H * 3 / 2);
    unsigned char* rgb = (unsigned char*)malloc(W * H * 3);
    rga_buffer_t s = wrapbuffer_virtualaddr(pic, W, H, RK_FORMAT_RGB_888);
    rga_buffer_t y = wrapbuffer_virtualaddr(nv12, W, H, RK_FORMAT_YCbCr_420_SP);
    CHECK_RET(imcvtcolor(s, y, RK_FORMAT_RGB_888, RK_FORMAT_YCbCr_420_SP), IM_STATUS_SUCCESS);
    rga_buffer_t back = wrapbuffer_virtualaddr(rgb, W, H, RK_FORMAT_RGB_888);
    run("nv12_to_rgb", back, rgb, imcvtcolor(y, back, RK_FORMAT_YCbCr_420_SP, RK_FORMAT_RGB_888));

    /* geometry */
    unsigned char* buf = (unsigned char*)calloc(W * H * 4, 1);
    rga_buffer_t same = wrapbuffer_virtualaddr(buf, W, H, RK_FORMAT_RGB_888);
    run("copy", same, buf, imcopy(s, same));
    rga_buffer_t turned = wrapbuffer_virtualaddr(buf, H, W, RK_FORMAT_RGB_888);
    run("rot90", turned, buf, imrotate(s, turned, IM_HAL_TRANSFORM_ROT_90));
    run("rot270", turned, buf, imrotate(s, turned, IM_HAL_TRANSFORM_ROT_270));
    run("rot180", same, buf, imrotate(s, same, IM_HAL_TRANSFORM_ROT_180));
    run("flip_h", same, buf, imflip(s, same, IM_HAL_TRANSFORM_FLIP_H));
    run("flip_v", same, buf, imflip(s, same, IM_HAL_TRANSFORM_FLIP_V));
    memset(buf, 0, W * H * 3);
    run("translate", same, buf, imtranslate(s, same, 8, 4));
    im_rect crop = {12, 8, 32, 24};
    rga_buffer_t small = wrapbuffer_virtualaddr(buf, 32, 24, RK_FORMAT_RGB_888);
    run("crop", small, buf, imcrop(s, small, crop));
    memcpy(buf, pic, W * H * 3);
    im_rect box = {4, 6, 20, 10};
    run("fill", same, buf, imfill(same, box, 0x00ff8040)); /* R 0x40, G 0x80, B 0xff */
    memcpy(buf, pic, W * H * 3);
    run("rectangle", same, buf, imrectangle(same, box, 0x0000ff00, 2));
    /* improcess: src rect scaled into a dst rect (the zoo's letterbox), the rest left as is */
    memset(buf, 114, W * H * 3);
    im_rect srect = {0, 0, W, H}, drect = {8, 6, 48, 36}, prect = {0, 0, 0, 0};
    rga_buffer_t pat;
    memset(&pat, 0, sizeof pat);
    run("letterbox", same, buf, improcess(s, same, pat, srect, drect, prect, 0));

    /* handles and fds: an fd from memfd, as rknn_create_mem gives */
    int fd = memfd_create("rga-test", 0);
    CHECK(fd > 0 && ftruncate(fd, W * H * 3) == 0);
    im_handle_param_t param = {W, H, RK_FORMAT_RGB_888};
    rga_buffer_handle_t hs = importbuffer_virtualaddr(pic, &param), hd = importbuffer_fd(fd, &param);
    CHECK(hs > 0 && hd > 0);
    rga_buffer_t bs = wrapbuffer_handle(hs, W, H, RK_FORMAT_RGB_888);
    rga_buffer_t bd = wrapbuffer_handle(hd, W, H, RK_FORMAT_RGB_888);
    CHECK_RET(imflip(bs, bd, IM_HAL_TRANSFORM_FLIP_V), IM_STATUS_SUCCESS);
    unsigned char* mapped = (unsigned char*)mmap(NULL, W * H * 3, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(mapped != MAP_FAILED);
    dump("handle_fd", mapped, W, H, W * H * 3);
    munmap(mapped, W * H * 3);
    CHECK_RET(releasebuffer_handle(hs), IM_STATUS_SUCCESS);
    CHECK_RET(releasebuffer_handle(hd), IM_STATUS_SUCCESS);
    status("release_twice", releasebuffer_handle(hd));
    status("import_phys", (int)importbuffer_physicaladdr(0x10000000ull, &param));
    close(fd);

    /* the RgaBlit API: resize into a 32x24 BGR888 buffer */
    rga_info_t src_info, dst_info;
    memset(&src_info, 0, sizeof src_info);
    memset(&dst_info, 0, sizeof dst_info);
    src_info.virAddr = pic;
    rga_set_rect(&src_info.rect, 0, 0, W, H, W, H, RK_FORMAT_RGB_888);
    dst_info.virAddr = buf;
    rga_set_rect(&dst_info.rect, 0, 0, 32, 24, 32, 24, RK_FORMAT_BGR_888);
    CHECK_RET(c_RkRgaInit(), 0);
    CHECK_RET(c_RkRgaBlit(&src_info, &dst_info, NULL), 0);
    dump("blit", buf, 32, 24, 32 * 24 * 3);

    /* refused cases: the vendor's codes */
    im_rect none = {0, 0, 0, 0};
    rga_buffer_t odd_stride = wrapbuffer_virtualaddr(buf, 30, 20, RK_FORMAT_RGB_888);
    status("rgb_stride_30", imcheck(s, odd_stride, none, none));
    rga_buffer_t odd_yuv = wrapbuffer_virtualaddr(buf, 32, 21, RK_FORMAT_YCbCr_420_SP);
    status("nv12_odd_height", imcheck(s, odd_yuv, none, none));
    rga_buffer_t r565 = wrapbuffer_virtualaddr(buf, 32, 24, RK_FORMAT_RGB_565);
    status("rgb565", imcheck(s, r565, none, none));
    rga_buffer_t tiny = wrapbuffer_virtualaddr(buf, 2, 2, RK_FORMAT_RGBA_8888);
    status("scale_32x", imresize(s, tiny));
    printf("message %s\n", imStrError(IM_STATUS_NOT_SUPPORTED));
    rga_buffer_t nothing = wrapbuffer_virtualaddr(NULL, 32, 24, RK_FORMAT_RGB_888);
    status("null_buffer", imcopy(nothing, small));
    status("rect_outside", imcrop(s, small, ((im_rect){40, 30, 32, 24})));
    printf("query %s", querystring(RGA_VERSION));
    fclose(out);
    free(nv12); free(rgb); free(buf); free(pic);
    printf("ALL OK\n");
    return 0;
}
