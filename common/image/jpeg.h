/* jpeg: JPEG header probing and decoding (libjpeg-turbo's libjpeg API), full
 * frame or a region of interest at a DCT scale of M/8, M = 1..8.
 * Output is always 8-bit RGB, HWC: grayscale is expanded, CMYK and YCCK
 * (Adobe, inverted or not) are converted, progressive files are supported.
 * Thread-safe: no shared state; each call owns its decompressor.
 *
 * Errors (negative errno, err filled), mapped to skip reasons by common/data/skip.h:
 *   -ENODATA  zero bytes
 *   -EILSEQ   not a JPEG (no SOI marker)
 *   -EFBIG    width x height > max_pixels (checked from the header, before any
 *             allocation: a decompression bomb costs nothing)
 *   -ENOMSG   truncated: the data ends before the image does (libjpeg's
 *             "premature end" warning is treated as an error, never gray fill)
 *   -EBADMSG  corrupt: libjpeg reported an error or a corrupt-data warning
 *   -ENOMEM   allocation failed */
#ifndef SL_JPEG_H
#define SL_JPEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

typedef enum {
    SL_JCS_GRAY = 0,
    SL_JCS_YCBCR,
    SL_JCS_RGB,
    SL_JCS_CMYK,
    SL_JCS_YCCK,
    SL_JCS_OTHER,
} sl_jpeg_colorspace_e;

/* Features read from the header without decoding: what the cost model needs. */
typedef struct sl_jpeg_info_s {
    uint32_t width, height;
    uint32_t components;
    sl_jpeg_colorspace_e colorspace;
    bool progressive;
    /* Luma sampling factors relative to chroma: 4:2:0 -> h=2,v=2; 4:4:4 -> 1,1. */
    uint8_t subsamp_h, subsamp_v;
} sl_jpeg_info_t;

int sl_jpeg_probe(const uint8_t *buf, size_t len, sl_jpeg_info_t *ret_info, char *err,
                  size_t errlen);

/* Full decode to RGB u8 HWC in out. */
int sl_jpeg_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out,
                   char *err, size_t errlen);

/* Region-of-interest decode. The region (x, y, w, h) is in full-resolution
 * pixels and must lie inside the image. scale_denom is 1, 2, 4 or 8: the image
 * is decoded at 1/scale_denom size by DCT scaling (libjpeg scale_num = 1,
 * scale_denom) and only the scanlines and iMCU columns the region needs are
 * decoded (jpeg_crop_scanline / jpeg_skip_scanlines).
 *
 * out receives a rectangle of the scaled image that covers the region:
 * columns [*ret_x0, *ret_x0 + out->w) and rows [*ret_y0, *ret_y0 + out->h) in
 * scaled-image pixels, where the scaled image is ceil(W/s) x ceil(H/s). The
 * caller maps the region into out's coordinates as
 *   ((x / s) - x0, (y / s) - y0, w / s, h / s)
 * and resamples that (possibly fractional) rectangle. */
int sl_jpeg_decode_region(const uint8_t *buf, size_t len, uint64_t max_pixels, uint32_t x,
                          uint32_t y, uint32_t w, uint32_t h, uint32_t scale_denom,
                          sl_tensor_t *out, uint32_t *ret_x0, uint32_t *ret_y0, char *err,
                          size_t errlen);

/* The same at a DCT scale of scale_num/8, scale_num 1..8 (libjpeg scale_num =
 * scale_num, scale_denom = 8): the scaled image is ceil(W*M/8) x ceil(H*M/8),
 * out covers the region's columns [floor(x*M/8), ceil((x+w)*M/8)) (clamped to
 * the scaled image) and the caller maps the region into out as
 *   (x*M/8 - x0, y*M/8 - y0, w*M/8, h*M/8).
 * M = 8, 4, 2, 1 are scale_denom 1, 2, 4, 8 above (bit-identical). Scales 3,
 * 5, 6, 7 use libjpeg-turbo's plain-C IDCTs (no SIMD), see pick_scale in
 * common/engine/pipeline.c for which are worth it. */
int sl_jpeg_decode_region_m8(const uint8_t *buf, size_t len, uint64_t max_pixels, uint32_t x,
                             uint32_t y, uint32_t w, uint32_t h, uint32_t scale_num,
                             sl_tensor_t *out, uint32_t *ret_x0, uint32_t *ret_y0, char *err,
                             size_t errlen);

/* Where a region decode's thread CPU time went, in seconds: the two parts
 * that scale with the region's position and size. The rest of the call
 * (header, decompressor start -- for a progressive file the entropy
 * decoding of every scan --, teardown) is its total minus these. */
typedef struct sl_jpeg_times_s {
    double skip_sec; /* jpeg_skip_scanlines over the rows above the region */
    double rows_sec; /* the region's rows: entropy, IDCT, upsampling, colour */
} sl_jpeg_times_t;

/* sl_jpeg_decode_region_m8 for a caller that only reads the region (the
 * fused crop's resample): out may be wider than the region's columns. It
 * covers columns [*ret_x0, *ret_x0 + out->w) of the scaled image, a superset
 * of [floor(x*M/8), ceil((x+w)*M/8)) (rows exactly as _m8), and the caller
 * maps the region into out with the same formula. Inside the region the
 * pixels are the same bytes as _m8's; the extra columns (up to an iMCU plus
 * a few pixels each side) are libjpeg's and not defined by this API. That
 * lets an RGB region be decoded straight into out instead of through a
 * scratch copy. Also fills *ret_times (three clock reads; NULL: none). On
 * failure *ret_times is untouched. */
int sl_jpeg_decode_region_timed(const uint8_t *buf, size_t len, uint64_t max_pixels, uint32_t x,
                                uint32_t y, uint32_t w, uint32_t h, uint32_t scale_num,
                                sl_tensor_t *out, uint32_t *ret_x0, uint32_t *ret_y0,
                                sl_jpeg_times_t *ret_times, char *err, size_t errlen);

#endif
