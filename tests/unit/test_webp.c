/* WebP decode (common/image/webp.h) and its place behind the image front
 * door: lossless files decode to exactly the encoded pixels, lossy ones to
 * what libwebp's simple API gives (PIL's path), alpha dropped; sniff,
 * probe, the pixel limit, truncated and corrupt files with jpeg.h's codes.
 * PIL as the oracle: tests/integration/test_webp_pil.sh. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/encode.h>

#include "common/image/image_decode.h"
#include "common/image/webp.h"
#include "tests/unit/fixtures.h"

typedef struct {
    uint8_t *data;
    size_t len;
} enc_t;

/* An RGB (or RGBA, alpha from the pattern) test image, encoded. */
static enc_t encode(uint32_t w, uint32_t h, int lossless, int alpha, uint8_t **ret_rgb)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    ck_assert_ptr_nonnull(rgb);
    fx_pattern_rgb(w, h, 7, rgb);
    enc_t e = {NULL, 0};
    if (alpha) {
        uint8_t *rgba = malloc((size_t)w * h * 4);
        ck_assert_ptr_nonnull(rgba);
        for (size_t i = 0; i < (size_t)w * h; i++) {
            memcpy(rgba + 4 * i, rgb + 3 * i, 3);
            rgba[4 * i + 3] = (uint8_t)(i * 7);
        }
        e.len = lossless ? WebPEncodeLosslessRGBA(rgba, (int)w, (int)h, (int)w * 4, &e.data)
                         : WebPEncodeRGBA(rgba, (int)w, (int)h, (int)w * 4, 80, &e.data);
        free(rgba);
    } else {
        e.len = lossless ? WebPEncodeLosslessRGB(rgb, (int)w, (int)h, (int)w * 3, &e.data)
                         : WebPEncodeRGB(rgb, (int)w, (int)h, (int)w * 3, 80, &e.data);
    }
    ck_assert_uint_gt(e.len, 0);
    if (ret_rgb != NULL) {
        *ret_rgb = rgb;
    } else {
        free(rgb);
    }
    return e;
}

START_TEST(test_lossless_exact)
{
    const uint32_t dims[][2] = {{1, 1}, {17, 3}, {64, 48}, {301, 203}};
    sl_tensor_t out;
    sl_tensor_init(&out);
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
        uint8_t *rgb;
        enc_t e = encode(dims[d][0], dims[d][1], 1, 0, &rgb);
        char err[256] = "";
        ck_assert_msg(sl_webp_decode(e.data, e.len, 1u << 30, &out, err, sizeof(err)) == 0, "%s",
                      err);
        ck_assert_uint_eq(out.w, dims[d][0]);
        ck_assert_uint_eq(out.h, dims[d][1]);
        ck_assert_uint_eq(out.c, 3);
        ck_assert_mem_eq(out.data, rgb, out.nbytes);
        WebPFree(e.data);
        free(rgb);
    }
    sl_tensor_free(&out);
}
END_TEST

/* Lossy and alpha files: the RGB of libwebp's own WebPDecodeRGB. */
START_TEST(test_lossy_and_alpha_as_libwebp)
{
    sl_tensor_t out, via;
    sl_tensor_init(&out);
    sl_tensor_init(&via);
    for (int v = 0; v < 3; v++) {
        enc_t e = encode(97, 61, v == 2, v >= 1, NULL);
        int w, h;
        uint8_t *ref = WebPDecodeRGB(e.data, e.len, &w, &h);
        ck_assert_ptr_nonnull(ref);
        char err[256] = "";
        ck_assert_msg(sl_webp_decode(e.data, e.len, 1u << 30, &out, err, sizeof(err)) == 0, "%s",
                      err);
        ck_assert(out.w == (uint32_t)w && out.h == (uint32_t)h);
        ck_assert_mem_eq(out.data, ref, out.nbytes);
        /* The front door sniffs and decodes the same. */
        sl_image_format_e fmt;
        ck_assert_int_eq(sl_image_decode(e.data, e.len, 1u << 30, &via, &fmt, err, sizeof(err)), 0);
        ck_assert_int_eq(fmt, SL_IMAGE_WEBP);
        ck_assert_mem_eq(via.data, ref, via.nbytes);
        uint32_t pw, ph;
        ck_assert_int_eq(sl_image_probe(e.data, e.len, &pw, &ph, &fmt, err, sizeof(err)), 0);
        ck_assert(pw == 97 && ph == 61 && fmt == SL_IMAGE_WEBP);
        WebPFree(ref);
        WebPFree(e.data);
    }
    ck_assert_str_eq(sl_image_format_name(SL_IMAGE_WEBP), "webp");
    sl_tensor_free(&out);
    sl_tensor_free(&via);
}
END_TEST

START_TEST(test_errors)
{
    enc_t e = encode(80, 40, 0, 0, NULL);
    sl_tensor_t out;
    sl_tensor_init(&out);
    char err[256] = "";
    /* The pixel limit, before any decoding. */
    ck_assert_int_eq(sl_webp_decode(e.data, e.len, 80 * 40 - 1, &out, err, sizeof(err)), -EFBIG);
    ck_assert_int_eq(sl_webp_decode(e.data, e.len, 80 * 40, &out, err, sizeof(err)), 0);
    /* Truncated: any cut before the end (the header cut too) is -ENOMSG. */
    const size_t cuts[] = {3, 11, 20, e.len / 2, e.len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        int rc = sl_webp_decode(e.data, cuts[i], 1u << 30, &out, err, sizeof(err));
        ck_assert_msg(rc == -ENOMSG || rc == -EBADMSG, "cut at %zu: rc %d (%s)", cuts[i], rc, err);
    }
    ck_assert_int_eq(sl_webp_decode(e.data, e.len / 2, 1u << 30, &out, err, sizeof(err)), -ENOMSG);
    /* Not WebP, empty, corrupt. */
    ck_assert_int_eq(sl_webp_decode((const uint8_t *)"RIFX1234WEBPxxxx", 16, 1u << 30, &out, err,
                                    sizeof(err)),
                     -EILSEQ);
    ck_assert_int_eq(sl_webp_decode(e.data, 0, 1u << 30, &out, err, sizeof(err)), -ENODATA);
    uint8_t *bad = malloc(e.len);
    ck_assert_ptr_nonnull(bad);
    memcpy(bad, e.data, e.len);
    memset(bad + 20, 0xAB, 16); /* the VP8 frame header */
    int rc = sl_webp_decode(bad, e.len, 1u << 30, &out, err, sizeof(err));
    ck_assert_msg(rc == -EBADMSG || rc == -ENOMSG, "corrupt header: rc %d", rc);
    ck_assert(!sl_webp_sniff((const uint8_t *)"RIFF1234WAVE", 12));
    ck_assert(sl_webp_sniff((const uint8_t *)"RIF", 3));
    ck_assert_int_eq(sl_image_sniff((const uint8_t *)"RIFF1234WAVE", 12), SL_IMAGE_UNKNOWN);
    ck_assert_int_eq(sl_image_sniff(e.data, e.len), SL_IMAGE_WEBP);
    free(bad);
    WebPFree(e.data);
    sl_tensor_free(&out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("webp");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_lossless_exact);
    tcase_add_test(tc, test_lossy_and_alpha_as_libwebp);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
