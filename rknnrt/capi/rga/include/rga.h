/* rga.h: pixel formats and colour-space constants of Rockchip's RGA 2D engine (librga 1.10
 * names and values), written by the rknnrt project for its CPU stand-in of librga. */
#ifndef RKNNRT_RGA_H
#define RKNNRT_RGA_H
#define _RGA_DRIVER_H_

#ifdef __cplusplus
extern "C" {
#endif

/* A format is its index << 8. */
typedef enum _Rga_SURF_FORMAT {
    RK_FORMAT_RGBA_8888 = 0x00 << 8,  /* bytes R G B A */
    RK_FORMAT_RGBX_8888 = 0x01 << 8,  /* bytes R G B X */
    RK_FORMAT_RGB_888 = 0x02 << 8,    /* bytes R G B */
    RK_FORMAT_BGRA_8888 = 0x03 << 8,  /* bytes B G R A */
    RK_FORMAT_RGB_565 = 0x04 << 8,
    RK_FORMAT_RGBA_5551 = 0x05 << 8,
    RK_FORMAT_RGBA_4444 = 0x06 << 8,
    RK_FORMAT_BGR_888 = 0x07 << 8,    /* bytes B G R */
    RK_FORMAT_YCbCr_422_SP = 0x08 << 8,
    RK_FORMAT_YCbCr_422_P = 0x09 << 8,
    RK_FORMAT_YCbCr_420_SP = 0x0a << 8, /* NV12: Y plane, then interleaved Cb Cr (2x2) */
    RK_FORMAT_YCbCr_420_P = 0x0b << 8,  /* I420: Y, Cb, Cr planes (2x2) */
    RK_FORMAT_YCrCb_422_SP = 0x0c << 8,
    RK_FORMAT_YCrCb_422_P = 0x0d << 8,
    RK_FORMAT_YCrCb_420_SP = 0x0e << 8, /* NV21: Y plane, then interleaved Cr Cb (2x2) */
    RK_FORMAT_YCrCb_420_P = 0x0f << 8,  /* YV12: Y, Cr, Cb planes (2x2) */
    RK_FORMAT_BPP1 = 0x10 << 8,
    RK_FORMAT_BPP2 = 0x11 << 8,
    RK_FORMAT_BPP4 = 0x12 << 8,
    RK_FORMAT_BPP8 = 0x13 << 8,
    RK_FORMAT_Y4 = 0x14 << 8,
    RK_FORMAT_YCbCr_400 = 0x15 << 8,    /* GRAY8: the Y plane only */
    RK_FORMAT_BGRX_8888 = 0x16 << 8,
    RK_FORMAT_YVYU_422 = 0x18 << 8,
    RK_FORMAT_YVYU_420 = 0x19 << 8,
    RK_FORMAT_VYUY_422 = 0x1a << 8,
    RK_FORMAT_VYUY_420 = 0x1b << 8,
    RK_FORMAT_YUYV_422 = 0x1c << 8,
    RK_FORMAT_YUYV_420 = 0x1d << 8,
    RK_FORMAT_UYVY_422 = 0x1e << 8,
    RK_FORMAT_UYVY_420 = 0x1f << 8,
    RK_FORMAT_YCbCr_420_SP_10B = 0x20 << 8,
    RK_FORMAT_YCrCb_420_SP_10B = 0x21 << 8,
    RK_FORMAT_YCbCr_422_SP_10B = 0x22 << 8,
    RK_FORMAT_YCrCb_422_SP_10B = 0x23 << 8,
    RK_FORMAT_YCbCr_422_10b_SP = RK_FORMAT_YCbCr_422_SP_10B,
    RK_FORMAT_YCrCb_422_10b_SP = RK_FORMAT_YCrCb_422_SP_10B,
    RK_FORMAT_BGR_565 = 0x24 << 8,
    RK_FORMAT_BGRA_5551 = 0x25 << 8,
    RK_FORMAT_BGRA_4444 = 0x26 << 8,
    RK_FORMAT_ARGB_8888 = 0x28 << 8,
    RK_FORMAT_XRGB_8888 = 0x29 << 8,
    RK_FORMAT_ARGB_5551 = 0x2a << 8,
    RK_FORMAT_ARGB_4444 = 0x2b << 8,
    RK_FORMAT_ABGR_8888 = 0x2c << 8,
    RK_FORMAT_XBGR_8888 = 0x2d << 8,
    RK_FORMAT_ABGR_5551 = 0x2e << 8,
    RK_FORMAT_ABGR_4444 = 0x2f << 8,
    RK_FORMAT_RGBA2BPP = 0x30 << 8,
    RK_FORMAT_A8 = 0x31 << 8,
    RK_FORMAT_YCbCr_444_SP = 0x32 << 8,
    RK_FORMAT_YCrCb_444_SP = 0x33 << 8,
    RK_FORMAT_Y8 = 0x34 << 8,
    RK_FORMAT_UNKNOWN = 0x100 << 8
} RgaSURF_FORMAT;

/* rga_info_t.color_space_mode values */
enum {
    yuv2rgb_mode0 = 0x0, /* BT.601 limited range */
    yuv2rgb_mode1 = 0x1, /* BT.601 full range */
    yuv2rgb_mode2 = 0x2, /* BT.709 limited range */
    rgb2yuv_601_full = 0x1 << 8,
    rgb2yuv_709_full = 0x2 << 8,
    yuv2yuv_601_limit_2_709_limit = 0x3 << 8,
    yuv2yuv_601_limit_2_709_full = 0x4 << 8,
    yuv2yuv_709_limit_2_601_limit = 0x5 << 8,
    yuv2yuv_709_limit_2_601_full = 0x6 << 8,
    yuv2yuv_601_full_2_709_limit = 0x7 << 8,
    yuv2yuv_601_full_2_709_full = 0x8 << 8,
    yuv2yuv_709_full_2_601_limit = 0x9 << 8,
    yuv2yuv_709_full_2_601_full = 0xa << 8,
    rgb2yuv_709_limit = 0xb << 8,
    yuv2rgb_709_full = 0xc << 8,
    yuv2yuv_601_limit_2_601_full = 0xd << 8,
    yuv2yuv_601_full_2_601_limit = 0xe << 8,
    yuv2yuv_709_limit_2_709_full = 0xf << 8,
    yuv2yuv_709_full_2_709_limit = 0x10 << 8,
    full_csc_mask = 0xf00
};

enum {
    RGA3_SCHEDULER_CORE0 = 1 << 0,
    RGA3_SCHEDULER_CORE1 = 1 << 1,
    RGA2_SCHEDULER_CORE0 = 1 << 2,
    RGA2_SCHEDULER_CORE1 = 1 << 3,
    RGA_CORE_MASK = 0xf,
    RGA_NONE_CORE = 0x0
};

enum { raster_mode = 1 << 0, fbc_mode = 1 << 1, tile_mode = 1 << 2 };

#ifdef __cplusplus
}
#endif
#endif
