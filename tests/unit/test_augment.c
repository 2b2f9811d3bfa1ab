/* The augmentation ops: their spec keys (defaults, torchvision's short
 * forms, canonical JSON round trip, errors naming file:line: field), their
 * order rules, their pipeline units (deterministic per (seed, epoch,
 * index), split-invariant, profiled) and the functional ops' edge cases
 * (1x1 images, gray images, extreme parameters). Agreement with
 * torchvision itself is tests/integration/test_augment_torchvision.sh. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine/pipeline.h"
#include "common/image/augment.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

#define ERRLEN 1024

static char *spec_with(const char *stages)
{
    static char buf[8192];
    int n = snprintf(buf, sizeof(buf),
                     "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\", \"seed\": 5},\n"
                     " \"stages\": [\n  {\"op\": \"decode_jpeg\"},\n  %s\n ]}\n",
                     stages);
    ck_assert(n > 0 && (size_t)n < sizeof(buf));
    return buf;
}

static void parse_ok(const char *stages, sl_spec_t *spec)
{
    char err[ERRLEN] = "";
    const char *text = spec_with(stages);
    int rc = sl_spec_parse("t.json", text, strlen(text), spec, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", stages, err);
}

static void parse_err(const char *stages, const char *want)
{
    char err[ERRLEN] = "";
    sl_spec_t spec;
    const char *text = spec_with(stages);
    int rc = sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "%s: rc %d", stages, rc);
    ck_assert_msg(strstr(err, want) != NULL, "%s:\n  error \"%s\"\n  lacks \"%s\"", stages, err,
                  want);
}

/* parse(to_json(s)) == s for the augmentation fields (parse zeroes every
 * stage first, so the structs compare as bytes), and a fixed point. */
static void assert_round_trip(const sl_spec_t *s)
{
    char *j1 = sl_spec_to_json(s);
    ck_assert_ptr_nonnull(j1);
    char err[ERRLEN] = "";
    sl_spec_t back;
    ck_assert_msg(sl_spec_parse("canon", j1, strlen(j1), &back, err, sizeof(err)) == 0, "%s: %s",
                  j1, err);
    ck_assert_uint_eq(back.nstages, s->nstages);
    for (uint32_t i = 0; i < s->nstages; i++) {
        ck_assert_int_eq(back.stages[i].op, s->stages[i].op);
        ck_assert_msg(memcmp(&back.stages[i].aug, &s->stages[i].aug, sizeof(sl_aug_spec_t)) == 0,
                      "stage %u differs after %s", i, j1);
    }
    char *j2 = sl_spec_to_json(&back);
    ck_assert_str_eq(j1, j2);
    free(j1);
    free(j2);
}

static const char *ALL_DEFAULTS =
    "{\"op\": \"color_jitter\"}, {\"op\": \"random_grayscale\"},"
    " {\"op\": \"gaussian_blur\", \"kernel_size\": 5}, {\"op\": \"random_erasing\"},"
    " {\"op\": \"random_rotation\", \"degrees\": 30}, {\"op\": \"random_affine\", \"degrees\": 0},"
    " {\"op\": \"solarize\", \"threshold\": 128}, {\"op\": \"posterize\", \"bits\": 4},"
    " {\"op\": \"auto_contrast\"}, {\"op\": \"equalize\"}, {\"op\": \"trivial_augment_wide\"},"
    " {\"op\": \"rand_augment\"}";

START_TEST(test_defaults)
{
    sl_spec_t s;
    parse_ok(ALL_DEFAULTS, &s);
    ck_assert_uint_eq(s.nstages, 13);
    const sl_aug_spec_t *a = &s.stages[1].aug;
    ck_assert(a->brightness[0] == 1 && a->brightness[1] == 1 && a->hue[0] == 0 && a->hue[1] == 0);
    ck_assert(s.stages[2].aug.p == 0.1);
    a = &s.stages[3].aug;
    ck_assert(a->kernel_size[0] == 5 && a->kernel_size[1] == 5);
    ck_assert(a->sigma[0] == 0.1 && a->sigma[1] == 2.0);
    a = &s.stages[4].aug;
    ck_assert(a->p == 0.5 && a->scale[0] == 0.02 && a->scale[1] == 0.33 && a->ratio[0] == 0.3 &&
              a->ratio[1] == 3.3 && !a->value_random && a->value[0] == 0);
    a = &s.stages[5].aug;
    ck_assert(a->degrees[0] == -30 && a->degrees[1] == 30 && a->interpolation == SL_INTERP_NEAREST);
    ck_assert(a->has_fill && a->fill[0] == 0 && !a->has_center);
    a = &s.stages[6].aug;
    ck_assert(a->affine_scale[0] == 1 && a->affine_scale[1] == 1 && a->translate[0] == 0 &&
              a->shear[0] == 0 && a->shear[3] == 0);
    ck_assert(s.stages[7].aug.threshold == 128 && s.stages[7].aug.p == 0.5);
    ck_assert(s.stages[8].aug.bits == 4 && s.stages[8].aug.p == 0.5);
    ck_assert(s.stages[9].aug.p == 0.5 && s.stages[10].aug.p == 0.5);
    a = &s.stages[11].aug;
    ck_assert(a->num_magnitude_bins == 31 && !a->has_fill);
    a = &s.stages[12].aug;
    ck_assert(a->num_ops == 2 && a->magnitude == 9 && a->num_magnitude_bins == 31);
    assert_round_trip(&s);
}
END_TEST

/* torchvision's short forms expand as its constructors expand them. */
START_TEST(test_short_forms)
{
    sl_spec_t s;
    parse_ok("{\"op\": \"color_jitter\", \"brightness\": 0.4, \"contrast\": 1.5,"
             " \"saturation\": [0.5, 2], \"hue\": 0.1},"
             " {\"op\": \"gaussian_blur\", \"kernel_size\": [3, 7], \"sigma\": 1.5},"
             " {\"op\": \"random_erasing\", \"value\": \"random\", \"p\": 1},"
             " {\"op\": \"random_erasing\", \"value\": [1, 2, 3.5]},"
             " {\"op\": \"random_affine\", \"degrees\": [-5, 10], \"translate\": [0.1, 0.2],"
             " \"scale\": [0.8, 1.2], \"shear\": 10, \"interpolation\": \"bilinear\","
             " \"center\": [3, 4.5], \"fill\": 7},"
             " {\"op\": \"random_affine\", \"degrees\": 1, \"shear\": [1, 2, 3, 4],"
             " \"fill\": [1, 2, 3]},"
             " {\"op\": \"rand_augment\", \"num_ops\": 3, \"magnitude\": 4,"
             " \"num_magnitude_bins\": 5, \"fill\": [128, 128, 128]}",
             &s);
    const sl_aug_spec_t *a = &s.stages[1].aug;
    ck_assert(fabs(a->brightness[0] - 0.6) < 1e-12 && fabs(a->brightness[1] - 1.4) < 1e-12);
    ck_assert(a->contrast[0] == 0 && a->contrast[1] == 2.5); /* max(0, 1 - x) */
    ck_assert(a->saturation[0] == 0.5 && a->saturation[1] == 2);
    ck_assert(a->hue[0] == -0.1 && a->hue[1] == 0.1);
    a = &s.stages[2].aug;
    ck_assert(a->kernel_size[0] == 3 && a->kernel_size[1] == 7);
    ck_assert(a->sigma[0] == 1.5 && a->sigma[1] == 1.5);
    ck_assert(s.stages[3].aug.value_random && s.stages[3].aug.p == 1);
    ck_assert(s.stages[4].aug.value[2] == 3.5);
    a = &s.stages[5].aug;
    ck_assert(a->shear[0] == -10 && a->shear[1] == 10 && a->shear[2] == 0 && a->shear[3] == 0);
    ck_assert(a->has_center && a->center[1] == 4.5 && a->fill[2] == 7);
    ck_assert(a->interpolation == SL_INTERP_BILINEAR && a->translate[1] == 0.2);
    ck_assert(s.stages[6].aug.shear[2] == 3 && s.stages[6].aug.fill[1] == 2);
    a = &s.stages[7].aug;
    ck_assert(a->has_fill && a->num_ops == 3 && a->magnitude == 4 && a->num_magnitude_bins == 5);
    assert_round_trip(&s);
}
END_TEST

START_TEST(test_errors)
{
    /* The first augmentation stage sits on line 4 as stages[1]. */
    parse_err("{\"op\": \"color_jitter\", \"brightness\": -1}",
              "t.json:4: stages[1].brightness: must be a number >= 0 or [min, max] with 0 <= "
              "min <= max, got -1");
    parse_err("{\"op\": \"color_jitter\", \"hue\": 0.7}",
              "t.json:4: stages[1].hue: must be a number >= 0 or [min, max] with -0.5 <= min <= "
              "max <= 0.5, got 0.7");
    parse_err("{\"op\": \"color_jitter\", \"contrast\": [2, 1]}", "stages[1].contrast: must be");
    parse_err("{\"op\": \"color_jitter\", \"brightnes\": 1}",
              "stages[1].brightnes: unknown key for color_jitter (expected one of: op, "
              "brightness, contrast, saturation, hue)");
    parse_err("{\"op\": \"random_grayscale\", \"p\": 1.5}",
              "t.json:4: stages[1].p: must be a probability in 0..1, got 1.5");
    parse_err("{\"op\": \"gaussian_blur\"}",
              "t.json:4: stages[1].kernel_size: missing (required): an odd integer in 1..255");
    parse_err("{\"op\": \"gaussian_blur\", \"kernel_size\": 4}",
              "stages[1].kernel_size: must be an odd integer in 1..255 or [kx, ky], got 4");
    parse_err("{\"op\": \"gaussian_blur\", \"kernel_size\": [3, 0]}", "stages[1].kernel_size");
    parse_err("{\"op\": \"gaussian_blur\", \"kernel_size\": 3, \"sigma\": 0}",
              "stages[1].sigma: must be a number or [min, max] with 0 < min <= max, got 0");
    parse_err("{\"op\": \"random_erasing\", \"scale\": [0.5, 1.5]}",
              "stages[1].scale: must be a number or [min, max] with 0 <= min <= max <= 1");
    parse_err("{\"op\": \"random_erasing\", \"ratio\": [0, 1]}", "stages[1].ratio: must be");
    parse_err("{\"op\": \"random_erasing\", \"value\": \"noise\"}",
              "stages[1].value: must be a pixel value in 0..255, [R, G, B] or \"random\", got "
              "\"noise\"");
    parse_err("{\"op\": \"random_erasing\", \"value\": 256}",
              "stages[1].value: must be a pixel value in 0..255 or [R, G, B], got 256");
    parse_err("{\"op\": \"random_rotation\"}", "t.json:4: stages[1].degrees: missing (required)");
    parse_err("{\"op\": \"random_rotation\", \"degrees\": 10, \"interpolation\": \"bicubic\"}",
              "stages[1].interpolation: must be one of nearest, bilinear, got \"bicubic\"");
    parse_err("{\"op\": \"random_rotation\", \"degrees\": 10, \"center\": [1]}",
              "stages[1].center: must be [x, y] in pixels or null");
    parse_err("{\"op\": \"random_rotation\", \"degrees\": 10, \"fill\": null}",
              "stages[1].fill: must be a pixel value in 0..255 or [R, G, B], got null");
    parse_err("{\"op\": \"random_affine\", \"degrees\": 0, \"translate\": [0.5, 2]}",
              "stages[1].translate: must be [tx, ty], fractions of the width and height in 0..1");
    parse_err("{\"op\": \"random_affine\", \"degrees\": 0, \"shear\": [1, 2, 3]}",
              "stages[1].shear: must be s >= 0, [min, max] or [xmin, xmax, ymin, ymax]");
    parse_err("{\"op\": \"random_affine\", \"degrees\": 0, \"shear\": 95}", "stages[1].shear");
    parse_err("{\"op\": \"random_affine\", \"degrees\": 0, \"scale\": [0, 1]}",
              "stages[1].scale: must be a number or [min, max] with 0 < min <= max");
    parse_err("{\"op\": \"solarize\"}",
              "t.json:4: stages[1].threshold: missing (required): a pixel value in 0..255");
    parse_err("{\"op\": \"solarize\", \"threshold\": 300}",
              "stages[1].threshold: must be a pixel value in 0..255, got 300");
    parse_err("{\"op\": \"posterize\", \"bits\": 9}", "stages[1].bits");
    parse_err("{\"op\": \"posterize\"}", "stages[1].bits: missing (required)");
    parse_err("{\"op\": \"rand_augment\", \"magnitude\": 31}", "stages[1].magnitude");
    parse_err("{\"op\": \"rand_augment\", \"num_magnitude_bins\": 5, \"magnitude\": 5}",
              "stages[1].magnitude");
    parse_err("{\"op\": \"trivial_augment_wide\", \"num_magnitude_bins\": 1}",
              "stages[1].num_magnitude_bins");
    parse_err("{\"op\": \"trivial_augment_wide\", \"num_ops\": 2}",
              "stages[1].num_ops: unknown key for trivial_augment_wide");
    parse_err("{\"op\": \"trivial_augment_wide\", \"fill\": [1, 2]}", "stages[1].fill");
    /* Order: on uint8 HWC pixels, so after the decode, before normalize,
     * to_chw (and image_tiles). */
    parse_err("{\"op\": \"normalize\"}, {\"op\": \"equalize\"}",
              "t.json:4: stages[2].op: equalize must come before normalize (stages[1])");
    parse_err("{\"op\": \"to_chw\"}, {\"op\": \"color_jitter\"}",
              "stages[2].op: color_jitter must come before to_chw (stages[1])");
}
END_TEST

START_TEST(test_first_stage)
{
    const char *text = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"},"
                       " \"stages\": [{\"op\": \"equalize\"}]}";
    char err[ERRLEN] = "";
    sl_spec_t spec;
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "the first stage must be decode_jpeg or decode_image") != NULL, "%s",
                  err);
}
END_TEST

START_TEST(test_conf_example)
{
    sl_spec_t s;
    char err[ERRLEN] = "";
    int rc = sl_spec_parse_file("conf/augment-train.json", &s, err, sizeof(err));
    ck_assert_msg(rc == 0, "conf/augment-train.json (run from the source tree): %s", err);
    assert_round_trip(&s);
    int naug = 0;
    for (uint32_t i = 0; i < s.nstages; i++) {
        naug += sl_op_is_augment(s.stages[i].op);
    }
    ck_assert_int_ge(naug, 3);
}
END_TEST

/* ---- pipeline units ------------------------------------------------------------------- */

static void load_jpeg(sl_tensor_t *t, uint32_t w, uint32_t h, uint32_t seed)
{
    fx_jpeg_opts_t o = {.width = w, .height = h, .quality = 90, .seed = seed};
    uint8_t *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(fx_make_jpeg(&o, &buf, &len), 0);
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_BYTES, SL_LAYOUT_HWC, (uint32_t)len, 1, 1), 0);
    memcpy(t->data, buf, len);
    free(buf);
}

static void run_units(const sl_pipeline_t *p, uint32_t from, uint32_t to, uint64_t epoch,
                      uint64_t index, sl_tensor_t *io, sl_unit_stat_t *stats)
{
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    char err[256] = "";
    int rc = sl_pipeline_run(p, from, to, epoch, index, io, &sc, stats, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    sl_pipe_scratch_free(&sc);
}

static void copy_tensor(const sl_tensor_t *in, sl_tensor_t *out)
{
    ck_assert_int_eq(sl_tensor_reshape(out, in->dtype, in->layout, in->h, in->w, in->c), 0);
    if (in->dtype == SL_DT_BYTES) {
        out->nbytes = in->nbytes;
    }
    memcpy(out->data, in->data, in->nbytes);
}

/* Every op that draws, at parameters that make each draw matter. */
static const char *RANDOM_STAGES =
    "{\"op\": \"random_resized_crop\", \"size\": 96},"
    " {\"op\": \"color_jitter\", \"brightness\": 0.4, \"contrast\": 0.4, \"saturation\": 0.4,"
    " \"hue\": 0.1},"
    " {\"op\": \"random_grayscale\", \"p\": 0.5},"
    " {\"op\": \"gaussian_blur\", \"kernel_size\": 5},"
    " {\"op\": \"random_rotation\", \"degrees\": 20, \"interpolation\": \"bilinear\"},"
    " {\"op\": \"random_affine\", \"degrees\": 5, \"translate\": [0.1, 0.1], \"scale\": [0.9, 1.1],"
    " \"shear\": [-5, 5, -5, 5]},"
    " {\"op\": \"solarize\", \"threshold\": 200}, {\"op\": \"posterize\", \"bits\": 5},"
    " {\"op\": \"auto_contrast\"}, {\"op\": \"equalize\"},"
    " {\"op\": \"trivial_augment_wide\"}, {\"op\": \"rand_augment\"},"
    " {\"op\": \"random_erasing\", \"p\": 0.7, \"value\": \"random\"},"
    " {\"op\": \"normalize\"}, {\"op\": \"to_chw\"}";

START_TEST(test_units_deterministic)
{
    sl_spec_t spec;
    parse_ok(RANDOM_STAGES, &spec);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, NULL, 0), 0);
    const uint32_t n = sl_pipeline_nunits(p);
    ck_assert_uint_eq(n, 15); /* the decode fuses with the crop */
    ck_assert_str_eq(sl_pipeline_unit_name(p, 1), "color_jitter");
    ck_assert_str_eq(sl_pipeline_unit_name(p, 12), "random_erasing");
    sl_tensor_t jpg, a, b;
    sl_tensor_init(&jpg);
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    load_jpeg(&jpg, 320, 240, 4);
    /* Same (seed, epoch, index): same bytes, wherever the run is cut, and
     * every unit's cost is counted. */
    sl_unit_stat_t stats[SL_PIPE_MAX_UNITS] = {{0}};
    copy_tensor(&jpg, &a);
    run_units(p, 0, n, 3, 17, &a, stats);
    for (uint32_t u = 0; u < n; u++) {
        ck_assert_uint_eq(stats[u].samples, 1);
        ck_assert(stats[u].cpu_sec >= 0);
    }
    ck_assert_uint_eq(stats[5].out_bytes, 96 * 96 * 3);
    for (uint32_t cut = 1; cut < n; cut += 3) {
        copy_tensor(&jpg, &b);
        run_units(p, 0, cut, 3, 17, &b, NULL);
        run_units(p, cut, n, 3, 17, &b, NULL);
        ck_assert_uint_eq(a.nbytes, b.nbytes);
        ck_assert_msg(memcmp(a.data, b.data, a.nbytes) == 0, "cut at unit %u changed bytes", cut);
    }
    /* Another index or epoch draws differently (over a few tries: a
     * sample may draw no change by chance, not all of them). */
    int differ = 0;
    for (uint64_t idx = 18; idx < 22; idx++) {
        copy_tensor(&jpg, &b);
        run_units(p, 0, n, 3, idx, &b, NULL);
        differ += memcmp(a.data, b.data, a.nbytes) != 0;
    }
    copy_tensor(&jpg, &b);
    run_units(p, 0, n, 4, 17, &b, NULL);
    differ += memcmp(a.data, b.data, a.nbytes) != 0;
    ck_assert_int_eq(differ, 5);
    sl_tensor_free(&jpg);
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    sl_pipeline_free(p);
}
END_TEST

/* Each random op alone: over 64 indices it sometimes changes the image
 * and, where it has a p < 1, sometimes leaves it; the same index repeats. */
START_TEST(test_each_op_draws)
{
    const char *ops[] = {
        "{\"op\": \"color_jitter\", \"hue\": 0.2}",
        "{\"op\": \"random_grayscale\", \"p\": 0.5}",
        "{\"op\": \"gaussian_blur\", \"kernel_size\": 3, \"sigma\": [0.1, 3]}",
        "{\"op\": \"random_erasing\"}",
        "{\"op\": \"random_rotation\", \"degrees\": 45}",
        "{\"op\": \"random_affine\", \"degrees\": 0, \"translate\": [0.2, 0.2]}",
        "{\"op\": \"solarize\", \"threshold\": 100}",
        "{\"op\": \"posterize\", \"bits\": 2}",
        "{\"op\": \"auto_contrast\"}",
        "{\"op\": \"equalize\"}",
        "{\"op\": \"trivial_augment_wide\"}",
        "{\"op\": \"rand_augment\", \"num_ops\": 1}",
    };
    sl_tensor_t jpg, plain, out, again;
    sl_tensor_init(&jpg);
    sl_tensor_init(&plain);
    sl_tensor_init(&out);
    sl_tensor_init(&again);
    load_jpeg(&jpg, 64, 48, 9);
    copy_tensor(&jpg, &plain);
    {
        sl_spec_t s;
        parse_ok("{\"op\": \"flip\", \"p\": 0}", &s);
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
        run_units(p, 0, 1, 0, 0, &plain, NULL); /* the decoded image */
        sl_pipeline_free(p);
    }
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
        sl_spec_t s;
        parse_ok(ops[k], &s);
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
        int changed = 0;
        for (uint64_t idx = 0; idx < 64; idx++) {
            copy_tensor(&plain, &out);
            run_units(p, 1, 2, 0, idx, &out, NULL);
            ck_assert_uint_eq(out.nbytes, plain.nbytes);
            changed += memcmp(out.data, plain.data, plain.nbytes) != 0;
            copy_tensor(&plain, &again);
            run_units(p, 1, 2, 0, idx, &again, NULL);
            ck_assert_mem_eq(out.data, again.data, out.nbytes);
        }
        ck_assert_msg(changed > 0, "%s never changed the image", ops[k]);
        bool has_p = k == 1 || k == 3 || (k >= 6 && k <= 9);
        ck_assert_msg(!has_p || changed < 64, "%s changed every image at p = 0.5", ops[k]);
        sl_pipeline_free(p);
    }
    sl_tensor_free(&jpg);
    sl_tensor_free(&plain);
    sl_tensor_free(&out);
    sl_tensor_free(&again);
}
END_TEST

/* An augmentation unit given float32 (from a peer that sent the wrong
 * tensor) refuses it with a message. */
START_TEST(test_unit_refuses_floats)
{
    sl_spec_t s;
    parse_ok("{\"op\": \"equalize\", \"p\": 1}", &s);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
    sl_tensor_t t;
    sl_tensor_init(&t);
    ck_assert_int_eq(sl_tensor_reshape(&t, SL_DT_F32, SL_LAYOUT_HWC, 2, 2, 3), 0);
    memset(t.data, 0, t.nbytes);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    char err[256] = "";
    ck_assert_int_eq(sl_pipeline_run(p, 1, 2, 0, 0, &t, &sc, NULL, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "equalize needs a uint8 HWC image") != NULL, "%s", err);
    sl_pipe_scratch_free(&sc);
    sl_tensor_free(&t);
    sl_pipeline_free(p);
}
END_TEST

/* ---- functional ops: edge cases ------------------------------------------------------- */

static void make_img(sl_tensor_t *t, uint32_t h, uint32_t w, uint32_t c, uint32_t seed)
{
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_U8, SL_LAYOUT_HWC, h, w, c), 0);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < t->nbytes; i++) {
        x = x * 1103515245u + 12345u;
        t->data[i] = (uint8_t)(x >> 16);
    }
}

/* Every op on 1x1, 1xN, Nx1 and 2x2 images, 1 and 3 channels: no crash,
 * the shape kept, and the same result twice. */
START_TEST(test_tiny_images)
{
    const uint32_t dims[][2] = {{1, 1}, {1, 7}, {7, 1}, {2, 2}, {3, 3}};
    sl_tensor_t t, s;
    sl_tensor_init(&t);
    sl_tensor_init(&s);
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
        for (uint32_t c = 1; c <= 3; c += 2) {
            for (int op = 0; op < SL_AUG_OP__COUNT; op++) {
                for (int sign = -1; sign <= 1; sign += 2) {
                    make_img(&t, dims[d][0], dims[d][1], c, (uint32_t)op);
                    const double mag = op == SL_AUG_OP_POSTERIZE  ? 3
                                       : op == SL_AUG_OP_SOLARIZE ? 128
                                                                  : sign * 0.5;
                    const double fill[3] = {9, 9, 9};
                    ck_assert_int_eq(sl_aug_apply_op(&t, (sl_aug_op_e)op, mag, SL_AUG_BILINEAR,
                                                     sign > 0 ? fill : NULL, &s),
                                     0);
                    ck_assert_uint_eq(t.h, dims[d][0]);
                    ck_assert_uint_eq(t.w, dims[d][1]);
                    ck_assert_uint_eq(t.c, c);
                }
            }
            make_img(&t, dims[d][0], dims[d][1], c, 1);
            ck_assert_int_eq(sl_aug_gaussian_blur(&t, 23, 5, 2.0, 0.3, &s), 0);
            ck_assert_int_eq(sl_aug_hue(&t, 0.5), 0);
            ck_assert_int_eq(sl_aug_saturation(&t, 3), 0);
            ck_assert_int_eq(sl_aug_contrast(&t, 0), 0);
            ck_assert_int_eq(sl_aug_grayscale(&t), 0);
            ck_assert_int_eq(sl_aug_erase(&t, 0, 0, dims[d][1], dims[d][0], NULL,
                                          &(sl_rng_t){.key = 1}),
                             0);
            bool ok;
            uint32_t x, y, w, h;
            sl_rng_t r;
            sl_rng_init(&r, 1, 2, 3, 4);
            const double scale[2] = {0.02, 0.33}, ratio[2] = {0.3, 3.3};
            sl_aug_erasing_draw(dims[d][0], dims[d][1], scale, ratio, &r, &ok, &x, &y, &w, &h);
            /* A 1-pixel side never fits an erasing strictly smaller than it
             * but 0 wide: torchvision's rule (h < H and w < W). */
            ck_assert(!ok || (h < dims[d][0] && w < dims[d][1]));
        }
    }
    sl_tensor_free(&t);
    sl_tensor_free(&s);
}
END_TEST

/* Gray images (R = G = B) and flat images: what torchvision leaves alone. */
START_TEST(test_gray_and_flat)
{
    sl_tensor_t t, ref, s;
    sl_tensor_init(&t);
    sl_tensor_init(&ref);
    sl_tensor_init(&s);
    make_img(&t, 16, 12, 3, 5);
    for (size_t i = 0; i < t.nbytes; i += 3) {
        t.data[i + 1] = t.data[i + 2] = t.data[i];
    }
    copy_tensor(&t, &ref);
    /* Hue shifts nothing without saturation; grayscale of gray is gray
     * (0.2989 + 0.587 + 0.114 = 0.9999: truncation may take one level). */
    ck_assert_int_eq(sl_aug_hue(&t, 0.3), 0);
    ck_assert_mem_eq(t.data, ref.data, t.nbytes);
    ck_assert_int_eq(sl_aug_grayscale(&t), 0);
    for (size_t i = 0; i < t.nbytes; i++) {
        ck_assert_int_le(abs((int)t.data[i] - (int)ref.data[i]), 1);
    }
    /* A flat channel: auto_contrast and equalize keep it. */
    memset(t.data, 77, t.nbytes);
    ck_assert_int_eq(sl_aug_autocontrast(&t), 0);
    ck_assert_int_eq(sl_aug_equalize(&t), 0);
    for (size_t i = 0; i < t.nbytes; i++) {
        ck_assert_uint_eq(t.data[i], 77);
    }
    /* Two values: auto_contrast stretches them to 0 and 255. */
    for (size_t i = 0; i < t.nbytes; i++) {
        t.data[i] = i % 2 ? 100 : 50;
    }
    ck_assert_int_eq(sl_aug_autocontrast(&t), 0);
    ck_assert_uint_eq(t.data[0], 0);
    ck_assert_uint_eq(t.data[1], 255);
    sl_tensor_free(&t);
    sl_tensor_free(&ref);
    sl_tensor_free(&s);
}
END_TEST

START_TEST(test_extremes)
{
    sl_tensor_t t, ref, s;
    sl_tensor_init(&t);
    sl_tensor_init(&ref);
    sl_tensor_init(&s);
    make_img(&t, 9, 11, 3, 2);
    copy_tensor(&t, &ref);
    /* Identity parameters are exact identities. */
    ck_assert_int_eq(sl_aug_brightness(&t, 1), 0);
    ck_assert_int_eq(sl_aug_contrast(&t, 1), 0);
    ck_assert_int_eq(sl_aug_saturation(&t, 1), 0);
    ck_assert_int_eq(sl_aug_posterize(&t, 8), 0);
    ck_assert_int_eq(sl_aug_solarize(&t, 255.5 - 0.5), 0); /* only 255s flip: 255 -> 0 */
    for (size_t i = 0; i < t.nbytes; i++) {
        ck_assert_uint_eq(t.data[i], ref.data[i] == 255 ? 0 : ref.data[i]);
    }
    copy_tensor(&ref, &t);
    double m[6];
    sl_aug_affine_matrix(t.h, t.w, NULL, 0, 0, 0, 1, 0, 0, m);
    for (int interp = 0; interp < 2; interp++) {
        ck_assert_int_eq(sl_aug_warp(&t, m, (sl_aug_interp_e)interp, NULL, &s), 0);
        ck_assert_mem_eq(t.data, ref.data, t.nbytes);
    }
    ck_assert_int_eq(sl_aug_gaussian_blur(&t, 1, 1, 5.0, 5.0, &s), 0);
    ck_assert_mem_eq(t.data, ref.data, t.nbytes);
    /* Extremes: black, all inverted, all zero, a translation out of view
     * leaves only the fill. */
    ck_assert_int_eq(sl_aug_solarize(&t, 0), 0);
    for (size_t i = 0; i < t.nbytes; i++) {
        ck_assert_uint_eq(t.data[i], 255 - ref.data[i]);
    }
    ck_assert_int_eq(sl_aug_posterize(&t, 0), 0);
    for (size_t i = 0; i < t.nbytes; i++) {
        ck_assert_uint_eq(t.data[i], 0);
    }
    copy_tensor(&ref, &t);
    ck_assert_int_eq(sl_aug_brightness(&t, 0), 0);
    for (size_t i = 0; i < t.nbytes; i++) {
        ck_assert_uint_eq(t.data[i], 0);
    }
    copy_tensor(&ref, &t);
    const double fill[3] = {10, 20, 30};
    sl_aug_affine_matrix(t.h, t.w, NULL, 0, 100, 0, 1, 0, 0, m);
    ck_assert_int_eq(sl_aug_warp(&t, m, SL_AUG_BILINEAR, fill, &s), 0);
    for (size_t i = 0; i < t.nbytes; i++) {
        ck_assert_uint_eq(t.data[i], (i % 3 + 1) * 10);
    }
    /* A quarter turn of a square image with nearest is a pure permutation,
     * clockwise for F.affine (checked against torchvision). */
    make_img(&t, 8, 8, 1, 3);
    copy_tensor(&t, &ref);
    sl_aug_affine_matrix(8, 8, NULL, 90, 0, 0, 1, 0, 0, m);
    ck_assert_int_eq(sl_aug_warp(&t, m, SL_AUG_NEAREST, NULL, &s), 0);
    for (uint32_t y = 0; y < 8; y++) {
        for (uint32_t x = 0; x < 8; x++) {
            ck_assert_uint_eq(t.data[y * 8 + x], ref.data[(7 - x) * 8 + y]);
        }
    }
    /* Bad arguments are errors, not crashes. */
    ck_assert_int_eq(sl_aug_brightness(&t, -1), -EINVAL);
    ck_assert_int_eq(sl_aug_hue(&t, 0.6), -EINVAL);
    ck_assert_int_eq(sl_aug_posterize(&t, 9), -EINVAL);
    ck_assert_int_eq(sl_aug_solarize(&t, 256), -EINVAL);
    ck_assert_int_eq(sl_aug_gaussian_blur(&t, 4, 3, 1, 1, &s), -EINVAL);
    ck_assert_int_eq(sl_aug_gaussian_blur(&t, 3, 3, 0, 1, &s), -EINVAL);
    ck_assert_int_eq(sl_aug_erase(&t, 4, 4, 5, 1, NULL, NULL), -EINVAL);
    m[0] = NAN;
    ck_assert_int_eq(sl_aug_warp(&t, m, SL_AUG_NEAREST, NULL, &s), -EINVAL);
    ck_assert_int_eq(sl_tensor_reshape(&t, SL_DT_U8, SL_LAYOUT_HWC, 2, 2, 4), 0);
    ck_assert_int_eq(sl_aug_equalize(&t), -EINVAL); /* 4 channels: torchvision refuses too */
    sl_tensor_free(&t);
    sl_tensor_free(&ref);
    sl_tensor_free(&s);
}
END_TEST

/* The policies' magnitude tables at their ends, as torchvision 0.14's. */
START_TEST(test_policy_tables)
{
    bool sg;
    ck_assert(sl_aug_magnitude(SL_AUG_TRIVIAL_WIDE, SL_AUG_OP_ROTATE, 30, 31, 10, 10, &sg) ==
              135.0);
    ck_assert(sg);
    ck_assert(sl_aug_magnitude(SL_AUG_RAND_AUGMENT, SL_AUG_OP_ROTATE, 30, 31, 10, 10, &sg) == 30.0);
    ck_assert(sl_aug_magnitude(SL_AUG_RAND_AUGMENT, SL_AUG_OP_POSTERIZE, 30, 31, 1, 1, &sg) == 4.0);
    ck_assert(!sg);
    ck_assert(sl_aug_magnitude(SL_AUG_TRIVIAL_WIDE, SL_AUG_OP_POSTERIZE, 30, 31, 1, 1, &sg) == 2.0);
    ck_assert(sl_aug_magnitude(SL_AUG_TRIVIAL_WIDE, SL_AUG_OP_POSTERIZE, 0, 31, 1, 1, &sg) == 8.0);
    ck_assert(sl_aug_magnitude(SL_AUG_TRIVIAL_WIDE, SL_AUG_OP_SOLARIZE, 0, 31, 1, 1, &sg) == 255.0);
    ck_assert(sl_aug_magnitude(SL_AUG_TRIVIAL_WIDE, SL_AUG_OP_SOLARIZE, 30, 31, 1, 1, &sg) == 0.0);
    /* RandAugment translates by up to 150/331 of the side (float32). */
    ck_assert(sl_aug_magnitude(SL_AUG_RAND_AUGMENT, SL_AUG_OP_TRANSLATE_X, 30, 31, 100, 331, &sg) ==
              (double)150.0f);
    ck_assert(sl_aug_magnitude(SL_AUG_RAND_AUGMENT, SL_AUG_OP_EQUALIZE, 9, 31, 1, 1, &sg) == 0);
    /* rand_augment with no ops is the identity and draws nothing. */
    sl_tensor_t t, ref, s;
    sl_tensor_init(&t);
    sl_tensor_init(&ref);
    sl_tensor_init(&s);
    make_img(&t, 5, 5, 3, 1);
    copy_tensor(&t, &ref);
    sl_rng_t r;
    sl_rng_init(&r, 1, 1, 1, 1);
    ck_assert_int_eq(sl_aug_policy(&t, SL_AUG_RAND_AUGMENT, 0, 9, 31, SL_AUG_NEAREST, NULL, &r, &s),
                     0);
    ck_assert_mem_eq(t.data, ref.data, t.nbytes);
    ck_assert_int_eq(sl_aug_policy(&t, SL_AUG_RAND_AUGMENT, 1, 31, 31, SL_AUG_NEAREST, NULL, &r,
                                   &s),
                     -EINVAL);
    sl_tensor_free(&t);
    sl_tensor_free(&ref);
    sl_tensor_free(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("augment");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_short_forms);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_first_stage);
    tcase_add_test(tc, test_conf_example);
    tcase_add_test(tc, test_units_deterministic);
    tcase_add_test(tc, test_each_op_draws);
    tcase_add_test(tc, test_unit_refuses_floats);
    tcase_add_test(tc, test_tiny_images);
    tcase_add_test(tc, test_gray_and_flat);
    tcase_add_test(tc, test_extremes);
    tcase_add_test(tc, test_policy_tables);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
