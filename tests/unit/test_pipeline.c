/* Pipeline units: fusion boundaries, split mapping, determinism, how far
 * the fused region-of-interest decode may differ from decode-then-crop, the
 * one-pass normalize + to_chw, and the device normalize (no unit).
 *
 * Documented tolerance (docs/reference/spec.md "Fused decode"): on RandomResizedCrop(224) the
 * fused unit's output differs from the unfused path's by a mean absolute
 * difference below 3 levels (of 255) per sample; at DCT scale 1 the two are
 * identical up to resampling rounding (< 1 level mean). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine/pipeline.h"
#include "common/spec/spec.h"
#include "common/spec/spec_layout.h"
#include "tests/unit/fixtures.h"

static void parse(const char *json, sl_spec_t *spec)
{
    char err[512];
    int rc = sl_spec_parse("t.json", json, strlen(json), spec, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
}

static const char *RRC_SPEC =
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\", \"seed\": 3},"
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", \"size\": 224},"
    " {\"op\": \"flip\"}, {\"op\": \"normalize\"}, {\"op\": \"to_chw\"}]}";

START_TEST(test_units_and_split_mapping)
{
    sl_spec_t spec;
    parse(RRC_SPEC, &spec);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, NULL, 0), 0);
    ck_assert_uint_eq(sl_pipeline_nunits(p), 4);
    ck_assert_str_eq(sl_pipeline_unit_name(p, 0), "decode_jpeg+random_resized_crop");
    ck_assert_str_eq(sl_pipeline_unit_name(p, 3), "to_chw");
    /* Spec split 1 cuts the fused unit: it moves to the unit's end. */
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 0), 0);
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 1), 1);
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 2), 1);
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 3), 2);
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 5), 4);
    sl_pipeline_free(p);
    ck_assert_int_eq(sl_pipeline_new(&spec, SL_PIPE_NO_FUSE, &p, NULL, 0), 0);
    ck_assert_uint_eq(sl_pipeline_nunits(p), 5);
    sl_pipeline_free(p);
}
END_TEST

/* The unit layout computed from the spec alone (common/spec/spec_layout.h)
 * is exactly what sl_pipeline_new builds: counts, names and the split
 * mapping, with and without fusion, for every op and the fusion cases. */
#define IMG_SRC "\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"}"
#define REC_SRC "\"source\": {\"type\": \"webdataset\", \"path\": \"x\"}"
#define SHA "\"sha256\": \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""
static const char *const LAYOUT_SPECS[] = {
    "{" IMG_SRC "}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_jpeg\"}]}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_image\"}, {\"op\": \"to_chw\"}]}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\","
    " \"size\": 224}, {\"op\": \"flip\"}, {\"op\": \"normalize\"}, {\"op\": \"to_chw\"}]}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_image\"}, {\"op\": \"center_crop\", \"size\":"
    " [32, 48]}, {\"op\": \"resize\", \"size\": 16}, {\"op\": \"random_resized_crop\", \"size\":"
    " 8}, {\"op\": \"center_crop\", \"size\": 4}, {\"op\": \"normalize\", \"on\": \"device\"},"
    " {\"op\": \"to_chw\"}]}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": [8, 9]},"
    " {\"op\": \"center_crop\", \"size\": 8}, {\"op\": \"to_chw\"}, {\"op\": \"normalize\"}]}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"normalize\", \"on\":"
    " \"device\"}]}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"color_jitter\","
    " \"brightness\": 0.4}, {\"op\": \"random_grayscale\"}, {\"op\": \"gaussian_blur\","
    " \"kernel_size\": 3}, {\"op\": \"random_erasing\"}, {\"op\": \"random_rotation\","
    " \"degrees\": 10}, {\"op\": \"random_affine\", \"degrees\": 5}, {\"op\": \"solarize\","
    " \"threshold\": 128}, {\"op\": \"posterize\", \"bits\": 4}, {\"op\": \"auto_contrast\"},"
    " {\"op\": \"equalize\"}, {\"op\": \"trivial_augment_wide\"}, {\"op\": \"rand_augment\"},"
    " {\"op\": \"normalize\"}, {\"op\": \"to_chw\"}]}",
    "{" IMG_SRC ", \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"plugin\", \"name\":"
    " \"sharpen\", " SHA "}, {\"op\": \"center_crop\", \"size\": 8}]}",
    "{" REC_SRC ", \"stages\": [{\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\"},"
    " {\"op\": \"decode_image\"}, {\"op\": \"random_resized_crop\", \"size\": 64},"
    " {\"op\": \"image_tiles\", \"tile\": 32}, {\"op\": \"normalize\"}, {\"op\": \"to_chw\"},"
    " {\"op\": \"template\", \"image_token\": 5}]}",
    "{" REC_SRC ", \"stages\": [{\"op\": \"decode_image\"}, {\"op\": \"center_crop\", \"size\":"
    " 8}, {\"op\": \"normalize\", \"on\": \"device\"}]}",
    "{" REC_SRC ", \"stages\": [{\"op\": \"decode_image\"}]}",
};

static void check_layout(const sl_spec_t *spec, unsigned pipe_flags, unsigned layout_flags,
                         const char *json)
{
    sl_pipeline_t *p = NULL;
    char err[256];
    ck_assert_msg(sl_pipeline_new(spec, pipe_flags, &p, err, sizeof(err)) == 0, "%s: %s", json,
                  err);
    sl_layout_t l;
    ck_assert_int_eq(sl_spec_layout(spec, layout_flags, &l), 0);
    ck_assert_msg(l.nunits == sl_pipeline_nunits(p), "%s: %u units, the pipeline %u", json,
                  l.nunits, sl_pipeline_nunits(p));
    for (uint32_t u = 0; u <= l.nunits; u++) {
        ck_assert_str_eq(sl_layout_unit_name(&l, u), sl_pipeline_unit_name(p, u));
    }
    for (uint32_t k = 0; k <= spec->nstages + 1; k++) {
        ck_assert_msg(sl_layout_unit_for_split(&l, k) == sl_pipeline_unit_for_split(p, k),
                      "%s: split %u", json, k);
    }
    sl_pipeline_free(p);
}

START_TEST(test_layout_matches_pipeline)
{
    sl_spec_t *spec = malloc(sizeof(*spec));
    ck_assert_ptr_nonnull(spec);
    for (size_t i = 0; i < sizeof(LAYOUT_SPECS) / sizeof(LAYOUT_SPECS[0]); i++) {
        parse(LAYOUT_SPECS[i], spec);
        check_layout(spec, 0, 0, LAYOUT_SPECS[i]);
        check_layout(spec, SL_PIPE_NO_FUSE, SL_LAYOUT_NO_FUSE, LAYOUT_SPECS[i]);
        sl_spec_clear(spec);
    }
    /* What the layout says, checked by hand once: fusion, the device
     * normalize's missing unit, a plugin unit's name, the split mapping. */
    sl_layout_t l;
    parse(LAYOUT_SPECS[4], spec);
    ck_assert_int_eq(sl_spec_layout(spec, 0, &l), 0);
    ck_assert_uint_eq(l.nunits, 5);
    ck_assert_str_eq(l.units[0].name, "decode_image+center_crop");
    ck_assert_str_eq(l.units[3].name, "center_crop");
    ck_assert_str_eq(l.units[4].name, "to_chw");
    ck_assert_uint_eq(l.units[0].param_stage, 1);
    ck_assert_uint_eq(sl_layout_unit_for_split(&l, 1), 1);
    ck_assert_uint_eq(sl_layout_unit_for_split(&l, 6), 4);
    ck_assert_uint_eq(sl_layout_unit_for_split(&l, 7), 5);
    sl_spec_clear(spec);
    parse(LAYOUT_SPECS[8], spec);
    ck_assert_int_eq(sl_spec_layout(spec, 0, &l), 0);
    ck_assert_uint_eq(l.nunits, 3);
    ck_assert_str_eq(l.units[1].name, "sharpen");
    sl_spec_clear(spec);
    parse(LAYOUT_SPECS[3], spec);
    ck_assert_int_eq(sl_spec_layout(spec, 0, &l), 0);
    ck_assert(l.units[2].pass_with_next && !l.units[3].pass_with_next);
    ck_assert_int_eq(sl_spec_layout(spec, SL_LAYOUT_NO_FUSE, &l), 0);
    ck_assert(!l.units[3].pass_with_next);
    spec->nstages = SL_SPEC_MAX_STAGES + 1; /* no parse yields it */
    ck_assert_int_eq(sl_spec_layout(spec, 0, &l), -EINVAL);
    sl_spec_clear(spec);
    free(spec);
}
END_TEST

static void load_jpeg(sl_tensor_t *t, uint32_t w, uint32_t h, uint32_t seed, int progressive)
{
    fx_jpeg_opts_t o = {.width = w, .height = h, .quality = 90, .seed = seed,
                        .progressive = progressive};
    uint8_t *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(fx_make_jpeg(&o, &buf, &len), 0);
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_BYTES, SL_LAYOUT_HWC, (uint32_t)len, 1, 1), 0);
    memcpy(t->data, buf, len);
    free(buf);
}

static double run_one(const sl_pipeline_t *p, uint32_t to, uint64_t index, const sl_tensor_t *jpg,
                      sl_tensor_t *out)
{
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    ck_assert_int_eq(
        sl_tensor_reshape(out, SL_DT_BYTES, SL_LAYOUT_HWC, (uint32_t)jpg->nbytes, 1, 1), 0);
    memcpy(out->data, jpg->data, jpg->nbytes);
    char err[256];
    int rc = sl_pipeline_run(p, 0, to, 1, index, out, &sc, NULL, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    sl_pipe_scratch_free(&sc);
    return 0;
}

START_TEST(test_fused_matches_unfused_within_tolerance)
{
    sl_spec_t spec;
    parse(RRC_SPEC, &spec);
    sl_pipeline_t *fused = NULL, *plain = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &fused, NULL, 0), 0);
    ck_assert_int_eq(sl_pipeline_new(&spec, SL_PIPE_NO_FUSE, &plain, NULL, 0), 0);
    sl_tensor_t jpg, a, b;
    sl_tensor_init(&jpg);
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    double worst = 0;
    /* Large images so that DCT scaling really kicks in for some crops. */
    const uint32_t dims[3][2] = {{500, 375}, {1600, 1200}, {2400, 1800}};
    for (int d = 0; d < 3; d++) {
        load_jpeg(&jpg, dims[d][0], dims[d][1], 11 + d, d == 1);
        for (uint64_t idx = 0; idx < 12; idx++) {
            run_one(fused, 1, idx, &jpg, &a);   /* decode+crop unit only */
            run_one(plain, 2, idx, &jpg, &b);   /* decode, then crop */
            ck_assert_uint_eq(a.h, 224);
            ck_assert_uint_eq(a.w, 224);
            ck_assert_uint_eq(a.nbytes, b.nbytes);
            double sum = 0;
            for (size_t i = 0; i < a.nbytes; i++) {
                sum += fabs((double)a.data[i] - (double)b.data[i]);
            }
            double mad = sum / (double)a.nbytes;
            if (mad > worst) {
                worst = mad;
            }
            ck_assert_msg(mad < 3.0, "image %d sample %llu: mean abs diff %.3f", d,
                          (unsigned long long)idx, mad);
        }
    }
    fprintf(stderr, "fused vs unfused: worst mean abs diff %.3f levels\n", worst);
    sl_tensor_free(&jpg);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    sl_pipeline_free(fused);
    sl_pipeline_free(plain);
}
END_TEST

START_TEST(test_deterministic_and_split_invariant)
{
    /* Running units [0,2) then [2,4) equals running [0,4) at once: where the
     * split falls never changes the bytes. Same index twice: same bytes. */
    sl_spec_t spec;
    parse(RRC_SPEC, &spec);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, NULL, 0), 0);
    sl_tensor_t jpg, whole, part;
    sl_tensor_init(&jpg);
    sl_tensor_init(&whole);
    sl_tensor_init(&part);
    load_jpeg(&jpg, 640, 480, 5, 0);
    run_one(p, 4, 9, &jpg, &whole);
    run_one(p, 2, 9, &jpg, &part);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    sl_unit_stat_t stats[SL_PIPE_MAX_UNITS] = {{0}};
    ck_assert_int_eq(sl_pipeline_run(p, 2, 4, 1, 9, &part, &sc, stats, NULL, 0), 0);
    ck_assert_uint_eq(part.nbytes, whole.nbytes);
    ck_assert_mem_eq(part.data, whole.data, whole.nbytes);
    ck_assert_int_eq(part.dtype, SL_DT_F32);
    ck_assert_int_eq(part.layout, SL_LAYOUT_CHW);
    ck_assert_uint_eq(stats[2].samples, 1);
    ck_assert_uint_eq(stats[3].out_bytes, 224 * 224 * 3 * 4);
    ck_assert_uint_eq(stats[0].samples, 0);
    /* A different index draws a different crop. */
    run_one(p, 4, 10, &jpg, &part);
    ck_assert(memcmp(part.data, whole.data, whole.nbytes) != 0);
    /* A unit range past the end, or a wrong input, is an error, not a crash. */
    ck_assert_int_eq(sl_pipeline_run(p, 3, 9, 0, 0, &part, &sc, NULL, NULL, 0), -EINVAL);
    ck_assert_int_eq(sl_pipeline_run(p, 0, 1, 0, 0, &part, &sc, NULL, NULL, 0), -EINVAL);
    sl_pipe_scratch_free(&sc);
    sl_tensor_free(&jpg);
    sl_tensor_free(&whole);
    sl_tensor_free(&part);
    sl_pipeline_free(p);
}
END_TEST

/* Runs units [from, to) of p on a copy of in, adding to stats. */
static void run_range(const sl_pipeline_t *p, uint32_t from, uint32_t to, const sl_tensor_t *in,
                      sl_tensor_t *out, sl_unit_stat_t *stats)
{
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    ck_assert_int_eq(sl_tensor_reshape(out, in->dtype, in->layout, in->h, in->w, in->c), 0);
    memcpy(out->data, in->data, in->nbytes);
    char err[256] = "";
    int rc = sl_pipeline_run(p, from, to, 1, 4, out, &sc, stats, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    sl_pipe_scratch_free(&sc);
}

/* normalize + to_chw: one pass when one run covers both, two units for
 * splits either way, and the same bytes wherever the split falls. */
START_TEST(test_normalize_chw_one_pass)
{
    sl_spec_t spec;
    parse(RRC_SPEC, &spec);
    sl_pipeline_t *p = NULL, *plain = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, NULL, 0), 0);
    ck_assert_int_eq(sl_pipeline_new(&spec, SL_PIPE_NO_FUSE, &plain, NULL, 0), 0);
    ck_assert_uint_eq(sl_pipeline_nunits(p), 4);
    ck_assert_str_eq(sl_pipeline_unit_name(p, 2), "normalize");
    ck_assert_str_eq(sl_pipeline_unit_name(p, 3), "to_chw");
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 4), 3); /* the split between stays */
    sl_tensor_t jpg, px, one, two, sep;
    sl_tensor_init(&jpg);
    sl_tensor_init(&px);
    sl_tensor_init(&one);
    sl_tensor_init(&two);
    sl_tensor_init(&sep);
    load_jpeg(&jpg, 640, 480, 8, 0);
    run_one(p, 2, 4, &jpg, &px); /* uint8 HWC after the flip */
    ck_assert_int_eq(px.dtype, SL_DT_U8);
    sl_unit_stat_t st1[SL_PIPE_MAX_UNITS] = {{0}}, st2[SL_PIPE_MAX_UNITS] = {{0}};
    sl_unit_stat_t st3[SL_PIPE_MAX_UNITS] = {{0}};
    run_range(p, 2, 4, &px, &one, st1);
    run_range(p, 2, 3, &px, &sep, st2); /* split between: worker normalizes, */
    run_range(p, 3, 4, &sep, &two, st2); /* client transposes */
    ck_assert_int_eq(one.dtype, SL_DT_F32);
    ck_assert_int_eq(one.layout, SL_LAYOUT_CHW);
    ck_assert_uint_eq(one.nbytes, two.nbytes);
    ck_assert_mem_eq(one.data, two.data, two.nbytes);
    run_range(plain, 3, 5, &px, &sep, st3); /* SL_PIPE_NO_FUSE: two passes */
    ck_assert_mem_eq(one.data, sep.data, sep.nbytes);
    /* The one pass is charged to to_chw; normalize keeps its bytes. */
    ck_assert(st1[2].cpu_sec == 0.0);
    ck_assert(st1[3].cpu_sec > 0.0);
    ck_assert_uint_eq(st1[2].samples, 1);
    ck_assert_uint_eq(st1[3].samples, 1);
    ck_assert_uint_eq(st1[2].out_bytes, 224 * 224 * 3 * 4);
    ck_assert_uint_eq(st1[3].out_bytes, 224 * 224 * 3 * 4);
    ck_assert(st2[2].cpu_sec > 0.0 && st2[3].cpu_sec > 0.0);
    ck_assert(st3[3].cpu_sec > 0.0 && st3[4].cpu_sec > 0.0);
    /* Encoded bytes into the pass: an error, not a crash. */
    char err[256] = "";
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    ck_assert_int_eq(sl_pipeline_run(p, 2, 4, 0, 0, &jpg, &sc, NULL, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "normalize needs pixels") != NULL, "%s", err);
    sl_pipe_scratch_free(&sc);
    sl_tensor_free(&jpg);
    sl_tensor_free(&px);
    sl_tensor_free(&one);
    sl_tensor_free(&two);
    sl_tensor_free(&sep);
    sl_pipeline_free(p);
    sl_pipeline_free(plain);
}
END_TEST

/* normalize "on": "device" is no unit: the output stays uint8, the bytes of
 * the same spec without the normalize. */
START_TEST(test_device_normalize_is_no_unit)
{
    static const char *DEV =
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\", \"seed\": 3},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", "
        "\"size\": 224}, {\"op\": \"flip\"}, {\"op\": \"normalize\", \"on\": \"device\"}, "
        "{\"op\": \"to_chw\"}]}";
    static const char *NONE =
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\", \"seed\": 3},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\", "
        "\"size\": 224}, {\"op\": \"flip\"}, {\"op\": \"to_chw\"}]}";
    sl_spec_t dev, none;
    parse(DEV, &dev);
    parse(NONE, &none);
    sl_pipeline_t *p = NULL, *q = NULL;
    ck_assert_int_eq(sl_pipeline_new(&dev, 0, &p, NULL, 0), 0);
    ck_assert_int_eq(sl_pipeline_new(&none, 0, &q, NULL, 0), 0);
    ck_assert_uint_eq(sl_pipeline_nunits(p), 3);
    ck_assert_str_eq(sl_pipeline_unit_name(p, 1), "flip");
    ck_assert_str_eq(sl_pipeline_unit_name(p, 2), "to_chw");
    /* A spec split before or after the device normalize: before to_chw. */
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 3), 2);
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 4), 2);
    ck_assert_uint_eq(sl_pipeline_unit_for_split(p, 5), 3);
    sl_tensor_t jpg, a, b;
    sl_tensor_init(&jpg);
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    load_jpeg(&jpg, 500, 375, 6, 0);
    for (uint64_t idx = 0; idx < 4; idx++) {
        run_one(p, 3, idx, &jpg, &a);
        run_one(q, 3, idx, &jpg, &b);
        ck_assert_int_eq(a.dtype, SL_DT_U8);
        ck_assert_int_eq(a.layout, SL_LAYOUT_CHW);
        ck_assert_uint_eq(a.nbytes, 224 * 224 * 3);
        ck_assert_mem_eq(a.data, b.data, b.nbytes);
    }
    sl_tensor_free(&jpg);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    sl_pipeline_free(p);
    sl_pipeline_free(q);
}
END_TEST

START_TEST(test_center_crop_pads_small_images)
{
    const char *json =
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 96}]}";
    sl_spec_t spec;
    parse(json, &spec);
    sl_pipeline_t *fused = NULL, *plain = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &fused, NULL, 0), 0);
    ck_assert_int_eq(sl_pipeline_new(&spec, SL_PIPE_NO_FUSE, &plain, NULL, 0), 0);
    sl_tensor_t jpg, a, b;
    sl_tensor_init(&jpg);
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    const uint32_t dims[2][2] = {{64, 48}, {300, 200}};
    for (int d = 0; d < 2; d++) {
        load_jpeg(&jpg, dims[d][0], dims[d][1], 2, 0);
        run_one(fused, 1, 0, &jpg, &a);
        run_one(plain, 2, 0, &jpg, &b);
        ck_assert_uint_eq(a.h, 96);
        ck_assert_uint_eq(a.w, 96);
        /* Center crop at scale 1 decodes the same pixels: exact. */
        ck_assert_mem_eq(a.data, b.data, a.nbytes);
        if (d == 0) {
            /* The 64x48 image is padded with zeros around it. */
            ck_assert_uint_eq(b.data[0], 0);
            ck_assert_uint_ne(b.data[(48 * 96 + 48) * 3], 0);
        }
    }
    sl_tensor_free(&jpg);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    sl_pipeline_free(fused);
    sl_pipeline_free(plain);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_units_and_split_mapping);
    tcase_add_test(tc, test_layout_matches_pipeline);
    tcase_add_test(tc, test_fused_matches_unfused_within_tolerance);
    tcase_add_test(tc, test_deterministic_and_split_invariant);
    tcase_add_test(tc, test_center_crop_pads_small_images);
    tcase_add_test(tc, test_normalize_chw_one_pass);
    tcase_add_test(tc, test_device_normalize_is_no_unit);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
