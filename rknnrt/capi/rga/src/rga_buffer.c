/* Buffers of rknnrt's librga stand-in: formats, wrapping, handles, memory access, errors. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "RgaUtils.h"
#include "rga_internal.h"

static const rga_format FORMATS[] = {
    /* format, name, space, bytes, r, g, b, a, planar, cb_first, align, even */
    {RK_FORMAT_RGBA_8888, "rgba8888", 0, 4, 0, 1, 2, 3, 0, 0, 1, 0},
    {RK_FORMAT_RGBX_8888, "rgbx8888", 0, 4, 0, 1, 2, -1, 0, 0, 1, 0},
    {RK_FORMAT_BGRA_8888, "bgra8888", 0, 4, 2, 1, 0, 3, 0, 0, 1, 0},
    {RK_FORMAT_BGRX_8888, "bgrx8888", 0, 4, 2, 1, 0, -1, 0, 0, 1, 0},
    {RK_FORMAT_ARGB_8888, "argb8888", 0, 4, 1, 2, 3, 0, 0, 0, 1, 0},
    {RK_FORMAT_ABGR_8888, "abgr8888", 0, 4, 3, 2, 1, 0, 0, 0, 1, 0},
    {RK_FORMAT_RGB_888, "rgb888", 0, 3, 0, 1, 2, -1, 0, 0, 4, 0},
    {RK_FORMAT_BGR_888, "bgr888", 0, 3, 2, 1, 0, -1, 0, 0, 4, 0},
    {RK_FORMAT_YCbCr_420_SP, "nv12", 1, 1, 0, 0, 0, -1, 1, 1, 4, 1},
    {RK_FORMAT_YCrCb_420_SP, "nv21", 1, 1, 0, 0, 0, -1, 1, 0, 4, 1},
    {RK_FORMAT_YCbCr_420_P, "yuv420p", 1, 1, 0, 0, 0, -1, 2, 1, 4, 1},
    {RK_FORMAT_YCrCb_420_P, "yvu420p", 1, 1, 0, 0, 0, -1, 2, 0, 4, 1},
    {RK_FORMAT_YCbCr_400, "yuv400", 1, 1, 0, 0, 0, -1, 0, 0, 4, 1},
};

const rga_format* rga_format_of(int format)
{
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (FORMATS[i].format == format) return &FORMATS[i];
    return NULL;
}

size_t rga_frame_bytes(const rga_format* f, int wstride, int hstride)
{
    size_t plane = (size_t)wstride * (size_t)hstride;
    if (f->space == 0) return plane * (size_t)f->bytes;
    return f->planar ? plane + plane / 2 : plane;
}

/* -- errors ------------------------------------------------------------------------------ */
static __thread char last_error[512];

static const char* status_text(IM_STATUS status)
{
    switch (status) {
    case IM_STATUS_NOERROR: return "No errors during operation";
    case IM_STATUS_SUCCESS: return "Run successfully";
    case IM_STATUS_NOT_SUPPORTED: return "Unsupported function";
    case IM_STATUS_OUT_OF_MEMORY: return "Memory overflow";
    case IM_STATUS_INVALID_PARAM: return "Invalid parameters";
    case IM_STATUS_ILLEGAL_PARAM: return "Illegal parameters";
    case IM_STATUS_ERROR_VERSION: return "Version verification failed";
    case IM_STATUS_NO_SESSION: return "No session";
    default: return "Fatal error";
    }
}

IM_STATUS rga_fail(IM_STATUS status, const char* fmt, ...)
{
    char detail[400];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    snprintf(last_error, sizeof last_error, "%s: %s", status_text(status), detail);
    fprintf(stderr, "E RGA: %s\n", last_error);
    return status;
}

void rga_clear_error(void) { last_error[0] = '\0'; }

RGA_EXPORT const char* imStrError_t(IM_STATUS status)
{
    static __thread char text[512];
    if (status <= 0 && last_error[0] && strncmp(last_error, status_text(status), strlen(status_text(status))) == 0)
        snprintf(text, sizeof text, "%s", last_error);
    else snprintf(text, sizeof text, "%s", status_text(status));
    return text;
}

/* -- wrapping ---------------------------------------------------------------------------- */
static rga_buffer_t wrap(void* va, void* pa, int fd, rga_buffer_handle_t handle, int width, int height,
                         int wstride, int hstride, int format)
{
    rga_buffer_t b;
    memset(&b, 0, sizeof b);
    b.vir_addr = va;
    b.phy_addr = pa;
    b.fd = fd;
    b.handle = handle;
    b.width = width;
    b.height = height;
    b.wstride = wstride;
    b.hstride = hstride;
    b.format = format;
    b.global_alpha = 0xff;
    return b;
}

RGA_EXPORT rga_buffer_t wrapbuffer_virtualaddr_t(void* va, int width, int height, int wstride, int hstride,
                                                 int format)
{
    return wrap(va, NULL, -1, 0, width, height, wstride, hstride, format);
}

RGA_EXPORT rga_buffer_t wrapbuffer_physicaladdr_t(void* pa, int width, int height, int wstride, int hstride,
                                                  int format)
{
    return wrap(NULL, pa, -1, 0, width, height, wstride, hstride, format);
}

RGA_EXPORT rga_buffer_t wrapbuffer_fd_t(int fd, int width, int height, int wstride, int hstride, int format)
{
    return wrap(NULL, NULL, fd, 0, width, height, wstride, hstride, format);
}

RGA_EXPORT rga_buffer_t wrapbuffer_handle_t(rga_buffer_handle_t handle, int width, int height, int wstride,
                                            int hstride, int format)
{
    return wrap(NULL, NULL, -1, handle, width, height, wstride, hstride, format);
}

RGA_EXPORT void imsetAlphaBit(rga_buffer_t* buf, uint8_t alpha0, uint8_t alpha1)
{
    if (!buf) return;
    buf->alpha_bit.alpha0 = alpha0;
    buf->alpha_bit.alpha1 = alpha1;
}

RGA_EXPORT void imsetOpacity(rga_buffer_t* buf, uint8_t alpha)
{
    if (buf) buf->global_alpha = alpha;
}

RGA_EXPORT void imsetColorSpace(rga_buffer_t* buf, IM_COLOR_SPACE_MODE mode)
{
    if (buf) buf->color_space_mode = mode;
}

/* -- handles ----------------------------------------------------------------------------- */
#define MAX_HANDLES 4096
typedef struct {
    int used;
    void* va;
    int fd; /* a dup of the caller's descriptor, closed at release */
    size_t size;
} handle_entry;

static handle_entry handles[MAX_HANDLES];
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t param_bytes(const im_handle_param_t* p)
{
    const rga_format* f = rga_format_of((int)p->format);
    return f ? rga_frame_bytes(f, (int)p->width, (int)p->height) : (size_t)p->width * p->height * 4;
}

static rga_buffer_handle_t add_handle(void* va, int fd, size_t size)
{
    pthread_mutex_lock(&handles_lock);
    for (int i = 0; i < MAX_HANDLES; i++)
        if (!handles[i].used) {
            handles[i].used = 1;
            handles[i].va = va;
            handles[i].fd = fd;
            handles[i].size = size;
            pthread_mutex_unlock(&handles_lock);
            return (rga_buffer_handle_t)(i + 1);
        }
    pthread_mutex_unlock(&handles_lock);
    if (fd >= 0) close(fd);
    rga_fail(IM_STATUS_OUT_OF_MEMORY, "more than %d buffers imported at once", MAX_HANDLES);
    return 0;
}

rga_buffer_handle_t rga_import_fd(int fd, size_t size)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rga_fail(IM_STATUS_INVALID_PARAM, "importbuffer_fd: fd %d is not an open descriptor", fd);
        return 0;
    }
    if (size == 0 || (S_ISREG(st.st_mode) && (size_t)st.st_size < size)) {
        rga_fail(IM_STATUS_INVALID_PARAM, "importbuffer_fd: fd %d holds %lld bytes, %zu needed", fd,
                 (long long)st.st_size, size);
        return 0;
    }
    int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0) {
        rga_fail(IM_STATUS_OUT_OF_MEMORY, "importbuffer_fd: cannot duplicate fd %d", fd);
        return 0;
    }
    return add_handle(NULL, mine, size);
}

rga_buffer_handle_t rga_import_va(void* va, size_t size)
{
    if (va == NULL || size == 0) {
        rga_fail(IM_STATUS_INVALID_PARAM, "importbuffer_virtualaddr: %s", va ? "size is 0" : "NULL address");
        return 0;
    }
    return add_handle(va, -1, size);
}

rga_buffer_handle_t rga_import_pa(uint64_t pa)
{
    rga_fail(IM_STATUS_NOT_SUPPORTED,
             "importbuffer_physicaladdr(0x%llx): physical addresses cannot be reached on a PC; import the "
             "buffer's fd or virtual address",
             (unsigned long long)pa);
    return 0;
}

RGA_EXPORT rga_buffer_handle_t importbuffer_fd(int fd, im_handle_param_t* param)
{
    if (!param) {
        rga_fail(IM_STATUS_INVALID_PARAM, "importbuffer_fd: param is NULL");
        return 0;
    }
    return rga_import_fd(fd, param_bytes(param));
}

RGA_EXPORT rga_buffer_handle_t importbuffer_virtualaddr(void* va, im_handle_param_t* param)
{
    if (!param) {
        rga_fail(IM_STATUS_INVALID_PARAM, "importbuffer_virtualaddr: param is NULL");
        return 0;
    }
    return rga_import_va(va, param_bytes(param));
}

RGA_EXPORT rga_buffer_handle_t importbuffer_physicaladdr(uint64_t pa, im_handle_param_t* param)
{
    (void)param;
    return rga_import_pa(pa);
}

RGA_EXPORT IM_STATUS releasebuffer_handle(rga_buffer_handle_t handle)
{
    int fd = -1, ok = 0;
    pthread_mutex_lock(&handles_lock);
    if (handle >= 1 && handle <= MAX_HANDLES && handles[handle - 1].used) {
        fd = handles[handle - 1].fd;
        memset(&handles[handle - 1], 0, sizeof handles[0]);
        ok = 1;
    }
    pthread_mutex_unlock(&handles_lock);
    if (!ok) return rga_fail(IM_STATUS_INVALID_PARAM, "releasebuffer_handle: %u is not an imported handle", handle);
    if (fd >= 0) close(fd);
    return IM_STATUS_SUCCESS;
}

/* -- access ------------------------------------------------------------------------------ */
static IM_STATUS map_fd(int fd, size_t need, const char* what, rga_access* out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s: fd %d is not an open descriptor", what, fd);
    if (S_ISREG(st.st_mode) && (size_t)st.st_size < need)
        return rga_fail(IM_STATUS_INVALID_PARAM, "%s: fd %d holds %lld bytes, the image needs %zu", what, fd,
                        (long long)st.st_size, need);
    void* p = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return rga_fail(IM_STATUS_INVALID_PARAM, "%s: cannot map fd %d", what, fd);
    out->base = (uint8_t*)p;
    out->size = need;
    out->map = p;
    out->map_len = need;
    return IM_STATUS_SUCCESS;
}

IM_STATUS rga_open(const rga_buffer_t* buf, const char* what, rga_access* out)
{
    memset(out, 0, sizeof *out);
    const rga_format* f = rga_format_of(buf->format);
    size_t need = f ? rga_frame_bytes(f, buf->wstride, buf->hstride) : 0;
    if (buf->handle) {
        handle_entry e;
        int ok = 0;
        pthread_mutex_lock(&handles_lock);
        if (buf->handle <= MAX_HANDLES && handles[buf->handle - 1].used) {
            e = handles[buf->handle - 1];
            ok = 1;
        }
        pthread_mutex_unlock(&handles_lock);
        if (!ok) return rga_fail(IM_STATUS_INVALID_PARAM, "%s: handle %u was not imported", what, buf->handle);
        if (e.size < need)
            return rga_fail(IM_STATUS_INVALID_PARAM, "%s: handle %u holds %zu bytes, the image needs %zu", what,
                            buf->handle, e.size, need);
        if (e.va) {
            out->base = (uint8_t*)e.va;
            out->size = e.size;
            return IM_STATUS_SUCCESS;
        }
        return map_fd(e.fd, need, what, out);
    }
    if (buf->vir_addr) {
        out->base = (uint8_t*)buf->vir_addr;
        return IM_STATUS_SUCCESS;
    }
    if (buf->fd > 0) return map_fd(buf->fd, need, what, out);
    if (buf->phy_addr)
        return rga_fail(IM_STATUS_NOT_SUPPORTED, "%s: physical address %p cannot be reached on a PC", what,
                        buf->phy_addr);
    return rga_fail(IM_STATUS_INVALID_PARAM, "%s: the buffer has no address, fd or handle", what);
}

void rga_close(rga_access* acc)
{
    if (acc->map) munmap(acc->map, acc->map_len);
    memset(acc, 0, sizeof *acc);
}

/* -- RgaUtils.h, queries ------------------------------------------------------------------- */
RGA_EXPORT float get_bpp_from_format(int format)
{
    const rga_format* f = rga_format_of(format);
    if (!f) return 0;
    return f->space == 0 ? (float)f->bytes : f->planar ? 1.5f : 1.0f;
}

RGA_EXPORT int get_perPixel_stride_from_format(int format)
{
    const rga_format* f = rga_format_of(format);
    return f ? f->bytes * 8 : 0;
}

RGA_EXPORT const char* translate_format_str(int format)
{
    const rga_format* f = rga_format_of(format);
    return f ? f->name : "unknown";
}

RGA_EXPORT const char* querystring(int name)
{
    switch (name) {
    case RGA_VENDOR: return "Rockchip Electronics Co.,Ltd. (rknnrt CPU stand-in)\n";
    case RGA_VERSION: return "RGA_api version : " RGA_API_VERSION " (rknnrt CPU stand-in)\nRGA version : RGA_2_Enhance\n";
    case RGA_MAX_INPUT:
    case RGA_MAX_OUTPUT: return "max resolution : 8192x8192\n";
    case RGA_BYTE_STRIDE: return "stride align : 4 bytes\n";
    case RGA_SCALE_LIMIT: return "scale limit : 1/16 ~ 16\n";
    case RGA_INPUT_FORMAT:
    case RGA_OUTPUT_FORMAT: return "format : RGBA_8888 RGBX_8888 BGRA_8888 BGRX_8888 ARGB_8888 ABGR_8888 RGB_888 BGR_888 "
                                   "YUV420(NV12/NV21/I420/YV12) YUV400\n";
    case RGA_FEATURE: return "feature : copy resize crop translate cvtcolor rotate flip fill rectangle\n";
    case RGA_EXPECTED: return "expected performance : CPU (no RGA hardware)\n";
    case RGA_ALL: return "Rockchip Electronics Co.,Ltd. (rknnrt CPU stand-in)\nRGA_api version : " RGA_API_VERSION
                         "\nmax resolution : 8192x8192\nscale limit : 1/16 ~ 16\n";
    default: return "Invalid name\n";
    }
}

RGA_EXPORT IM_STATUS imsync(int release_fence_fd)
{
    (void)release_fence_fd; /* every operation here is synchronous */
    return IM_STATUS_SUCCESS;
}

RGA_EXPORT IM_STATUS imconfig(IM_CONFIG_NAME name, uint64_t value)
{
    (void)value;
    if ((int)name < IM_CONFIG_SCHEDULER_CORE || name > IM_CONFIG_CHECK)
        return rga_fail(IM_STATUS_INVALID_PARAM, "imconfig: unknown name %d", (int)name);
    return IM_STATUS_SUCCESS; /* one CPU "core", no priorities */
}
