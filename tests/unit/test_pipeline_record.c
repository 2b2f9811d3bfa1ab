/* The pipeline on records (common/engine/pipe_record.c, pipe_text.c): every
 * image of a sample goes through the image units with its own random stream;
 * the same record gives the same bytes whatever the split between hosts;
 * fields a unit does not touch pass through; template lays out the sequence;
 * a bad image names itself; a damaged record from a peer is refused. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/engine/pipeline.h"
#include "common/sample/record.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

static const char *SPEC =
    "{\"source\": {\"type\": \"webdataset\", \"path\": \"x\", \"seed\": 5},"
    " \"stages\": [{\"op\": \"decode_image\"},"
    " {\"op\": \"random_resized_crop\", \"size\": 32}, {\"op\": \"flip\"},"
    " {\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\"},"
    " {\"op\": \"template\", \"image_token\": 7, \"tokens_per_tile\": 3, \"bos\": 1,"
    " \"eos\": 2},"
    " {\"op\": \"normalize\", \"on\": \"device\"}, {\"op\": \"to_chw\"}]}";

static sl_pipeline_t *compile(const char *json)
{
    sl_spec_t spec;
    char err[512];
    int rc = sl_spec_parse("t.json", json, strlen(json), &spec, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
    sl_spec_clear(&spec); /* the pipeline holds its own copy */
    return p;
}

/* The records below carry their token ids already: the tests run around
 * the tokenize unit (2; tests/unit/test_tokenizer.c covers it). */
enum { U_FLIP = 1, U_TOKENIZE = 2, U_TEMPLATE = 3, U_END = 5 };

/* A record with text tokens and two images (the same JPEG twice, so only
 * their random streams can make the outputs differ), or a broken second one. */
static void make_record(sl_tensor_t *t, int broken)
{
    fx_jpeg_opts_t o = {.width = 120, .height = 90, .quality = 90, .seed = 4};
    uint8_t *jpg = NULL;
    size_t len = 0;
    ck_assert_int_eq(fx_make_jpeg(&o, &jpg, &len), 0);
    ck_assert_int_eq(sl_rec_begin(t), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_KEY, "k1", 2), 0);
    ck_assert_int_eq(sl_rec_add_label(t, 4), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_TEXT, "two pictures", 12), 0);
    uint32_t ids[4] = {100, 200, 300, 400};
    sl_rfield_t tok = {.kind = SL_RF_TOKENS, .dtype = SL_DT_U32, .count = 1, .h = 4, .w = 1,
                       .c = 1, .nbytes = sizeof(ids), .data = (const uint8_t *)ids};
    ck_assert_int_eq(sl_rec_add_copy(t, &tok), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_IMAGE_ENC, jpg, len), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_IMAGE_ENC, jpg, broken ? len / 3 : len), 0);
    sl_rec_finish(t);
    free(jpg);
}

static int run(const sl_pipeline_t *p, uint32_t from, uint32_t to, sl_tensor_t *io, char *err)
{
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    int rc = sl_pipeline_run(p, from, to, 2, 17, io, &sc, NULL, err, 256);
    sl_pipe_scratch_free(&sc);
    return rc;
}

START_TEST(test_images_and_template)
{
    sl_pipeline_t *p = compile(SPEC);
    uint32_t n = sl_pipeline_nunits(p);
    ck_assert_uint_eq(n, U_END); /* decode+rrc, flip, tokenize, template, to_chw */
    ck_assert_str_eq(sl_pipeline_unit_name(p, 0), "decode_image+random_resized_crop");
    sl_tensor_t t;
    sl_tensor_init(&t);
    make_record(&t, 0);
    char err[256];
    ck_assert_msg(run(p, 0, U_TOKENIZE, &t, err) == 0, "%s", err);
    ck_assert_msg(run(p, U_TEMPLATE, n, &t, err) == 0, "%s", err);
    sl_rec_t r;
    ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE), 2);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE_ENC), 0);
    ck_assert_int_eq(sl_rec_label(&r), 4);
    ck_assert_mem_eq(sl_rec_find(&r, SL_RF_TEXT)->data, "two pictures", 12);
    const sl_rfield_t *a = NULL, *b = NULL;
    for (uint32_t i = 0; i < r.n; i++) {
        if (r.f[i].kind == SL_RF_IMAGE) {
            *(a == NULL ? &a : &b) = &r.f[i];
        }
    }
    ck_assert_uint_eq(a->h, 32);
    ck_assert_uint_eq(a->layout, SL_LAYOUT_CHW);
    ck_assert_uint_eq(a->dtype, SL_DT_U8);
    ck_assert_uint_eq(a->src_h, 90);
    ck_assert_uint_eq(a->src_w, 120);
    /* The same JPEG, different streams: different crops. */
    ck_assert(memcmp(a->data, b->data, a->nbytes) != 0);
    /* [bos] 7 x (2 images x 1 tile x 3) text [eos] */
    const sl_rfield_t *ids = sl_rec_find(&r, SL_RF_INPUT_IDS);
    ck_assert_uint_eq(ids->h, 1 + 6 + 4 + 1);
    uint32_t v[12];
    memcpy(v, ids->data, sizeof(v));
    const uint32_t want[12] = {1, 7, 7, 7, 7, 7, 7, 100, 200, 300, 400, 2};
    ck_assert_mem_eq(v, want, sizeof(v));

    /* Every split between two hosts gives the same bytes. */
    const uint32_t cuts[][2] = {{0, U_TEMPLATE}, {1, U_TEMPLATE}, {2, U_TEMPLATE},
                                {2, U_TEMPLATE + 1}, {2, n}};
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
        sl_tensor_t u;
        sl_tensor_init(&u);
        make_record(&u, 0);
        ck_assert_int_eq(run(p, 0, cuts[k][0], &u, err), 0);
        ck_assert_int_eq(run(p, cuts[k][0], U_TOKENIZE, &u, err), 0);
        ck_assert_int_eq(run(p, U_TEMPLATE, cuts[k][1], &u, err), 0);
        ck_assert_int_eq(run(p, cuts[k][1], n, &u, err), 0);
        ck_assert_uint_eq(u.nbytes, t.nbytes);
        ck_assert_mem_eq(u.data, t.data, t.nbytes);
        sl_tensor_free(&u);
    }
    sl_tensor_free(&t);
    sl_pipeline_free(p);
}
END_TEST

START_TEST(test_bad_image_and_peer)
{
    sl_pipeline_t *p = compile(SPEC);
    sl_tensor_t t;
    sl_tensor_init(&t);
    make_record(&t, 1);
    char err[256] = "";
    int rc = run(p, 0, 1, &t, err);
    ck_assert_int_lt(rc, 0);
    ck_assert_msg(strstr(err, "image 1") != NULL, "%s", err);
    /* A peer's damaged record at unit 1: refused like a bad tensor. */
    make_record(&t, 0);
    t.data[t.nbytes - 1] ^= 1; /* padding or payload of the last image */
    t.data[4] = 99;            /* the field count */
    ck_assert_int_eq(run(p, U_FLIP, U_TOKENIZE, &t, err), -EINVAL);
    /* template without token ids. */
    ck_assert_int_eq(sl_rec_begin(&t), 0);
    ck_assert_int_eq(sl_rec_add_bytes(&t, SL_RF_KEY, "k", 1), 0);
    sl_rec_finish(&t);
    rc = run(p, U_TEMPLATE, U_TEMPLATE + 1, &t, err);
    ck_assert_int_eq(rc, -EINVAL);
    ck_assert_msg(strstr(err, "token") != NULL, "%s", err);
    sl_tensor_free(&t);
    sl_pipeline_free(p);
}
END_TEST

/* A record without images passes the image units untouched. */
START_TEST(test_text_only)
{
    sl_pipeline_t *p = compile(SPEC);
    sl_tensor_t t;
    sl_tensor_init(&t);
    ck_assert_int_eq(sl_rec_begin(&t), 0);
    ck_assert_int_eq(sl_rec_add_bytes(&t, SL_RF_KEY, "k", 1), 0);
    uint32_t ids[2] = {5, 6};
    sl_rfield_t tok = {.kind = SL_RF_TOKENS, .dtype = SL_DT_U32, .count = 1, .h = 2, .w = 1,
                       .c = 1, .nbytes = sizeof(ids), .data = (const uint8_t *)ids};
    ck_assert_int_eq(sl_rec_add_copy(&t, &tok), 0);
    sl_rec_finish(&t);
    char err[256];
    ck_assert_msg(run(p, 0, U_TOKENIZE, &t, err) == 0, "%s", err);
    ck_assert_msg(run(p, U_TEMPLATE, U_END, &t, err) == 0, "%s", err);
    sl_rec_t r;
    ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_rec_find(&r, SL_RF_INPUT_IDS)->h, 4);
    sl_tensor_free(&t);
    sl_pipeline_free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline_record");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_images_and_template);
    tcase_add_test(tc, test_bad_image_and_peer);
    tcase_add_test(tc, test_text_only);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
