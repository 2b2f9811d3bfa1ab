/* test_client_costs: the per-sample costs a client sends for the split cut
 * (client/lib/costs.c) -- from the fitted model over each file's header when
 * there is one, else from the file sizes -- on real JPEG files. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/lib/costs.h"
#include "common/cost/costmodel.h"
#include "common/profile/features.h"
#include "common/data/source.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_tar.h"

/* Two samples with about the same bytes and 16x apart in pixels: a noisy
 * 64x64 at high quality and a flat 256x256 at low quality; a third file
 * that is not a JPEG; and a large one with 100 KB of metadata before its
 * header (the header read sees no SOF: costed from its size). */
static sl_source_t *make_set(char *dir)
{
    char path[256];
    ck_assert_int_eq(fx_mkdtemp_class(dir, "a"), 0);
    fx_jpeg_opts_t small = {.width = 64, .height = 64, .quality = 100, .seed = 1};
    snprintf(path, sizeof(path), "%s/train/a/0.jpg", dir);
    ck_assert_int_eq(fx_make_jpeg_file(path, &small), 0);
    fx_jpeg_opts_t big = {.width = 256, .height = 256, .quality = 5, .seed = 2};
    snprintf(path, sizeof(path), "%s/train/a/1.jpg", dir);
    ck_assert_int_eq(fx_make_jpeg_file(path, &big), 0);
    snprintf(path, sizeof(path), "%s/train/a/2.jpg", dir);
    ck_assert_int_eq(fx_write_file(path, "not a jpeg at all", 17), 0);
    /* The small JPEG with two 64 KB APP1 segments of zeros after its SOI:
     * a valid file whose SOF lies beyond SL_COST_HEAD_BYTES. */
    uint8_t *jpg = NULL;
    size_t jlen = 0;
    snprintf(path, sizeof(path), "%s/train/a/0.jpg", dir);
    ck_assert_int_eq(fx_read_file(path, &jpg, &jlen), 0);
    size_t seg = 2 + 65533;
    size_t len = 2 + 2 * seg + (jlen - 2);
    uint8_t *buf = calloc(1, len);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, jpg, 2); /* SOI */
    for (int k = 0; k < 2; k++) {
        uint8_t *p = buf + 2 + (size_t)k * seg;
        p[0] = 0xFF;
        p[1] = 0xE1;
        p[2] = 0xFF;
        p[3] = 0xFD; /* 65533: the 2 length bytes + 65531 of payload */
    }
    memcpy(buf + 2 + 2 * seg, jpg + 2, jlen - 2);
    sl_cost_features_t whole;
    sl_cost_features(buf, len, &whole);
    ck_assert(whole.mpix > 0); /* libjpeg skips the APP1 segments */
    snprintf(path, sizeof(path), "%s/train/a/3.jpg", dir);
    ck_assert_int_eq(fx_write_file(path, buf, len), 0);
    free(buf);
    free(jpg);
    sl_source_t *src = NULL;
    char err[256];
    ck_assert_int_eq(sl_source_open(dir, SL_SRC_IMAGEFOLDER, "train", &src, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_source_count(src), 4);
    return src;
}

START_TEST(test_costs_from_header_model)
{
    char dir[FX_TMPDIR_LEN];
    sl_source_t *src = make_set(dir);
    uint64_t b0 = sl_source_size(src, 0), b1 = sl_source_size(src, 1);
    /* The test's premise: bytes alone would not tell the two apart. */
    ck_assert_msg(b1 < 4 * b0 && b0 < 4 * b1, "sizes %llu and %llu", (unsigned long long)b0,
                  (unsigned long long)b1);

    /* 1 ms per sample plus 10 ms per megapixel. */
    const double coef[SL_COST_NPARAM] = {0.001, 0.0, 0.010, 0.0, 0.0, 0.0};
    sl_costmodel_t m;
    ck_assert_int_eq(sl_costmodel_set(&m, coef, SL_COST_NPARAM), 0);
    float c[4];
    cl_costs_from_e from = CL_COSTS_SIZE;
    ck_assert_int_eq(cl_sample_costs(src, &m, 10000, c, 4, &from), 0);
    ck_assert_int_eq(from, CL_COSTS_MODEL);
    ck_assert_str_eq(cl_costs_from_name(from), "header model");
    ck_assert_float_eq_tol(c[0], 1e6 * (0.001 + 0.010 * 64 * 64 / 1e6), 0.01);
    ck_assert_float_eq_tol(c[1], 1e6 * (0.001 + 0.010 * 256 * 256 / 1e6), 0.01);
    ck_assert_float_eq_tol(c[2], 1e3, 0.01); /* no header: the fixed part */
    ck_assert_float_eq_tol(c[3], 1e3, 0.01); /* header beyond the head read */

    /* No model, or no time for the headers: the sizes. */
    float s[4];
    ck_assert_int_eq(cl_sample_costs(src, NULL, 10000, s, 4, &from), 0);
    ck_assert_int_eq(from, CL_COSTS_SIZE);
    ck_assert_str_eq(cl_costs_from_name(from), "file size");
    double mean = 0;
    for (int i = 0; i < 4; i++) {
        mean += (double)sl_source_size(src, (uint64_t)i) / 4;
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_float_eq_tol(s[i], (double)sl_source_size(src, (uint64_t)i) + 0.25 * mean, 1.0);
    }
    float z[4];
    ck_assert_int_eq(cl_sample_costs(src, &m, 0, z, 4, &from), 0);
    ck_assert_int_eq(from, CL_COSTS_SIZE);
    ck_assert_mem_eq(z, s, sizeof(s));
    /* An unfitted model is no model. */
    sl_costmodel_t none;
    sl_costmodel_init(&none);
    ck_assert_int_eq(cl_sample_costs(src, &none, 10000, z, 4, &from), 0);
    ck_assert_int_eq(from, CL_COSTS_SIZE);
    sl_source_free(src);
    ck_assert_int_eq(fx_rmtree(dir), 0);
}
END_TEST

/* Coefficients from a peer (a cached profile) are checked. */
START_TEST(test_costmodel_set_refuses)
{
    sl_costmodel_t m;
    const double ok[SL_COST_NPARAM] = {1, 2, 3, 4, 5, 6};
    ck_assert_int_eq(sl_costmodel_set(&m, ok, 3), -EINVAL);
    ck_assert_int_eq(sl_costmodel_set(&m, NULL, SL_COST_NPARAM), -EINVAL);
    const double nan[SL_COST_NPARAM] = {1, NAN, 3, 4, 0, 0};
    ck_assert_int_eq(sl_costmodel_set(&m, nan, SL_COST_NPARAM), -EINVAL);
    const double inf[SL_COST_NPARAM] = {1, 2, INFINITY, 4, 0, 0};
    ck_assert_int_eq(sl_costmodel_set(&m, inf, SL_COST_NPARAM), -EINVAL);
    ck_assert_int_eq(sl_costmodel_set(&m, ok, SL_COST_NPARAM), 0);
    ck_assert(m.fitted);
    sl_cost_features_t f = {.kb = 1, .mpix = 1, .progressive = 1, .prog_mpix = 1, .text_kb = 1,
                            .images = 1};
    ck_assert_float_eq_tol(sl_costmodel_predict(&m, &f), 1 + 2 + 3 + 4 + 5 + 6, 1e-9);
}
END_TEST

/* A webdataset source: costs from the images' headers (summed over a
 * sample's images) and the text's bytes, before anything is decoded. */
START_TEST(test_costs_of_records)
{
    fxs_setup();
    uint8_t *small = NULL, *big = NULL;
    size_t ns = 0, nb = 0;
    fx_jpeg_opts_t o = {.width = 64, .height = 64, .quality = 90, .seed = 1};
    ck_assert_int_eq(fx_make_jpeg(&o, &small, &ns), 0);
    o.width = o.height = 256;
    ck_assert_int_eq(fx_make_jpeg(&o, &big, &nb), 0);
    tbuf_t b = {0};
    tb_file(&b, "a.txt", "one", 3); /* a: one small image */
    tb_file(&b, "a.jpg", small, ns);
    tb_file(&b, "b.txt", "two", 3); /* b: two big ones */
    tb_file(&b, "b.0.jpg", big, nb);
    tb_file(&b, "b.1.jpg", big, nb);
    tb_file(&b, "c.txt", "0123456789", 10); /* c: text only */
    tb_end(&b);
    t_mkdir("s");
    tb_save(&b, "s/0.tar");
    sl_source_t *src = NULL;
    char err[256];
    ck_assert_int_eq(sl_source_open(g_root, SL_SRC_WEBDATASET, "s", &src, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_source_count(src), 3);
    /* 1 ms + 10 ms per megapixel + 2 ms per image + 1 ms per text KB. */
    const double coef[SL_COST_NPARAM] = {0.001, 0.0, 0.010, 0.0, 0.001, 0.002};
    sl_costmodel_t m;
    ck_assert_int_eq(sl_costmodel_set(&m, coef, SL_COST_NPARAM), 0);
    float c[3];
    cl_costs_from_e from = CL_COSTS_SIZE;
    ck_assert_int_eq(cl_sample_costs(src, &m, 10000, c, 3, &from), 0);
    ck_assert_int_eq(from, CL_COSTS_MODEL);
    ck_assert_float_eq_tol(c[0], 1e6 * (0.001 + 0.010 * 64 * 64 / 1e6 + 0.002 + 3e-6), 0.01);
    ck_assert_float_eq_tol(c[1], 1e6 * (0.001 + 0.010 * 2 * 256 * 256 / 1e6 + 0.004 + 3e-6),
                           0.01);
    ck_assert_float_eq_tol(c[2], 1e6 * (0.001 + 10e-6), 0.01);
    sl_source_free(src);
    free(small);
    free(big);
    fxs_teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_costs");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_costs_from_header_model);
    tcase_add_test(tc, test_costs_of_records);
    tcase_add_test(tc, test_costmodel_set_refuses);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
