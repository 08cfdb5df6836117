/* Pixels of rknnrt's librga stand-in: decode a rectangle to float, colour-space conversion,
 * resampling (bilinear up, area average down: the RGA2 developer guide's "scale-up bi-linear,
 * scale-down average"), rotation/flip, encode. Sample phase and rounding are rknnrt's
 * (pixel centres aligned, round half up): the guide does not document the hardware's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rga_internal.h"

static inline uint8_t to_u8(float v)
{
    v = floorf(v + 0.5f);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static float* alloc_px(int w, int h) { return (float*)malloc(sizeof(float) * 4 * (size_t)w * (size_t)h); }

/* chroma plane bases of a 4:2:0 frame */
static void chroma_planes(const rga_format* f, uint8_t* base, int ws, int hs, uint8_t** cb, uint8_t** cr, int* step,
                          int* cstride)
{
    uint8_t* c = base + (size_t)ws * hs;
    if (f->planar == 1) { /* interleaved */
        *cb = f->cb_first ? c : c + 1;
        *cr = f->cb_first ? c + 1 : c;
        *step = 2;
        *cstride = ws;
    } else {
        uint8_t* second = c + (size_t)(ws / 2) * (hs / 2);
        *cb = f->cb_first ? c : second;
        *cr = f->cb_first ? second : c;
        *step = 1;
        *cstride = ws / 2;
    }
}

IM_STATUS rga_decode(const rga_buffer_t* buf, const rga_format* f, const uint8_t* base, im_rect r, rga_image* out)
{
    out->w = r.width;
    out->h = r.height;
    out->px = alloc_px(r.width, r.height);
    if (!out->px) return rga_fail(IM_STATUS_OUT_OF_MEMORY, "cannot allocate a %dx%d image", r.width, r.height);
    int ws = buf->wstride, hs = buf->hstride;
    for (int y = 0; y < r.height; y++) {
        float* o = out->px + (size_t)y * r.width * 4;
        int sy = r.y + y;
        if (f->space == 0) {
            const uint8_t* row = base + ((size_t)sy * ws + r.x) * f->bytes;
            for (int x = 0; x < r.width; x++, row += f->bytes, o += 4) {
                o[0] = row[f->r];
                o[1] = row[f->g];
                o[2] = row[f->b];
                o[3] = f->a >= 0 ? row[f->a] : 255.0f;
            }
            continue;
        }
        const uint8_t* yrow = base + (size_t)sy * ws + r.x;
        uint8_t *cb = NULL, *cr = NULL;
        int step = 0, cstride = 0;
        if (f->planar) chroma_planes(f, (uint8_t*)base, ws, hs, &cb, &cr, &step, &cstride);
        for (int x = 0; x < r.width; x++, o += 4) {
            o[0] = yrow[x];
            o[3] = 255.0f;
            if (!f->planar) {
                o[1] = o[2] = 128.0f;
                continue;
            }
            size_t at = (size_t)(sy / 2) * cstride + (size_t)((r.x + x) / 2) * step; /* nearest chroma */
            o[1] = cb[at];
            o[2] = cr[at];
        }
    }
    return IM_STATUS_SUCCESS;
}

void rga_encode(const rga_image* img, const rga_buffer_t* buf, const rga_format* f, uint8_t* base, im_rect r)
{
    int ws = buf->wstride, hs = buf->hstride;
    for (int y = 0; y < r.height; y++) {
        const float* p = img->px + (size_t)y * img->w * 4;
        int dy = r.y + y;
        if (f->space == 0) {
            uint8_t* row = base + ((size_t)dy * ws + r.x) * f->bytes;
            for (int x = 0; x < r.width; x++, row += f->bytes, p += 4) {
                row[f->r] = to_u8(p[0]);
                row[f->g] = to_u8(p[1]);
                row[f->b] = to_u8(p[2]);
                if (f->bytes == 4) row[f->a >= 0 ? f->a : 3] = f->a >= 0 ? to_u8(p[3]) : 0xff;
            }
        } else {
            uint8_t* yrow = base + (size_t)dy * ws + r.x;
            for (int x = 0; x < r.width; x++) yrow[x] = to_u8(p[4 * x]);
        }
    }
    if (f->space == 0 || !f->planar) return;
    uint8_t *cb, *cr;
    int step, cstride;
    chroma_planes(f, base, ws, hs, &cb, &cr, &step, &cstride);
    for (int y = 0; y < r.height; y += 2)
        for (int x = 0; x < r.width; x += 2) { /* 4:2:0: the mean of each 2x2 block */
            float u = 0, v = 0;
            int n = 0;
            for (int j = 0; j < 2 && y + j < r.height; j++)
                for (int i = 0; i < 2 && x + i < r.width; i++, n++) {
                    const float* p = img->px + ((size_t)(y + j) * img->w + x + i) * 4;
                    u += p[1];
                    v += p[2];
                }
            size_t at = (size_t)((r.y + y) / 2) * cstride + (size_t)((r.x + x) / 2) * step;
            cb[at] = to_u8(u / n);
            cr[at] = to_u8(v / n);
        }
}

/* Matrices: rows give Y, U, V from R, G, B (plus offsets), or R, G, B from Y-oy, U-128, V-128. */
typedef struct {
    float k[3][3];
    float oy, scale; /* limited range: Y offset 16 and 255/219 luma scale on the way back */
} csc;

static const csc BT601_LIMIT = {{{0.257f, 0.504f, 0.098f}, {-0.148f, -0.291f, 0.439f}, {0.439f, -0.368f, -0.071f}},
                                16, 1};
static const csc BT601_FULL = {{{0.299f, 0.587f, 0.114f}, {-0.168736f, -0.331264f, 0.5f}, {0.5f, -0.418688f, -0.081312f}},
                               0, 1};
static const csc BT709_LIMIT = {{{0.183f, 0.614f, 0.062f}, {-0.101f, -0.339f, 0.439f}, {0.439f, -0.399f, -0.040f}},
                                16, 1};

static const csc* matrix_for(int to_yuv, int mode)
{
    if (to_yuv) {
        int m = mode & IM_RGB_TO_YUV_MASK;
        return m == IM_RGB_TO_YUV_BT601_FULL ? &BT601_FULL : m == IM_RGB_TO_YUV_BT709_LIMIT ? &BT709_LIMIT
                                                                                            : &BT601_LIMIT;
    }
    int m = mode & IM_YUV_TO_RGB_MASK;
    return m == IM_YUV_TO_RGB_BT601_FULL ? &BT601_FULL : m == IM_YUV_TO_RGB_BT709_LIMIT ? &BT709_LIMIT : &BT601_LIMIT;
}

static void invert3(const float a[3][3], float o[3][3])
{
    float det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
                a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int r0 = (j + 1) % 3, r1 = (j + 2) % 3, c0 = (i + 1) % 3, c1 = (i + 2) % 3;
            o[i][j] = (a[r0][c0] * a[r1][c1] - a[r0][c1] * a[r1][c0]) / det;
        }
}

static void apply(float* p, const float k[3][3], const float in_off[3], const float out_off[3])
{
    float a = p[0] - in_off[0], b = p[1] - in_off[1], c = p[2] - in_off[2];
    for (int i = 0; i < 3; i++) p[i] = k[i][0] * a + k[i][1] * b + k[i][2] * c + out_off[i];
}

void rga_convert_space(rga_image* img, int from, int to, int mode)
{
    if (from == to) return;
    const csc* m = matrix_for(to == 1, mode);
    float k[3][3];
    const float zero[3] = {0, 0, 0}, yuv_off[3] = {m->oy, 128, 128};
    if (to == 1) memcpy(k, m->k, sizeof k);
    else invert3(m->k, k);
    size_t n = (size_t)img->w * img->h;
    for (size_t i = 0; i < n; i++) {
        float* p = img->px + 4 * i;
        if (to == 1) apply(p, k, zero, yuv_off);
        else apply(p, k, yuv_off, zero);
    }
}

void rga_color_pixel(uint32_t color, int space, int mode, float px[4])
{
    /* im_color_t: red in the lowest byte, then green, blue, alpha */
    px[0] = (float)(color & 0xff);
    px[1] = (float)((color >> 8) & 0xff);
    px[2] = (float)((color >> 16) & 0xff);
    px[3] = (float)((color >> 24) & 0xff);
    if (space == 1) {
        rga_image one = {1, 1, px};
        rga_convert_space(&one, 0, 1, mode);
    }
}

/* One axis: for each output index the first input index and the weights of its taps. */
typedef struct {
    int first, count;
    float w[40]; /* at most 16x down + 2 */
} taps;

static taps* axis_taps(int in, int out)
{
    taps* t = (taps*)calloc((size_t)out, sizeof(taps));
    if (!t) return NULL;
    double scale = (double)in / out;
    for (int o = 0; o < out; o++) {
        taps* a = &t[o];
        if (out == in) {
            a->first = o;
            a->count = 1;
            a->w[0] = 1;
        } else if (out > in) { /* bilinear, centres aligned, edges clamped */
            double s = (o + 0.5) * scale - 0.5;
            if (s < 0) s = 0;
            if (s > in - 1) s = in - 1;
            int i0 = (int)floor(s);
            double f = s - i0;
            a->first = i0;
            a->count = i0 + 1 < in ? 2 : 1;
            a->w[0] = (float)(1 - f);
            if (a->count == 2) a->w[1] = (float)f;
            else a->w[0] = 1;
        } else { /* area average: the input span [o*scale, (o+1)*scale) */
            double lo = o * scale, hi = (o + 1) * scale;
            int i0 = (int)floor(lo), i1 = (int)ceil(hi) - 1;
            if (i1 > in - 1) i1 = in - 1;
            a->first = i0;
            a->count = i1 - i0 + 1;
            for (int i = i0; i <= i1; i++) {
                double cover = fmin(hi, i + 1.0) - fmax(lo, (double)i);
                a->w[i - i0] = (float)(cover / scale);
            }
        }
    }
    return t;
}

IM_STATUS rga_resize(const rga_image* src, int w, int h, rga_image* out)
{
    out->w = w;
    out->h = h;
    out->px = alloc_px(w, h);
    float* mid = alloc_px(w, src->h);
    taps* tx = axis_taps(src->w, w);
    taps* ty = axis_taps(src->h, h);
    if (!out->px || !mid || !tx || !ty) {
        free(out->px);
        free(mid);
        free(tx);
        free(ty);
        out->px = NULL;
        return rga_fail(IM_STATUS_OUT_OF_MEMORY, "cannot allocate the resize buffers");
    }
    for (int y = 0; y < src->h; y++)
        for (int x = 0; x < w; x++) {
            const taps* a = &tx[x];
            float acc[4] = {0, 0, 0, 0};
            for (int i = 0; i < a->count; i++) {
                const float* p = src->px + ((size_t)y * src->w + a->first + i) * 4;
                for (int c = 0; c < 4; c++) acc[c] += a->w[i] * p[c];
            }
            memcpy(mid + ((size_t)y * w + x) * 4, acc, sizeof acc);
        }
    for (int y = 0; y < h; y++) {
        const taps* a = &ty[y];
        for (int x = 0; x < w; x++) {
            float acc[4] = {0, 0, 0, 0};
            for (int i = 0; i < a->count; i++) {
                const float* p = mid + ((size_t)(a->first + i) * w + x) * 4;
                for (int c = 0; c < 4; c++) acc[c] += a->w[i] * p[c];
            }
            memcpy(out->px + ((size_t)y * w + x) * 4, acc, sizeof acc);
        }
    }
    free(mid);
    free(tx);
    free(ty);
    return IM_STATUS_SUCCESS;
}

/* Rotation (clockwise, as the guide's pictures) then flips, of the whole image. */
IM_STATUS rga_transform(const rga_image* src, int usage, rga_image* out)
{
    int rot = usage & IM_HAL_TRANSFORM_ROT_MASK;
    int turned = rot == IM_HAL_TRANSFORM_ROT_90 || rot == IM_HAL_TRANSFORM_ROT_270;
    int fh = (usage & IM_HAL_TRANSFORM_FLIP_H) || (usage & IM_HAL_TRANSFORM_FLIP_H_V);
    int fv = (usage & IM_HAL_TRANSFORM_FLIP_V) || (usage & IM_HAL_TRANSFORM_FLIP_H_V);
    out->w = turned ? src->h : src->w;
    out->h = turned ? src->w : src->h;
    out->px = alloc_px(out->w, out->h);
    if (!out->px) return rga_fail(IM_STATUS_OUT_OF_MEMORY, "cannot allocate the rotation buffer");
    for (int y = 0; y < out->h; y++)
        for (int x = 0; x < out->w; x++) {
            int ox = fh ? out->w - 1 - x : x, oy = fv ? out->h - 1 - y : y, sx, sy;
            if (rot == IM_HAL_TRANSFORM_ROT_90) { sx = oy; sy = src->h - 1 - ox; }
            else if (rot == IM_HAL_TRANSFORM_ROT_180) { sx = src->w - 1 - ox; sy = src->h - 1 - oy; }
            else if (rot == IM_HAL_TRANSFORM_ROT_270) { sx = src->w - 1 - oy; sy = ox; }
            else { sx = ox; sy = oy; }
            memcpy(out->px + ((size_t)y * out->w + x) * 4, src->px + ((size_t)sy * src->w + sx) * 4,
                   4 * sizeof(float));
        }
    return IM_STATUS_SUCCESS;
}
