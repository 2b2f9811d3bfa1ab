/* The image kernels by instruction set (common/image/simd.h) give the same
 * bytes. The resample (scalar, SSE2, AVX2: common/image/img_resize.c): each
 * path this build and CPU run is compared with the scalar one on random
 * images and rectangles -- up- and downscales, odd widths, 1 to 4 channels,
 * Pillow's box and the clipped crop, rectangles that touch the buffer's last
 * byte (where the SIMD kernels fall back). The normalize + CHW tail
 * (common/image/imgops.c): every path on random images of many sizes. A
 * sample's bytes must not depend on the host's CPU. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image/simd.h"
#include "common/image/imgops.h"
#include "tests/unit/fixtures.h"

static const sl_simd_e simd_paths[] = {SL_SIMD_SSE2, SL_SIMD_AVX2,
                                              SL_SIMD_AUTO};
static const char *const simd_names[] = {"sse2", "avx2", "auto"};

/* xorshift64*: a fixed sequence, so a failure reproduces. */
static uint64_t next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static uint32_t below(uint64_t *s, uint32_t n) { return (uint32_t)(next(s) % n); }

/* Random pixels, with runs of 0 and 255 so saturation is exercised. */
static void random_image(sl_tensor_t *t, uint32_t h, uint32_t w, uint32_t c, uint64_t *s)
{
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_U8, SL_LAYOUT_HWC, h, w, c), 0);
    int mode = (int)below(s, 3);
    for (size_t i = 0; i < t->nbytes; i++) {
        uint8_t v = (uint8_t)next(s);
        if (mode == 1) {
            v = v < 128 ? 0 : 255;
        } else if (mode == 2) {
            v = (uint8_t)((i / c) * 7 + (v & 3)); /* smooth ramps */
        }
        t->data[i] = v;
    }
}

/* One case: every SIMD path against scalar. Returns paths compared. */
static int compare(const sl_tensor_t *in, double x, double y, double w, double h, uint32_t oh,
                   uint32_t ow, uint32_t flags, sl_tensor_t *scratch, const char *what)
{
    sl_tensor_t want, got;
    sl_tensor_init(&want);
    sl_tensor_init(&got);
    int rc = sl_img_resize_rect_path(in, x, y, w, h, oh, ow, flags, NULL, &want,
                                     SL_SIMD_SCALAR);
    ck_assert_msg(rc == 0, "%s: scalar rc %d", what, rc);
    int n = 0;
    for (size_t p = 0; p < sizeof(simd_paths) / sizeof(simd_paths[0]); p++) {
        if (!sl_simd_ok(simd_paths[p])) {
            continue;
        }
        rc = sl_img_resize_rect_path(in, x, y, w, h, oh, ow, flags, scratch, &got,
                                     simd_paths[p]);
        ck_assert_msg(rc == 0, "%s: %s rc %d", what, simd_names[p], rc);
        ck_assert_uint_eq(got.nbytes, want.nbytes);
        if (memcmp(got.data, want.data, want.nbytes) != 0) {
            size_t i = 0;
            while (got.data[i] == want.data[i]) {
                i++;
            }
            ck_abort_msg("%s: %s differs from scalar at byte %zu (%u vs %u)", what,
                         simd_names[p], i, got.data[i], want.data[i]);
        }
        n++;
    }
    sl_tensor_free(&want);
    sl_tensor_free(&got);
    return n;
}

START_TEST(test_paths_identical_random)
{
    uint64_t seed = 0x5eed0019u;
    sl_tensor_t in, scratch;
    sl_tensor_init(&in);
    sl_tensor_init(&scratch);
    int compared = 0;
    for (int it = 0; it < 600; it++) {
        uint32_t c = 1 + below(&seed, 4);
        uint32_t iw = 1 + below(&seed, it % 5 == 0 ? 700 : 90);
        uint32_t ih = 1 + below(&seed, it % 5 == 0 ? 500 : 90);
        random_image(&in, ih, iw, c, &seed);
        uint32_t flags = below(&seed, 2) ? SL_RESIZE_CLIP : 0;
        double x, y, w, h;
        if (below(&seed, 2)) {
            /* An integer crop, as the unfused random_resized_crop draws. */
            uint32_t cw = 1 + below(&seed, iw), ch = 1 + below(&seed, ih);
            x = below(&seed, iw - cw + 1);
            y = below(&seed, ih - ch + 1);
            w = cw;
            h = ch;
        } else {
            /* A fractional one, as the fused unit maps a crop at M/8. */
            x = (double)below(&seed, iw * 8) / 8.0;
            y = (double)below(&seed, ih * 8) / 8.0;
            w = (iw - x) * (1 + below(&seed, 8)) / 8.0;
            h = (ih - y) * (1 + below(&seed, 8)) / 8.0;
        }
        if (below(&seed, 4) == 0) {
            /* Bottom-right corner: reads end at the buffer's last byte. */
            x = iw - w;
            y = ih - h;
        }
        /* Output: down to 1/20 of the crop, up to 3x, odd and even. */
        uint32_t ow = 1 + below(&seed, (uint32_t)(w * 3) + 8);
        uint32_t oh = 1 + below(&seed, (uint32_t)(h * 3) + 8);
        if (it % 3 == 0) {
            ow = 224;
            oh = 224;
        }
        char what[160];
        snprintf(what, sizeof(what), "case %d: %ux%ux%u rect %.3f,%.3f %.3fx%.3f -> %ux%u flags %u",
                 it, iw, ih, c, x, y, w, h, ow, oh, flags);
        compared += compare(&in, x, y, w, h, oh, ow, flags, (it % 2) ? &scratch : NULL, what);
    }
    /* SSE2 and auto at least on x86-64; on other machines only scalar runs. */
#if defined(__x86_64__)
    ck_assert_int_ge(compared, 600 * 2);
#endif
    sl_tensor_free(&in);
    sl_tensor_free(&scratch);
}
END_TEST

/* The pipeline's shapes: a random-resized crop of a photo-sized image to
 * 224x224 at every downscale from 1x to 12x, 3 channels, and a big
 * downscale whose windows are long. */
START_TEST(test_paths_identical_pipeline_shapes)
{
    uint64_t seed = 42;
    sl_tensor_t in, scratch;
    sl_tensor_init(&in);
    sl_tensor_init(&scratch);
    random_image(&in, 601, 803, 3, &seed);
    for (uint32_t side = 224; side <= 600; side += 17) {
        char what[96];
        snprintf(what, sizeof(what), "crop %u", side);
        compare(&in, 803 - side, 601 - side, side, side, 224, 224, SL_RESIZE_CLIP, &scratch,
                what);
        compare(&in, 1.375, 2.625, side - 0.5, side * 0.75, 224, 224, SL_RESIZE_CLIP, &scratch,
                what);
    }
    compare(&in, 0, 0, 803, 601, 7, 5, 0, &scratch, "803x601 -> 5x7");
    compare(&in, 0, 0, 803, 601, 1, 1, SL_RESIZE_CLIP, &scratch, "803x601 -> 1x1");
    compare(&in, 3, 3, 11, 13, 601, 803, SL_RESIZE_CLIP, &scratch, "11x13 -> 803x601");
    sl_tensor_free(&in);
    sl_tensor_free(&scratch);
}
END_TEST

START_TEST(test_path_refused_when_absent)
{
    ck_assert_int_eq(sl_simd_ok(SL_SIMD_SCALAR), 1);
    ck_assert_int_eq(sl_simd_ok(SL_SIMD_AUTO), 1);
#if defined(__x86_64__)
    ck_assert_int_eq(sl_simd_ok(SL_SIMD_SSE2), 1);
#endif
    ck_assert_int_eq(sl_simd_ok((sl_simd_e)99), 0);
    sl_tensor_t in, out;
    sl_tensor_init(&in);
    sl_tensor_init(&out);
    uint64_t seed = 1;
    random_image(&in, 8, 8, 3, &seed);
    ck_assert_int_eq(
        sl_img_resize_rect_path(&in, 0, 0, 8, 8, 4, 4, 0, NULL, &out, (sl_simd_e)99),
        -ENOTSUP);
    static const float m[3] = {0.5f, 0.5f, 0.5f};
    ck_assert_int_eq(sl_img_normalize_chw_path(&in, m, m, &out, (sl_simd_e)99), -ENOTSUP);
    if (!sl_simd_ok(SL_SIMD_AVX2)) {
        fprintf(stderr, "test_simd_paths: this CPU has no AVX2; that path not compared\n");
        ck_assert_int_eq(sl_img_resize_rect_path(&in, 0, 0, 8, 8, 4, 4, 0, NULL, &out,
                                                 SL_SIMD_AVX2),
                         -ENOTSUP);
    }
    sl_tensor_free(&in);
    sl_tensor_free(&out);
}
END_TEST

START_TEST(test_normalize_chw_paths_identical)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f};
    static const float std3[3] = {0.229f, 0.224f, 0.225f};
    static const float odd_mean[3] = {0.5f, -1.25f, 3.0f};
    static const float odd_std[3] = {0.1f, 7.0f, -0.3f};
    uint64_t seed = 7;
    sl_tensor_t in, want, got;
    sl_tensor_init(&in);
    sl_tensor_init(&want);
    sl_tensor_init(&got);
    int compared = 0;
    for (int it = 0; it < 300; it++) {
        uint32_t c = below(&seed, 4) == 0 ? 1 : 3;
        uint32_t h = 1 + below(&seed, it % 10 == 0 ? 300 : 40);
        uint32_t w = 1 + below(&seed, it % 10 == 0 ? 300 : 40);
        if (it == 0) {
            h = w = 224;
        }
        random_image(&in, h, w, c, &seed);
        const float *m = it % 2 ? mean : odd_mean;
        const float *sd = it % 2 ? std3 : odd_std;
        ck_assert_int_eq(sl_img_normalize_chw_path(&in, m, sd, &want, SL_SIMD_SCALAR), 0);
        for (size_t p = 0; p < sizeof(simd_paths) / sizeof(simd_paths[0]); p++) {
            if (!sl_simd_ok(simd_paths[p])) {
                continue;
            }
            ck_assert_int_eq(sl_img_normalize_chw_path(&in, m, sd, &got, simd_paths[p]), 0);
            ck_assert_int_eq(got.layout, SL_LAYOUT_CHW);
            ck_assert_uint_eq(got.nbytes, want.nbytes);
            ck_assert_msg(memcmp(got.data, want.data, want.nbytes) == 0,
                          "normalize_chw %ux%ux%u: %s differs from scalar", h, w, c,
                          simd_names[p]);
            compared++;
        }
    }
#if defined(__x86_64__)
    ck_assert_int_ge(compared, 300 * 2);
#endif
    sl_tensor_free(&in);
    sl_tensor_free(&want);
    sl_tensor_free(&got);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("simd_paths");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_paths_identical_random);
    tcase_add_test(tc, test_paths_identical_pipeline_shapes);
    tcase_add_test(tc, test_path_refused_when_absent);
    tcase_add_test(tc, test_normalize_chw_paths_identical);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
