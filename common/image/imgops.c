/* imgops: crop, flip, normalize, layout and the crop geometry of
 * torchvision's transforms. Resampling lives in img_resize.c.
 *
 * Pure functions over caller-owned tensors; no static mutable state, so any
 * thread may call them on its own tensors. */
#include "common/image/imgops.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/image/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define NORM_AVX2 1
#else
#define NORM_AVX2 0
#endif

/* Validates a pixel tensor: U8 or F32, a known layout, no empty dimension,
 * and nbytes consistent with the shape (a mismatch means a stage wrote a
 * shape without the data, and indexing by shape would read out of bounds). */
static int img_check(const sl_tensor_t *t)
{
    if (t == NULL || (t->dtype != SL_DT_U8 && t->dtype != SL_DT_F32) ||
        (t->layout != SL_LAYOUT_HWC && t->layout != SL_LAYOUT_CHW) || t->h == 0 || t->w == 0 ||
        t->c == 0 || t->data == NULL) {
        return -EINVAL;
    }
    size_t px, n;
    if (__builtin_mul_overflow((size_t)t->h, (size_t)t->w, &px) ||
        __builtin_mul_overflow(px, (size_t)t->c * sl_dtype_size(t->dtype), &n) || n != t->nbytes) {
        return -EINVAL;
    }
    return 0;
}

int sl_img_crop(const sl_tensor_t *in, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                sl_tensor_t *out)
{
    if (img_check(in) < 0 || out == NULL || out == in || in->layout != SL_LAYOUT_HWC || w == 0 ||
        h == 0 || (uint64_t)x + w > in->w || (uint64_t)y + h > in->h) {
        return -EINVAL;
    }
    int rc = sl_tensor_reshape(out, in->dtype, SL_LAYOUT_HWC, h, w, in->c);
    if (rc < 0) {
        return rc;
    }
    const size_t px = (size_t)in->c * sl_dtype_size(in->dtype);
    const size_t in_row = (size_t)in->w * px;
    const size_t out_row = (size_t)w * px;
    const uint8_t *src = in->data + (size_t)y * in_row + (size_t)x * px;
    for (uint32_t r = 0; r < h; r++) {
        memcpy(out->data + (size_t)r * out_row, src + (size_t)r * in_row, out_row);
    }
    return 0;
}

/* Reverses n items of PS bytes each. PS is a constant at every call site
 * that matters, so the swaps compile to register moves. */
static inline __attribute__((always_inline)) void flip_items(uint8_t *p, size_t n, const size_t PS)
{
    uint8_t *a = p;
    uint8_t *b = p + (n - 1) * PS;
    uint8_t tmp[16];
    for (; a < b; a += PS, b -= PS) {
        memcpy(tmp, a, PS);
        memcpy(a, b, PS);
        memcpy(b, tmp, PS);
    }
}

/* Any item size: swaps byte by byte (wide channel counts are rare). */
static void flip_items_any(uint8_t *p, size_t n, size_t ps)
{
    uint8_t *a = p;
    uint8_t *b = p + (n - 1) * ps;
    for (; a < b; a += ps, b -= ps) {
        for (size_t i = 0; i < ps; i++) {
            uint8_t t = a[i];
            a[i] = b[i];
            b[i] = t;
        }
    }
}

int sl_img_flip_h(sl_tensor_t *t)
{
    if (img_check(t) < 0) {
        return -EINVAL;
    }
    const size_t es = sl_dtype_size(t->dtype);
    /* HWC: a row is w pixels of c elements; CHW: c*h rows of w elements. */
    const size_t item = t->layout == SL_LAYOUT_HWC ? (size_t)t->c * es : es;
    const size_t rows = t->layout == SL_LAYOUT_HWC ? t->h : (size_t)t->c * t->h;
    const size_t row_bytes = (size_t)t->w * item;
    for (size_t r = 0; r < rows; r++) {
        uint8_t *p = t->data + r * row_bytes;
        switch (item) {
        case 1:
            flip_items(p, t->w, 1);
            break;
        case 3:
            flip_items(p, t->w, 3);
            break;
        case 4:
            flip_items(p, t->w, 4);
            break;
        case 12:
            flip_items(p, t->w, 12);
            break;
        default:
            flip_items_any(p, t->w, item);
            break;
        }
    }
    return 0;
}

int sl_img_flip_v(sl_tensor_t *t)
{
    if (img_check(t) < 0) {
        return -EINVAL;
    }
    /* A plane is h rows: one for HWC, c for CHW. Rows swap whole. */
    const size_t es = sl_dtype_size(t->dtype);
    const size_t row_bytes = (t->layout == SL_LAYOUT_HWC ? (size_t)t->w * t->c : (size_t)t->w) * es;
    const size_t planes = t->layout == SL_LAYOUT_HWC ? 1 : t->c;
    uint8_t tmp[256];
    for (size_t pl = 0; pl < planes; pl++) {
        uint8_t *base = t->data + pl * t->h * row_bytes;
        for (size_t a = 0, b = t->h - 1; a < b; a++, b--) {
            uint8_t *ra = base + a * row_bytes, *rb = base + b * row_bytes;
            for (size_t off = 0; off < row_bytes; off += sizeof(tmp)) {
                size_t n = row_bytes - off < sizeof(tmp) ? row_bytes - off : sizeof(tmp);
                memcpy(tmp, ra + off, n);
                memcpy(ra + off, rb + off, n);
                memcpy(rb + off, tmp, n);
            }
        }
    }
    return 0;
}

/* The checks both normalize entry points share. */
static int norm_check(const sl_tensor_t *in, const float mean[3], const float std[3],
                      const sl_tensor_t *out)
{
    if (img_check(in) < 0 || out == NULL || mean == NULL || std == NULL ||
        (in->c != 1 && in->c != 3)) {
        return -EINVAL;
    }
    for (uint32_t ch = 0; ch < in->c; ch++) {
        /* torchvision's Normalize refuses a zero std; we also refuse values
         * that would turn every pixel into NaN. */
        if (!isfinite(mean[ch]) || !isfinite(std[ch]) || std[ch] == 0.0f) {
            return -EINVAL;
        }
    }
    return 0;
}

/* U8 has 256 values per channel, so ToTensor (x / 255 in float32) followed
 * by Normalize ((x - mean) / std in float32) is a table: bit-identical to
 * torchvision, one load per element and no division in the pixel loop
 * (two IEEE divisions per element cost more than the scalar lookup, even
 * vectorised: measured in docs/benchmarks.md). */
static void norm_lut(const float mean[3], const float std[3], uint32_t c, float lut[3][256])
{
    for (uint32_t ch = 0; ch < c; ch++) {
        for (int v = 0; v < 256; v++) {
            float x = (float)v / 255.0f;
            lut[ch][v] = (x - mean[ch]) / std[ch];
        }
    }
}

int sl_img_normalize(const sl_tensor_t *in, const float mean[3], const float std[3],
                     sl_tensor_t *out)
{
    if (norm_check(in, mean, std, out) < 0) {
        return -EINVAL;
    }
    /* In place only where input and output have the same element size. */
    if (out == in && in->dtype != SL_DT_F32) {
        return -EINVAL;
    }
    const uint32_t c = in->c;
    const sl_dtype_e in_dt = in->dtype;
    const sl_layout_e layout = in->layout;
    const uint8_t *in_data = in->data;
    int rc = sl_tensor_reshape(out, SL_DT_F32, layout, in->h, in->w, c);
    if (rc < 0) {
        return rc;
    }
    const size_t plane = (size_t)out->h * out->w;
    float *restrict o = (float *)(void *)out->data;

    if (in_dt == SL_DT_F32) {
        /* Same float32 ops as Normalize: subtract, then divide. Element-wise,
         * so in place is safe (hence no restrict on the input). */
        const float *s = (const float *)(const void *)in_data;
        float *d = (float *)(void *)out->data;
        if (layout == SL_LAYOUT_CHW || c == 1) {
            for (uint32_t ch = 0; ch < c; ch++) {
                const float m = mean[ch], sd = std[ch];
                for (size_t i = ch * plane; i < (ch + 1) * plane; i++) {
                    d[i] = (s[i] - m) / sd;
                }
            }
        } else {
            for (size_t i = 0; i < plane; i++) {
                for (uint32_t ch = 0; ch < 3; ch++) {
                    d[3 * i + ch] = (s[3 * i + ch] - mean[ch]) / std[ch];
                }
            }
        }
        return 0;
    }

    float lut[3][256];
    norm_lut(mean, std, c, lut);
    const uint8_t *restrict s = in_data;
    if (layout == SL_LAYOUT_CHW || c == 1) {
        for (uint32_t ch = 0; ch < c; ch++) {
            const float *l = lut[ch];
            for (size_t i = ch * plane; i < (ch + 1) * plane; i++) {
                o[i] = l[s[i]];
            }
        }
    } else {
        for (size_t i = 0; i < plane; i++) {
            o[3 * i + 0] = lut[0][s[3 * i + 0]];
            o[3 * i + 1] = lut[1][s[3 * i + 1]];
            o[3 * i + 2] = lut[2][s[3 * i + 2]];
        }
    }
    return 0;
}

#if NORM_AVX2
/* The table lookup of sl_img_normalize_chw, 8 pixels a step: vpshufb picks
 * each channel's 8 bytes out of 24 interleaved ones, vgatherdps loads their
 * table entries (the same floats, so the same bytes as the scalar loop).
 * Gathers from a 1 KB table measured ~1.6x the scalar loop here
 * (docs/benchmarks.md, issue #19); the last plane % 8 pixels take the
 * scalar loop. */
static __attribute__((target("avx2"))) void norm_chw_avx2(const uint8_t *restrict s,
                                                          float *restrict d0, size_t plane,
                                                          const float lut[3][256])
{
    /* Channel c of pixel k is byte 3k + c: from the first 16 bytes (lo)
     * while 3k + c < 16, else from bytes 8..23 (hi, index 3k + c - 8). */
    const __m128i lo_mask[3] = {
        _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
    };
    const __m128i hi_mask[3] = {
        _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(-1, -1, -1, -1, -1, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1),
        _mm_setr_epi8(-1, -1, -1, -1, -1, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1),
    };
    float *restrict d[3] = {d0, d0 + plane, d0 + 2 * plane};
    size_t i = 0;
    for (; i + 8 <= plane; i += 8) { /* reads bytes 3i .. 3i + 23 */
        const __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(s + 3 * i));
        const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(s + 3 * i + 8));
        for (int c = 0; c < 3; c++) {
            __m128i b = _mm_or_si128(_mm_shuffle_epi8(lo, lo_mask[c]),
                                     _mm_shuffle_epi8(hi, hi_mask[c]));
            __m256i idx = _mm256_cvtepu8_epi32(b);
            _mm256_storeu_ps(d[c] + i, _mm256_i32gather_ps(lut[c], idx, 4));
        }
    }
    for (; i < plane; i++) {
        d[0][i] = lut[0][s[3 * i + 0]];
        d[1][i] = lut[1][s[3 * i + 1]];
        d[2][i] = lut[2][s[3 * i + 2]];
    }
}
#endif

int sl_img_normalize_chw(const sl_tensor_t *in, const float mean[3], const float std[3],
                         sl_tensor_t *out)
{
    return sl_img_normalize_chw_path(in, mean, std, out, SL_SIMD_AUTO);
}

int sl_img_normalize_chw_path(const sl_tensor_t *in, const float mean[3], const float std[3],
                              sl_tensor_t *out, sl_simd_e path)
{
    if (!sl_simd_ok(path)) {
        return -ENOTSUP;
    }
    if (norm_check(in, mean, std, out) < 0 || out == in) {
        return -EINVAL;
    }
    if (in->layout == SL_LAYOUT_CHW || in->c == 1) {
        /* Already planar (one channel: both layouts are the same bytes). */
        int rc = sl_img_normalize(in, mean, std, out);
        if (rc == 0) {
            out->layout = SL_LAYOUT_CHW;
        }
        return rc;
    }
    const sl_dtype_e in_dt = in->dtype;
    int rc = sl_tensor_reshape(out, SL_DT_F32, SL_LAYOUT_CHW, in->h, in->w, 3);
    if (rc < 0) {
        return rc;
    }
    const size_t plane = (size_t)in->h * in->w;
    float *restrict d0 = (float *)(void *)out->data;
    float *restrict d1 = d0 + plane;
    float *restrict d2 = d1 + plane;
    if (in_dt == SL_DT_F32) {
        /* Only a peer's tensor gets here (normalize is the one op that makes
         * floats); the formula of sl_img_normalize, written planar. */
        const float *restrict s = (const float *)(const void *)in->data;
        for (size_t i = 0; i < plane; i++) {
            d0[i] = (s[3 * i + 0] - mean[0]) / std[0];
            d1[i] = (s[3 * i + 1] - mean[1]) / std[1];
            d2[i] = (s[3 * i + 2] - mean[2]) / std[2];
        }
        return 0;
    }
    float lut[3][256];
    norm_lut(mean, std, 3, lut);
    const uint8_t *restrict s = in->data;
#if NORM_AVX2
    if (path == SL_SIMD_AVX2 || (path == SL_SIMD_AUTO && sl_simd_ok(SL_SIMD_AVX2))) {
        norm_chw_avx2(s, d0, plane, (const float(*)[256])lut);
        return 0;
    }
#endif
    for (size_t i = 0; i < plane; i++) {
        d0[i] = lut[0][s[3 * i + 0]];
        d1[i] = lut[1][s[3 * i + 1]];
        d2[i] = lut[2][s[3 * i + 2]];
    }
    return 0;
}

/* HWC -> CHW for items of ES bytes; ES constant at each call site. */
static inline __attribute__((always_inline)) void
to_chw_items(const uint8_t *restrict s, uint8_t *restrict d, size_t plane, uint32_t c,
             const size_t ES)
{
    if (c == 3) {
        uint8_t *restrict d0 = d;
        uint8_t *restrict d1 = d + plane * ES;
        uint8_t *restrict d2 = d + 2 * plane * ES;
        for (size_t i = 0; i < plane; i++) {
            memcpy(d0 + i * ES, s + (3 * i + 0) * ES, ES);
            memcpy(d1 + i * ES, s + (3 * i + 1) * ES, ES);
            memcpy(d2 + i * ES, s + (3 * i + 2) * ES, ES);
        }
        return;
    }
    for (uint32_t ch = 0; ch < c; ch++) {
        uint8_t *restrict dc = d + ch * plane * ES;
        for (size_t i = 0; i < plane; i++) {
            memcpy(dc + i * ES, s + ((size_t)c * i + ch) * ES, ES);
        }
    }
}

int sl_img_to_chw(const sl_tensor_t *in, sl_tensor_t *out)
{
    if (img_check(in) < 0 || out == NULL || out == in) {
        return -EINVAL;
    }
    int rc = sl_tensor_reshape(out, in->dtype, SL_LAYOUT_CHW, in->h, in->w, in->c);
    if (rc < 0) {
        return rc;
    }
    if (in->layout == SL_LAYOUT_CHW || in->c == 1) {
        /* One channel: both layouts are the same bytes. */
        memcpy(out->data, in->data, in->nbytes);
        return 0;
    }
    const size_t plane = (size_t)in->h * in->w;
    if (in->dtype == SL_DT_U8) {
        to_chw_items(in->data, out->data, plane, in->c, 1);
    } else {
        to_chw_items(in->data, out->data, plane, in->c, 4);
    }
    return 0;
}

/* Python's int(round(v)) for a value already known to be in range: round
 * half to even, which rint gives in the default rounding mode. */
static uint32_t py_round_u32(double v) { return (uint32_t)rint(v); }

/* py_round_u32 for values that might not be sane (a degenerate ratio can
 * make them 0, NaN or huge): clamps to [1, hi] so the crop stays inside the
 * image and non-empty. */
static uint32_t py_round_clamp(double v, uint32_t hi)
{
    double r = rint(v);
    if (!(r >= 1.0)) {
        return 1;
    }
    return r > (double)hi ? hi : (uint32_t)r;
}

void sl_rrc_params(uint32_t img_h, uint32_t img_w, const double scale[2], const double ratio[2],
                   sl_rng_t *r, uint32_t *ret_x, uint32_t *ret_y, uint32_t *ret_w,
                   uint32_t *ret_h)
{
    if (img_h == 0 || img_w == 0) {
        /* torchvision would divide by zero; an empty image has no crop. */
        *ret_x = *ret_y = *ret_w = *ret_h = 0;
        return;
    }
    const double H = img_h, W = img_w;
    const double area = H * W;
    const double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        /* torch's uniform_(a, b) is u * (b - a) + a. */
        double target_area = area * (sl_rng_uniform(r) * (scale[1] - scale[0]) + scale[0]);
        double aspect = exp(sl_rng_uniform(r) * (lr1 - lr0) + lr0);
        double w = rint(sqrt(target_area * aspect));
        double h = rint(sqrt(target_area / aspect));
        /* Compared as doubles so NaN or huge values are rejected before any
         * conversion. */
        if (w > 0.0 && w <= W && h > 0.0 && h <= H) {
            uint32_t iw = (uint32_t)w, ih = (uint32_t)h;
            *ret_y = (uint32_t)sl_rng_below(r, (uint64_t)img_h - ih + 1);
            *ret_x = (uint32_t)sl_rng_below(r, (uint64_t)img_w - iw + 1);
            *ret_w = iw;
            *ret_h = ih;
            return;
        }
    }
    /* Fallback to a central crop of the nearest allowed aspect ratio. */
    const double rmin = ratio[0] < ratio[1] ? ratio[0] : ratio[1];
    const double rmax = ratio[0] < ratio[1] ? ratio[1] : ratio[0];
    const double in_ratio = W / H;
    uint32_t w = img_w, h = img_h;
    if (in_ratio < rmin) {
        h = py_round_clamp(W / rmin, img_h);
    } else if (in_ratio > rmax) {
        w = py_round_clamp(H * rmax, img_w);
    }
    *ret_w = w;
    *ret_h = h;
    *ret_x = (img_w - w) / 2;
    *ret_y = (img_h - h) / 2;
}

void sl_center_crop_params(uint32_t img_h, uint32_t img_w, uint32_t crop_h, uint32_t crop_w,
                           uint32_t *ret_x, uint32_t *ret_y)
{
    /* A crop larger than the image has no inside position; 0 keeps the
     * result usable by callers that pad. */
    *ret_y = crop_h >= img_h ? 0 : py_round_u32((double)(img_h - crop_h) / 2.0);
    *ret_x = crop_w >= img_w ? 0 : py_round_u32((double)(img_w - crop_w) / 2.0);
}

void sl_resize_shorter_dims(uint32_t img_h, uint32_t img_w, uint32_t size, uint32_t *ret_h,
                            uint32_t *ret_w)
{
    if (img_h == 0 || img_w == 0) {
        *ret_h = *ret_w = 0;
        return;
    }
    const uint32_t shrt = img_w <= img_h ? img_w : img_h;
    const uint32_t lng = img_w <= img_h ? img_h : img_w;
    /* Python: int(size * long / short), an exact product and a correctly
     * rounded division. The product is exact in a double below 2^53, far
     * beyond any real image, so this is the same number. */
    double v = (double)((uint64_t)size * lng) / (double)shrt;
    uint32_t new_long = v >= 4294967295.0 ? UINT32_MAX : (uint32_t)v;
    if (img_w <= img_h) {
        *ret_w = size;
        *ret_h = new_long;
    } else {
        *ret_h = size;
        *ret_w = new_long;
    }
}
