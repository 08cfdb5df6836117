/* RgaUtils.h: format helpers of librga. */
#ifndef RKNNRT_RGA_UTILS_H
#define RKNNRT_RGA_UTILS_H
#define _rga_utils_h_
#ifdef __cplusplus
extern "C" {
#endif
float get_bpp_from_format(int format);            /* bytes per pixel (NV12: 1.5) */
int get_perPixel_stride_from_format(int format);  /* bits per pixel of the first plane */
const char* translate_format_str(int format);     /* e.g. "rgb888", "nv12" */
#ifdef __cplusplus
}
#endif
#endif
