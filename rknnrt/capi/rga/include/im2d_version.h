/* im2d_version.h: the im2d API version this header set describes (librga 1.10.3). */
#ifndef RKNNRT_IM2D_VERSION_H
#define RKNNRT_IM2D_VERSION_H
#define _RGA_IM2D_VERSION_H_

#define RGA_VERSION_STR_HELPER(x) #x
#define RGA_VERSION_STR(x) RGA_VERSION_STR_HELPER(x)
#define RGA_API_MAJOR_VERSION 1
#define RGA_API_MINOR_VERSION 10
#define RGA_API_REVISION_VERSION 3
#define RGA_API_BUILD_VERSION 1
#define RGA_API_SUFFIX
#define RGA_API_VERSION                                                                        \
    RGA_VERSION_STR(RGA_API_MAJOR_VERSION) "." RGA_VERSION_STR(RGA_API_MINOR_VERSION) "."      \
        RGA_VERSION_STR(RGA_API_REVISION_VERSION) "_[" RGA_VERSION_STR(RGA_API_BUILD_VERSION) "]"
#define RGA_API_FULL_VERSION "rga_api version " RGA_API_VERSION RGA_API_SUFFIX
#define RGA_CURRENT_API_VERSION                                                                \
    ((RGA_API_MAJOR_VERSION & 0xff) << 24 | (RGA_API_MINOR_VERSION & 0xff) << 16 |             \
     (RGA_API_REVISION_VERSION & 0xff) << 8 | (RGA_API_BUILD_VERSION & 0xff))
#define RGA_CURRENT_API_HEADER_VERSION RGA_CURRENT_API_VERSION
#endif
