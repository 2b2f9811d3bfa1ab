/* img_resize: sl_img_resize_rect, Pillow's ImagingResample for 8-bit images
 * with the bilinear (triangle) filter.
 *
 * The arithmetic mirrors Pillow 9 (src/libImaging/Resample.c) step for step,
 * so results are bit-identical to Image.resize(size, BILINEAR, box): the box
 * is rounded to float as Pillow parses it, window bounds and weights are
 * computed in double in the same order, weights become 22-bit fixed point
 * with the same rounding, the horizontal pass runs first over just the rows
 * the vertical pass needs and rounds to 8 bits, then the vertical pass.
 *
 * Only the loop structure differs. On x86-64 both passes use pmaddwd, which
 * multiplies 16-bit values and adds adjacent pairs: two taps per
 * instruction. A 22-bit weight does not fit in 16 bits, so each is split as
 * k = kh * 2^11 + kl and the two partial sums are recombined as
 * (sum_h << 11) + sum_l: the same integer, hence the same result. Every
 * path is integer arithmetic that cannot overflow, so the order of terms
 * does not matter and scalar, SSE2 and AVX2 give the same bytes
 * (tests/unit/test_simd_paths.c compares them on random images). The path
 * is chosen per call at run time: AVX2 where the CPU has it
 * (__builtin_cpu_supports; the vertical pass 32 bytes a step, ~10% off the
 * resample; the horizontal pass stays SSE2, see rs_hpass), else SSE2 (part
 * of the x86-64 ABI); elsewhere, or with -DSL_RESIZE_SCALAR, plain C loops.
 *
 * Thread-safe: no static mutable state; scratch memory is the caller's or
 * malloc'd per call. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/image/imgops.h"
#include "common/image/simd.h"

#if defined(__x86_64__) && defined(__SSE2__) && !defined(SL_RESIZE_SCALAR)
#include <immintrin.h>
#define RS_SSE2 1
#else
#define RS_SSE2 0
#endif

/* Pillow: 8 bits of result, two bits of headroom, the rest for weights. */
#define RS_PRECISION_BITS (32 - 8 - 2)
#define RS_HALF (1 << (RS_PRECISION_BITS - 1))
/* Weight split for pmaddwd: both halves of a weight <= 2^22 fit in int16. */
#define RS_SPLIT_BITS 11
/* The low partial sum grows by up to 255 * (2^11 - 1) per tap; below this
 * many taps it cannot overflow int32 (a downscale of ~2000x would be needed
 * to exceed it; such windows take the scalar path). */
#define RS_SIMD_MAX_TAPS 4096
/* Window bounds are int as in Pillow; this cap keeps centre + support far
 * from INT_MAX. No real image edge comes near it. */
#define RS_MAX_EDGE (1u << 28)

/* One axis of the resample: which input pixels are visible (base, size) and
 * the rectangle inside them, in Pillow's float box coordinates. */
typedef struct rs_axis_s {
    uint32_t base;  /* first visible input pixel (absolute) */
    uint32_t size;  /* visible input pixels */
    uint32_t out;   /* output pixels */
    float in0, in1; /* rectangle, relative to base */
    double scale;   /* input pixels per output pixel */
    int cubic;      /* Pillow's BICUBIC filter (support 2) instead of BILINEAR */
    double filterscale;
    double support;
    size_t ksize;    /* coefficient slots per output pixel */
    size_t npair;    /* (ksize + 1) / 2: tap pairs per output pixel */
    size_t pmax;     /* most tap pairs any output pixel uses */
    int32_t *bounds; /* out pairs (first input pixel, absolute; count) */
    int32_t *kk;     /* out * ksize fixed-point weights */
#if RS_SSE2
    __m128i *kv; /* out * npair * 2: per tap pair, kh and kl pairs in 4 lanes */
#endif
} rs_axis_t;

static double rs_triangle(double x)
{
    if (x < 0.0) {
        x = -x;
    }
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's bicubic_filter, a = -0.5 (the same as torch's antialiased
 * bicubic kernel). */
static double rs_bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0) {
        x = -x;
    }
    if (x < 1.0) {
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    }
    if (x < 2.0) {
        return (((x - 5) * x + 8) * x - 4) * a;
    }
    return 0.0;
}

static double rs_filter(const rs_axis_t *a, double x)
{
    return a->cubic ? rs_bicubic(x) : rs_triangle(x);
}

/* Validates one axis of the rectangle and fills the geometry. Pillow rejects
 * boxes outside the image after rounding them to float; we do the same, and
 * also reject empty or non-finite ones. */
static int rs_axis_init(rs_axis_t *a, uint32_t in_size, double start, double len, uint32_t out,
                        int clip, int cubic)
{
    if (out > RS_MAX_EDGE) {
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
    a->cubic = cubic;
    a->support = (cubic ? 2.0 : 1.0) * a->filterscale;
    a->ksize = (size_t)ceil(a->support) * 2 + 1;
    a->npair = (a->ksize + 1) / 2;
    a->pmax = 0;
    a->bounds = NULL;
    a->kk = NULL;
#if RS_SSE2
    a->kv = NULL;
#endif
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
            ww += rs_filter(a, (x + xmin - center + 0.5) * ss);
        }
        int32_t *k = a->kk + (size_t)xx * a->ksize;
        for (int x = 0; x < xmax; x++) {
            double w = rs_filter(a, (x + xmin - center + 0.5) * ss);
            if (ww != 0.0) {
                w /= ww;
            }
            /* Pillow rounds half away from zero; only bicubic's lobes are
             * negative. */
            k[x] = w < 0 ? (int32_t)(-0.5 + w * (1 << RS_PRECISION_BITS))
                         : (int32_t)(0.5 + w * (1 << RS_PRECISION_BITS));
        }
        for (size_t x = (size_t)xmax; x < a->ksize; x++) {
            k[x] = 0;
        }
        a->bounds[2 * (size_t)xx] = (int32_t)a->base + xmin;
        a->bounds[2 * (size_t)xx + 1] = xmax;
    }
}

/* Pillow's clip8: bilinear sums are never negative, bicubic's may be
 * (an arithmetic shift, as Pillow's). */
static inline uint8_t rs_clip8(int32_t v)
{
    v >>= RS_PRECISION_BITS;
    return (uint8_t)(v > 255 ? 255 : v < 0 ? 0 : v);
}

/* Horizontal, one output pixel, any channel count. */
static inline void rs_hpixel_scalar(const uint8_t *restrict s, uint8_t *restrict d,
                                    const rs_axis_t *ax, uint32_t c, uint32_t xx)
{
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

/* Horizontal, one output pixel with 3 channels: the common case, with the
 * accumulators named so they stay in registers. */
static inline void rs_hpixel3_scalar(const uint8_t *restrict s, uint8_t *restrict d,
                                     const rs_axis_t *ax, uint32_t xx)
{
    const uint8_t *restrict p = s + (size_t)ax->bounds[2 * (size_t)xx] * 3;
    const int32_t n = ax->bounds[2 * (size_t)xx + 1];
    const int32_t *restrict k = ax->kk + (size_t)xx * ax->ksize;
    int32_t a0 = RS_HALF, a1 = RS_HALF, a2 = RS_HALF;
    for (int32_t t = 0; t < n; t++) {
        a0 += p[3 * t + 0] * k[t];
        a1 += p[3 * t + 1] * k[t];
        a2 += p[3 * t + 2] * k[t];
    }
    d[(size_t)xx * 3 + 0] = rs_clip8(a0);
    d[(size_t)xx * 3 + 1] = rs_clip8(a1);
    d[(size_t)xx * 3 + 2] = rs_clip8(a2);
}

#if RS_SSE2
/* Builds the pmaddwd weights of an axis from its int32 ones: for taps 2q and
 * 2q+1, lanes of (kh[2q], kh[2q+1]) and of (kl[2q], kl[2q+1]). A missing
 * odd tap gets weight 0. */
static void rs_axis_pairs(rs_axis_t *a)
{
    a->pmax = 1;
    for (uint32_t o = 0; o < a->out; o++) {
        size_t pairs = ((size_t)a->bounds[2 * (size_t)o + 1] + 1) / 2;
        a->pmax = pairs > a->pmax ? pairs : a->pmax;
        const int32_t *k = a->kk + (size_t)o * a->ksize;
        __m128i *kv = a->kv + (size_t)o * a->npair * 2;
        for (size_t q = 0; q < a->npair; q++) {
            uint32_t k0 = (uint32_t)k[2 * q];
            uint32_t k1 = 2 * q + 1 < a->ksize ? (uint32_t)k[2 * q + 1] : 0;
            uint32_t lo = (1u << RS_SPLIT_BITS) - 1;
            uint32_t h = (k0 >> RS_SPLIT_BITS) | (k1 >> RS_SPLIT_BITS) << 16;
            uint32_t l = (k0 & lo) | (k1 & lo) << 16;
            kv[2 * q] = _mm_set1_epi32((int32_t)h);
            kv[2 * q + 1] = _mm_set1_epi32((int32_t)l);
        }
    }
}

/* (sum_h << 11) + sum_l, shifted as Pillow does (the rounding half is
 * already in sum_l). */
static inline __m128i rs_combine(__m128i h, __m128i l)
{
    return _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(h, RS_SPLIT_BITS), l), RS_PRECISION_BITS);
}

/* Horizontal row for 3 or 4 channels: per tap pair, the two pixels are
 * interleaved channel by channel ((r0, r1), (g0, g1), ...) so one pmaddwd
 * gives every channel's two products summed. Every output pixel runs P
 * pairs (the axis maximum; extra pairs have weight 0), so the tap loop has
 * a fixed trip count and never mispredicts as window sizes alternate
 * (that alone was worth 20%). Each pixel is read and written as 4 bytes; with 3
 * channels the 4th lane is the next pixel's first byte, discarded on input
 * and overwritten by the next store on output (the row's last pixel stores
 * 3). A pixel whose reads would pass the end of the buffer (avail bytes from
 * s) takes the scalar path. */
static inline __attribute__((always_inline)) void
rs_hrow_sse2(const uint8_t *restrict s, uint8_t *restrict d, const rs_axis_t *ax, size_t avail,
             const uint32_t C, const size_t P)
{
    const __m128i zero = _mm_setzero_si128();
    const __m128i half = _mm_set1_epi32(RS_HALF);
    const size_t last_read = (2 * P - 1) * C + 4;
    for (uint32_t xx = 0; xx < ax->out; xx++) {
        const size_t start = (size_t)ax->bounds[2 * (size_t)xx];
        if (start * C + last_read > avail) {
            rs_hpixel_scalar(s, d, ax, C, xx);
            continue;
        }
        const uint8_t *restrict p = s + start * C;
        const __m128i *restrict kv = ax->kv + (size_t)xx * ax->npair * 2;
        __m128i h = zero, l = half;
        for (size_t q = 0; q < P; q++) {
            int32_t a, b;
            memcpy(&a, p + 2 * q * C, 4);
            memcpy(&b, p + (2 * q + 1) * C, 4);
            __m128i w = _mm_unpacklo_epi8(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b));
            w = _mm_unpacklo_epi8(w, zero);
            h = _mm_add_epi32(h, _mm_madd_epi16(w, kv[2 * q]));
            l = _mm_add_epi32(l, _mm_madd_epi16(w, kv[2 * q + 1]));
        }
        __m128i v = rs_combine(h, l);
        v = _mm_packs_epi32(v, v);
        v = _mm_packus_epi16(v, v);
        uint32_t px = (uint32_t)_mm_cvtsi128_si32(v);
        if (C == 4 || xx + 1 < ax->out) {
            memcpy(d + (size_t)xx * C, &px, 4);
        } else {
            memcpy(d + (size_t)xx * C, &px, C);
        }
    }
}

/* rs_hrow_sse2 with P a constant for the usual window sizes: P = 2 covers
 * upscaling, 3 to 5 the common downscales of a random-resized crop. */
static inline __attribute__((always_inline)) void
rs_hrow_sse2_c(const uint8_t *s, uint8_t *d, const rs_axis_t *ax, size_t avail, const uint32_t C)
{
    switch (ax->pmax) {
    case 1:
        rs_hrow_sse2(s, d, ax, avail, C, 1);
        break;
    case 2:
        rs_hrow_sse2(s, d, ax, avail, C, 2);
        break;
    case 3:
        rs_hrow_sse2(s, d, ax, avail, C, 3);
        break;
    case 4:
        rs_hrow_sse2(s, d, ax, avail, C, 4);
        break;
    case 5:
        rs_hrow_sse2(s, d, ax, avail, C, 5);
        break;
    default:
        rs_hrow_sse2(s, d, ax, avail, C, ax->pmax);
        break;
    }
}

/* Vertical pass, 16 output bytes of one row at offset i: rows 2q and 2q+1
 * are interleaved byte by byte so one pmaddwd covers both taps for four
 * outputs. */
static inline __attribute__((always_inline)) void
rs_vblock16(const uint8_t *restrict s, size_t src_stride, size_t n,
            const __m128i *restrict kv, uint8_t *restrict d, size_t i)
{
    const __m128i zero = _mm_setzero_si128();
    const __m128i half = _mm_set1_epi32(RS_HALF);
    __m128i h0 = zero, h1 = zero, h2 = zero, h3 = zero;
    __m128i l0 = half, l1 = half, l2 = half, l3 = half;
    for (size_t t = 0; t < n; t += 2) {
        const uint8_t *r = s + t * src_stride + i;
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)r);
        /* An odd last tap pairs with zeros (its partner weight is 0). */
        __m128i b = t + 1 < n ? _mm_loadu_si128((const __m128i *)(const void *)(r + src_stride))
                              : zero;
        __m128i lo = _mm_unpacklo_epi8(a, b);
        __m128i hi = _mm_unpackhi_epi8(a, b);
        __m128i w0 = _mm_unpacklo_epi8(lo, zero);
        __m128i w1 = _mm_unpackhi_epi8(lo, zero);
        __m128i w2 = _mm_unpacklo_epi8(hi, zero);
        __m128i w3 = _mm_unpackhi_epi8(hi, zero);
        const __m128i kh = kv[t], kl = kv[t + 1];
        h0 = _mm_add_epi32(h0, _mm_madd_epi16(w0, kh));
        h1 = _mm_add_epi32(h1, _mm_madd_epi16(w1, kh));
        h2 = _mm_add_epi32(h2, _mm_madd_epi16(w2, kh));
        h3 = _mm_add_epi32(h3, _mm_madd_epi16(w3, kh));
        l0 = _mm_add_epi32(l0, _mm_madd_epi16(w0, kl));
        l1 = _mm_add_epi32(l1, _mm_madd_epi16(w1, kl));
        l2 = _mm_add_epi32(l2, _mm_madd_epi16(w2, kl));
        l3 = _mm_add_epi32(l3, _mm_madd_epi16(w3, kl));
    }
    /* Results are 0..255 (plus rounding slack): packs then packus
     * saturate exactly as clip8 does. */
    __m128i v01 = _mm_packs_epi32(rs_combine(h0, l0), rs_combine(h1, l1));
    __m128i v23 = _mm_packs_epi32(rs_combine(h2, l2), rs_combine(h3, l3));
    _mm_storeu_si128((__m128i *)(void *)(d + i), _mm_packus_epi16(v01, v23));
}

/* The bytes of a row no SIMD block covers. */
static inline void rs_vtail(const uint8_t *restrict s, size_t src_stride, size_t n,
                            const int32_t *restrict k, uint8_t *restrict d, size_t i,
                            size_t row_bytes)
{
    for (; i < row_bytes; i++) {
        int32_t acc = RS_HALF;
        for (size_t t = 0; t < n; t++) {
            acc += s[t * src_stride + i] * k[t];
        }
        d[i] = rs_clip8(acc);
    }
}

static void rs_vpass_sse2(const uint8_t *restrict src, size_t src_stride, size_t row_bytes,
                          uint8_t *restrict dst, const rs_axis_t *ay,
                          const int32_t *restrict bounds)
{
    for (uint32_t yy = 0; yy < ay->out; yy++) {
        const uint8_t *restrict s = src + (size_t)bounds[2 * (size_t)yy] * src_stride;
        const size_t n = (size_t)bounds[2 * (size_t)yy + 1];
        const __m128i *restrict kv = ay->kv + (size_t)yy * ay->npair * 2;
        uint8_t *restrict d = dst + (size_t)yy * row_bytes;
        size_t i = 0;
        for (; i + 16 <= row_bytes; i += 16) {
            rs_vblock16(s, src_stride, n, kv, d, i);
        }
        rs_vtail(s, src_stride, n, ay->kk + (size_t)yy * ay->ksize, d, i, row_bytes);
    }
}

/* (sum_h << 11) + sum_l >> 22, 8 lanes. */
static inline __attribute__((always_inline, target("avx2"))) __m256i rs_combine256(__m256i h,
                                                                                   __m256i l)
{
    return _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, RS_SPLIT_BITS), l),
                             RS_PRECISION_BITS);
}

/* rs_vpass_sse2 with 32 output bytes per step. Per 128-bit lane the steps
 * are those of rs_vblock16 (unpack and pack work within lanes), so lane 0
 * holds bytes i..i+15 and lane 1 bytes i+16..i+31, in order. */
static __attribute__((target("avx2"))) void
rs_vpass_avx2(const uint8_t *restrict src, size_t src_stride, size_t row_bytes,
              uint8_t *restrict dst, const rs_axis_t *ay, const int32_t *restrict bounds)
{
    const __m256i zero = _mm256_setzero_si256();
    const __m256i half = _mm256_set1_epi32(RS_HALF);
    for (uint32_t yy = 0; yy < ay->out; yy++) {
        const uint8_t *restrict s = src + (size_t)bounds[2 * (size_t)yy] * src_stride;
        const size_t n = (size_t)bounds[2 * (size_t)yy + 1];
        const __m128i *restrict kv = ay->kv + (size_t)yy * ay->npair * 2;
        uint8_t *restrict d = dst + (size_t)yy * row_bytes;
        size_t i = 0;
        for (; i + 32 <= row_bytes; i += 32) {
            __m256i h0 = zero, h1 = zero, h2 = zero, h3 = zero;
            __m256i l0 = half, l1 = half, l2 = half, l3 = half;
            for (size_t t = 0; t < n; t += 2) {
                const uint8_t *r = s + t * src_stride + i;
                __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)r);
                __m256i b =
                    t + 1 < n ? _mm256_loadu_si256((const __m256i *)(const void *)(r + src_stride))
                              : zero;
                __m256i lo = _mm256_unpacklo_epi8(a, b);
                __m256i hi = _mm256_unpackhi_epi8(a, b);
                __m256i w0 = _mm256_unpacklo_epi8(lo, zero);
                __m256i w1 = _mm256_unpackhi_epi8(lo, zero);
                __m256i w2 = _mm256_unpacklo_epi8(hi, zero);
                __m256i w3 = _mm256_unpackhi_epi8(hi, zero);
                const __m256i kh = _mm256_broadcastsi128_si256(kv[t]);
                const __m256i kl = _mm256_broadcastsi128_si256(kv[t + 1]);
                h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(w0, kh));
                h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(w1, kh));
                h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(w2, kh));
                h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(w3, kh));
                l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(w0, kl));
                l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(w1, kl));
                l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(w2, kl));
                l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(w3, kl));
            }
            __m256i v01 = _mm256_packs_epi32(rs_combine256(h0, l0), rs_combine256(h1, l1));
            __m256i v23 = _mm256_packs_epi32(rs_combine256(h2, l2), rs_combine256(h3, l3));
            _mm256_storeu_si256((__m256i *)(void *)(d + i), _mm256_packus_epi16(v01, v23));
        }
        for (; i + 16 <= row_bytes; i += 16) {
            rs_vblock16(s, src_stride, n, kv, d, i);
        }
        rs_vtail(s, src_stride, n, ay->kk + (size_t)yy * ay->ksize, d, i, row_bytes);
    }
}

#endif

/* Horizontal pass over rows [0, rows) of src (row stride src_stride bytes)
 * into dst, rows x out_w x c packed. src_avail is how many bytes the input
 * buffer holds from src on (the SIMD kernel must not read past it). */
static void rs_hpass(const uint8_t *src, size_t src_stride, size_t rows, uint8_t *dst,
                     const rs_axis_t *ax, uint32_t c, size_t src_avail, sl_simd_e path)
{
    const size_t out_row = (size_t)ax->out * c;
#if RS_SSE2
    const int simd = (c == 3 || c == 4) && ax->ksize <= RS_SIMD_MAX_TAPS;
#endif
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *s = src + r * src_stride;
        uint8_t *d = dst + r * out_row;
#if RS_SSE2
        if (simd && path != SL_SIMD_SCALAR) {
            const size_t avail = src_avail - r * src_stride;
            /* Every path runs the SSE2 row: an AVX2 one (two pixels a
             * step, or a vpshufb per tap pair) measured 10-20% slower. */
            if (c == 3) {
                rs_hrow_sse2_c(s, d, ax, avail, 3);
            } else {
                rs_hrow_sse2_c(s, d, ax, avail, 4);
            }
            continue;
        }
#else
        (void)src_avail;
        (void)path;
#endif
        if (c == 3) {
            for (uint32_t xx = 0; xx < ax->out; xx++) {
                rs_hpixel3_scalar(s, d, ax, xx);
            }
        } else {
            for (uint32_t xx = 0; xx < ax->out; xx++) {
                rs_hpixel_scalar(s, d, ax, c, xx);
            }
        }
    }
}

/* Vertical pass: each output row is a weighted sum of whole input rows, so
 * it is the same multiply-add over row_bytes independent bytes whatever the
 * channel count. src rows are src_stride apart; bounds index them relative
 * to src. The scalar version walks 8 bytes at a time so the accumulators
 * stay in registers. */
static void rs_vpass(const uint8_t *restrict src, size_t src_stride, size_t row_bytes,
                     uint8_t *restrict dst, const rs_axis_t *ay, const int32_t *restrict bounds,
                     sl_simd_e path)
{
#if RS_SSE2
    if (ay->ksize <= RS_SIMD_MAX_TAPS && path == SL_SIMD_AVX2) {
        rs_vpass_avx2(src, src_stride, row_bytes, dst, ay, bounds);
        return;
    }
    if (ay->ksize <= RS_SIMD_MAX_TAPS && path == SL_SIMD_SSE2) {
        rs_vpass_sse2(src, src_stride, row_bytes, dst, ay, bounds);
        return;
    }
#else
    (void)path;
#endif
    for (uint32_t yy = 0; yy < ay->out; yy++) {
        const uint8_t *restrict s = src + (size_t)bounds[2 * (size_t)yy] * src_stride;
        const int32_t n = bounds[2 * (size_t)yy + 1];
        const int32_t *restrict k = ay->kk + (size_t)yy * ay->ksize;
        uint8_t *restrict d = dst + (size_t)yy * row_bytes;
        size_t i = 0;
        for (; i + 8 <= row_bytes; i += 8) {
            int32_t acc[8];
            for (int j = 0; j < 8; j++) {
                acc[j] = RS_HALF;
            }
            for (int32_t t = 0; t < n; t++) {
                const uint8_t *restrict p = s + (size_t)t * src_stride + i;
                for (int j = 0; j < 8; j++) {
                    acc[j] += p[j] * k[t];
                }
            }
            for (int j = 0; j < 8; j++) {
                d[i + j] = rs_clip8(acc[j]);
            }
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

/* Bytes of scratch a resample needs (see rs_scratch_carve for the layout);
 * the intermediate image only when both passes run. */
static int rs_scratch_bytes(const rs_axis_t *ax, const rs_axis_t *ay, size_t out_row, int both,
                            size_t *ret_need)
{
    size_t need = 16; /* slack to align the base */
    int rc = 0;
#if RS_SSE2
    rc = rs_add_mul(&need, ay->npair * 2 * sizeof(__m128i), ay->out);
    rc = rc ? rc : rs_add_mul(&need, ax->npair * 2 * sizeof(__m128i), ax->out);
#endif
    rc = rc ? rc : rs_add_mul(&need, 2 * sizeof(int32_t), ay->out);
    rc = rc ? rc : rs_add_mul(&need, ay->ksize * sizeof(int32_t), ay->out);
    rc = rc ? rc : rs_add_mul(&need, 2 * sizeof(int32_t), ax->out);
    rc = rc ? rc : rs_add_mul(&need, ax->ksize * sizeof(int32_t), ax->out);
    rc = rc ? rc : rs_add_mul(&need, out_row, both ? ay->size : 0);
    if (rc == 0) {
        *ret_need = need;
    }
    return rc;
}

/* Scratch layout, 16-byte aligned pieces first: SIMD weights (vertical,
 * horizontal), int32 bounds and weights (vertical, horizontal), then the
 * intermediate image (at most every visible row), which is returned. */
static uint8_t *rs_scratch_carve(uint8_t *mem, rs_axis_t *ax, rs_axis_t *ay)
{
    mem += (16 - (uintptr_t)mem % 16) % 16;
#if RS_SSE2
    ay->kv = (__m128i *)(void *)mem;
    ax->kv = ay->kv + ay->npair * 2 * ay->out;
    mem = (uint8_t *)(ax->kv + ax->npair * 2 * ax->out);
#endif
    ay->bounds = (int32_t *)(void *)mem;
    ay->kk = ay->bounds + 2 * (size_t)ay->out;
    ax->bounds = ay->kk + ay->ksize * ay->out;
    ax->kk = ax->bounds + 2 * (size_t)ax->out;
    return (uint8_t *)(ax->kk + ax->ksize * ax->out);
}

/* The passes over carved scratch: horizontal first over just the rows the
 * vertical one needs, into tmp, then vertical; or whichever one is needed,
 * or a copy of the visible rectangle. */
static void rs_resample(const sl_tensor_t *in, rs_axis_t *ax, rs_axis_t *ay, int need_h,
                        int need_v, uint8_t *tmp, sl_tensor_t *out, sl_simd_e path)
{
    const uint32_t c = in->c;
    const uint32_t out_h = ay->out;
    const size_t in_stride = (size_t)in->w * c;
    const size_t out_row = (size_t)ax->out * c;
    const uint8_t *src = in->data + (size_t)ax->base * c;
    if (need_v) {
        rs_axis_coeffs(ay);
#if RS_SSE2
        if (path != SL_SIMD_SCALAR) {
            rs_axis_pairs(ay);
        }
#endif
    }
    if (need_h) {
        rs_axis_coeffs(ax);
#if RS_SSE2
        if (path != SL_SIMD_SCALAR) {
            rs_axis_pairs(ax);
        }
#endif
        /* Only rows some vertical window touches are resampled horizontally,
         * as Pillow does (ybox_first .. ybox_last). Vertically identical:
         * exactly the output rows. */
        size_t first = ay->base, last = (size_t)ay->base + out_h;
        if (need_v) {
            first = (size_t)ay->bounds[0];
            last = (size_t)ay->bounds[2 * (size_t)out_h - 2] +
                   (size_t)ay->bounds[2 * (size_t)out_h - 1];
        }
        const uint8_t *rows = in->data + first * in_stride;
        const size_t avail = in->nbytes - first * in_stride;
        if (need_v) {
            rs_hpass(rows, in_stride, last - first, tmp, ax, c, avail, path);
            for (uint32_t yy = 0; yy < out_h; yy++) {
                ay->bounds[2 * (size_t)yy] -= (int32_t)first;
            }
            rs_vpass(tmp, out_row, out_row, out->data, ay, ay->bounds, path);
        } else {
            rs_hpass(rows, in_stride, out_h, out->data, ax, c, avail, path);
        }
    } else if (need_v) {
        rs_vpass(src, in_stride, out_row, out->data, ay, ay->bounds, path);
    } else {
        for (uint32_t yy = 0; yy < out_h; yy++) {
            memcpy(out->data + (size_t)yy * out_row,
                   src + ((size_t)ay->base + yy) * in_stride, out_row);
        }
    }
}

/* The fastest path this build and CPU run. */
static sl_simd_e rs_best_path(void)
{
    if (sl_simd_ok(SL_SIMD_AVX2)) {
        return SL_SIMD_AVX2;
    }
    return RS_SSE2 ? SL_SIMD_SSE2 : SL_SIMD_SCALAR;
}

int sl_img_resize_rect_ex(const sl_tensor_t *in, double x, double y, double w, double h,
                          uint32_t out_h, uint32_t out_w, uint32_t flags, sl_tensor_t *scratch,
                          sl_tensor_t *out)
{
    return sl_img_resize_rect_path(in, x, y, w, h, out_h, out_w, flags, scratch, out,
                                   SL_SIMD_AUTO);
}

static int rs_resize(const sl_tensor_t *in, double x, double y, double w, double h, uint32_t out_h,
                     uint32_t out_w, uint32_t flags, int cubic, sl_tensor_t *scratch,
                     sl_tensor_t *out, sl_simd_e path);

int sl_img_resize_rect_path(const sl_tensor_t *in, double x, double y, double w, double h,
                            uint32_t out_h, uint32_t out_w, uint32_t flags, sl_tensor_t *scratch,
                            sl_tensor_t *out, sl_simd_e path)
{
    return rs_resize(in, x, y, w, h, out_h, out_w, flags, 0, scratch, out, path);
}

static int rs_resize(const sl_tensor_t *in, double x, double y, double w, double h, uint32_t out_h,
                     uint32_t out_w, uint32_t flags, int cubic, sl_tensor_t *scratch,
                     sl_tensor_t *out, sl_simd_e path)
{
    if (!sl_simd_ok(path)) {
        return -ENOTSUP;
    }
    if (path == SL_SIMD_AUTO) {
        path = rs_best_path();
    }
    if (in == NULL || out == NULL || in == out || scratch == in || scratch == out ||
        in->dtype != SL_DT_U8 || in->layout != SL_LAYOUT_HWC || in->c < 1 || in->c > 4 ||
        in->h == 0 || in->w == 0 || in->h > RS_MAX_EDGE || in->w > RS_MAX_EDGE ||
        in->data == NULL || in->nbytes != (size_t)in->h * in->w * in->c ||
        (flags & ~SL_RESIZE_CLIP) != 0) {
        return -EINVAL;
    }
    const int clip = (flags & SL_RESIZE_CLIP) != 0;
    rs_axis_t ax, ay;
    int rc = rs_axis_init(&ax, in->w, x, w, out_w, clip, cubic);
    if (rc == 0) {
        rc = rs_axis_init(&ay, in->h, y, h, out_h, clip, cubic);
    }
    if (rc < 0) {
        return rc;
    }
    const int need_h = !rs_axis_identity(&ax);
    const int need_v = !rs_axis_identity(&ay);
    size_t need = 0;
    rc = rs_scratch_bytes(&ax, &ay, (size_t)out_w * in->c, need_h && need_v, &need);
    if (rc < 0) {
        return rc;
    }
    rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, out_h, out_w, in->c);
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
    uint8_t *tmp = rs_scratch_carve(mem, &ax, &ay);
    rs_resample(in, &ax, &ay, need_h, need_v, tmp, out, path);
    free(owned);
    return 0;
}

int sl_img_resize_rect(const sl_tensor_t *in, double x, double y, double w, double h,
                       uint32_t out_h, uint32_t out_w, sl_tensor_t *out)
{
    return sl_img_resize_rect_ex(in, x, y, w, h, out_h, out_w, 0, NULL, out);
}

int sl_img_resize_interp(const sl_tensor_t *in, double x, double y, double w, double h,
                         uint32_t out_h, uint32_t out_w, uint32_t flags, sl_img_interp_e interp,
                         sl_tensor_t *scratch, sl_tensor_t *out)
{
    switch (interp) {
    case SL_IMG_BILINEAR:
        return sl_img_resize_rect_ex(in, x, y, w, h, out_h, out_w, flags, scratch, out);
    case SL_IMG_BICUBIC:
        /* The plain C loops: the SIMD ones assume non-negative weights. */
        return rs_resize(in, x, y, w, h, out_h, out_w, flags, 1, scratch, out, SL_SIMD_SCALAR);
    case SL_IMG_NEAREST:
        return (flags & SL_RESIZE_CLIP) ? sl_img_resize_nearest(in, x, y, w, h, out_h, out_w, out)
                                        : -EINVAL;
    default:
        return -EINVAL;
    }
}
