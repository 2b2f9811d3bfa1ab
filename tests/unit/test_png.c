/* test_png: sl_png_probe / sl_png_decode and the sl_image_* front door.
 *
 * PNGs are written in the test with libpng's writer from samples generated
 * here, for every colour type x bit depth x interlace (with and without
 * tRNS), and the decoded RGB is compared exactly with what those samples
 * mean: palette looked up, gray replicated, low depths scaled, 16 bits ->
 * high byte, alpha and tRNS dropped. tests/integration/test_png_pil.sh
 * checks the same decoder against PIL. */
#include <check.h>
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "common/image/image_decode.h"
#include "common/image/jpeg.h"
#include "common/image/png.h"
#include "tests/unit/fixtures.h"

#define MAXPIX 100000000ull

typedef struct spec_s {
    uint32_t w, h;
    int ct;    /* PNG_COLOR_TYPE_* */
    int depth; /* 1, 2, 4, 8, 16 */
    int interlace;
    bool trns;
    int npal; /* palette entries, palette only; indices stay below it */
    uint32_t seed;
} spec_t;

typedef struct img_s {
    uint8_t *png; /* encoded, malloc'd */
    size_t len;
    uint8_t *rgb; /* expected decode, w * h * 3, malloc'd */
} img_t;

typedef struct sink_s {
    uint8_t *p;
    size_t n, cap;
} sink_t;

static void sink_write(png_structp png, png_bytep data, size_t n)
{
    sink_t *s = png_get_io_ptr(png);
    if (s->n + n > s->cap) {
        s->cap = (s->n + n) * 2;
        s->p = realloc(s->p, s->cap);
        ck_assert_ptr_nonnull(s->p);
    }
    memcpy(s->p + s->n, data, n);
    s->n += n;
}

static void sink_flush(png_structp png) { (void)png; }

static int channels_of(int ct)
{
    switch (ct) {
    case PNG_COLOR_TYPE_GRAY:
    case PNG_COLOR_TYPE_PALETTE:
        return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        return 2;
    case PNG_COLOR_TYPE_RGB:
        return 3;
    default:
        return 4;
    }
}

/* Deterministic sample in [0, 2^depth) (or [0, npal) for a palette),
 * reaching both ends of the range. */
static uint32_t sample(const spec_t *s, uint32_t x, uint32_t y, int k)
{
    uint32_t v = (x * 2654435761u) ^ (y * 40503u + (uint32_t)k * 977u) ^ (s->seed * 0x9E3779B9u);
    v ^= v >> 13;
    v *= 0x5bd1e995u;
    v ^= v >> 15;
    if ((x + y + (uint32_t)k) % 7 == 0) {
        v = 0;
    } else if ((x + y + (uint32_t)k) % 7 == 1) {
        v = 0xFFFFFFFFu;
    }
    if (s->ct == PNG_COLOR_TYPE_PALETTE) {
        return v % (uint32_t)s->npal;
    }
    return s->depth == 16 ? v & 0xFFFFu : v & ((1u << s->depth) - 1);
}

static uint8_t to8(const spec_t *s, uint32_t v)
{
    if (s->depth == 16) {
        return (uint8_t)(v >> 8);
    }
    return (uint8_t)(v * 255u / ((1u << s->depth) - 1));
}

/* Encodes s with libpng and computes the RGB a correct decoder returns. */
static img_t make_png(const spec_t *s)
{
    int ch = channels_of(s->ct);
    size_t rowbytes = ((size_t)s->w * (size_t)ch * (size_t)s->depth + 7) / 8;
    uint8_t *raw = calloc(s->h, rowbytes);
    png_bytep *rows = calloc(s->h, sizeof(*rows));
    img_t im = {.rgb = malloc((size_t)s->w * s->h * 3)};
    ck_assert(raw && rows && im.rgb);
    png_color pal[256];
    png_byte trans[256];
    for (int i = 0; i < 256; i++) {
        pal[i].red = (png_byte)(i * 37 + s->seed);
        pal[i].green = (png_byte)(i * 101 + 7);
        pal[i].blue = (png_byte)(255 - i * 13);
        trans[i] = (png_byte)(i * 50);
    }
    for (uint32_t y = 0; y < s->h; y++) {
        uint8_t *row = raw + y * rowbytes;
        rows[y] = row;
        for (uint32_t x = 0; x < s->w; x++) {
            uint32_t v[4];
            for (int k = 0; k < ch; k++) {
                v[k] = sample(s, x, y, k);
                size_t bit = ((size_t)x * (size_t)ch + (size_t)k) * (size_t)s->depth;
                if (s->depth == 16) {
                    row[bit / 8] = (uint8_t)(v[k] >> 8);
                    row[bit / 8 + 1] = (uint8_t)v[k];
                } else {
                    row[bit / 8] |= (uint8_t)(v[k] << (8 - s->depth - bit % 8));
                }
            }
            uint8_t *o = im.rgb + ((size_t)y * s->w + x) * 3;
            if (s->ct == PNG_COLOR_TYPE_PALETTE) {
                o[0] = pal[v[0]].red;
                o[1] = pal[v[0]].green;
                o[2] = pal[v[0]].blue;
            } else if (ch <= 2) {
                memset(o, to8(s, v[0]), 3);
            } else {
                for (int k = 0; k < 3; k++) {
                    o[k] = to8(s, v[k]);
                }
            }
        }
    }

    sink_t sk = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ck_assert(png && info);
    if (setjmp(png_jmpbuf(png))) {
        ck_abort_msg("libpng writer failed");
    }
    png_set_write_fn(png, &sk, sink_write, sink_flush);
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_set_IHDR(png, info, s->w, s->h, s->depth, s->ct, s->interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (s->ct == PNG_COLOR_TYPE_PALETTE) {
        png_set_PLTE(png, info, pal, s->npal);
    }
    if (s->trns) {
        /* The colour of pixel (0, 0) is the transparent one, so tRNS really
         * applies to some pixels; a palette gets alphas for a few entries. */
        png_color_16 tc = {0};
        if (s->ct == PNG_COLOR_TYPE_GRAY) {
            tc.gray = (png_uint_16)sample(s, 0, 0, 0);
        } else if (s->ct == PNG_COLOR_TYPE_RGB) {
            tc.red = (png_uint_16)sample(s, 0, 0, 0);
            tc.green = (png_uint_16)sample(s, 0, 0, 1);
            tc.blue = (png_uint_16)sample(s, 0, 0, 2);
        }
        png_set_tRNS(png, info, trans, s->ct == PNG_COLOR_TYPE_PALETTE ? (s->npal + 1) / 2 : 0,
                     &tc);
    }
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(raw);
    im.png = sk.p;
    im.len = sk.n;
    return im;
}

static void img_free(img_t *im)
{
    free(im->png);
    free(im->rgb);
}

static const int depths_gray[] = {1, 2, 4, 8, 16};
static const int depths_pal[] = {1, 2, 4, 8};
static const int depths_8_16[] = {8, 16};

typedef struct ctype_s {
    int ct;
    const int *depths;
    int ndepths;
    bool trns_ok;
} ctype_t;

static const ctype_t ctypes[] = {
    {PNG_COLOR_TYPE_GRAY, depths_gray, 5, true},
    {PNG_COLOR_TYPE_PALETTE, depths_pal, 4, true},
    {PNG_COLOR_TYPE_RGB, depths_8_16, 2, true},
    {PNG_COLOR_TYPE_GRAY_ALPHA, depths_8_16, 2, false},
    {PNG_COLOR_TYPE_RGB_ALPHA, depths_8_16, 2, false},
};

/* Sizes: odd, and tiny ones where Adam7 passes are empty. */
static const uint32_t sizes[][2] = {{37, 23}, {1, 1}, {2, 3}, {5, 1}, {1, 9}, {64, 8}};

static void check_decodes(const spec_t *s, sl_tensor_t *out)
{
    img_t im = make_png(s);
    char err[256] = "";
    char what[128];
    snprintf(what, sizeof(what), "ct %d depth %d interlace %d trns %d %ux%u", s->ct, s->depth,
             s->interlace, s->trns, s->w, s->h);
    sl_png_info_t info;
    int rc = sl_png_probe(im.png, SL_PNG_PROBE_BYTES, &info, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: probe %d %s", what, rc, err);
    ck_assert_uint_eq(info.width, s->w);
    ck_assert_uint_eq(info.height, s->h);
    ck_assert_uint_eq(info.channels, (uint32_t)channels_of(s->ct));
    ck_assert_uint_eq(info.bit_depth, (uint32_t)s->depth);
    ck_assert_int_eq((int)info.color, s->ct);
    ck_assert_int_eq(info.interlaced, s->interlace == PNG_INTERLACE_ADAM7);

    /* A dirty, reused buffer: every output byte must be written. */
    if (out->cap > 0) {
        memset(out->data, 0xA5, out->cap);
    }
    rc = sl_png_decode(im.png, im.len, MAXPIX, out, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: decode %d %s", what, rc, err);
    ck_assert_int_eq(out->dtype, SL_DT_U8);
    ck_assert_int_eq(out->layout, SL_LAYOUT_HWC);
    ck_assert_uint_eq(out->h, s->h);
    ck_assert_uint_eq(out->w, s->w);
    ck_assert_uint_eq(out->c, 3);
    ck_assert_uint_eq(out->nbytes, (size_t)s->w * s->h * 3);
    for (size_t i = 0; i < out->nbytes; i++) {
        if (out->data[i] != im.rgb[i]) {
            ck_abort_msg("%s: byte %zu (pixel %zu,%zu ch %zu) is %u, want %u", what, i,
                         (i / 3) % s->w, (i / 3) / s->w, i % 3, out->data[i], im.rgb[i]);
        }
    }
    img_free(&im);
}

START_TEST(test_every_kind_exact)
{
    sl_tensor_t out;
    sl_tensor_init(&out);
    int n = 0;
    for (size_t c = 0; c < sizeof(ctypes) / sizeof(ctypes[0]); c++) {
        for (int d = 0; d < ctypes[c].ndepths; d++) {
            for (int il = 0; il <= 1; il++) {
                for (int t = 0; t <= (ctypes[c].trns_ok ? 1 : 0); t++) {
                    for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                        int depth = ctypes[c].depths[d];
                        spec_t s = {
                            .w = sizes[z][0], .h = sizes[z][1], .ct = ctypes[c].ct,
                            .depth = depth,
                            .interlace = il ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                            .trns = t != 0, .npal = depth == 8 ? 200 : (1 << depth),
                            .seed = (uint32_t)(n + 1),
                        };
                        check_decodes(&s, &out);
                        n++;
                    }
                }
            }
        }
    }
    ck_assert_int_eq(n, (5 * 2 * 2 + 4 * 2 * 2 + 2 * 2 * 2 + 2 * 2 + 2 * 2) * 6);
    sl_tensor_free(&out);
}
END_TEST

/* Past libpng's default 1e6-per-side limit, inside max_pixels: decodes. */
START_TEST(test_wide_strip)
{
    spec_t s = {.w = 1100000, .h = 1, .ct = PNG_COLOR_TYPE_GRAY, .depth = 1, .seed = 3};
    sl_tensor_t out;
    sl_tensor_init(&out);
    check_decodes(&s, &out);
    sl_tensor_free(&out);
}
END_TEST

/* --- broken inputs --- */

static uint32_t crc(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
    }
    return ~c;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Offset of the first chunk of type t (its length field). */
static size_t find_chunk(const uint8_t *b, size_t len, const char *t)
{
    for (size_t off = 8; off + 12 <= len; off += 12 + rd32(b + off)) {
        if (memcmp(b + off + 4, t, 4) == 0) {
            return off;
        }
    }
    ck_abort_msg("chunk %s not found", t);
    return 0;
}

/* Rewrites IHDR's width and height and fixes its CRC. */
static void set_ihdr_size(uint8_t *b, uint32_t w, uint32_t h)
{
    wr32(b + 16, w);
    wr32(b + 20, h);
    wr32(b + 29, crc(b + 12, 17));
}

static int decode_rc(const uint8_t *b, size_t len, uint64_t maxpix, char *err, size_t errlen)
{
    sl_tensor_t out;
    sl_tensor_init(&out);
    err[0] = '\0';
    int rc = sl_png_decode(b, len, maxpix, &out, err, errlen);
    sl_tensor_free(&out);
    if (rc < 0) {
        ck_assert_msg(err[0] != '\0', "rc %d with an empty error string", rc);
    }
    return rc;
}

static img_t plain(void)
{
    spec_t s = {.w = 61, .h = 47, .ct = PNG_COLOR_TYPE_RGB, .depth = 8, .seed = 9};
    return make_png(&s);
}

START_TEST(test_not_png)
{
    char err[256];
    uint8_t gif[] = "GIF89a\x01\x00\x01\x00\x00\x00\x00;";
    ck_assert_int_eq(decode_rc(gif, sizeof(gif) - 1, MAXPIX, err, sizeof(err)), -EILSEQ);
    ck_assert_ptr_nonnull(strstr(err, "not a PNG"));
    ck_assert_int_eq(decode_rc((const uint8_t *)"", 0, MAXPIX, err, sizeof(err)), -ENODATA);
    /* A PNG signature mangled by a text-mode transfer (\r\n -> \n). */
    img_t im = plain();
    memmove(im.png + 4, im.png + 5, im.len - 5);
    ck_assert_int_eq(decode_rc(im.png, im.len - 1, MAXPIX, err, sizeof(err)), -EILSEQ);
    img_free(&im);
    /* A JPEG handed to the PNG decoder. */
    fx_jpeg_opts_t o = {.width = 16, .height = 16, .seed = 1};
    uint8_t *jpg;
    size_t jlen;
    ck_assert_int_eq(fx_make_jpeg(&o, &jpg, &jlen), 0);
    ck_assert_int_eq(decode_rc(jpg, jlen, MAXPIX, err, sizeof(err)), -EILSEQ);
    sl_png_info_t info;
    ck_assert_int_eq(sl_png_probe(jpg, jlen, &info, err, sizeof(err)), -EILSEQ);
    free(jpg);
}
END_TEST

START_TEST(test_truncated)
{
    img_t im = plain();
    size_t idat = find_chunk(im.png, im.len, "IDAT");
    size_t idat_end = idat + 12 + rd32(im.png + idat);
    size_t cuts[] = {1, 4, 8, 20, 32, 33, 40, idat + 4, idat + 8, idat + 9,
                     idat + 8 + rd32(im.png + idat) / 2, idat_end - 5, idat_end - 1};
    char err[256];
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        int rc = decode_rc(im.png, cuts[i], MAXPIX, err, sizeof(err));
        ck_assert_msg(rc == -ENOMSG, "cut at %zu of %zu: %d %s", cuts[i], im.len, rc, err);
        ck_assert_ptr_nonnull(strstr(err, "truncated"));
    }
    /* Cut after the last IDAT (no IEND): every pixel is there; decodes as PIL. */
    sl_tensor_t out;
    sl_tensor_init(&out);
    ck_assert_int_eq(sl_png_decode(im.png, idat_end, MAXPIX, &out, err, sizeof(err)), 0);
    ck_assert_mem_eq(out.data, im.rgb, out.nbytes);
    sl_tensor_free(&out);
    img_free(&im);
}
END_TEST

START_TEST(test_crc)
{
    char err[256];
    img_t im = plain();
    size_t idat = find_chunk(im.png, im.len, "IDAT");
    uint32_t n = rd32(im.png + idat);
    /* A flipped byte in the compressed data: zlib or the row filters may
     * trip over it before the chunk's CRC is reached (libpng inflates as it
     * reads), so only the code is fixed (a flip in the zlib stream's
     * Adler-32, its last 4 bytes, is "incorrect data check"). In the CRC
     * field, the CRC check catches it. */
    size_t at[] = {idat + 8, idat + 9, idat + 8 + n / 3, idat + 8 + n / 2, idat + 8 + n - 1,
                   idat + 8 + n, idat + 8 + n + 3};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        im.png[at[i]] ^= 0x10;
        int rc = decode_rc(im.png, im.len, MAXPIX, err, sizeof(err));
        ck_assert_msg(rc == -EBADMSG, "flip at %zu: %d %s", at[i], rc, err);
        if (at[i] >= idat + 8 + n) {
            ck_assert_msg(strstr(err, "CRC") != NULL, "flip at %zu: %s", at[i], err);
        }
        im.png[at[i]] ^= 0x10;
    }
    /* In IHDR: caught by our own parser, in probe and decode. */
    im.png[18] ^= 0x01;
    ck_assert_int_eq(decode_rc(im.png, im.len, MAXPIX, err, sizeof(err)), -EBADMSG);
    ck_assert_str_eq(err, "IHDR: CRC error");
    sl_png_info_t info;
    ck_assert_int_eq(sl_png_probe(im.png, im.len, &info, err, sizeof(err)), -EBADMSG);
    im.png[18] ^= 0x01;
    /* Flipped bytes everywhere: never a crash, never a success with bad
     * pixels going unnoticed in IHDR/IDAT (a flip in IEND is not read). */
    size_t iend = find_chunk(im.png, im.len, "IEND");
    for (size_t i = 0; i < iend; i += 7) {
        im.png[i] ^= 0x5A;
        int rc = decode_rc(im.png, im.len, MAXPIX, err, sizeof(err));
        ck_assert_msg(rc == -EBADMSG || rc == -EILSEQ || rc == -ENOMSG || rc == -EFBIG,
                      "flip at %zu: %d %s", i, rc, err);
        im.png[i] ^= 0x5A;
    }
    img_free(&im);
}
END_TEST

START_TEST(test_bad_ihdr)
{
    char err[256];
    img_t im = plain();
    sl_png_info_t info;
    set_ihdr_size(im.png, 0, 47);
    ck_assert_int_eq(decode_rc(im.png, im.len, MAXPIX, err, sizeof(err)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(err, "bad size 0x47"));
    ck_assert_int_eq(sl_png_probe(im.png, im.len, &info, err, sizeof(err)), -EBADMSG);
    set_ihdr_size(im.png, 61, 0x80000000u);
    ck_assert_int_eq(decode_rc(im.png, im.len, MAXPIX, err, sizeof(err)), -EBADMSG);
    /* A bomb: refused from IHDR, the probe still reads it. */
    set_ihdr_size(im.png, 100000, 100000);
    ck_assert_int_eq(decode_rc(im.png, im.len, MAXPIX, err, sizeof(err)), -EFBIG);
    ck_assert_ptr_nonnull(strstr(err, "100000x100000"));
    ck_assert_int_eq(sl_png_probe(im.png, im.len, &info, err, sizeof(err)), 0);
    ck_assert_uint_eq(info.width, 100000);
    /* Within max_pixels but beyond SL_TENSOR_MAX_BYTES. */
    set_ihdr_size(im.png, 50000, 50000);
    ck_assert_int_eq(decode_rc(im.png, im.len, UINT64_MAX, err, sizeof(err)), -EFBIG);
    /* A strip whose 16-bit RGBA rows (libpng keeps two) outgrow the limit. */
    im.png[24] = 16;
    im.png[25] = 6;
    set_ihdr_size(im.png, 200000000, 1);
    ck_assert_int_eq(decode_rc(im.png, im.len, UINT64_MAX, err, sizeof(err)), -EFBIG);
    ck_assert_ptr_nonnull(strstr(err, "too wide"));
    im.png[24] = 8;
    im.png[25] = 2;
    /* max_pixels is inclusive. */
    set_ihdr_size(im.png, 61, 47);
    ck_assert_int_eq(decode_rc(im.png, im.len, 61 * 47, err, sizeof(err)), 0);
    ck_assert_int_eq(decode_rc(im.png, im.len, 61 * 47 - 1, err, sizeof(err)), -EFBIG);
    /* Bad depth for the colour type, unknown interlace. */
    im.png[24] = 4; /* RGB at 4 bits */
    wr32(im.png + 29, crc(im.png + 12, 17));
    ck_assert_int_eq(decode_rc(im.png, im.len, MAXPIX, err, sizeof(err)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(err, "bit depth"));
    im.png[24] = 8;
    im.png[28] = 2;
    wr32(im.png + 29, crc(im.png + 12, 17));
    ck_assert_int_eq(decode_rc(im.png, im.len, MAXPIX, err, sizeof(err)), -EBADMSG);
    /* First chunk not IHDR. */
    memcpy(im.png + 12, "IHDX", 4);
    ck_assert_int_eq(decode_rc(im.png, im.len, MAXPIX, err, sizeof(err)), -EBADMSG);
    img_free(&im);
}
END_TEST

/* The image data ends before the last row, though the file goes on to IEND:
 * IDATs of a 20-row image under an IHDR claiming 47 rows. Interlaced, the
 * passes of 20 rows do not line up with those of 47: the data is misread
 * (a bad filter byte, corrupt) before it runs out, or runs out (truncated). */
START_TEST(test_short_idat)
{
    char err[256];
    spec_t s = {.w = 61, .h = 20, .ct = PNG_COLOR_TYPE_RGB, .depth = 8, .seed = 9};
    for (int il = 0; il <= 1; il++) {
        s.interlace = il;
        img_t im = make_png(&s);
        set_ihdr_size(im.png, 61, 47);
        int rc = decode_rc(im.png, im.len, MAXPIX, err, sizeof(err));
        if (il) {
            ck_assert_msg(rc == -ENOMSG || rc == -EBADMSG, "interlaced: %d %s", rc, err);
        } else {
            ck_assert_msg(rc == -ENOMSG, "%d %s", rc, err);
            ck_assert_ptr_nonnull(strstr(err, "image data"));
        }
        img_free(&im);
    }
    /* An IDAT whose length field (CRC fixed) drops its second half. */
    img_t im = plain();
    size_t idat = find_chunk(im.png, im.len, "IDAT");
    uint32_t n = rd32(im.png + idat);
    uint32_t keep = n / 2;
    memmove(im.png + idat + 8 + keep, im.png + idat + 8 + n, im.len - (idat + 8 + n));
    size_t len = im.len - (n - keep);
    wr32(im.png + idat, keep);
    wr32(im.png + idat + 8 + keep, crc(im.png + idat + 4, 4 + keep));
    int rc = decode_rc(im.png, len, MAXPIX, err, sizeof(err));
    ck_assert_msg(rc == -ENOMSG || rc == -EBADMSG, "%d %s", rc, err);
    img_free(&im);
}
END_TEST

START_TEST(test_missing_plte)
{
    char err[256];
    spec_t s = {.w = 9, .h = 9, .ct = PNG_COLOR_TYPE_PALETTE, .depth = 8, .npal = 16};
    img_t im = make_png(&s);
    size_t plte = find_chunk(im.png, im.len, "PLTE");
    size_t clen = 12 + rd32(im.png + plte);
    memmove(im.png + plte, im.png + plte + clen, im.len - plte - clen);
    ck_assert_int_eq(decode_rc(im.png, im.len - clen, MAXPIX, err, sizeof(err)), -EBADMSG);
    img_free(&im);
}
END_TEST

START_TEST(test_probe_prefix)
{
    char err[256];
    img_t im = plain();
    sl_png_info_t info = {0};
    ck_assert_int_eq(sl_png_probe(im.png, 32, &info, err, sizeof(err)), -ENOMSG);
    ck_assert_uint_eq(info.width, 0); /* untouched */
    ck_assert_int_eq(sl_png_probe(im.png, 5, &info, err, sizeof(err)), -ENOMSG);
    ck_assert_int_eq(sl_png_probe(im.png, 0, &info, err, sizeof(err)), -ENODATA);
    ck_assert_int_eq(sl_png_probe(im.png, SL_PNG_PROBE_BYTES, &info, err, sizeof(err)), 0);
    ck_assert_uint_eq(info.width, 61);
    ck_assert_uint_eq(info.height, 47);
    ck_assert_uint_eq(info.channels, 3);
    img_free(&im);
}
END_TEST

/* --- the front door --- */

START_TEST(test_front_door)
{
    char err[256];
    img_t im = plain();
    fx_jpeg_opts_t o = {.width = 33, .height = 17, .seed = 4};
    uint8_t *jpg;
    size_t jlen;
    ck_assert_int_eq(fx_make_jpeg(&o, &jpg, &jlen), 0);

    ck_assert_int_eq(sl_image_sniff(im.png, im.len), SL_IMAGE_PNG);
    ck_assert_int_eq(sl_image_sniff(im.png, 3), SL_IMAGE_PNG);
    ck_assert_int_eq(sl_image_sniff(jpg, jlen), SL_IMAGE_JPEG);
    ck_assert_int_eq(sl_image_sniff((const uint8_t *)"BM", 2), SL_IMAGE_UNKNOWN);
    ck_assert_int_eq(sl_image_sniff(NULL, 0), SL_IMAGE_UNKNOWN);
    ck_assert_str_eq(sl_image_format_name(SL_IMAGE_PNG), "png");

    uint32_t w = 0, h = 0;
    sl_image_format_e fmt = SL_IMAGE_UNKNOWN;
    ck_assert_int_eq(sl_image_probe(im.png, 40, &w, &h, &fmt, err, sizeof(err)), 0);
    ck_assert(w == 61 && h == 47 && fmt == SL_IMAGE_PNG);
    ck_assert_int_eq(sl_image_probe(jpg, jlen, &w, &h, &fmt, err, sizeof(err)), 0);
    ck_assert(w == 33 && h == 17 && fmt == SL_IMAGE_JPEG);

    sl_tensor_t out, ref;
    sl_tensor_init(&out);
    sl_tensor_init(&ref);
    ck_assert_int_eq(sl_image_decode(im.png, im.len, MAXPIX, &out, &fmt, err, sizeof(err)), 0);
    ck_assert_int_eq(fmt, SL_IMAGE_PNG);
    ck_assert_mem_eq(out.data, im.rgb, out.nbytes);
    ck_assert_int_eq(sl_image_decode(jpg, jlen, MAXPIX, &out, &fmt, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_jpeg_decode(jpg, jlen, MAXPIX, &ref, err, sizeof(err)), 0);
    ck_assert(fmt == SL_IMAGE_JPEG && out.nbytes == ref.nbytes && out.c == 3);
    ck_assert_mem_eq(out.data, ref.data, ref.nbytes);

    /* Same codes for the same failures, whatever the format. */
    ck_assert_int_eq(sl_image_decode(jpg, jlen, 10, &out, NULL, err, sizeof(err)), -EFBIG);
    ck_assert_int_eq(sl_image_decode(im.png, im.len, 10, &out, NULL, err, sizeof(err)), -EFBIG);
    ck_assert_int_eq(sl_image_decode(jpg, jlen / 2, MAXPIX, &out, NULL, err, sizeof(err)),
                     -ENOMSG);
    ck_assert_int_eq(sl_image_decode(im.png, im.len / 2, MAXPIX, &out, NULL, err, sizeof(err)),
                     -ENOMSG);
    ck_assert_int_eq(sl_image_decode((const uint8_t *)"BM\0\0", 4, MAXPIX, &out, &fmt, err,
                                     sizeof(err)),
                     -EILSEQ);
    ck_assert_int_eq(fmt, SL_IMAGE_UNKNOWN);
    ck_assert_ptr_nonnull(strstr(err, "not an image"));
    ck_assert_int_eq(sl_image_decode(NULL, 0, MAXPIX, &out, NULL, err, sizeof(err)), -ENODATA);
    ck_assert_int_eq(sl_image_probe((const uint8_t *)"x", 1, &w, &h, NULL, err, sizeof(err)),
                     -EILSEQ);
    sl_tensor_free(&out);
    sl_tensor_free(&ref);
    free(jpg);
    img_free(&im);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("png");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_kind_exact);
    tcase_add_test(tc, test_wide_strip);
    tcase_add_test(tc, test_not_png);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_crc);
    tcase_add_test(tc, test_bad_ihdr);
    tcase_add_test(tc, test_short_idat);
    tcase_add_test(tc, test_missing_plte);
    tcase_add_test(tc, test_probe_prefix);
    tcase_add_test(tc, test_front_door);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
