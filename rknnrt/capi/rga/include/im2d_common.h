/* im2d_common.h: checks, error strings, queries (librga 1.10 names and signatures). */
#ifndef RKNNRT_IM2D_COMMON_H
#define RKNNRT_IM2D_COMMON_H
#define _im2d_common_h_

#include "im2d_type.h"

IM_EXPORT_API const char* querystring(int name);
IM_C_API const char* imStrError_t(IM_STATUS status);
IM_C_API IM_STATUS imcheck_t(const rga_buffer_t src, const rga_buffer_t dst, const rga_buffer_t pat,
                             const im_rect src_rect, const im_rect dst_rect, const im_rect pat_rect,
                             const int mode_usage);
IM_C_API void rga_check_perpare(rga_buffer_t* src, rga_buffer_t* dst, rga_buffer_t* pat, im_rect* src_rect,
                                im_rect* dst_rect, im_rect* pat_rect, int mode_usage);
IM_EXPORT_API IM_STATUS imsync(int release_fence_fd);
IM_EXPORT_API IM_STATUS imconfig(IM_CONFIG_NAME name, uint64_t value);

#ifdef __cplusplus
IM_API IM_STATUS imcheckHeader(im_api_version_t header_version = RGA_CURRENT_API_HEADER_VERSION);

static inline const char* imStrError(int status = IM_STATUS_INVALID_PARAM)
{
    return imStrError_t((IM_STATUS)status);
}
static inline IM_STATUS imcheck(const rga_buffer_t src, const rga_buffer_t dst, const im_rect src_rect,
                                const im_rect dst_rect, int usage = 0)
{
    rga_buffer_t pat;
    im_rect pat_rect;
    memset(&pat, 0, sizeof pat);
    memset(&pat_rect, 0, sizeof pat_rect);
    return imcheck_t(src, dst, pat, src_rect, dst_rect, pat_rect, usage);
}
static inline IM_STATUS imcheck_composite(const rga_buffer_t src, const rga_buffer_t dst, const rga_buffer_t pat,
                                          const im_rect src_rect, const im_rect dst_rect, const im_rect pat_rect,
                                          int usage = 0)
{
    return imcheck_t(src, dst, pat, src_rect, dst_rect, pat_rect, usage);
}
#else
#define imStrError(...)                                                                        \
    ({                                                                                         \
        const char* __rga_msg = "Fatal error, imStrError() too many parameters\n";           \
        if (RGA_ARGC(int, ##__VA_ARGS__) == 0) __rga_msg = imStrError_t(IM_STATUS_INVALID_PARAM); \
        else if (RGA_ARGC(int, ##__VA_ARGS__) == 1)                                            \
            __rga_msg = imStrError_t((IM_STATUS)RGA_ARG(int, 0, ##__VA_ARGS__));               \
        __rga_msg;                                                                             \
    })
#define imcheck_composite(src, dst, pat, src_rect, dst_rect, pat_rect, ...)                   \
    ({                                                                                         \
        IM_STATUS __rga_ret = IM_STATUS_FAILED;                                                \
        if (RGA_ARGC(int, ##__VA_ARGS__) <= 1)                                                 \
            __rga_ret = imcheck_t(src, dst, pat, src_rect, dst_rect, pat_rect,                 \
                                  RGA_ARG(int, 0, ##__VA_ARGS__));                             \
        else printf("check failed\n");                                                         \
        __rga_ret;                                                                             \
    })
#define imcheck(src, dst, src_rect, dst_rect, ...)                                             \
    ({                                                                                         \
        rga_buffer_t __rga_pat;                                                                \
        im_rect __rga_pat_rect;                                                                \
        memset(&__rga_pat, 0, sizeof __rga_pat);                                               \
        memset(&__rga_pat_rect, 0, sizeof __rga_pat_rect);                                     \
        imcheck_composite(src, dst, __rga_pat, src_rect, dst_rect, __rga_pat_rect, ##__VA_ARGS__); \
    })
#endif

#endif
