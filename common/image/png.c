/* png: probe and decode through libpng's progressive-row API.
 *
 * The probe parses IHDR itself (33 bytes, CRC checked): no libpng, no
 * allocation, and a prefix of the file is enough. A decode runs the same
 * parser first, so a decompression bomb or an oversized output is refused
 * before libpng is created.
 *
 * libpng reports errors by calling the error function, which must not
 * return: ours records a code and the message and longjmps back to the one
 * setjmp, in dec_run(). As in jpeg.c, the state libpng owns (read and info
 * structs) lives in a png_ctx_t in the caller of dec_run(), reached through
 * a pointer that never changes, so nothing "indeterminate after longjmp" is
 * ever read, and png_destroy_read_struct frees it on every path. The steps
 * after setjmp are noinline functions (no locals of theirs in the setjmp
 * frame). libpng allocates through our malloc so that an allocation failure
 * is told apart from corrupt data. Warnings (a bad CRC in an ancillary chunk,
 * the common "iCCP: known incorrect sRGB profile", libpng's benign errors)
 * are dropped: the pixels are fine. */
#include "common/image/png.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "common/base/err.h"

#define DEC_STEP __attribute__((noinline))

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

typedef struct png_ctx_s {
    png_structp png; /* owned: png_destroy_read_struct in dec_call */
    png_infop info;
    jmp_buf jmp;
    const uint8_t *buf; /* the input: [pos, len) not yet handed to libpng */
    size_t len, pos;
    int code;  /* set by whoever longjmps; 0 until then */
    bool oom;  /* our malloc failed: libpng's error is then -ENOMEM */
    char msg[256];
} png_ctx_t;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* CRC-32 (ISO 3309, as PNG uses) of a few bytes, bitwise: only 17 bytes of
 * IHDR go through it, not worth a table. */
static uint32_t crc32_small(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
    }
    return c ^ 0xFFFFFFFFu;
}

/* Signature and IHDR; fills info. */
static int ihdr_parse(const uint8_t *buf, size_t len, sl_png_info_t *info, char *err,
                      size_t errlen)
{
    if (len == 0) {
        return sl_err(err, errlen, -ENODATA, "empty input");
    }
    size_t n = len < sizeof(png_sig) ? len : sizeof(png_sig);
    if (memcmp(buf, png_sig, n) != 0) {
        return sl_err(err, errlen, -EILSEQ, "not a PNG (no PNG signature)");
    }
    if (len < SL_PNG_PROBE_BYTES) {
        return sl_err(err, errlen, -ENOMSG, "truncated: %zu bytes, the PNG header needs %d",
                      len, SL_PNG_PROBE_BYTES);
    }
    const uint8_t *c = buf + 8;
    if (be32(c) != 13 || memcmp(c + 4, "IHDR", 4) != 0) {
        return sl_err(err, errlen, -EBADMSG, "first chunk is not a 13-byte IHDR");
    }
    if (crc32_small(c + 4, 17) != be32(c + 21)) {
        return sl_err(err, errlen, -EBADMSG, "IHDR: CRC error");
    }
    const uint8_t *d = c + 8;
    uint32_t w = be32(d), h = be32(d + 4);
    unsigned depth = d[8], ct = d[9];
    if (w == 0 || h == 0 || w > PNG_UINT_31_MAX || h > PNG_UINT_31_MAX) {
        return sl_err(err, errlen, -EBADMSG, "IHDR: bad size %ux%u", w, h);
    }
    uint32_t ch;
    bool ok_depth;
    switch (ct) {
    case SL_PNG_GRAY:
        ch = 1;
        ok_depth = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
        break;
    case SL_PNG_PALETTE:
        ch = 1;
        ok_depth = depth == 1 || depth == 2 || depth == 4 || depth == 8;
        break;
    case SL_PNG_RGB:
    case SL_PNG_GRAY_ALPHA:
    case SL_PNG_RGBA:
        ch = ct == SL_PNG_RGB ? 3 : ct == SL_PNG_RGBA ? 4 : 2;
        ok_depth = depth == 8 || depth == 16;
        break;
    default:
        return sl_err(err, errlen, -EBADMSG, "IHDR: unknown colour type %u", ct);
    }
    if (!ok_depth) {
        return sl_err(err, errlen, -EBADMSG, "IHDR: bit depth %u invalid for colour type %u",
                      depth, ct);
    }
    if (d[10] != 0 || d[11] != 0 || d[12] > 1) {
        return sl_err(err, errlen, -EBADMSG,
                      "IHDR: unknown compression %u, filter %u or interlace %u", d[10], d[11],
                      d[12]);
    }
    memset(info, 0, sizeof(*info));
    info->width = w;
    info->height = h;
    info->channels = ch;
    info->bit_depth = depth;
    info->color = (sl_png_color_e)ct;
    info->interlaced = d[12] == 1;
    return 0;
}

int sl_png_probe(const uint8_t *buf, size_t len, sl_png_info_t *ret_info, char *err,
                 size_t errlen)
{
    sl_png_info_t info;
    int rc = ihdr_parse(buf, len, &info, err, errlen);
    if (rc == 0) {
        *ret_info = info;
    }
    return rc;
}

static void dec_error(png_structp png, png_const_charp msg)
{
    png_ctx_t *x = png_get_error_ptr(png);
    if (x->code == 0) {
        if (x->oom) {
            x->code = -ENOMEM;
        } else if (strstr(msg, "Not enough image data") != NULL) {
            /* The IDATs (or the zlib stream in them) end before the last row:
             * the image data is cut short, whatever follows it. */
            x->code = -ENOMSG;
        } else {
            x->code = -EBADMSG;
        }
        snprintf(x->msg, sizeof(x->msg), "%s", msg);
    }
    longjmp(x->jmp, 1);
}

static void dec_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static png_voidp dec_malloc(png_structp png, png_alloc_size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        ((png_ctx_t *)png_get_mem_ptr(png))->oom = true;
    }
    return p;
}

static void dec_free(png_structp png, png_voidp p) { (void)png, free(p); }

static void dec_read(png_structp png, png_bytep data, size_t n)
{
    png_ctx_t *x = png_get_io_ptr(png);
    if (x->len - x->pos < n) {
        x->code = -ENOMSG;
        snprintf(x->msg, sizeof(x->msg), "truncated: data ends at byte %zu, inside a chunk",
                 x->len);
        png_error(png, x->msg);
    }
    memcpy(data, x->buf + x->pos, n);
    x->pos += n;
}

/* After png_read_info: the transforms to 8-bit RGB, then a check that libpng
 * agrees on the row size we are about to hand it. */
static DEC_STEP int dec_configure(png_ctx_t *x, const sl_tensor_t *out)
{
    png_structp png = x->png;
    png_infop info = x->info;
    int ct = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    if (png_get_image_width(png, info) != out->w || png_get_image_height(png, info) != out->h) {
        return sl_err(x->msg, sizeof(x->msg), -EBADMSG, "libpng disagrees on the image size");
    }
    if (ct == PNG_COLOR_TYPE_PALETTE) {
        png_set_palette_to_rgb(png); /* also expands tRNS to alpha: stripped below */
    }
    if (ct == PNG_COLOR_TYPE_GRAY && depth < 8) {
        png_set_expand_gray_1_2_4_to_8(png); /* gray tRNS is left alone */
    }
    if (depth == 16) {
        png_set_strip_16(png); /* high byte; not png_set_scale_16 (rounds) */
    }
    png_set_strip_alpha(png);
    if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA) {
        png_set_gray_to_rgb(png);
    }
    (void)png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
        png_get_rowbytes(png, info) != (size_t)out->w * 3) {
        return sl_err(x->msg, sizeof(x->msg), -EBADMSG,
                      "libpng gives %u channels of %u bits, not 8-bit RGB",
                      (unsigned)png_get_channels(png, info),
                      (unsigned)png_get_bit_depth(png, info));
    }
    return 0;
}

/* Every pass straight into the tensor: libpng combines an interlaced pass's
 * pixels into the row it is given, so after the last pass each pixel has been
 * written once (the tensor's old contents never show). */
static DEC_STEP void dec_read_rows(png_ctx_t *x, sl_tensor_t *out)
{
    int passes = png_get_interlace_type(x->png, x->info) == PNG_INTERLACE_ADAM7 ? 7 : 1;
    size_t stride = (size_t)out->w * 3;
    for (int p = 0; p < passes; p++) {
        for (uint32_t y = 0; y < out->h; y++) {
            png_read_row(x->png, out->data + (size_t)y * stride, NULL);
        }
    }
}

/* The only setjmp: libpng's errors in the calls below longjmp back here. */
static int dec_run(png_ctx_t *x, sl_tensor_t *out)
{
    if (setjmp(x->jmp) != 0) {
        return x->code;
    }
    x->png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, x, dec_error, dec_warning, x,
                                      dec_malloc, dec_free);
    if (x->png == NULL) {
        return sl_err(x->msg, sizeof(x->msg), -ENOMEM, "cannot create a libpng reader");
    }
    x->info = png_create_info_struct(x->png);
    if (x->info == NULL) {
        return sl_err(x->msg, sizeof(x->msg), -ENOMEM, "cannot create a libpng info struct");
    }
    png_set_read_fn(x->png, x, dec_read);
    /* Our max_pixels, checked from IHDR already, is the limit that counts:
     * libpng's default 1e6 per side would refuse a legal 2e6 x 1 strip. */
    png_set_user_limits(x->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_read_info(x->png, x->info);
    int rc = dec_configure(x, out);
    if (rc < 0) {
        return rc;
    }
    dec_read_rows(x, out);
    /* No png_read_end: the pixels are complete and the IDAT CRCs checked;
     * what follows (IEND, text) is not worth reading (see png.h). */
    return 0;
}

int sl_png_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out,
                  char *err, size_t errlen)
{
    sl_png_info_t info;
    int rc = ihdr_parse(buf, len, &info, err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint64_t pixels = (uint64_t)info.width * info.height;
    if (pixels > max_pixels) {
        return sl_err(err, errlen, -EFBIG, "%ux%u is more than %llu pixels", info.width,
                      info.height, (unsigned long long)max_pixels);
    }
    /* libpng keeps two file rows (current and previous, for the filters): at
     * 8 bytes a pixel, a wide strip within max_pixels could still cost more
     * than the output. Bound them by SL_TENSOR_MAX_BYTES as well. */
    uint64_t file_row = ((uint64_t)info.width * info.channels * info.bit_depth + 7) / 8;
    if (2 * file_row > SL_TENSOR_MAX_BYTES) {
        return sl_err(err, errlen, -EFBIG, "rows of %ux%u at %u bits are too wide",
                      info.width, info.channels, info.bit_depth);
    }
    rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_HWC, info.height, info.width, 3);
    if (rc < 0) {
        return sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc,
                      "cannot hold %ux%u RGB output", info.width, info.height);
    }
    png_ctx_t x;
    memset(&x, 0, sizeof(x));
    x.buf = buf;
    x.len = len;
    rc = dec_run(&x, out);
    png_destroy_read_struct(&x.png, &x.info, NULL); /* NULL-safe */
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s", x.msg);
    }
    return 0;
}
