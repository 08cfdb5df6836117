/* RgaApi.h: librga's older C API (c_RkRga*, RgaBlit), as rknnrt's CPU stand-in provides it. */
#ifndef RKNNRT_RGA_API_H
#define RKNNRT_RGA_API_H
#define _rockchip_rga_c_h_

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "drmrga.h"
#include "rga.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RgaInit(ctx) ({ int __rga_ret = c_RkRgaInit(); c_RkRgaGetContext(ctx); __rga_ret; })
#define RgaDeInit(ctx) { (void)(ctx); c_RkRgaDeInit(); }
#define RgaBlit(...) c_RkRgaBlit(__VA_ARGS__)
#define RgaCollorFill(...) c_RkRgaColorFill(__VA_ARGS__)
#define RgaFlush() c_RkRgaFlush()

int c_RkRgaInit(void);
void c_RkRgaDeInit(void);
void c_RkRgaGetContext(void** ctx);
int c_RkRgaBlit(rga_info_t* src, rga_info_t* dst, rga_info_t* src1);
int c_RkRgaColorFill(rga_info_t* dst);
int c_RkRgaFlush(void);
int c_RkRgaGetAllocBuffer(bo_t* bo_info, int width, int height, int bpp);
int c_RkRgaGetAllocBufferCache(bo_t* bo_info, int width, int height, int bpp);
int c_RkRgaGetMmap(bo_t* bo_info);
int c_RkRgaUnmap(bo_t* bo_info);
int c_RkRgaFree(bo_t* bo_info);
int c_RkRgaGetBufferFd(bo_t* bo_info, int* fd);

#ifdef __cplusplus
}
#endif
#endif
