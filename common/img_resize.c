/* img_resize: sl_img_resize_rect, Pillow's ImagingResample for 8-bit images
 * with the bilinear (triangle) filter.
 *
 * The arithmetic mirrors Pillow 9 (src/libImaging/Resample.c) step for step,
 * so results are bit-identical to Image.resize(size, BILINEAR, box): the box
 * is rounded to float as Pillow parses it, window bounds and weights are
 * computed in double in the same order, weights become 22-bit fixed point
 * with the same rounding, the horizontal pass runs first over just the rows
 * the vertical pass needs and rounds to 8 bits, then the vertical pass.
 * Only the loop structure differs: channel counts are specialised, and the
 * vertical pass walks rows in 16-byte blocks so the compiler vectorises it.
 *
 * Thread-safe: no static mutable state; scratch memory is the caller's or
 * malloc'd per call. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/imgops.h"

/* Pillow: 8 bits of result, two bits of headroom, the rest for weights. */
#define RS_PRECISION_BITS (32 - 8 - 2)
#define RS_HALF (1 << (RS_PRECISION_BITS - 1))
/* Bytes the vertical pass handles per block: 16 int32 accumulators fit in
 * registers (four SSE or two AVX vectors). */
#define RS_VBLOCK 16
#define RS_MAX_EDGE (1u << 28)

/* One axis of the resample: which input pixels are visible (base, size) and
 * the rectangle inside them, in Pillow's float box coordinates. */
typedef struct rs_axis_s {
    uint32_t base;     /* first visible input pixel (absolute) */
    uint32_t size;     /* visible input pixels */
    uint32_t out;      /* output pixels */
    float in0, in1;    /* rectangle, relative to base */
    double scale;      /* input pixels per output pixel */
    double filterscale;
    double support;
    size_t ksize;      /* coefficient slots per output pixel */
    int32_t *bounds;   /* out pairs (first input pixel, absolute; count) */
    int32_t *kk;       /* out * ksize fixed-point weights */
} rs_axis_t;

static double rs_triangle(double x)
{
    if (x < 0.0) {
        x = -x;
    }
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Validates one axis of the rectangle and fills the geometry. Pillow rejects
 * boxes outside the image after rounding them to float; we do the same, and
 * also reject empty or non-finite ones. */
static int rs_axis_init(rs_axis_t *a, uint32_t in_size, double start, double len, uint32_t out,
                        int clip)
{
    /* Window bounds are int as in Pillow; this cap keeps centre + support
     * far from INT_MAX. No real image edge comes near it. */
    if (in_size > RS_MAX_EDGE || out > RS_MAX_EDGE) {
        return -EINVAL;
    }
    if (!isfinite(start) || !isfinite(len) || start < 0.0 || len <= 0.0 ||
        start + len > (double)in_size + 1.0 || out == 0) {
        return -EINVAL;
    }
    double end = start + len;
    a->base = 0;
    a->size = in_size;
    if (clip) {
        /* The caller's crop: whole pixels covering the rectangle. */
        a->base = (uint32_t)floor(start);
        double lim = ceil(end);
        a->size = (lim > (double)in_size ? in_size : (uint32_t)lim) - a->base;
    }
    a->in0 = (float)(start - a->base);
    a->in1 = (float)(end - a->base);
    if (!(a->in0 >= 0.0f) || !(a->in1 <= (float)a->size) || !(a->in1 > a->in0) || a->size == 0) {
        return -EINVAL;
    }
    a->out = out;
    /* Pillow subtracts in float, then divides in double. */
    float span = a->in1 - a->in0;
    a->scale = (double)span / out;
    a->filterscale = a->scale < 1.0 ? 1.0 : a->scale;
    a->support = 1.0 * a->filterscale;
    a->ksize = (size_t)ceil(a->support) * 2 + 1;
    a->bounds = NULL;
    a->kk = NULL;
    return 0;
}

/* Pillow's need_horizontal / need_vertical: an axis whose output equals its
 * input exactly has identity weights, so its pass can be skipped. */
static int rs_axis_identity(const rs_axis_t *a)
{
    return a->out == a->size && a->in0 == 0.0f && a->in1 == (float)a->out;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc. Weights are computed
 * twice (once for the sum, once to store) instead of keeping a double array:
 * the same expression gives the same double both times. */
static void rs_axis_coeffs(const rs_axis_t *a)
{
    const double ss = 1.0 / a->filterscale;
    for (uint32_t xx = 0; xx < a->out; xx++) {
        double center = a->in0 + (xx + 0.5) * a->scale;
        int xmin = (int)(center - a->support + 0.5);
        if (xmin < 0) {
            xmin = 0;
        }
        int xmax = (int)(center + a->support + 0.5);
        if (xmax > (int)a->size) {
            xmax = (int)a->size;
        }
        xmax -= xmin;
        double ww = 0.0;
        for (int x = 0; x < xmax; x++) {
            ww += rs_triangle((x + xmin - center + 0.5) * ss);
        }
        int32_t *k = a->kk + (size_t)xx * a->ksize;
        for (int x = 0; x < xmax; x++) {
            double w = rs_triangle((x + xmin - center + 0.5) * ss);
            if (ww != 0.0) {
                w /= ww;
            }
            /* Triangle weights are never negative: Pillow's positive branch. */
            k[x] = (int32_t)(0.5 + w * (1 << RS_PRECISION_BITS));
        }
        for (size_t x = (size_t)xmax; x < a->ksize; x++) {
            k[x] = 0;
        }
        a->bounds[2 * (size_t)xx] = (int32_t)a->base + xmin;
        a->bounds[2 * (size_t)xx + 1] = xmax;
    }
}

/* GCC/Clang vector extensions: portable SIMD without intrinsics. Lane
 * arithmetic is the same integer arithmetic as the scalar code. */
typedef int32_t rs_v4i __attribute__((vector_size(16)));
typedef uint8_t rs_v4b __attribute__((vector_size(4)));
typedef int32_t rs_v16i __attribute__((vector_size(64)));
typedef uint8_t rs_v16b __attribute__((vector_size(16)));

/* Pillow's clip8 for a sum of non-negative products (triangle weights are
 * never negative, so only the top needs clamping). */
static inline uint8_t rs_clip8(int32_t v)
{
    v >>= RS_PRECISION_BITS;
    return (uint8_t)(v > 255 ? 255 : v);
}

/* One horizontal row, output pixels [from, out), any channel count. */
static void rs_hrow_scalar(const uint8_t *restrict s, uint8_t *restrict d, const rs_axis_t *ax,
                           uint32_t c, uint32_t from)
{
    for (uint32_t xx = from; xx < ax->out; xx++) {
        const uint8_t *restrict p = s + (size_t)ax->bounds[2 * (size_t)xx] * c;
        const int32_t n = ax->bounds[2 * (size_t)xx + 1];
        const int32_t *restrict k = ax->kk + (size_t)xx * ax->ksize;
        for (uint32_t ch = 0; ch < c; ch++) {
            int32_t acc = RS_HALF;
            for (int32_t t = 0; t < n; t++) {
                acc += p[(size_t)t * c + ch] * k[t];
            }
            d[(size_t)xx * c + ch] = rs_clip8(acc);
        }
    }
}

/* One horizontal row, output pixels [0, nx), for 3 or 4 channels: each tap
 * is one 4-lane multiply-add over a whole pixel. With 3 channels the 4th
 * lane reads the next pixel's first byte and is discarded; the caller keeps
 * that read inside the buffer. */
static inline __attribute__((always_inline)) void
rs_hrow_px4(const uint8_t *restrict s, uint8_t *restrict d, const rs_axis_t *ax, uint32_t nx,
            const uint32_t C)
{
    for (uint32_t xx = 0; xx < nx; xx++) {
        const uint8_t *restrict p = s + (size_t)ax->bounds[2 * (size_t)xx] * C;
        const int32_t n = ax->bounds[2 * (size_t)xx + 1];
        const int32_t *restrict k = ax->kk + (size_t)xx * ax->ksize;
        rs_v4i acc = {RS_HALF, RS_HALF, RS_HALF, RS_HALF};
        for (int32_t t = 0; t < n; t++) {
            rs_v4b b;
            memcpy(&b, p + (size_t)t * C, sizeof(b));
            acc += __builtin_convertvector(b, rs_v4i) * k[t];
        }
        acc >>= RS_PRECISION_BITS;
        for (uint32_t ch = 0; ch < C; ch++) {
            d[(size_t)xx * C + ch] = (uint8_t)(acc[ch] > 255 ? 255 : acc[ch]);
        }
    }
}

/* Horizontal pass over rows [0, rows) of src (row stride src_stride bytes)
 * into dst, rows x out_w x c packed. src_avail is how many bytes the input
 * buffer holds from src on: the 3-channel kernel reads one byte past a
 * pixel, so on the row that ends the buffer the pixels touching its last
 * byte take the scalar path. */
static void rs_hpass(const uint8_t *src, size_t src_stride, size_t rows, uint8_t *dst,
                     const rs_axis_t *ax, uint32_t c, size_t src_avail)
{
    const size_t out_row = (size_t)ax->out * c;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *s = src + r * src_stride;
        uint8_t *d = dst + r * out_row;
        uint32_t nx = 0;
        if (c >= 3) {
            nx = ax->out;
            /* Windows only move right, so the unsafe pixels are a suffix. */
            const size_t avail = src_avail - r * src_stride;
            while (nx > 0 && ((size_t)ax->bounds[2 * (size_t)nx - 2] +
                              (size_t)ax->bounds[2 * (size_t)nx - 1]) * c + (4 - c) > avail) {
                nx--;
            }
        }
        if (c == 3) {
            rs_hrow_px4(s, d, ax, nx, 3);
        } else if (c == 4) {
            rs_hrow_px4(s, d, ax, nx, 4);
        }
        rs_hrow_scalar(s, d, ax, c, nx);
    }
}

/* Vertical pass: each output row is a weighted sum of whole input rows, so
 * it is the same multiply-add over row_bytes independent bytes regardless of
 * channel count, done 16 bytes at a time. src rows are src_stride apart;
 * bounds index them relative to src. */
static void rs_vpass(const uint8_t *restrict src, size_t src_stride, size_t row_bytes,
                     uint8_t *restrict dst, const rs_axis_t *ay, const int32_t *restrict bounds)
{
    const int32_t *restrict kk = ay->kk;
    const rs_v16i half = {RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF,
                          RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF, RS_HALF,
                          RS_HALF, RS_HALF, RS_HALF, RS_HALF};
    for (uint32_t yy = 0; yy < ay->out; yy++) {
        const uint8_t *restrict s = src + (size_t)bounds[2 * (size_t)yy] * src_stride;
        const int32_t n = bounds[2 * (size_t)yy + 1];
        const int32_t *restrict k = kk + (size_t)yy * ay->ksize;
        uint8_t *restrict d = dst + (size_t)yy * row_bytes;
        size_t i = 0;
        for (; i + RS_VBLOCK <= row_bytes; i += RS_VBLOCK) {
            rs_v16i acc = half;
            for (int32_t t = 0; t < n; t++) {
                rs_v16b b;
                memcpy(&b, s + (size_t)t * src_stride + i, sizeof(b));
                acc += __builtin_convertvector(b, rs_v16i) * k[t];
            }
            acc >>= RS_PRECISION_BITS;
            /* Clamp to 255 without a vector ?: (C has none): lanes > 255
             * compare to -1, which selects 255. */
            rs_v16i over = acc > 255;
            acc = (acc & ~over) | (over & 255);
            rs_v16b o = __builtin_convertvector(acc, rs_v16b);
            memcpy(d + i, &o, sizeof(o));
        }
        for (; i < row_bytes; i++) {
            int32_t acc = RS_HALF;
            for (int32_t t = 0; t < n; t++) {
                acc += s[(size_t)t * src_stride + i] * k[t];
            }
            d[i] = rs_clip8(acc);
        }
    }
}

/* a += b * c on sizes, failing on overflow or beyond the per-tensor cap (no
 * single resample may make us allocate more than a tensor may hold). */
static int rs_add_mul(size_t *a, size_t b, size_t c)
{
    size_t m;
    if (__builtin_mul_overflow(b, c, &m) || __builtin_add_overflow(*a, m, a) ||
        *a > SL_TENSOR_MAX_BYTES) {
        return -EOVERFLOW;
    }
    return 0;
}

int sl_img_resize_rect_ex(const sl_tensor_t *in, double x, double y, double w, double h,
                          uint32_t out_h, uint32_t out_w, uint32_t flags, sl_tensor_t *scratch,
                          sl_tensor_t *out)
{
    if (in == NULL || out == NULL || in == out || scratch == in || scratch == out ||
        in->dtype != SL_DT_U8 || in->layout != SL_LAYOUT_HWC || in->c < 1 || in->c > 4 ||
        in->h == 0 || in->w == 0 || in->data == NULL ||
        in->nbytes != (size_t)in->h * in->w * in->c || (flags & ~SL_RESIZE_CLIP) != 0) {
        return -EINVAL;
    }
    const int clip = (flags & SL_RESIZE_CLIP) != 0;
    const uint32_t c = in->c;
    rs_axis_t ax, ay;
    int rc = rs_axis_init(&ax, in->w, x, w, out_w, clip);
    if (rc == 0) {
        rc = rs_axis_init(&ay, in->h, y, h, out_h, clip);
    }
    if (rc < 0) {
        return rc;
    }
    const int need_h = !rs_axis_identity(&ax);
    const int need_v = !rs_axis_identity(&ay);
    const size_t in_stride = (size_t)in->w * c;
    const size_t out_row = (size_t)out_w * c;

    /* Scratch layout: vertical bounds and weights, horizontal bounds and
     * weights, then the intermediate image (at most every visible row). */
    size_t need = 0;
    rc = rs_add_mul(&need, 2 * sizeof(int32_t), out_h);
    rc = rc ? rc : rs_add_mul(&need, ay.ksize * sizeof(int32_t), out_h);
    rc = rc ? rc : rs_add_mul(&need, 2 * sizeof(int32_t), out_w);
    rc = rc ? rc : rs_add_mul(&need, ax.ksize * sizeof(int32_t), out_w);
    rc = rc ? rc : rs_add_mul(&need, out_row, need_h && need_v ? ay.size : 0);
    if (rc < 0) {
        return rc;
    }
    rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, out_h, out_w, c);
    if (rc < 0) {
        return rc;
    }

    uint8_t *mem;
    uint8_t *owned = NULL;
    if (scratch != NULL) {
        rc = sl_tensor_reserve(scratch, need);
        if (rc < 0) {
            return rc;
        }
        mem = scratch->data;
    } else {
        owned = malloc(need);
        if (owned == NULL) {
            return -ENOMEM;
        }
        mem = owned;
    }
    /* Every piece is a multiple of 4 bytes up to the intermediate image, so
     * the int32 arrays stay aligned. */
    ay.bounds = (int32_t *)(void *)mem;
    ay.kk = ay.bounds + 2 * (size_t)out_h;
    ax.bounds = ay.kk + ay.ksize * out_h;
    ax.kk = ax.bounds + 2 * (size_t)out_w;
    uint8_t *tmp = (uint8_t *)(ax.kk + ax.ksize * out_w);

    rs_axis_coeffs(&ay);
    const uint8_t *src = in->data + (size_t)ax.base * c;
    if (need_h) {
        rs_axis_coeffs(&ax);
        /* Only rows some vertical window touches are resampled horizontally,
         * as Pillow does (ybox_first .. ybox_last). */
        const size_t first = (size_t)ay.bounds[0];
        const size_t last = (size_t)ay.bounds[2 * (size_t)out_h - 2] +
                            (size_t)ay.bounds[2 * (size_t)out_h - 1];
        const uint8_t *rows = in->data + first * in_stride;
        const size_t avail = in->nbytes - first * in_stride;
        if (need_v) {
            rs_hpass(rows, in_stride, last - first, tmp, &ax, c, avail);
            for (uint32_t yy = 0; yy < out_h; yy++) {
                ay.bounds[2 * (size_t)yy] -= (int32_t)first;
            }
            rs_vpass(tmp, out_row, out_row, out->data, &ay, ay.bounds);
        } else {
            /* Identity vertically: the rows are exactly the output rows. */
            rs_hpass(rows, in_stride, out_h, out->data, &ax, c, avail);
        }
    } else if (need_v) {
        rs_vpass(src, in_stride, out_row, out->data, &ay, ay.bounds);
    } else {
        for (uint32_t yy = 0; yy < out_h; yy++) {
            memcpy(out->data + (size_t)yy * out_row,
                   src + ((size_t)ay.base + yy) * in_stride, out_row);
        }
    }
    free(owned);
    return 0;
}

int sl_img_resize_rect(const sl_tensor_t *in, double x, double y, double w, double h,
                       uint32_t out_h, uint32_t out_w, sl_tensor_t *out)
{
    return sl_img_resize_rect_ex(in, x, y, w, h, out_h, out_w, 0, NULL, out);
}
