#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/image/jpeg.h"
#include "common/image/imgops.h"
#include "common/base/rng.h"
#include "tests/unit/fixtures.h"

#define MAXPIX 100000000ull

/* One fixture per kind of file the decoder must handle. Odd sizes exercise
 * partial MCUs at the right and bottom edges. */
typedef struct kind_s {
    const char *name;
    fx_jpeg_opts_t o;
    sl_jpeg_colorspace_e cs;
    uint32_t comps;
    uint8_t sh, sv;
} kind_t;

static const kind_t kinds[] = {
    {"ycbcr420", {.width = 257, .height = 131, .quality = 95, .seed = 1}, SL_JCS_YCBCR, 3, 2, 2},
    {"ycbcr422", {.width = 200, .height = 97, .quality = 95, .h_samp = 2, .v_samp = 1, .seed = 2},
     SL_JCS_YCBCR, 3, 2, 1},
    {"ycbcr444", {.width = 123, .height = 77, .quality = 95, .h_samp = 1, .v_samp = 1, .seed = 3},
     SL_JCS_YCBCR, 3, 1, 1},
    {"rgb", {.width = 99, .height = 64, .quality = 95, .color = FX_COLOR_RGB, .seed = 4},
     SL_JCS_RGB, 3, 1, 1},
    {"gray", {.width = 211, .height = 119, .quality = 95, .color = FX_COLOR_GRAY, .seed = 5},
     SL_JCS_GRAY, 1, 1, 1},
    {"cmyk", {.width = 150, .height = 101, .quality = 95, .color = FX_COLOR_CMYK, .seed = 6},
     SL_JCS_CMYK, 4, 1, 1},
    {"cmyk_noadobe",
     {.width = 90, .height = 70, .quality = 95, .color = FX_COLOR_CMYK, .no_adobe = true,
      .seed = 7},
     SL_JCS_CMYK, 4, 1, 1},
    {"ycck", {.width = 177, .height = 93, .quality = 95, .color = FX_COLOR_YCCK, .seed = 8},
     SL_JCS_YCCK, 4, 2, 2},
    {"progressive", {.width = 241, .height = 187, .quality = 95, .progressive = true, .seed = 9},
     SL_JCS_YCBCR, 3, 2, 2},
    {"progressive_gray",
     {.width = 130, .height = 150, .quality = 95, .color = FX_COLOR_GRAY, .progressive = true,
      .seed = 10},
     SL_JCS_GRAY, 1, 1, 1},
    {"progressive_cmyk",
     {.width = 140, .height = 90, .quality = 95, .color = FX_COLOR_CMYK, .progressive = true,
      .seed = 11},
     SL_JCS_CMYK, 4, 1, 1},
    {"restart", {.width = 260, .height = 140, .quality = 95, .restart_interval = 3, .seed = 12},
     SL_JCS_YCBCR, 3, 2, 2},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static uint8_t *make(const fx_jpeg_opts_t *o, size_t *len)
{
    uint8_t *buf = NULL;
    ck_assert_int_eq(fx_make_jpeg(o, &buf, len), 0);
    ck_assert_ptr_nonnull(buf);
    return buf;
}

/* The RGB a perfect decoder would return for a fixture. */
static uint8_t *expected_rgb(const fx_jpeg_opts_t *o)
{
    size_t n = (size_t)o->width * o->height;
    uint8_t *rgb = malloc(n * 3);
    ck_assert_ptr_nonnull(rgb);
    fx_pattern_rgb(o->width, o->height, o->seed, rgb);
    if (o->color == FX_COLOR_GRAY) {
        for (size_t i = 0; i < n; i++) {
            memset(rgb + i * 3, fx_rgb_to_gray(rgb + i * 3), 3);
        }
    }
    return rgb;
}

static double mad(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += (uint64_t)abs((int)a[i] - (int)b[i]);
    }
    return n ? (double)sum / (double)n : 0.0;
}

static size_t find_marker(const uint8_t *buf, size_t len, uint8_t m)
{
    for (size_t i = 2; i + 1 < len; i++) {
        if (buf[i] == 0xFF && buf[i + 1] == m) {
            return i;
        }
    }
    ck_abort_msg("marker 0x%02x not found", m);
    return 0;
}

static size_t find_sof(const uint8_t *buf, size_t len)
{
    for (size_t i = 2; i + 1 < len; i++) {
        if (buf[i] == 0xFF && (buf[i + 1] == 0xC0 || buf[i + 1] == 0xC1 || buf[i + 1] == 0xC2)) {
            return i;
        }
    }
    ck_abort_msg("no SOF");
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(test_probe_kinds)
{
    for (size_t k = 0; k < NKINDS; k++) {
        const kind_t *kd = &kinds[k];
        size_t len;
        uint8_t *buf = make(&kd->o, &len);
        sl_jpeg_info_t info;
        char err[256] = "";
        int rc = sl_jpeg_probe(buf, len, &info, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s: %d %s", kd->name, rc, err);
        ck_assert_uint_eq(info.width, kd->o.width);
        ck_assert_uint_eq(info.height, kd->o.height);
        ck_assert_uint_eq(info.components, kd->comps);
        ck_assert_msg(info.colorspace == kd->cs, "%s: colorspace %d", kd->name,
                      (int)info.colorspace);
        ck_assert_int_eq(info.progressive, kd->o.progressive);
        ck_assert_msg(info.subsamp_h == kd->sh && info.subsamp_v == kd->sv, "%s: %ux%u",
                      kd->name, info.subsamp_h, info.subsamp_v);
        free(buf);
    }
}
END_TEST

START_TEST(test_decode_kinds)
{
    sl_tensor_t t;
    sl_tensor_init(&t);
    for (size_t k = 0; k < NKINDS; k++) {
        const kind_t *kd = &kinds[k];
        size_t len;
        uint8_t *buf = make(&kd->o, &len);
        char err[256] = "";
        int rc = sl_jpeg_decode(buf, len, MAXPIX, &t, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s: %d %s", kd->name, rc, err);
        ck_assert_uint_eq(t.h, kd->o.height);
        ck_assert_uint_eq(t.w, kd->o.width);
        ck_assert_uint_eq(t.c, 3);
        ck_assert_int_eq(t.dtype, SL_DT_U8);
        ck_assert_int_eq(t.layout, SL_LAYOUT_HWC);
        ck_assert_uint_eq(t.nbytes, (size_t)t.h * t.w * 3);
        uint8_t *ref = expected_rgb(&kd->o);
        double d = mad(t.data, ref, t.nbytes);
        ck_assert_msg(d < 8.0, "%s: mean abs diff %.2f", kd->name, d);
        free(ref);
        free(buf);
    }
    sl_tensor_free(&t);
}
END_TEST

/* Decodes a 16x16 CMYK file of one stored value, returns its centre pixel. */
static void decode_cmyk_solid(const uint8_t cmyk[4], fx_color_e color, bool no_adobe,
                              uint8_t rgb[3])
{
    fx_jpeg_opts_t o = {.width = 16, .height = 16, .quality = 100, .color = color,
                        .no_adobe = no_adobe, .h_samp = 1, .v_samp = 1};
    uint8_t px[16 * 16 * 4];
    for (int i = 0; i < 16 * 16; i++) {
        memcpy(px + i * 4, cmyk, 4);
    }
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fx_jpeg_encode(px, &o, &buf, &len), 0);
    sl_tensor_t t;
    sl_tensor_init(&t);
    char err[256] = "";
    int rc = sl_jpeg_decode(buf, len, MAXPIX, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "%d %s", rc, err);
    memcpy(rgb, t.data + (8 * 16 + 8) * 3, 3);
    sl_tensor_free(&t);
    free(buf);
}

static void assert_rgb_near(const uint8_t got[3], int r, int g, int b, const char *what)
{
    ck_assert_msg(abs(got[0] - r) <= 3 && abs(got[1] - g) <= 3 && abs(got[2] - b) <= 3,
                  "%s: got %d,%d,%d want %d,%d,%d", what, got[0], got[1], got[2], r, g, b);
}

START_TEST(test_cmyk_known_colours)
{
    uint8_t rgb[3];
    /* Hand-written stored values. Adobe (inverted): 255 = no ink. */
    decode_cmyk_solid((const uint8_t[]){255, 0, 0, 255}, FX_COLOR_CMYK, false, rgb);
    assert_rgb_near(rgb, 255, 0, 0, "adobe red");
    decode_cmyk_solid((const uint8_t[]){255, 255, 255, 128}, FX_COLOR_CMYK, false, rgb);
    assert_rgb_near(rgb, 128, 128, 128, "adobe 50% K");
    decode_cmyk_solid((const uint8_t[]){255, 128, 255, 255}, FX_COLOR_CMYK, false, rgb);
    assert_rgb_near(rgb, 255, 128, 255, "adobe 50% M");
    /* No Adobe marker: plain CMYK, 0 = no ink. */
    decode_cmyk_solid((const uint8_t[]){0, 255, 255, 0}, FX_COLOR_CMYK, true, rgb);
    assert_rgb_near(rgb, 255, 0, 0, "plain red");
    decode_cmyk_solid((const uint8_t[]){0, 0, 0, 255}, FX_COLOR_CMYK, true, rgb);
    assert_rgb_near(rgb, 0, 0, 0, "plain black");
    decode_cmyk_solid((const uint8_t[]){0, 0, 0, 0}, FX_COLOR_CMYK, true, rgb);
    assert_rgb_near(rgb, 255, 255, 255, "plain white");

    /* Round trips through the fixture's conversion, CMYK and YCCK. */
    static const uint8_t cols[][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {128, 64, 32},
                                      {200, 200, 50}, {10, 10, 10}, {250, 250, 250}};
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
        uint8_t cmyk[4];
        fx_rgb_to_cmyk(cols[i], true, cmyk);
        decode_cmyk_solid(cmyk, FX_COLOR_CMYK, false, rgb);
        assert_rgb_near(rgb, cols[i][0], cols[i][1], cols[i][2], "cmyk round trip");
        decode_cmyk_solid(cmyk, FX_COLOR_YCCK, false, rgb);
        assert_rgb_near(rgb, cols[i][0], cols[i][1], cols[i][2], "ycck round trip");
        fx_rgb_to_cmyk(cols[i], false, cmyk);
        decode_cmyk_solid(cmyk, FX_COLOR_CMYK, true, rgb);
        assert_rgb_near(rgb, cols[i][0], cols[i][1], cols[i][2], "plain round trip");
    }
}
END_TEST

/* All three entry points on one input; the decoders must agree on the code. */
static int decode_all(const uint8_t *buf, size_t len, int *ret_probe)
{
    sl_tensor_t t;
    sl_tensor_init(&t);
    char err[256] = "";
    sl_jpeg_info_t info;
    *ret_probe = sl_jpeg_probe(buf, len, &info, err, sizeof(err));
    int rc = sl_jpeg_decode(buf, len, MAXPIX, &t, err, sizeof(err));
    if (rc < 0) {
        ck_assert_msg(err[0] != '\0', "no error text for %d", rc);
    }
    uint32_t x0, y0;
    int rc2 = sl_jpeg_decode_region(buf, len, MAXPIX, 0, 0, 1, 1, 1, &t, &x0, &y0, err,
                                    sizeof(err));
    /* The region decoder stops early, so it may succeed where the full
     * decode finds damage further down; otherwise the codes agree. */
    if (rc2 < 0) {
        ck_assert_int_eq(rc2, rc);
    }
    sl_tensor_free(&t);
    return rc;
}

START_TEST(test_broken_inputs)
{
    int p;
    ck_assert_int_eq(decode_all(NULL, 0, &p), -ENODATA);
    ck_assert_int_eq(p, -ENODATA);
    const uint8_t one[] = {0xFF};
    ck_assert_int_eq(decode_all(one, 1, &p), -EILSEQ);
    ck_assert_int_eq(p, -EILSEQ);
    const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13};
    ck_assert_int_eq(decode_all(png, sizeof(png), &p), -EILSEQ);
    ck_assert_int_eq(p, -EILSEQ);
    const uint8_t soi_only[] = {0xFF, 0xD8};
    ck_assert_int_eq(decode_all(soi_only, sizeof(soi_only), &p), -ENOMSG);
    ck_assert_int_eq(p, -ENOMSG);
    const uint8_t soi_eoi[] = {0xFF, 0xD8, 0xFF, 0xD9};
    ck_assert_int_eq(decode_all(soi_eoi, sizeof(soi_eoi), &p), -EBADMSG);
    ck_assert_int_eq(p, -EBADMSG);

    uint8_t rnd[4096];
    for (uint64_t s = 0; s < 50; s++) {
        sl_rng_t r;
        sl_rng_init(&r, s, 0, 0, 0);
        for (size_t i = 0; i < sizeof(rnd); i++) {
            rnd[i] = (uint8_t)sl_rng_u64(&r);
        }
        size_t len = 1 + (size_t)sl_rng_below(&r, sizeof(rnd));
        rnd[0] = rnd[0] == 0xFF ? 0 : rnd[0];
        ck_assert_int_eq(decode_all(rnd, len, &p), -EILSEQ);
        /* Random bytes behind a valid SOI: an error, never a crash. */
        rnd[0] = 0xFF;
        rnd[1] = 0xD8;
        int rc = decode_all(rnd, len, &p);
        ck_assert_msg(rc == -EBADMSG || rc == -ENOMSG, "seed %d: %d", (int)s, rc);
    }
}
END_TEST

START_TEST(test_truncated)
{
    static const size_t which[] = {0, 7, 8, 11};
    for (size_t k = 0; k < sizeof(which) / sizeof(which[0]); k++) {
        const kind_t *kd = &kinds[which[k]];
        size_t len;
        uint8_t *buf = make(&kd->o, &len);
        size_t sos = find_marker(buf, len, 0xDA);
        const size_t cuts[] = {3, 4, 20, 100, sos - 1, sos + 4, sos + 30, len / 2,
                               len * 3 / 4, len - 10, len - 3};
        for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
            int p;
            int rc = decode_all(buf, cuts[c], &p);
            ck_assert_msg(rc == -ENOMSG, "%s cut at %zu of %zu: %d", kd->name, cuts[c], len,
                          rc);
            if (cuts[c] < sos) {
                ck_assert_int_eq(p, -ENOMSG);
            }
        }
        /* Only the EOI missing: the pixels may all be there; no crash, and
         * never a wrong code. */
        int p;
        int rc = decode_all(buf, len - 2, &p);
        ck_assert_msg(rc == 0 || rc == -ENOMSG, "%s without EOI: %d", kd->name, rc);
        free(buf);
    }

    /* A sequential file is read only as far as a region needs: the top of a
     * file cut at 3/4 still decodes, identical to the intact file. */
    size_t len;
    uint8_t *buf = make(&kinds[0].o, &len);
    sl_tensor_t a, b;
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    uint32_t x0, y0;
    ck_assert_int_eq(sl_jpeg_decode_region(buf, len, MAXPIX, 5, 3, 40, 20, 1, &a, &x0, &y0,
                                           NULL, 0),
                     0);
    ck_assert_int_eq(sl_jpeg_decode_region(buf, len * 3 / 4, MAXPIX, 5, 3, 40, 20, 1, &b, &x0,
                                           &y0, NULL, 0),
                     0);
    ck_assert_uint_eq(a.nbytes, b.nbytes);
    ck_assert_mem_eq(a.data, b.data, a.nbytes);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    free(buf);
}
END_TEST

/* A progressive region is decoded from a frame cut an iMCU row below it
 * (dec_short_frame): each scan's rows below are skipped to the next marker.
 * A file cut anywhere in its scans must still fail as truncated, for a
 * region at the top (the frame cut shortest) as for the whole image, and a
 * cut that leaves every scan whole but the EOI must not pass as corrupt. */
START_TEST(test_region_progressive_truncated)
{
    static const size_t which[] = {8, 9, 10};
    sl_tensor_t t;
    sl_tensor_init(&t);
    for (size_t k = 0; k < sizeof(which) / sizeof(which[0]); k++) {
        const kind_t *kd = &kinds[which[k]];
        ck_assert(kd->o.progressive);
        size_t len;
        uint8_t *buf = make(&kd->o, &len);
        size_t sos = find_marker(buf, len, 0xDA);
        const size_t cuts[] = {sos + 30, len / 2, len * 3 / 4, len - 10, len - 3};
        for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
            for (uint32_t m = 1; m <= 8; m++) {
                uint32_t x0, y0;
                char err[256] = "";
                int rc = sl_jpeg_decode_region_timed(buf, cuts[c], MAXPIX, 3, 2, 9, 7, m, &t,
                                                     &x0, &y0, NULL, err, sizeof(err));
                ck_assert_msg(rc == -ENOMSG, "%s cut at %zu of %zu, %u/8: %d %s", kd->name,
                              cuts[c], len, m, rc, err);
            }
        }
        uint32_t x0, y0;
        int rc = sl_jpeg_decode_region_timed(buf, len - 2, MAXPIX, 3, 2, 9, 7, 8, &t, &x0, &y0,
                                             NULL, NULL, 0);
        ck_assert_msg(rc == 0 || rc == -ENOMSG, "%s without EOI: %d", kd->name, rc);
        free(buf);
    }
    sl_tensor_free(&t);
}
END_TEST

/* Damage in the part of a scan a cut frame skips can forge a marker there:
 * an EOI (libjpeg would stop before the later scans) or a parseable segment
 * (a comment) followed by more scan bytes. The whole frame fails on both;
 * so must the region, with the same code, however small the region. */
START_TEST(test_region_progressive_forged_marker)
{
    static const uint8_t forged[][6] = {
        {0xFF, 0xD9, 0, 0, 0, 0},          /* EOI */
        {0xFF, 0xFE, 0x00, 0x04, 'h', 'i'}, /* a 2-byte comment */
    };
    sl_tensor_t t;
    sl_tensor_init(&t);
    size_t len;
    uint8_t *orig = make(&kinds[8].o, &len);
    ck_assert(kinds[8].o.progressive);
    uint8_t *buf = malloc(len);
    /* The first scan's data ends at the next marker; its last bytes are the
     * bottom rows', far below a region at the top. */
    size_t sos = find_marker(orig, len, 0xDA);
    size_t end = sos + 2 + (((size_t)orig[sos + 2] << 8) | orig[sos + 3]);
    while (end + 1 < len && !(orig[end] == 0xFF && orig[end + 1] != 0x00)) {
        end++;
    }
    ck_assert_uint_gt(end, sos + 40);
    for (size_t f = 0; f < sizeof(forged) / sizeof(forged[0]); f++) {
        memcpy(buf, orig, len);
        size_t n = forged[f][2] == 0 ? 2 : 6;
        memcpy(buf + end - 12, forged[f], n);
        char err[256] = "";
        int full = sl_jpeg_decode(buf, len, MAXPIX, &t, err, sizeof(err));
        ck_assert_msg(full == -EBADMSG, "forged %zu: whole frame %d %s", f, full, err);
        for (uint32_t m = 1; m <= 8; m++) {
            uint32_t x0, y0;
            int rc = sl_jpeg_decode_region_timed(buf, len, MAXPIX, 2, 1, 8, 6, m, &t, &x0, &y0,
                                                 NULL, err, sizeof(err));
            ck_assert_msg(rc == full, "forged %zu, %u/8: region %d %s", f, m, rc, err);
        }
    }
    free(buf);
    free(orig);
    sl_tensor_free(&t);
}
END_TEST

START_TEST(test_flipped_scan_bytes)
{
    static const size_t which[] = {0, 4, 5, 8, 11};
    int counts[3] = {0, 0, 0};
    for (size_t k = 0; k < sizeof(which) / sizeof(which[0]); k++) {
        const kind_t *kd = &kinds[which[k]];
        size_t len;
        uint8_t *orig = make(&kd->o, &len);
        uint8_t *buf = malloc(len);
        size_t sos = find_marker(orig, len, 0xDA);
        sl_rng_t r;
        sl_rng_init(&r, 99, k, 0, 0);
        for (int i = 0; i < 150; i++) {
            memcpy(buf, orig, len);
            size_t pos = sos + 20 + (size_t)sl_rng_below(&r, len - sos - 22);
            buf[pos] ^= (uint8_t)(1 + sl_rng_below(&r, 255));
            int p;
            int rc = decode_all(buf, len, &p);
            /* -ENOMSG: a flip that forges a marker whose length runs off
             * the end of the data. */
            ck_assert_msg(rc == 0 || rc == -EBADMSG || rc == -ENOMSG, "%s flip at %zu: %d",
                          kd->name, pos, rc);
            counts[rc == 0 ? 0 : rc == -EBADMSG ? 1 : 2]++;
        }
        free(buf);
        free(orig);
    }
    /* Huffman data resynchronises quickly, so most flips decode (to wrong
     * pixels); some must still be caught. */
    ck_assert_int_gt(counts[1], 0);
}
END_TEST

START_TEST(test_flipped_header_bytes)
{
    size_t len;
    uint8_t *orig = make(&kinds[0].o, &len);
    uint8_t *buf = malloc(len);
    size_t sof = find_sof(orig, len);
    size_t sos = find_marker(orig, len, 0xDA);
    size_t dht = find_marker(orig, len, 0xC4);
    /* Bytes whose damage libjpeg must reject: SOF marker, precision, component
     * count, SOS component count and selector, a Huffman count. */
    const size_t pos[] = {sof + 1, sof + 4, sof + 9, sos + 4, sos + 5, dht + 6, 1};
    for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++) {
        memcpy(buf, orig, len);
        buf[pos[i]] ^= 0x5A;
        int p;
        int rc = decode_all(buf, len, &p);
        ck_assert_msg(rc < 0, "flip at %zu decoded", pos[i]);
        ck_assert_msg(rc == -EBADMSG || rc == -ENOMSG || rc == -EILSEQ, "flip at %zu: %d",
                      pos[i], rc);
    }
    /* Any header byte: no crash, only documented codes. */
    for (size_t i = 2; i < sos + 14; i++) {
        memcpy(buf, orig, len);
        buf[i] ^= 0xFF;
        int p;
        int rc = decode_all(buf, len, &p);
        ck_assert_msg(rc == 0 || rc == -EBADMSG || rc == -ENOMSG || rc == -EFBIG,
                      "flip at %zu: %d", i, rc);
    }
    free(buf);
    free(orig);
}
END_TEST

START_TEST(test_bomb)
{
    static const size_t which[] = {0, 8};
    for (size_t k = 0; k < 2; k++) {
        size_t len;
        uint8_t *buf = make(&kinds[which[k]].o, &len);
        size_t sof = find_sof(buf, len);
        /* SOF: FF Cx, length(2), precision(1), height(2), width(2). */
        buf[sof + 5] = 40000 >> 8;
        buf[sof + 6] = 40000 & 0xFF;
        buf[sof + 7] = 40000 >> 8;
        buf[sof + 8] = 40000 & 0xFF;
        sl_jpeg_info_t info;
        char err[256] = "";
        ck_assert_int_eq(sl_jpeg_probe(buf, len, &info, err, sizeof(err)), 0);
        ck_assert_uint_eq(info.width, 40000);
        ck_assert_uint_eq(info.height, 40000);

        sl_tensor_t t;
        sl_tensor_init(&t);
        double t0 = now();
        ck_assert_int_eq(sl_jpeg_decode(buf, len, MAXPIX, &t, err, sizeof(err)), -EFBIG);
        uint32_t x0, y0;
        ck_assert_int_eq(sl_jpeg_decode_region(buf, len, MAXPIX, 0, 0, 16, 16, 8, &t, &x0, &y0,
                                               err, sizeof(err)),
                         -EFBIG);
        double dt = now() - t0;
        ck_assert_msg(dt < 0.05, "took %.3f s", dt);
        /* Nothing was allocated for the output. */
        ck_assert_ptr_null(t.data);
        free(buf);
    }
    /* The limit is inclusive. */
    size_t len;
    uint8_t *buf = make(&kinds[0].o, &len);
    sl_tensor_t t;
    sl_tensor_init(&t);
    uint64_t n = (uint64_t)kinds[0].o.width * kinds[0].o.height;
    ck_assert_int_eq(sl_jpeg_decode(buf, len, n, &t, NULL, 0), 0);
    ck_assert_int_eq(sl_jpeg_decode(buf, len, n - 1, &t, NULL, 0), -EFBIG);
    sl_tensor_free(&t);
    free(buf);
}
END_TEST

START_TEST(test_too_many_scans)
{
    fx_jpeg_opts_t o = {.width = 32, .height = 32, .color = FX_COLOR_GRAY, .many_scans = true};
    size_t len;
    uint8_t *buf = make(&o, &len);
    sl_jpeg_info_t info;
    ck_assert_int_eq(sl_jpeg_probe(buf, len, &info, NULL, 0), 0);
    ck_assert(info.progressive);
    sl_tensor_t t;
    sl_tensor_init(&t);
    char err[256] = "";
    ck_assert_int_eq(sl_jpeg_decode(buf, len, MAXPIX, &t, err, sizeof(err)), -EBADMSG);
    ck_assert_msg(strstr(err, "scans") != NULL, "%s", err);
    sl_tensor_free(&t);
    free(buf);
}
END_TEST

/* A random region inside w x h, biased towards edges and tiny sizes. */
static void pick_region(sl_rng_t *r, uint32_t W, uint32_t H, uint32_t *x, uint32_t *y,
                        uint32_t *w, uint32_t *h)
{
    *w = 1 + (uint32_t)sl_rng_below(r, W);
    *h = 1 + (uint32_t)sl_rng_below(r, H);
    *x = (uint32_t)sl_rng_below(r, W - *w + 1);
    *y = (uint32_t)sl_rng_below(r, H - *h + 1);
    switch (sl_rng_below(r, 6)) {
    case 0:
        *x = W - *w; /* right edge */
        break;
    case 1:
        *y = H - *h; /* bottom edge */
        break;
    case 2:
        *x = (*x / 16) * 16; /* iMCU-aligned start */
        break;
    default:
        break;
    }
}

START_TEST(test_region_scale1_exact)
{
    sl_tensor_t full, reg;
    sl_tensor_init(&full);
    sl_tensor_init(&reg);
    for (size_t k = 0; k < NKINDS; k++) {
        const kind_t *kd = &kinds[k];
        size_t len;
        uint8_t *buf = make(&kd->o, &len);
        ck_assert_int_eq(sl_jpeg_decode(buf, len, MAXPIX, &full, NULL, 0), 0);
        sl_rng_t r;
        sl_rng_init(&r, 5, k, 0, 0);
        for (int i = 0; i < 40; i++) {
            uint32_t x, y, w, h, x0, y0;
            pick_region(&r, full.w, full.h, &x, &y, &w, &h);
            char err[256] = "";
            int rc = sl_jpeg_decode_region(buf, len, MAXPIX, x, y, w, h, 1, &reg, &x0, &y0, err,
                                           sizeof(err));
            ck_assert_msg(rc == 0, "%s: %d %s", kd->name, rc, err);
            /* Convention: trimmed to exactly the region at scale 1. */
            ck_assert_uint_eq(x0, x);
            ck_assert_uint_eq(y0, y);
            ck_assert_uint_eq(reg.w, w);
            ck_assert_uint_eq(reg.h, h);
            ck_assert_uint_eq(reg.c, 3);
            for (uint32_t row = 0; row < h; row++) {
                const uint8_t *a = reg.data + (size_t)row * w * 3;
                const uint8_t *b = full.data + ((size_t)(y + row) * full.w + x) * 3;
                if (memcmp(a, b, (size_t)w * 3) != 0) {
                    ck_abort_msg("%s: region %u,%u %ux%u row %u differs", kd->name, x, y, w,
                                 h, row);
                }
            }
        }
        free(buf);
    }
    sl_tensor_free(&reg);
    sl_tensor_free(&full);
}
END_TEST

/* Mean abs difference between a scaled decode (its rectangle at x0, y0 of the
 * scaled image) and an s x s box average of the full decode. */
static double box_diff(const sl_tensor_t *full, const sl_tensor_t *reg, uint32_t x0,
                       uint32_t y0, uint32_t s)
{
    uint32_t W = full->w, H = full->h;
    uint64_t sum = 0, n = 0;
    for (uint32_t ry = 0; ry < reg->h; ry++) {
        for (uint32_t rx = 0; rx < reg->w; rx++) {
            uint32_t bx0 = (x0 + rx) * s, by0 = (y0 + ry) * s;
            uint32_t bx1 = bx0 + s < W ? bx0 + s : W;
            uint32_t by1 = by0 + s < H ? by0 + s : H;
            for (int c = 0; c < 3; c++) {
                uint32_t acc = 0, cnt = 0;
                for (uint32_t by = by0; by < by1; by++) {
                    for (uint32_t bx = bx0; bx < bx1; bx++) {
                        acc += full->data[((size_t)by * W + bx) * 3 + c];
                        cnt++;
                    }
                }
                int box = (int)((acc + cnt / 2) / cnt);
                sum += (uint64_t)abs(box - reg->data[((size_t)ry * reg->w + rx) * 3 + c]);
                n++;
            }
        }
    }
    return (double)sum / (double)n;
}

START_TEST(test_region_scaled)
{
    sl_tensor_t full, whole, reg;
    sl_tensor_init(&full);
    sl_tensor_init(&whole);
    sl_tensor_init(&reg);
    for (size_t k = 0; k < NKINDS; k++) {
        const kind_t *kd = &kinds[k];
        size_t len;
        uint8_t *buf = make(&kd->o, &len);
        ck_assert_int_eq(sl_jpeg_decode(buf, len, MAXPIX, &full, NULL, 0), 0);
        uint32_t W = full.w, H = full.h;
        sl_rng_t r;
        sl_rng_init(&r, 6, k, 0, 0);
        for (uint32_t s = 2; s <= 8; s *= 2) {
            /* Whole image at 1/s: ceil(W/s) x ceil(H/s), close to a box
             * downscale (DCT scaling is a low-pass, not a box filter). */
            uint32_t x0, y0;
            char err[256] = "";
            int rc = sl_jpeg_decode_region(buf, len, MAXPIX, 0, 0, W, H, s, &whole, &x0, &y0,
                                           err, sizeof(err));
            ck_assert_msg(rc == 0, "%s: %d %s", kd->name, rc, err);
            uint32_t sw = (W + s - 1) / s, sh = (H + s - 1) / s;
            ck_assert_uint_eq(x0, 0);
            ck_assert_uint_eq(y0, 0);
            ck_assert_uint_eq(whole.w, sw);
            ck_assert_uint_eq(whole.h, sh);
            double d = box_diff(&full, &whole, 0, 0, s);
            ck_assert_msg(d < 4.0, "%s 1/%u: mean abs diff %.2f", kd->name, s, d);
            /* Regions: the right rectangle, equal to that part of the whole
             * scaled image. */
            for (int i = 0; i < 15; i++) {
                uint32_t x, y, w, h;
                pick_region(&r, W, H, &x, &y, &w, &h);
                rc = sl_jpeg_decode_region(buf, len, MAXPIX, x, y, w, h, s, &reg, &x0, &y0, err,
                                           sizeof(err));
                ck_assert_msg(rc == 0, "%s: %d %s", kd->name, rc, err);
                uint32_t x1 = (x + w + s - 1) / s, y1 = (y + h + s - 1) / s;
                ck_assert_uint_eq(x0, x / s);
                ck_assert_uint_eq(y0, y / s);
                ck_assert_uint_eq(reg.w, (x1 < sw ? x1 : sw) - x0);
                ck_assert_uint_eq(reg.h, (y1 < sh ? y1 : sh) - y0);
                for (uint32_t row = 0; row < reg.h; row++) {
                    const uint8_t *a = reg.data + (size_t)row * reg.w * 3;
                    const uint8_t *b = whole.data + ((size_t)(y0 + row) * sw + x0) * 3;
                    if (memcmp(a, b, (size_t)reg.w * 3) != 0) {
                        ck_abort_msg("%s 1/%u: region %u,%u %ux%u row %u differs", kd->name, s,
                                     x, y, w, h, row);
                    }
                }
            }
        }
        free(buf);
    }
    sl_tensor_free(&reg);
    sl_tensor_free(&whole);
    sl_tensor_free(&full);
}
END_TEST

/* The pipeline's wide region (sl_jpeg_decode_region_timed) against the exact
 * one (reg at x0, y0): the same rows, columns that contain the exact ones, and
 * the same bytes in them. Counts in *widened the calls that returned more
 * columns, so the caller can check the wide path ran at all. */
static void check_wide(const uint8_t *buf, size_t len, uint32_t x, uint32_t y, uint32_t w,
                       uint32_t h, uint32_t m, const sl_tensor_t *reg, uint32_t x0, uint32_t y0,
                       sl_tensor_t *wide, unsigned *widened)
{
    uint32_t wx0, wy0;
    sl_jpeg_times_t jt = {-1, -1};
    char err[256] = "";
    int rc = sl_jpeg_decode_region_timed(buf, len, MAXPIX, x, y, w, h, m, wide, &wx0, &wy0, &jt,
                                         err, sizeof(err));
    ck_assert_msg(rc == 0, "wide %u/8: %d %s", m, rc, err);
    ck_assert(jt.skip_sec >= 0 && jt.rows_sec >= 0);
    ck_assert_uint_eq(wy0, y0);
    ck_assert_uint_eq(wide->h, reg->h);
    ck_assert_uint_eq(wide->c, 3);
    ck_assert_uint_le(wx0, x0);
    ck_assert_uint_ge(wx0 + wide->w, x0 + reg->w);
    *widened += wide->w > reg->w;
    for (uint32_t row = 0; row < reg->h; row++) {
        const uint8_t *a = reg->data + (size_t)row * reg->w * 3;
        const uint8_t *b = wide->data + ((size_t)row * wide->w + (x0 - wx0)) * 3;
        if (memcmp(a, b, (size_t)reg->w * 3) != 0) {
            ck_abort_msg("wide %u/8: region %u,%u %ux%u row %u differs", m, x, y, w, h, row);
        }
    }
}

/* Every scale M/8: the region is the right rectangle of the scaled image
 * (ceil(W*M/8) x ceil(H*M/8)) and equal to that part of the whole image
 * decoded at M/8; M = 8/d is bit-identical to the 1/d entry point; the wide
 * variant holds the same bytes. */
START_TEST(test_region_m8)
{
    sl_tensor_t whole, reg, old, wide;
    sl_tensor_init(&whole);
    sl_tensor_init(&reg);
    sl_tensor_init(&old);
    sl_tensor_init(&wide);
    unsigned widened = 0;
    for (size_t k = 0; k < NKINDS; k++) {
        const kind_t *kd = &kinds[k];
        size_t len;
        uint8_t *buf = make(&kd->o, &len);
        uint32_t W = kd->o.width, H = kd->o.height;
        sl_rng_t r;
        sl_rng_init(&r, 8, k, 0, 0);
        for (uint32_t m = 1; m <= 8; m++) {
            uint32_t x0, y0;
            char err[256] = "";
            int rc = sl_jpeg_decode_region_m8(buf, len, MAXPIX, 0, 0, W, H, m, &whole, &x0, &y0,
                                              err, sizeof(err));
            ck_assert_msg(rc == 0, "%s %u/8: %d %s", kd->name, m, rc, err);
            uint32_t sw = (W * m + 7) / 8, sh = (H * m + 7) / 8;
            ck_assert_uint_eq(whole.w, sw);
            ck_assert_uint_eq(whole.h, sh);
            for (int i = 0; i < 10; i++) {
                uint32_t x, y, w, h;
                pick_region(&r, W, H, &x, &y, &w, &h);
                rc = sl_jpeg_decode_region_m8(buf, len, MAXPIX, x, y, w, h, m, &reg, &x0, &y0,
                                              err, sizeof(err));
                ck_assert_msg(rc == 0, "%s: %d %s", kd->name, rc, err);
                uint32_t x1 = ((x + w) * m + 7) / 8, y1 = ((y + h) * m + 7) / 8;
                ck_assert_uint_eq(x0, x * m / 8);
                ck_assert_uint_eq(y0, y * m / 8);
                ck_assert_uint_eq(reg.w, (x1 < sw ? x1 : sw) - x0);
                ck_assert_uint_eq(reg.h, (y1 < sh ? y1 : sh) - y0);
                for (uint32_t row = 0; row < reg.h; row++) {
                    const uint8_t *a = reg.data + (size_t)row * reg.w * 3;
                    const uint8_t *b = whole.data + ((size_t)(y0 + row) * sw + x0) * 3;
                    if (memcmp(a, b, (size_t)reg.w * 3) != 0) {
                        ck_abort_msg("%s %u/8: region %u,%u %ux%u row %u differs", kd->name, m,
                                     x, y, w, h, row);
                    }
                }
                check_wide(buf, len, x, y, w, h, m, &reg, x0, y0, &wide, &widened);
                if (m == 1 || m == 2 || m == 4 || m == 8) {
                    uint32_t ox, oy;
                    ck_assert_int_eq(sl_jpeg_decode_region(buf, len, MAXPIX, x, y, w, h, 8 / m,
                                                           &old, &ox, &oy, NULL, 0),
                                     0);
                    ck_assert_uint_eq(ox, x0);
                    ck_assert_uint_eq(oy, y0);
                    ck_assert_uint_eq(old.nbytes, reg.nbytes);
                    ck_assert_mem_eq(old.data, reg.data, reg.nbytes);
                }
            }
        }
        uint32_t x0 = 77, y0 = 77;
        ck_assert_int_eq(sl_jpeg_decode_region_m8(buf, len, MAXPIX, 0, 0, 8, 8, 0, &reg, &x0,
                                                  &y0, NULL, 0),
                         -EINVAL);
        ck_assert_int_eq(sl_jpeg_decode_region_m8(buf, len, MAXPIX, 0, 0, 8, 8, 9, &reg, &x0,
                                                  &y0, NULL, 0),
                         -EINVAL);
        ck_assert_uint_eq(x0, 77);
        free(buf);
    }
    /* Most random regions do not sit on iMCU edges: the wide path ran. */
    ck_assert_uint_gt(widened, 100);
    sl_tensor_free(&wide);
    sl_tensor_free(&old);
    sl_tensor_free(&reg);
    sl_tensor_free(&whole);
}
END_TEST

/* The fused crop's tolerance per DCT scale: crop at M/8 and resample to
 * out x out against full decode, integer crop and the same resample (the
 * unfused path). Crops are the smallest for which M/8 still leaves 1.5 x out
 * px (pick_scale's margin: the case it hands to M/8 with the least room) and
 * random larger ones. Documented bound (docs/reference/spec.md "Fused decode"): mean absolute difference
 * < 3 levels of 255 per sample; the worst per scale is printed. */
START_TEST(test_region_m8_tolerance)
{
    const uint32_t OUT = 40;
    sl_tensor_t full, reg, a, b;
    sl_tensor_init(&full);
    sl_tensor_init(&reg);
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    double worst[8] = {0};
    const fx_jpeg_opts_t imgs[] = {
        {.width = 640, .height = 480, .quality = 90, .seed = 21},
        {.width = 517, .height = 611, .quality = 85, .seed = 22, .progressive = true},
        {.width = 600, .height = 450, .quality = 95, .color = FX_COLOR_GRAY, .seed = 23},
    };
    for (size_t k = 0; k < sizeof(imgs) / sizeof(imgs[0]); k++) {
        size_t len;
        uint8_t *buf = make(&imgs[k], &len);
        ck_assert_int_eq(sl_jpeg_decode(buf, len, MAXPIX, &full, NULL, 0), 0);
        uint32_t W = full.w, H = full.h;
        sl_rng_t r;
        sl_rng_init(&r, 9, k, 0, 0);
        for (uint32_t m = 1; m <= 8; m++) {
            /* smallest side with floor(side * m / 8) >= 1.5 * OUT */
            uint32_t min_side = (OUT * 3 / 2 * 8 + m - 1) / m;
            if (min_side > W || min_side > H) {
                continue;
            }
            for (int i = 0; i < 12; i++) {
                uint32_t w = min_side, h = min_side;
                if (i >= 4) {
                    w += (uint32_t)sl_rng_below(&r, W - min_side + 1);
                    h += (uint32_t)sl_rng_below(&r, H - min_side + 1);
                }
                uint32_t x = (uint32_t)sl_rng_below(&r, W - w + 1);
                uint32_t y = (uint32_t)sl_rng_below(&r, H - h + 1);
                uint32_t x0, y0;
                ck_assert_int_eq(sl_jpeg_decode_region_m8(buf, len, MAXPIX, x, y, w, h, m, &reg,
                                                          &x0, &y0, NULL, 0),
                                 0);
                double s = m / 8.0;
                ck_assert_int_eq(sl_img_resize_rect_ex(&reg, x * s - x0, y * s - y0, w * s,
                                                       h * s, OUT, OUT, SL_RESIZE_CLIP, NULL,
                                                       &a),
                                 0);
                ck_assert_int_eq(sl_img_resize_rect_ex(&full, x, y, w, h, OUT, OUT,
                                                       SL_RESIZE_CLIP, NULL, &b),
                                 0);
                uint64_t sum = 0;
                for (size_t j = 0; j < a.nbytes; j++) {
                    sum += (uint64_t)abs((int)a.data[j] - (int)b.data[j]);
                }
                double mad = (double)sum / (double)a.nbytes;
                worst[m - 1] = mad > worst[m - 1] ? mad : worst[m - 1];
                ck_assert_msg(mad < 3.0, "image %zu %u/8 crop %u,%u %ux%u: mean abs diff %.3f",
                              k, m, x, y, w, h, mad);
            }
        }
        free(buf);
    }
    fprintf(stderr, "region M/8 vs unfused, worst mean abs diff per M = 1..8:");
    for (int m = 0; m < 8; m++) {
        fprintf(stderr, " %.3f", worst[m]);
    }
    fprintf(stderr, "\n");
    sl_tensor_free(&b);
    sl_tensor_free(&a);
    sl_tensor_free(&reg);
    sl_tensor_free(&full);
}
END_TEST

START_TEST(test_region_deterministic_and_reuse)
{
    sl_tensor_t a, b;
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    for (size_t k = 0; k < NKINDS; k++) {
        size_t len;
        uint8_t *buf = make(&kinds[k].o, &len);
        uint32_t x0, y0, x1, y1;
        ck_assert_int_eq(sl_jpeg_decode_region(buf, len, MAXPIX, 13, 9, 61, 40, 2, &a, &x0, &y0,
                                               NULL, 0),
                         0);
        /* b first holds something bigger: the buffer is reused, not shrunk. */
        ck_assert_int_eq(sl_jpeg_decode(buf, len, MAXPIX, &b, NULL, 0), 0);
        size_t cap = b.cap;
        uint8_t *data = b.data;
        ck_assert_int_eq(sl_jpeg_decode_region(buf, len, MAXPIX, 13, 9, 61, 40, 2, &b, &x1, &y1,
                                               NULL, 0),
                         0);
        ck_assert_uint_eq(b.cap, cap);
        ck_assert_ptr_eq(b.data, data);
        ck_assert_uint_eq(x0, x1);
        ck_assert_uint_eq(y0, y1);
        ck_assert_uint_eq(a.nbytes, b.nbytes);
        ck_assert_mem_eq(a.data, b.data, a.nbytes);
        free(buf);
    }
    sl_tensor_free(&a);
    sl_tensor_free(&b);
}
END_TEST

START_TEST(test_region_invalid)
{
    size_t len;
    uint8_t *buf = make(&kinds[0].o, &len);
    uint32_t W = kinds[0].o.width, H = kinds[0].o.height;
    sl_tensor_t t;
    sl_tensor_init(&t);
    uint32_t x0 = 77, y0 = 77;
    static const uint32_t bad_scales[] = {0, 3, 5, 16, 1000};
    for (size_t i = 0; i < sizeof(bad_scales) / sizeof(bad_scales[0]); i++) {
        ck_assert_int_eq(sl_jpeg_decode_region(buf, len, MAXPIX, 0, 0, 8, 8, bad_scales[i], &t,
                                               &x0, &y0, NULL, 0),
                         -EINVAL);
    }
    const uint32_t bad[][4] = {{0, 0, 0, 8},      {0, 0, 8, 0},          {W, 0, 1, 1},
                               {0, H, 1, 1},      {W - 4, 0, 5, 1},      {0, H - 4, 1, 5},
                               {UINT32_MAX, 0, 2, 2}, {0, 0, UINT32_MAX, 2}, {1, 1, W, H}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        ck_assert_int_eq(sl_jpeg_decode_region(buf, len, MAXPIX, bad[i][0], bad[i][1],
                                               bad[i][2], bad[i][3], 1, &t, &x0, &y0, err,
                                               sizeof(err)),
                         -EINVAL);
        ck_assert(err[0] != '\0');
    }
    /* ret_ outputs untouched on failure. */
    ck_assert_uint_eq(x0, 77);
    ck_assert_uint_eq(y0, 77);
    sl_tensor_free(&t);
    free(buf);
}
END_TEST

typedef struct thr_s {
    const uint8_t *buf;
    size_t len;
    const uint8_t *ref;
    size_t nbytes;
    int bad;
} thr_t;

static void *thr_main(void *arg)
{
    thr_t *a = arg;
    sl_tensor_t t;
    sl_tensor_init(&t);
    for (int i = 0; i < 20; i++) {
        if (sl_jpeg_decode(a->buf, a->len, MAXPIX, &t, NULL, 0) != 0 || t.nbytes != a->nbytes ||
            memcmp(t.data, a->ref, a->nbytes) != 0) {
            a->bad++;
        }
    }
    sl_tensor_free(&t);
    return NULL;
}

START_TEST(test_threads)
{
    enum { N = 4 };
    static const size_t which[N] = {0, 5, 8, 4};
    uint8_t *bufs[N];
    sl_tensor_t refs[N];
    thr_t args[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        bufs[i] = make(&kinds[which[i]].o, &args[i].len);
        sl_tensor_init(&refs[i]);
        ck_assert_int_eq(sl_jpeg_decode(bufs[i], args[i].len, MAXPIX, &refs[i], NULL, 0), 0);
        args[i].buf = bufs[i];
        args[i].ref = refs[i].data;
        args[i].nbytes = refs[i].nbytes;
        args[i].bad = 0;
    }
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].bad, 0);
        sl_tensor_free(&refs[i]);
        free(bufs[i]);
    }
}
END_TEST

START_TEST(test_fixture_files)
{
    char dir[FX_TMPDIR_LEN];
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    char path[FX_TMPDIR_LEN + 32];
    snprintf(path, sizeof(path), "%s/a.jpg", dir);
    ck_assert_int_eq(fx_make_jpeg_file(path, &kinds[0].o), 0);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fx_read_file(path, &buf, &len), 0);
    size_t len2;
    uint8_t *buf2 = make(&kinds[0].o, &len2);
    ck_assert_uint_eq(len, len2);
    ck_assert_mem_eq(buf, buf2, len);
    snprintf(path, sizeof(path), "%s/sub", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/sub/b.bin", dir);
    ck_assert_int_eq(fx_write_file(path, "abc", 3), 0);
    ck_assert_int_eq(fx_rmtree(dir), 0);
    ck_assert_int_ne(access(dir, F_OK), 0);
    free(buf);
    free(buf2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jpeg");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_probe_kinds);
    tcase_add_test(tc, test_decode_kinds);
    tcase_add_test(tc, test_cmyk_known_colours);
    tcase_add_test(tc, test_broken_inputs);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_region_progressive_truncated);
    tcase_add_test(tc, test_region_progressive_forged_marker);
    tcase_add_test(tc, test_flipped_scan_bytes);
    tcase_add_test(tc, test_flipped_header_bytes);
    tcase_add_test(tc, test_bomb);
    tcase_add_test(tc, test_too_many_scans);
    tcase_add_test(tc, test_region_scale1_exact);
    tcase_add_test(tc, test_region_scaled);
    tcase_add_test(tc, test_region_m8);
    tcase_add_test(tc, test_region_m8_tolerance);
    tcase_add_test(tc, test_region_deterministic_and_reuse);
    tcase_add_test(tc, test_region_invalid);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_fixture_files);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
