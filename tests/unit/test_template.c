/* template's chat form (common/engine/pipe_text.c, tmpl_plan.c): turns
 * between role markers, labels on the assistant's ids only (or on all but
 * image ids), max_seq_len's rule (trailing images first, then the text from
 * the end, or a too_long skip), a plain text unchanged, a peer's TURNS that
 * do not fit refused, and every bad template option refused naming it. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/skip.h"
#include "common/engine/pipeline.h"
#include "common/engine/tmpl_plan.h"
#include "common/sample/record.h"
#include "common/spec/spec.h"

#define IGN ((uint32_t)-100)

static char *spec_json(const char *tmpl_extra)
{
    static char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"source\": {\"type\": \"webdataset\", \"path\": \"x\"},"
             " \"stages\": [{\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\"},"
             " {\"op\": \"template\", \"image_token\": 7, \"tokens_per_tile\": 2, \"bos\": 1,"
             " \"eos\": 2%s}]}",
             tmpl_extra);
    return buf;
}

static sl_pipeline_t *compile(const char *tmpl_extra)
{
    sl_spec_t spec;
    char err[512];
    const char *json = spec_json(tmpl_extra);
    int rc = sl_spec_parse("t.json", json, strlen(json), &spec, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
    sl_spec_clear(&spec);
    return p;
}

#define CHAT                                                                                       \
    ", \"chat\": {\"system\": [90], \"user\": [91, 92], \"assistant\": [93], \"end\": [94]}"

/* A tokenized conversation -- user: 10 11, assistant: 20 21 22 -- and two
 * encoded images (one tile each here: no image_tiles); or, plain, the text
 * ids 5 6 and no turns. */
static void make_record(sl_tensor_t *t, int plain, int nimg)
{
    ck_assert_int_eq(sl_rec_begin(t), 0);
    ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_KEY, "k", 1), 0);
    uint32_t conv[5] = {10, 11, 20, 21, 22}, text[2] = {5, 6};
    sl_rfield_t tok = {.kind = SL_RF_TOKENS,
                       .dtype = SL_DT_U32,
                       .count = 1,
                       .h = plain ? 2 : 5,
                       .w = 1,
                       .c = 1,
                       .nbytes = plain ? 8 : 20,
                       .data = (const uint8_t *)(plain ? text : conv)};
    ck_assert_int_eq(sl_rec_add_copy(t, &tok), 0);
    for (int i = 0; i < nimg; i++) {
        ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_IMAGE_ENC, i ? "img1" : "img0", 4), 0);
    }
    if (!plain) {
        uint32_t rows[8] = {SL_ROLE_USER, 0, 2, 2, SL_ROLE_ASSISTANT, 3, 3, 5};
        sl_rfield_t tf = {.kind = SL_RF_TURNS,
                          .dtype = SL_DT_U32,
                          .count = 1,
                          .h = 2,
                          .w = SL_RF_TURN_WORDS,
                          .c = 1,
                          .nbytes = sizeof(rows),
                          .data = (const uint8_t *)rows};
        ck_assert_int_eq(sl_rec_add_copy(t, &tf), 0);
    }
    sl_rec_finish(t);
}

/* Runs template (unit 1: tokenize is unit 0) on a fresh record. */
static int run_template(const char *extra, int plain, int nimg, sl_tensor_t *t, char *err)
{
    sl_pipeline_t *p = compile(extra);
    make_record(t, plain, nimg);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    int rc = sl_pipeline_run(p, 1, 2, 0, 3, t, &sc, NULL, err, 256);
    sl_pipe_scratch_free(&sc);
    sl_pipeline_free(p);
    return rc;
}

static void check_u32(const sl_rfield_t *f, const uint32_t *want, uint32_t n, const char *what)
{
    ck_assert_msg(f != NULL, "%s: no field", what);
    ck_assert_msg(f->h == n, "%s: %u ids, want %u", what, f->h, n);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_msg(sl_rec_u32(f, i) == want[i], "%s[%u] = %d, want %d", what, i,
                      (int)sl_rec_u32(f, i), (int)want[i]);
    }
}

/* Runs and checks input_ids, labels (NULL: no LABELS field) and images kept. */
static void expect(const char *extra, int plain, int nimg, const uint32_t *ids,
                   const uint32_t *labels, uint32_t n, uint32_t images)
{
    sl_tensor_t t;
    sl_tensor_init(&t);
    char err[256] = "";
    ck_assert_msg(run_template(extra, plain, nimg, &t, err) == 0, "%s", err);
    sl_rec_t r;
    ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)), 0);
    check_u32(sl_rec_find(&r, SL_RF_INPUT_IDS), ids, n, "input_ids");
    if (labels == NULL) {
        ck_assert_ptr_null(sl_rec_find(&r, SL_RF_LABELS));
    } else {
        check_u32(sl_rec_find(&r, SL_RF_LABELS), labels, n, "labels");
    }
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE_ENC), images);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_TURNS), plain ? 0 : 1);
    sl_tensor_free(&t);
}

START_TEST(test_chat_labels)
{
    const uint32_t ids[16] = {1, 7, 7, 7, 7, 91, 92, 10, 11, 94, 93, 20, 21, 22, 94, 2};
    const uint32_t asst[16] = {IGN, IGN, IGN, IGN, IGN, IGN, IGN, IGN,
                               IGN, IGN, IGN, 20,  21,  22,  94,  2};
    expect(CHAT, 0, 2, ids, asst, 16, 2);
    const uint32_t all[16] = {1, IGN, IGN, IGN, IGN, 91, 92, 10, 11, 94, 93, 20, 21, 22, 94, 2};
    expect(CHAT ", \"train_on\": \"all\"", 0, 2, ids, all, 16, 2);
    /* Another ignore index; labels off: input_ids alone. */
    uint32_t other[16];
    for (int i = 0; i < 16; i++) {
        other[i] = asst[i] == IGN ? (uint32_t)-1 : asst[i];
    }
    expect(CHAT ", \"ignore_index\": -1", 0, 2, ids, other, 16, 2);
    expect(CHAT ", \"labels\": false", 0, 2, ids, NULL, 16, 2);
    /* "chat": true: roles without markers; labels still by role. */
    const uint32_t bare[10] = {1, 7, 7, 7, 7, 10, 11, 20, 21, 22};
    const uint32_t bare_l[10] = {IGN, IGN, IGN, IGN, IGN, IGN, IGN, 20, 21, 22};
    uint32_t bare_ids[11], bare_lab[11];
    memcpy(bare_ids, bare, sizeof(bare));
    memcpy(bare_lab, bare_l, sizeof(bare_l));
    bare_ids[10] = bare_lab[10] = 2;
    expect(", \"chat\": true", 0, 2, bare_ids, bare_lab, 11, 2);
}
END_TEST

START_TEST(test_plain_text)
{
    /* No chat, no labels: today's layout exactly. */
    const uint32_t ids[7] = {1, 7, 7, 7, 7, 5, 6};
    uint32_t full[8];
    memcpy(full, ids, sizeof(ids));
    full[7] = 2;
    expect("", 1, 2, full, NULL, 8, 2);
    /* Labels asked for a plain text: all of it but bos and the images. */
    const uint32_t lab[8] = {IGN, IGN, IGN, IGN, IGN, 5, 6, 2};
    expect(", \"labels\": true", 1, 2, full, lab, 8, 2);
    /* A conversation without chat: its tokens as they are, labels by role. */
    const uint32_t cids[8] = {1, 7, 7, 10, 11, 20, 21, 22};
    uint32_t c9[9], l9[9];
    memcpy(c9, cids, sizeof(cids));
    c9[8] = 2;
    const uint32_t cl[9] = {IGN, IGN, IGN, IGN, IGN, 20, 21, 22, 2};
    memcpy(l9, cl, sizeof(cl));
    expect(", \"labels\": true", 0, 1, c9, l9, 9, 1);
}
END_TEST

START_TEST(test_max_seq_len)
{
    /* 16 ids; 14: the second image (2 ids) goes. */
    const uint32_t ids14[14] = {1, 7, 7, 91, 92, 10, 11, 94, 93, 20, 21, 22, 94, 2};
    const uint32_t lab14[14] = {IGN, IGN, IGN, IGN, IGN, IGN, IGN, IGN, IGN, 20, 21, 22, 94, 2};
    expect(CHAT ", \"max_seq_len\": 14", 0, 2, ids14, lab14, 14, 1);
    expect(CHAT ", \"max_seq_len\": 15", 0, 2, ids14, lab14, 14, 1);
    /* 10: both images go (12 ids), then the text is cut, eos kept. */
    const uint32_t ids10[10] = {1, 91, 92, 10, 11, 94, 93, 20, 21, 2};
    const uint32_t lab10[10] = {IGN, IGN, IGN, IGN, IGN, IGN, IGN, 20, 21, 2};
    expect(CHAT ", \"max_seq_len\": 10", 0, 2, ids10, lab10, 10, 0);
    /* At the limit nothing changes. */
    const uint32_t ids16[16] = {1, 7, 7, 7, 7, 91, 92, 10, 11, 94, 93, 20, 21, 22, 94, 2};
    expect(CHAT ", \"max_seq_len\": 16, \"labels\": false", 0, 2, ids16, NULL, 16, 2);
    /* "overflow": "skip": a too_long skip naming max_seq_len. */
    sl_tensor_t t;
    sl_tensor_init(&t);
    char err[256] = "";
    int rc = run_template(CHAT ", \"max_seq_len\": 15, \"overflow\": \"skip\"", 0, 2, &t, err);
    ck_assert_int_eq(rc, -EMSGSIZE);
    ck_assert_msg(strstr(err, "max_seq_len 15") != NULL, "%s", err);
    ck_assert_int_eq(sl_skip_from_errno(rc), SL_SKIP_TOO_LONG);
    ck_assert_str_eq(sl_skip_name(SL_SKIP_TOO_LONG), "too_long");
    sl_tensor_free(&t);
}
END_TEST

/* The plan alone: what balance_costs predicts from. */
START_TEST(test_plan)
{
    sl_stage_spec_t st = {.op = SL_OP_TEMPLATE,
                          .bos = 1,
                          .eos = 2,
                          .tokens_per_tile = 4,
                          .chat = true,
                          .max_seq_len = 30};
    st.tmpl_nmarker[SL_ROLE_USER] = 2;
    st.tmpl_nmarker[SL_ROLE_ASSISTANT] = 1;
    st.tmpl_nmarker[SL_TMPL_END] = 1;
    uint32_t roles[2] = {SL_ROLE_USER, SL_ROLE_ASSISTANT};
    ck_assert_uint_eq(sl_tmpl_text_ids(&st, roles, 1, 2, 10), 10 + 3 + 2);
    ck_assert_uint_eq(sl_tmpl_fixed_ids(&st), 2 + 2 + 1);
    uint32_t tiles[3] = {2, 1, 3};
    sl_tmpl_plan_t p;
    sl_tmpl_plan(&st, tiles, 3, 15, &p); /* 2 + 24 + 15 = 41 */
    ck_assert_uint_eq(p.full, 41);
    ck_assert_uint_eq(p.nimages, 2); /* 41 - 12 = 29 */
    ck_assert_uint_eq(p.len, 29);
    ck_assert(!p.truncated && !p.skip);
    st.max_seq_len = 10;
    sl_tmpl_plan(&st, tiles, 3, 15, &p);
    ck_assert_uint_eq(p.nimages, 0);
    ck_assert_uint_eq(p.len, 10);
    ck_assert(p.truncated);
    st.skip_long = true;
    sl_tmpl_plan(&st, tiles, 3, 15, &p);
    ck_assert(p.skip);
}
END_TEST

/* A peer's record whose turns do not fit its tokens is refused. */
START_TEST(test_bad_turns)
{
    sl_pipeline_t *p = compile(CHAT);
    sl_tensor_t t;
    sl_tensor_init(&t);
    ck_assert_int_eq(sl_rec_begin(&t), 0);
    uint32_t ids[2] = {10, 11};
    sl_rfield_t tok = {.kind = SL_RF_TOKENS,
                       .dtype = SL_DT_U32,
                       .count = 1,
                       .h = 2,
                       .w = 1,
                       .c = 1,
                       .nbytes = 8,
                       .data = (const uint8_t *)ids};
    ck_assert_int_eq(sl_rec_add_copy(&t, &tok), 0);
    uint32_t rows[4] = {7, 0, 0, 2}; /* role 7 */
    sl_rfield_t tf = {.kind = SL_RF_TURNS,
                      .dtype = SL_DT_U32,
                      .count = 1,
                      .h = 1,
                      .w = SL_RF_TURN_WORDS,
                      .c = 1,
                      .nbytes = 16,
                      .data = (const uint8_t *)rows};
    ck_assert_int_eq(sl_rec_add_copy(&t, &tf), 0);
    sl_rec_finish(&t);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    char err[256] = "";
    ck_assert_int_eq(sl_pipeline_run(p, 1, 2, 0, 3, &t, &sc, NULL, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "turn 0") != NULL, "%s", err);
    sl_pipe_scratch_free(&sc);
    sl_tensor_free(&t);
    sl_pipeline_free(p);
}
END_TEST

static void refused(const char *extra, const char *what)
{
    sl_spec_t spec;
    char err[1024] = "";
    const char *json = spec_json(extra);
    int rc = sl_spec_parse("t.json", json, strlen(json), &spec, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "%s: rc %d", extra, rc);
    ck_assert_msg(strstr(err, what) != NULL, "'%s' not in '%s'", what, err);
}

START_TEST(test_spec_errors)
{
    refused(", \"chat\": 3", "chat: must be true, false or an object");
    refused(", \"chat\": {\"user\": \"<|im_start|>\"}", "chat.user: must be an array");
    refused(", \"chat\": {\"user\": [1, -2]}", "chat.user[1]: must be a token id");
    refused(", \"chat\": {\"user\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", "at most 8");
    refused(", \"chat\": {\"bot\": [1]}", "bot: unknown key");
    refused(", \"labels\": 1", "labels: must be true or false");
    refused(", \"train_on\": \"user\"", "train_on");
    refused(", \"ignore_index\": 2147483648", "ignore_index: must be an integer");
    refused(", \"ignore_index\": -2147483649", "ignore_index: must be an integer");
    refused(", \"ignore_index\": \"x\"", "ignore_index");
    refused(", \"max_seq_len\": -1", "max_seq_len");
    refused(", \"max_seq_len\": 2", "max_seq_len: must be more than the template's 2 fixed ids");
    /* bos + eos + the longest role marker (2) + end (1) = 5. */
    refused(CHAT ", \"max_seq_len\": 5", "max_seq_len: must be more than the template's 5");
    refused(", \"overflow\": \"drop\"", "overflow");
    /* 6 is fine, and the canonical form reads back the same. */
    sl_spec_t a, b;
    char err[512] = "";
    char *canon;
    const char *json = spec_json(CHAT ", \"max_seq_len\": 6, \"ignore_index\": -1, "
                                      "\"train_on\": \"all\", \"overflow\": \"skip\"");
    ck_assert_msg(sl_spec_parse("t.json", json, strlen(json), &a, err, sizeof(err)) == 0, "%s",
                  err);
    canon = sl_spec_to_json(&a);
    ck_assert_ptr_nonnull(canon);
    ck_assert_msg(sl_spec_parse("c.json", canon, strlen(canon), &b, err, sizeof(err)) == 0,
                  "%s: %s", canon, err);
    ck_assert_mem_eq(&a.stages[1], &b.stages[1], sizeof(a.stages[1]));
    ck_assert_msg(strstr(canon, "\"assistant\": [93]") != NULL ||
                      strstr(canon, "\"assistant\":[93]") != NULL,
                  "%s", canon);
    free(canon);
    sl_spec_clear(&a);
    sl_spec_clear(&b);
    /* Keys without effect read back too (train_on without labels, ...). */
    const char *idle[] = {", \"train_on\": \"all\"", ", \"ignore_index\": 5",
                          ", \"overflow\": \"skip\"", ", \"labels\": false" CHAT};
    for (size_t i = 0; i < sizeof(idle) / sizeof(idle[0]); i++) {
        json = spec_json(idle[i]);
        ck_assert_int_eq(sl_spec_parse("t.json", json, strlen(json), &a, err, sizeof(err)), 0);
        canon = sl_spec_to_json(&a);
        ck_assert_int_eq(sl_spec_parse("c.json", canon, strlen(canon), &b, err, sizeof(err)), 0);
        ck_assert_msg(memcmp(&a.stages[1], &b.stages[1], sizeof(a.stages[1])) == 0, "%s: %s",
                      idle[i], canon);
        free(canon);
        sl_spec_clear(&a);
        sl_spec_clear(&b);
    }
    /* Without the new keys the canonical form is today's. */
    json = spec_json("");
    ck_assert_int_eq(sl_spec_parse("t.json", json, strlen(json), &a, err, sizeof(err)), 0);
    canon = sl_spec_to_json(&a);
    ck_assert_ptr_nonnull(canon);
    ck_assert_ptr_null(strstr(canon, "chat"));
    ck_assert_ptr_null(strstr(canon, "labels"));
    ck_assert_ptr_null(strstr(canon, "max_seq_len"));
    free(canon);
    sl_spec_clear(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("template");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_chat_labels);
    tcase_add_test(tc, test_plain_text);
    tcase_add_test(tc, test_max_seq_len);
    tcase_add_test(tc, test_plan);
    tcase_add_test(tc, test_bad_turns);
    tcase_add_test(tc, test_spec_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
