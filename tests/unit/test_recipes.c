/* test_recipes: the torchvision recipe ops of issue #38 (vertical_flip,
 * padded random_crop, resize interpolation, random_apply / random_choice,
 * random_erasing after normalize): their spec keys and errors, and their
 * pipeline units. The pixels against torchvision: test_augment.c's
 * generated table and tests/integration/test_augment_torchvision.sh. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine/pipeline.h"
#include "common/image/augment.h"
#include "common/image/imgops.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_stages.h"

#define ERRLEN 512

/* The canonical JSON reads back to the same JSON (a fixed point). */
static void assert_json_fixed(const sl_spec_t *s)
{
    char *j1 = sl_spec_to_json(s);
    ck_assert_ptr_nonnull(j1);
    char err[ERRLEN] = "";
    sl_spec_t back;
    ck_assert_msg(sl_spec_parse("canon", j1, strlen(j1), &back, err, sizeof(err)) == 0, "%s: %s",
                  j1, err);
    char *j2 = sl_spec_to_json(&back);
    ck_assert_str_eq(j1, j2);
    sl_spec_clear(&back);
    free(j1);
    free(j2);
}

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

static void copy_tensor(const sl_tensor_t *in, sl_tensor_t *out)
{
    ck_assert_int_eq(sl_tensor_reshape(out, in->dtype, in->layout, in->h, in->w, in->c), 0);
    if (in->dtype == SL_DT_BYTES) {
        out->nbytes = in->nbytes;
    }
    memcpy(out->data, in->data, in->nbytes);
}

static int run_units(const sl_pipeline_t *p, uint32_t from, uint32_t to, uint64_t index,
                     sl_tensor_t *io, char *err, size_t errlen)
{
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    int rc = sl_pipeline_run(p, from, to, 0, index, io, &sc, NULL, err, errlen);
    sl_pipe_scratch_free(&sc);
    return rc;
}

/* A decoded photo: stages[0] of a spec with one more stage. */
static void decoded(uint32_t w, uint32_t h, sl_tensor_t *out)
{
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"flip\", \"p\": 0}", &s);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
    load_jpeg(out, w, h, 3);
    char err[ERRLEN] = "";
    ck_assert_msg(run_units(p, 0, 1, 0, out, err, sizeof(err)) == 0, "%s", err);
    sl_pipeline_free(p);
}

/* ---- vertical_flip ---------------------------------------------------------------------- */

START_TEST(test_vertical_flip_spec)
{
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"vertical_flip\"}", &s);
    ck_assert_int_eq(s.stages[1].op, SL_OP_VERTICAL_FLIP);
    ck_assert(s.stages[1].p == 0.5);
    assert_json_fixed(&s);
    fx_stages_parse_ok("{\"op\": \"vertical_flip\", \"p\": 1}", &s);
    ck_assert(s.stages[1].p == 1.0);
    ck_assert(sl_op_draws_random(SL_OP_VERTICAL_FLIP));
    fx_stages_parse_err("{\"op\": \"vertical_flip\", \"p\": 1.5}",
                        "stages[1].p: must be a probability in 0..1, got 1.5");
    fx_stages_parse_err("{\"op\": \"vertical_flip\", \"q\": 1}", "stages[1]");
}
END_TEST

/* p = 1: rows reversed, on uint8 HWC and after normalize + to_chw on
 * float32 CHW; p = 0: untouched. */
START_TEST(test_vertical_flip_unit)
{
    sl_tensor_t img, out;
    sl_tensor_init(&img);
    sl_tensor_init(&out);
    decoded(40, 30, &img);
    const char *stages[3] = {"{\"op\": \"vertical_flip\", \"p\": 1}",
                             "{\"op\": \"vertical_flip\", \"p\": 0}",
                             "{\"op\": \"normalize\"}, {\"op\": \"to_chw\"},"
                             " {\"op\": \"vertical_flip\", \"p\": 1}"};
    for (int k = 0; k < 3; k++) {
        sl_spec_t s;
        fx_stages_parse_ok(stages[k], &s);
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
        uint32_t n = sl_pipeline_nunits(p);
        copy_tensor(&img, &out);
        char err[ERRLEN] = "";
        ck_assert_msg(run_units(p, 1, n, 7, &out, err, sizeof(err)) == 0, "%s", err);
        sl_tensor_t want;
        sl_tensor_init(&want);
        copy_tensor(&img, &want);
        if (k == 2) {
            ck_assert_msg(run_units(p, 1, n - 1, 7, &want, err, sizeof(err)) == 0, "%s", err);
        }
        const size_t row = want.nbytes / (want.layout == SL_LAYOUT_CHW ? want.c : 1) / want.h;
        for (uint32_t pl = 0; pl < (want.layout == SL_LAYOUT_CHW ? want.c : 1u); pl++) {
            for (uint32_t y = 0; y < want.h; y++) {
                uint32_t from = k == 1 ? y : want.h - 1 - y;
                ck_assert(memcmp(out.data + (pl * want.h + y) * row,
                                 want.data + (pl * want.h + from) * row, row) == 0);
            }
        }
        sl_tensor_free(&want);
        sl_pipeline_free(p);
    }
    sl_tensor_free(&img);
    sl_tensor_free(&out);
}
END_TEST

/* ---- random_crop ---------------------------------------------------------------------- */

START_TEST(test_random_crop_spec)
{
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"random_crop\", \"size\": 32, \"padding\": 4}", &s);
    const sl_aug_spec_t *a = &s.stages[1].aug;
    ck_assert_uint_eq(a->crop_h, 32);
    ck_assert_uint_eq(a->crop_w, 32);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(a->padding[i], 4);
    }
    ck_assert_uint_eq(a->padding_mode, SL_PAD_CONSTANT);
    ck_assert(!a->pad_if_needed);
    ck_assert(a->pad_fill[0] == 0 && a->pad_fill[2] == 0);
    assert_json_fixed(&s);
    ck_assert(sl_op_draws_random(SL_OP_RANDOM_CROP));
    /* torchvision's padding forms: [p], [left/right, top/bottom], [l, t, r, b] */
    fx_stages_parse_ok("{\"op\": \"random_crop\", \"size\": [20, 30], \"padding\": [1, 2],"
                       " \"padding_mode\": \"reflect\", \"fill\": 9, \"pad_if_needed\": true}",
                       &s);
    a = &s.stages[1].aug;
    ck_assert_uint_eq(a->crop_h, 20);
    ck_assert_uint_eq(a->crop_w, 30);
    ck_assert(a->padding[0] == 1 && a->padding[1] == 2 && a->padding[2] == 1 && a->padding[3] == 2);
    ck_assert_uint_eq(a->padding_mode, SL_PAD_REFLECT);
    ck_assert(a->pad_if_needed);
    assert_json_fixed(&s);
    fx_stages_parse_ok("{\"op\": \"random_crop\", \"size\": 8, \"padding\": [1, 2, 3, 4],"
                       " \"padding_mode\": \"symmetric\"}",
                       &s);
    a = &s.stages[1].aug;
    ck_assert(a->padding[0] == 1 && a->padding[1] == 2 && a->padding[2] == 3 && a->padding[3] == 4);
    fx_stages_parse_ok("{\"op\": \"random_crop\", \"size\": 8, \"padding\": [5],"
                       " \"padding_mode\": \"edge\"}",
                       &s);
    ck_assert_uint_eq(s.stages[1].aug.padding[3], 5);
    ck_assert_uint_eq(s.stages[1].aug.padding_mode, SL_PAD_EDGE);

    fx_stages_parse_err("{\"op\": \"random_crop\", \"padding\": 4}",
                        "stages[1].size: missing (required)");
    fx_stages_parse_err("{\"op\": \"random_crop\", \"size\": 0}",
                        "stages[1].size: must be an integer");
    fx_stages_parse_err("{\"op\": \"random_crop\", \"size\": 32, \"padding\": -1}",
                        "stages[1].padding: must be an integer in 0..4096");
    fx_stages_parse_err("{\"op\": \"random_crop\", \"size\": 32, \"padding\": [1, 2, 3]}",
                        "stages[1].padding: must be");
    fx_stages_parse_err("{\"op\": \"random_crop\", \"size\": 32, \"padding\": [1, -2]}",
                        "stages[1].padding: must be");
    fx_stages_parse_err("{\"op\": \"random_crop\", \"size\": 32, \"padding_mode\": \"wrap\"}",
                        "stages[1].padding_mode");
    fx_stages_parse_err("{\"op\": \"random_crop\", \"size\": 32, \"fill\": 300}",
                        "stages[1].fill: must be a pixel value in 0..255");
    fx_stages_parse_err("{\"op\": \"random_crop\", \"size\": 32, \"pad_if_needed\": 1}",
                        "stages[1].pad_if_needed");
    fx_stages_parse_err("{\"op\": \"normalize\"}, {\"op\": \"random_crop\", \"size\": 32}",
                        "random_crop must come before normalize");
}
END_TEST

/* The unit: the output has the crop's size; the drawn window is the
 * same for the same index; with padding 4 some windows reach into the
 * zero border; a crop larger than the image fails the sample unless
 * pad_if_needed. */
START_TEST(test_random_crop_unit)
{
    sl_tensor_t img, out, again;
    sl_tensor_init(&img);
    sl_tensor_init(&out);
    sl_tensor_init(&again);
    decoded(32, 32, &img);
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"random_crop\", \"size\": 32, \"padding\": 4}", &s);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
    char err[ERRLEN] = "";
    int moved = 0, black_row = 0;
    for (uint64_t idx = 0; idx < 32; idx++) {
        copy_tensor(&img, &out);
        ck_assert_msg(run_units(p, 1, 2, idx, &out, err, sizeof(err)) == 0, "%s", err);
        ck_assert(out.h == 32 && out.w == 32 && out.c == 3);
        copy_tensor(&img, &again);
        ck_assert_int_eq(run_units(p, 1, 2, idx, &again, err, sizeof(err)), 0);
        ck_assert_mem_eq(out.data, again.data, out.nbytes);
        moved += memcmp(out.data, img.data, img.nbytes) != 0;
        bool zero = true;
        for (size_t i = 0; i < 32 * 3; i++) {
            zero = zero && out.data[i] == 0;
        }
        black_row += zero;
    }
    ck_assert_int_gt(moved, 20);
    ck_assert_int_gt(black_row, 0);
    sl_pipeline_free(p);

    fx_stages_parse_ok("{\"op\": \"random_crop\", \"size\": 40}", &s);
    ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
    copy_tensor(&img, &out);
    ck_assert_int_eq(run_units(p, 1, 2, 0, &out, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "random_crop") != NULL, "%s", err);
    sl_pipeline_free(p);
    fx_stages_parse_ok("{\"op\": \"random_crop\", \"size\": 40, \"pad_if_needed\": true,"
                       " \"padding_mode\": \"edge\"}",
                       &s);
    ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
    copy_tensor(&img, &out);
    ck_assert_msg(run_units(p, 1, 2, 0, &out, err, sizeof(err)) == 0, "%s", err);
    ck_assert(out.h == 40 && out.w == 40);
    sl_pipeline_free(p);
    sl_tensor_free(&img);
    sl_tensor_free(&out);
    sl_tensor_free(&again);
}
END_TEST

/* ---- resize / random_resized_crop interpolation -------------------------------------- */

START_TEST(test_interpolation_spec)
{
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"random_resized_crop\", \"size\": 64},"
                       " {\"op\": \"resize\", \"size\": 32}",
                       &s);
    ck_assert_uint_eq(s.stages[1].resize_interp, SL_RESIZE_INTERP_BILINEAR);
    ck_assert_uint_eq(s.stages[2].resize_interp, SL_RESIZE_INTERP_BILINEAR);
    /* bilinear, the default, leaves the canonical JSON (and hashes) as
     * they were */
    char *j = sl_spec_to_json(&s);
    ck_assert_ptr_null(strstr(j, "interpolation"));
    free(j);
    fx_stages_parse_ok("{\"op\": \"random_resized_crop\", \"size\": 64,"
                       " \"interpolation\": \"bicubic\"},"
                       " {\"op\": \"resize\", \"size\": [20, 30], \"interpolation\": \"nearest\"}",
                       &s);
    ck_assert_uint_eq(s.stages[1].resize_interp, SL_RESIZE_INTERP_BICUBIC);
    ck_assert_uint_eq(s.stages[2].resize_interp, SL_RESIZE_INTERP_NEAREST);
    assert_json_fixed(&s);
    fx_stages_parse_err("{\"op\": \"resize\", \"size\": 32, \"interpolation\": \"lanczos\"}",
                        "stages[1].interpolation");
    fx_stages_parse_err("{\"op\": \"random_resized_crop\", \"size\": 32, \"interpolation\": 2}",
                        "stages[1].interpolation");
    fx_stages_parse_err("{\"op\": \"center_crop\", \"size\": 32, \"interpolation\": \"nearest\"}",
                        "interpolation");
}
END_TEST

/* Bilinear keeps the fused decode; another filter runs unfused, and its
 * pixels differ from bilinear's. */
START_TEST(test_interpolation_units)
{
    const char *stages[3] = {"{\"op\": \"random_resized_crop\", \"size\": 48}",
                             "{\"op\": \"random_resized_crop\", \"size\": 48,"
                             " \"interpolation\": \"bicubic\"}",
                             "{\"op\": \"random_resized_crop\", \"size\": 48,"
                             " \"interpolation\": \"nearest\"}"};
    sl_tensor_t jpg, out[3];
    sl_tensor_init(&jpg);
    load_jpeg(&jpg, 160, 120, 5);
    for (int k = 0; k < 3; k++) {
        sl_spec_t s;
        fx_stages_parse_ok(stages[k], &s);
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
        ck_assert_uint_eq(sl_pipeline_nunits(p), k == 0 ? 1 : 2);
        ck_assert_str_eq(sl_pipeline_unit_name(p, 0),
                         k == 0 ? "decode_jpeg+random_resized_crop" : "decode_jpeg");
        sl_tensor_init(&out[k]);
        copy_tensor(&jpg, &out[k]);
        char err[ERRLEN] = "";
        ck_assert_msg(run_units(p, 0, sl_pipeline_nunits(p), 3, &out[k], err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert(out[k].h == 48 && out[k].w == 48 && out[k].dtype == SL_DT_U8);
        sl_pipeline_free(p);
    }
    ck_assert(memcmp(out[0].data, out[1].data, out[0].nbytes) != 0);
    ck_assert(memcmp(out[1].data, out[2].data, out[0].nbytes) != 0);
    /* resize nearest: exact pixel picks, floor(d * in / out) */
    sl_tensor_t img, r;
    sl_tensor_init(&img);
    sl_tensor_init(&r);
    decoded(40, 30, &img);
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"resize\", \"size\": [12, 16], \"interpolation\": \"nearest\"}",
                       &s);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
    copy_tensor(&img, &r);
    char err[ERRLEN] = "";
    ck_assert_msg(run_units(p, 1, 2, 0, &r, err, sizeof(err)) == 0, "%s", err);
    ck_assert(r.h == 12 && r.w == 16);
    for (uint32_t y = 0; y < 12; y++) {
        for (uint32_t x = 0; x < 16; x++) {
            uint32_t sy = (uint32_t)(y * 30 / 12), sx = (uint32_t)(x * 40 / 16);
            ck_assert(memcmp(r.data + (y * 16 + x) * 3, img.data + (sy * 40 + sx) * 3, 3) == 0);
        }
    }
    sl_pipeline_free(p);
    for (int k = 0; k < 3; k++) {
        sl_tensor_free(&out[k]);
    }
    sl_tensor_free(&jpg);
    sl_tensor_free(&img);
    sl_tensor_free(&r);
}
END_TEST

/* ---- random_apply / random_choice ------------------------------------------------------ */

START_TEST(test_nested_spec)
{
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"random_apply\", \"p\": 0.8, \"ops\": [{\"op\": \"color_jitter\","
                       " \"brightness\": 0.4}, {\"op\": \"random_grayscale\", \"p\": 1}]},"
                       " {\"op\": \"random_choice\", \"ops\": [{\"op\": \"solarize\", "
                       "\"threshold\":"
                       " 128}, {\"op\": \"posterize\", \"bits\": 3}], \"p\": [1, 3]},"
                       " {\"op\": \"random_choice\", \"ops\": [{\"op\": \"equalize\"}]}",
                       &s);
    const sl_aug_spec_t *a = &s.stages[1].aug;
    ck_assert_int_eq(s.stages[1].op, SL_OP_RANDOM_APPLY);
    ck_assert(a->p == 0.8);
    ck_assert_uint_eq(a->nops, 2);
    ck_assert_int_eq(a->ops[0].op, SL_OP_COLOR_JITTER);
    ck_assert(a->ops[0].aug.brightness[1] == 1.4);
    ck_assert(a->ops[1].aug.p == 1.0);
    a = &s.stages[2].aug;
    ck_assert_uint_eq(a->nops, 2);
    ck_assert(a->weights != NULL && a->weights[0] == 1 && a->weights[1] == 3);
    ck_assert_ptr_null(s.stages[3].aug.weights);
    assert_json_fixed(&s);
    /* a deep copy, whole after the source is cleared */
    sl_spec_t c;
    ck_assert_int_eq(sl_spec_copy(&c, &s), 0);
    ck_assert_ptr_ne(c.stages[1].aug.ops, s.stages[1].aug.ops);
    char *j1 = sl_spec_to_json(&s);
    sl_spec_clear(&s);
    ck_assert_ptr_null(s.stages[1].aug.ops);
    char *j2 = sl_spec_to_json(&c);
    ck_assert_str_eq(j1, j2);
    free(j1);
    free(j2);
    sl_spec_clear(&c);
    fx_stages_parse_ok("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"equalize\"}]}", &s);
    ck_assert(s.stages[1].aug.p == 0.5);
    sl_spec_clear(&s);

    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"normalize\"}]}",
                        "stages[1].ops[0].op: random_apply takes augmentation ops only");
    fx_stages_parse_err("{\"op\": \"random_choice\", \"ops\": [{\"op\": \"resize\", \"size\": 3}]}",
                        "stages[1].ops[0].op: random_choice takes augmentation ops only");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"decode_jpeg\"}]}",
                        "stages[1].ops[0].op");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"random_apply\","
                        " \"ops\": [{\"op\": \"equalize\"}]}]}",
                        "stages[1].ops[0].op");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"nope\"}]}",
                        "stages[1].ops[0].op");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": []}",
                        "stages[1].ops: must be a non-empty");
    fx_stages_parse_err("{\"op\": \"random_apply\"}", "stages[1].ops: missing (required)");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"p\": 1.2, \"ops\": [{\"op\": \"equalize\"}]}",
                        "stages[1].p: must be a probability in 0..1");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"equalize\", \"p\": -1}]}",
                        "stages[1].ops[0].p: must be a probability in 0..1");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"equalize\", \"x\": 1}]}",
                        "stages[1].ops[0]");
    fx_stages_parse_err("{\"op\": \"random_choice\", \"ops\": [{\"op\": \"equalize\"}], \"p\": [1, "
                        "2]}",
                        "stages[1].p: must be null or 1 weights");
    fx_stages_parse_err("{\"op\": \"random_choice\", \"ops\": [{\"op\": \"equalize\"},"
                        " {\"op\": \"equalize\"}], \"p\": [0, 0]}",
                        "stages[1].p: must be null or 2 weights");
    fx_stages_parse_err("{\"op\": \"random_choice\", \"ops\": [{\"op\": \"equalize\"},"
                        " {\"op\": \"equalize\"}], \"p\": [1, -1]}",
                        "stages[1].p");
    fx_stages_parse_err("{\"op\": \"normalize\"}, {\"op\": \"random_apply\", \"ops\": [{\"op\":"
                        " \"equalize\"}]}",
                        "random_apply must come before normalize");
}
END_TEST

/* random_apply at p = 1 is its ops in order, at p = 0 nothing; random_choice
 * with weights [0, 1] always the second; both deterministic per index and,
 * over indices, p = 0.5 and uniform choices take each branch. */
START_TEST(test_nested_units)
{
    sl_tensor_t img, out, want, scratch;
    sl_tensor_init(&img);
    sl_tensor_init(&out);
    sl_tensor_init(&want);
    sl_tensor_init(&scratch);
    decoded(48, 40, &img);
    copy_tensor(&img, &want);
    ck_assert_int_eq(sl_aug_solarize(&want, 100), 0);
    ck_assert_int_eq(sl_aug_posterize(&want, 2), 0);
    const char *stages[3] =
        {"{\"op\": \"random_apply\", \"p\": 1, \"ops\": [{\"op\": \"solarize\", \"threshold\":"
         " 100, \"p\": 1}, {\"op\": \"posterize\", \"bits\": 2, \"p\": 1}]}",
         "{\"op\": \"random_apply\", \"p\": 0, \"ops\": [{\"op\": \"equalize\", \"p\": 1}]}",
         "{\"op\": \"random_choice\", \"p\": [0, 1], \"ops\": [{\"op\": \"equalize\","
         " \"p\": 1}, {\"op\": \"posterize\", \"bits\": 2, \"p\": 1}]}"};
    for (int k = 0; k < 3; k++) {
        sl_spec_t s;
        fx_stages_parse_ok(stages[k], &s);
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
        sl_spec_clear(&s);
        for (uint64_t idx = 0; idx < 8; idx++) {
            copy_tensor(&img, &out);
            char err[ERRLEN] = "";
            ck_assert_msg(run_units(p, 1, 2, idx, &out, err, sizeof(err)) == 0, "%s", err);
            if (k == 0) {
                ck_assert_mem_eq(out.data, want.data, want.nbytes);
            } else if (k == 1) {
                ck_assert_mem_eq(out.data, img.data, img.nbytes);
            } else {
                copy_tensor(&img, &scratch);
                ck_assert_int_eq(sl_aug_posterize(&scratch, 2), 0);
                ck_assert_mem_eq(out.data, scratch.data, scratch.nbytes);
            }
        }
        sl_pipeline_free(p);
    }
    /* p = 0.5 and a uniform choice: both outcomes over 32 indices, and
     * the same one again for the same index */
    const char *mixed[2] =
        {"{\"op\": \"random_apply\", \"ops\": [{\"op\": \"posterize\", \"bits\": 2, \"p\": 1}]}",
         "{\"op\": \"random_choice\", \"ops\": [{\"op\": \"posterize\", \"bits\": 8, \"p\": 1},"
         " {\"op\": \"posterize\", \"bits\": 2, \"p\": 1}]}"};
    for (int k = 0; k < 2; k++) {
        sl_spec_t s;
        fx_stages_parse_ok(mixed[k], &s);
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
        sl_spec_clear(&s);
        int changed = 0;
        for (uint64_t idx = 0; idx < 32; idx++) {
            char err[ERRLEN] = "";
            copy_tensor(&img, &out);
            ck_assert_int_eq(run_units(p, 1, 2, idx, &out, err, sizeof(err)), 0);
            copy_tensor(&img, &want);
            ck_assert_int_eq(run_units(p, 1, 2, idx, &want, err, sizeof(err)), 0);
            ck_assert_mem_eq(out.data, want.data, out.nbytes);
            changed += memcmp(out.data, img.data, img.nbytes) != 0;
        }
        ck_assert_msg(changed > 4 && changed < 28, "%s: %d of 32 changed", mixed[k], changed);
        sl_pipeline_free(p);
    }
    sl_tensor_free(&img);
    sl_tensor_free(&out);
    sl_tensor_free(&want);
    sl_tensor_free(&scratch);
}
END_TEST

/* ---- random_erasing after normalize ---------------------------------------------------- */

START_TEST(test_erasing_after_normalize_spec)
{
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"normalize\"}, {\"op\": \"random_erasing\"}", &s);
    fx_stages_parse_ok("{\"op\": \"normalize\"}, {\"op\": \"to_chw\"}, {\"op\": \"random_erasing\","
                       " \"p\": 0.25, \"value\": \"random\"}",
                       &s);
    assert_json_fixed(&s);
    /* after a device normalize the consumer erases: no unit here */
    fx_stages_parse_ok("{\"op\": \"normalize\", \"on\": \"device\"}, {\"op\": \"random_erasing\"},"
                       " {\"op\": \"random_erasing\", \"value\": \"random\"}, {\"op\": \"to_chw\"}",
                       &s);
    ck_assert(s.stages[2].aug.erase_on_device && s.stages[3].aug.erase_on_device);
    sl_pipeline_t *p = NULL;
    char perr[256];
    ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, perr, sizeof(perr)), 0);
    ck_assert_uint_eq(sl_pipeline_nunits(p), 2); /* decode, to_chw: no normalize, no erase */
    sl_pipeline_free(p);
    assert_json_fixed(&s);
    fx_stages_parse_ok("{\"op\": \"random_erasing\"}, {\"op\": \"normalize\"}", &s);
    ck_assert(!s.stages[1].aug.erase_on_device);
    /* anything but to_chw after it would move pixels the device erases later */
    fx_stages_parse_err("{\"op\": \"normalize\", \"on\": \"device\"}, {\"op\": \"random_erasing\"},"
                        " {\"op\": \"flip\"}",
                        "stages[3].op: flip after a random_erasing the device applies (stages[2]) "
                        "is not supported: the consumer erases after everything Sluice does; put "
                        "flip before it");
    /* before a device normalize: uint8, pixel units, as always */
    fx_stages_parse_ok("{\"op\": \"random_erasing\"}, {\"op\": \"normalize\", \"on\": \"device\"}",
                       &s);
    /* the other augmentations stay before normalize */
    fx_stages_parse_err("{\"op\": \"normalize\"}, {\"op\": \"random_apply\", \"ops\":"
                        " [{\"op\": \"random_erasing\"}]}",
                        "random_apply must come before normalize");
}
END_TEST

/* value's units follow the stage's place: pixels (0..255) on uint8, any
 * float once normalized (torchvision's F.erase takes any), CPU or device. */
START_TEST(test_erasing_value_units)
{
    sl_spec_t s;
    fx_stages_parse_ok("{\"op\": \"normalize\"}, {\"op\": \"random_erasing\", \"value\": -1.5}",
                       &s);
    ck_assert(s.stages[2].aug.value[0] == -1.5 && s.stages[2].aug.value[2] == -1.5);
    assert_json_fixed(&s);
    fx_stages_parse_ok("{\"op\": \"normalize\", \"on\": \"device\"}, {\"op\": \"random_erasing\","
                       " \"value\": [-2.1, 0.5, 300]}",
                       &s);
    ck_assert(s.stages[2].aug.value[0] == -2.1 && s.stages[2].aug.value[2] == 300);
    assert_json_fixed(&s);
    fx_stages_parse_err("{\"op\": \"random_erasing\", \"value\": -1}, {\"op\": \"normalize\"}",
                        "stages[1].value: must be a pixel value in 0..255 before a normalize "
                        "(after one it is in tensor units, any number), got -1");
    fx_stages_parse_err("{\"op\": \"random_apply\", \"ops\": [{\"op\": \"random_erasing\","
                        " \"value\": [0, 0, 256]}]}",
                        "value: must be a pixel value in 0..255 before a normalize");
    fx_stages_parse_err("{\"op\": \"normalize\"}, {\"op\": \"random_erasing\", \"value\": 1e39}",
                        "stages[2].value: must be a number, [R, G, B] or \"random\", got 1e+39");
    fx_stages_parse_err("{\"op\": \"normalize\"}, {\"op\": \"random_erasing\", \"value\": "
                        "\"mean\"}",
                        "stages[2].value: must be a number, [R, G, B] or \"random\", got \"mean\"");
    fx_stages_parse_err("{\"op\": \"normalize\"}, {\"op\": \"random_erasing\", \"value\": [1, 2]}",
                        "stages[2].value: must be a number, [R, G, B] or \"random\"");
}
END_TEST

/* After a device normalize the consumer erases at sl_pipe_erase_box: the
 * very box the CPU erase (same stage position, same stream) painted, so
 * with it the device's floats equal the CPU's. */
static void erased_at_device_box(const sl_tensor_t *out, const sl_tensor_t *plain, uint64_t idx)
{
    sl_spec_t dev;
    fx_stages_parse_ok("{\"op\": \"normalize\", \"on\": \"device\"}, {\"op\": \"to_chw\"},"
                       " {\"op\": \"random_erasing\", \"p\": 1}",
                       &dev);
    sl_erase_box_t box;
    ck_assert(!sl_pipe_erase_box(&dev, 2, 0, idx, out->h, out->w, &box)); /* to_chw */
    ck_assert(sl_pipe_erase_box(&dev, 3, 0, idx, out->h, out->w, &box));
    const float *o = (const float *)(void *)out->data;
    const float *q = (const float *)(void *)plain->data;
    for (uint32_t c = 0; c < out->c; c++) {
        for (uint32_t y = 0; y < out->h; y++) {
            for (uint32_t x = 0; x < out->w; x++) {
                size_t i = ((size_t)c * out->h + y) * out->w + x;
                bool in = x >= box.x && x < box.x + box.w && y >= box.y && y < box.y + box.h;
                ck_assert_msg(in ? o[i] == 0.0f : o[i] == q[i], "index %u (%u, %u)", (unsigned)idx,
                              x, y);
            }
        }
    }
}

/* p = 1 after normalize + to_chw: an erased rectangle of exact zeros (the
 * normalized zero), every other float as without the erase; "random":
 * finite values; the same index, the same bytes. */
START_TEST(test_erasing_after_normalize_unit)
{
    sl_tensor_t img, plain, out, again;
    sl_tensor_init(&img);
    sl_tensor_init(&plain);
    sl_tensor_init(&out);
    sl_tensor_init(&again);
    decoded(64, 48, &img);
    const char *stages[2] = {"{\"op\": \"normalize\"}, {\"op\": \"to_chw\"},"
                             " {\"op\": \"random_erasing\", \"p\": 1}",
                             "{\"op\": \"normalize\"}, {\"op\": \"to_chw\"},"
                             " {\"op\": \"random_erasing\", \"p\": 1, \"value\": \"random\"}"};
    for (int k = 0; k < 2; k++) {
        sl_spec_t s;
        fx_stages_parse_ok(stages[k], &s);
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&s, 0, &p, NULL, 0), 0);
        const uint32_t n = sl_pipeline_nunits(p);
        char err[ERRLEN] = "";
        for (uint64_t idx = 0; idx < 8; idx++) {
            copy_tensor(&img, &plain);
            ck_assert_int_eq(run_units(p, 1, n - 1, idx, &plain, err, sizeof(err)), 0);
            copy_tensor(&img, &out);
            ck_assert_msg(run_units(p, 1, n, idx, &out, err, sizeof(err)) == 0, "%s", err);
            copy_tensor(&img, &again);
            ck_assert_int_eq(run_units(p, 1, n, idx, &again, err, sizeof(err)), 0);
            ck_assert_mem_eq(out.data, again.data, out.nbytes);
            ck_assert(out.dtype == SL_DT_F32 && out.layout == SL_LAYOUT_CHW);
            const float *o = (const float *)(void *)out.data;
            const float *q = (const float *)(void *)plain.data;
            size_t erased = 0;
            for (size_t i = 0; i < out.nbytes / sizeof(float); i++) {
                if (o[i] != q[i]) {
                    erased++;
                    ck_assert(k == 1 || o[i] == 0.0f);
                    ck_assert(isfinite(o[i]));
                }
            }
            ck_assert_msg(erased > 0 || idx > 0, "index %u erased nothing", (unsigned)idx);
            if (k == 0) {
                erased_at_device_box(&out, &plain, idx);
            }
        }
        sl_pipeline_free(p);
    }
    sl_tensor_free(&img);
    sl_tensor_free(&plain);
    sl_tensor_free(&out);
    sl_tensor_free(&again);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("recipes");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_vertical_flip_spec);
    tcase_add_test(tc, test_vertical_flip_unit);
    tcase_add_test(tc, test_random_crop_spec);
    tcase_add_test(tc, test_random_crop_unit);
    tcase_add_test(tc, test_interpolation_spec);
    tcase_add_test(tc, test_interpolation_units);
    tcase_add_test(tc, test_nested_spec);
    tcase_add_test(tc, test_nested_units);
    tcase_add_test(tc, test_erasing_after_normalize_spec);
    tcase_add_test(tc, test_erasing_value_units);
    tcase_add_test(tc, test_erasing_after_normalize_unit);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
