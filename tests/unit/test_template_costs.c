/* balance_costs' prediction against what the pipeline delivers: for a jsonl
 * set of conversations (system/user/assistant, chat messages, plain text)
 * with 0-3 images through decode_image, image_tiles, tokenize and a chat
 * template with max_seq_len, every sample's predicted sequence length is its
 * delivered input_ids' length exactly -- images dropped, text cut, and 0 for
 * a too_long skip included. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/sha256.h"
#include "common/data/skip.h"
#include "common/engine/balance_costs.h"
#include "common/engine/pipeline.h"
#include "common/sample/record.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures_source.h"

/* Byte b has rank b, then a few merges ("aa", "bc", "abc", "ab", "cd"). */
static void write_ranks(void)
{
    char buf[256 * 16 + 128];
    size_t o = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        char enc[8];
        fx_base64(&c, 1, enc);
        o += (size_t)sprintf(buf + o, "%s %d\n", enc, b);
    }
    o += (size_t)sprintf(buf + o, "YWE= 256\nYmM= 260\nYWJj 261\nYWI= 300\nY2Q= 301\n");
    t_write("v.tiktoken", buf, o);
}

static void write_data(void)
{
    write_ranks();
    t_mkdir("img");
    const uint32_t wh[3][2] = {{120, 90}, {64, 200}, {300, 100}};
    for (int i = 0; i < 3; i++) {
        char p[PATH_MAX], rel[32];
        snprintf(rel, sizeof(rel), "img/%c.jpg", 'a' + i);
        at(p, sizeof(p), rel);
        fx_jpeg_opts_t o = {.width = wh[i][0], .height = wh[i][1], .quality = 90, .seed = 3};
        ck_assert_int_eq(fx_make_jpeg_file(p, &o), 0);
    }
    const char *m =
        "{\"conversations\": [{\"from\": \"system\", \"value\": \"Be brief.\"}, {\"from\": "
        "\"human\", \"value\": \"<image>\\nWhat is abcabc?\"}, {\"from\": \"gpt\", \"value\": "
        "\"A cd.\"}], \"images\": [\"img/a.jpg\", \"img/b.jpg\"]}\n"
        "{\"text\": \"plain text, no turns\"}\n"
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"Three pictures: describe every "
        "one of them in all the detail you can manage, please.\"}, {\"from\": \"gpt\", "
        "\"value\": \"The first is wide, the second tall, the third wider still; all "
        "grey.\"}], \"images\": [\"img/a.jpg\", \"img/b.jpg\", \"img/c.jpg\"]}\n"
        "{\"conversations\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": "
        "\"assistant\", \"content\": \"Hello.\"}, {\"role\": \"user\", \"content\": \"Bye\"}]}\n"
        "{\"conversations\": [{\"role\": \"user\", \"content\": \"one picture\"}, {\"role\": "
        "\"assistant\", \"content\": \"ok\"}], \"images\": [\"img/c.jpg\"]}\n"
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"a long question, "
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?\"}, {\"from\": \"gpt\", \"value\": \"no\"}]}\n";
    t_write("m.jsonl", m, strlen(m));
}

static const char *spec_of(const char *tmpl_extra)
{
    static char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"source\": {\"type\": \"jsonl\", \"path\": \"m.jsonl\"},"
             " \"stages\": [{\"op\": \"decode_image\"},"
             " {\"op\": \"image_tiles\", \"tile\": 32, \"max_tiles\": 4},"
             " {\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\", \"encoding\": \"gpt2\","
             " \"max_tokens\": 120},"
             " {\"op\": \"template\", \"image_token\": 7, \"tokens_per_tile\": 3, \"bos\": 1,"
             " \"eos\": 2%s}]}",
             tmpl_extra);
    return buf;
}

typedef struct {
    unsigned skipped, dropped_images, truncated;
} seen_t;

/* Predicts, then runs every sample through the whole pipeline. */
static seen_t predicted_is_delivered(const char *tmpl_extra, uint32_t max_seq_len)
{
    sl_spec_t spec;
    char err[512] = "";
    const char *json = spec_of(tmpl_extra);
    ck_assert_msg(sl_spec_parse("t.json", json, strlen(json), &spec, err, sizeof(err)) == 0, "%s",
                  err);
    sl_source_t *src = open_ok(SL_SRC_JSONL, "m.jsonl");
    uint64_t n = sl_source_count(src);
    float cost[8];
    uint32_t tokens[8];
    ck_assert_uint_eq(n, 6);
    ck_assert_int_eq(sl_balance_sample_costs(&spec, src, cost, tokens, NULL), 0);
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
    ck_assert_msg(sl_pipeline_load(p, src, err, sizeof(err)) == 0, "%s", err);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    sl_tensor_t t;
    sl_tensor_init(&t);
    seen_t seen = {0};
    for (uint64_t i = 0; i < n; i++) {
        ck_assert_int_eq(sl_source_read(src, i, &t, err, sizeof(err)), 0);
        sl_rec_t in;
        ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &in, NULL, 0), 0);
        uint32_t named = sl_rec_count(&in, SL_RF_IMAGE_ENC);
        int rc = sl_pipeline_run(p, 0, sl_pipeline_nunits(p), 0, i, &t, &sc, NULL, err,
                                 sizeof(err));
        if (rc == -EMSGSIZE) {
            ck_assert_uint_eq(sl_skip_from_errno(rc), SL_SKIP_TOO_LONG);
            ck_assert_msg(tokens[i] == 0, "sample %llu: skipped, predicted %u",
                          (unsigned long long)i, tokens[i]);
            seen.skipped++;
            continue;
        }
        ck_assert_msg(rc == 0, "sample %llu: %s", (unsigned long long)i, err);
        sl_rec_t r;
        ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, NULL, 0), 0);
        const sl_rfield_t *ids = sl_rec_find(&r, SL_RF_INPUT_IDS);
        ck_assert_msg(ids->h == tokens[i], "sample %llu: delivered %u ids, predicted %u",
                      (unsigned long long)i, ids->h, tokens[i]);
        ck_assert(max_seq_len == 0 || ids->h <= max_seq_len);
        seen.dropped_images += sl_rec_count(&r, SL_RF_TILES) < named;
        seen.truncated += max_seq_len > 0 && ids->h == max_seq_len;
    }
    sl_tensor_free(&t);
    sl_pipe_scratch_free(&sc);
    sl_pipeline_free(p);
    sl_source_free(src);
    sl_spec_clear(&spec);
    return seen;
}

#define CHAT                                                                                       \
    ", \"chat\": {\"system\": [90, 91], \"user\": [92], \"assistant\": [93, 94, 95],"              \
    " \"end\": [96]}"

START_TEST(test_predicted_is_delivered)
{
    write_data();
    seen_t s = predicted_is_delivered(CHAT, 0);
    ck_assert_uint_eq(s.skipped + s.dropped_images + s.truncated, 0);
    s = predicted_is_delivered(CHAT ", \"max_seq_len\": 60", 60);
    ck_assert_uint_eq(s.skipped, 0);
    ck_assert_uint_gt(s.dropped_images, 0); /* the rule's both steps ran */
    ck_assert_uint_gt(s.truncated, 0);
    s = predicted_is_delivered(CHAT ", \"max_seq_len\": 60, \"overflow\": \"skip\"", 60);
    ck_assert_uint_gt(s.skipped, 0);
    s = predicted_is_delivered(", \"labels\": true, \"max_seq_len\": 40", 40);
    ck_assert_uint_gt(s.truncated, 0);
    (void)predicted_is_delivered("", 0); /* today's template: exact too */
}
END_TEST

/* A record of text and turns (spans given), for tokenize alone. */
static void turns_record(sl_tensor_t *t, const char *text, const uint32_t *rows, uint32_t n)
{
    ck_assert_int_eq(sl_rec_begin(t), 0);
    if (text != NULL) {
        ck_assert_int_eq(sl_rec_add_bytes(t, SL_RF_TEXT, text, strlen(text)), 0);
    }
    sl_rfield_t f = {.kind = SL_RF_TURNS,
                     .dtype = SL_DT_U32,
                     .count = 1,
                     .h = n,
                     .w = SL_RF_TURN_WORDS,
                     .c = 1,
                     .nbytes = (size_t)n * 16,
                     .data = (const uint8_t *)rows};
    ck_assert_int_eq(sl_rec_add_copy(t, &f), 0);
    sl_rec_finish(t);
}

/* tokenize on a conversation: turn by turn ("ab" and "cd" are one token each,
 * the joining newline none), token ends filled in, max_tokens over the total;
 * turns without a text or past it refused. */
START_TEST(test_tokenize_turns)
{
    write_ranks();
    t_write("m.jsonl", "{\"text\": \"x\"}\n", 14);
    for (int capped = 0; capped < 2; capped++) {
        char json[512], err[256] = "";
        snprintf(json, sizeof(json),
                 "{\"source\": {\"type\": \"jsonl\", \"path\": \"m.jsonl\"}, \"stages\": "
                 "[{\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\", \"encoding\": \"gpt2\", "
                 "\"max_tokens\": %d}]}",
                 capped ? 1 : 0);
        sl_spec_t spec;
        ck_assert_int_eq(sl_spec_parse("t.json", json, strlen(json), &spec, err, sizeof(err)), 0);
        sl_source_t *src = open_ok(SL_SRC_JSONL, "m.jsonl");
        sl_pipeline_t *p = NULL;
        ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
        ck_assert_msg(sl_pipeline_load(p, src, err, sizeof(err)) == 0, "%s", err);
        sl_pipe_scratch_t sc;
        sl_pipe_scratch_init(&sc);
        sl_tensor_t t;
        sl_tensor_init(&t);
        const uint32_t rows[8] = {SL_ROLE_USER, 0, 2, 0, SL_ROLE_ASSISTANT, 3, 2, 0};
        turns_record(&t, "ab\ncd", rows, 2);
        ck_assert_msg(sl_pipeline_run(p, 0, 1, 0, 0, &t, &sc, NULL, err, sizeof(err)) == 0, "%s",
                      err);
        sl_rec_t r;
        ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, NULL, 0), 0);
        const sl_rfield_t *tok = sl_rec_find(&r, SL_RF_TOKENS);
        const sl_rfield_t *tr = sl_rec_find(&r, SL_RF_TURNS);
        ck_assert_uint_eq(tok->h, capped ? 1 : 2);
        ck_assert_uint_eq(sl_rec_u32(tok, 0), 300);
        ck_assert_uint_eq(sl_rec_u32(tr, SL_RF_TURN_TOK_END), 1);
        ck_assert_uint_eq(sl_rec_u32(tr, SL_RF_TURN_WORDS + SL_RF_TURN_TOK_END), capped ? 1 : 2);
        if (!capped) {
            ck_assert_uint_eq(sl_rec_u32(tok, 1), 301);
        }
        const uint32_t past[4] = {SL_ROLE_USER, 4, 3, 0};
        turns_record(&t, "ab\ncd", past, 1);
        ck_assert_int_eq(sl_pipeline_run(p, 0, 1, 0, 0, &t, &sc, NULL, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "past the text") != NULL, "%s", err);
        turns_record(&t, NULL, rows, 2);
        ck_assert_int_eq(sl_pipeline_run(p, 0, 1, 0, 0, &t, &sc, NULL, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "turns without a text") != NULL, "%s", err);
        sl_tensor_free(&t);
        sl_pipe_scratch_free(&sc);
        sl_pipeline_free(p);
        sl_source_free(src);
        sl_spec_clear(&spec);
    }
}
END_TEST

/* The ranks file's content hash (sl_pipeline_content_hash, what the prefix
 * cache keys tokenize by): its bytes', a changed file under the same name
 * another, and none for a pipeline that reads no file. */
static int content_hash(const char *json, uint8_t out[32])
{
    sl_spec_t spec;
    char err[256] = "";
    ck_assert_int_eq(sl_spec_parse("t.json", json, strlen(json), &spec, err, sizeof(err)), 0);
    sl_source_t *src = open_ok(SL_SRC_JSONL, "m.jsonl");
    sl_pipeline_t *p = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &p, err, sizeof(err)), 0);
    ck_assert_msg(sl_pipeline_load(p, src, err, sizeof(err)) == 0, "%s", err);
    int has = sl_pipeline_content_hash(p, out);
    sl_pipeline_free(p);
    sl_source_free(src);
    sl_spec_clear(&spec);
    return has;
}

START_TEST(test_ranks_content_hash)
{
    static const char tok[] =
        "{\"source\": {\"type\": \"jsonl\", \"path\": \"m.jsonl\"}, \"stages\": "
        "[{\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\", \"encoding\": \"gpt2\"}]}";
    write_ranks();
    t_write("m.jsonl", "{\"text\": \"x\"}\n", 14);
    uint8_t a[32], b[32], want[32];
    ck_assert_int_eq(content_hash(tok, a), 1);
    char path[PATH_MAX];
    at(path, sizeof(path), "v.tiktoken");
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    sl_sha256_t h;
    sl_sha256_init(&h);
    sl_sha256_update(&h, buf, n);
    sl_sha256_final(&h, want);
    ck_assert(memcmp(a, want, 32) == 0);
    /* One merge more, same name: another hash. */
    memcpy(buf + n, "YWJjZA== 302\n", 13);
    t_write("v.tiktoken", buf, n + 13);
    ck_assert_int_eq(content_hash(tok, b), 1);
    ck_assert(memcmp(a, b, 32) != 0);
    static const char none[] =
        "{\"source\": {\"type\": \"jsonl\", \"path\": \"m.jsonl\"}, \"stages\": "
        "[{\"op\": \"decode_image\"}]}";
    ck_assert_int_eq(content_hash(none, b), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("template_costs");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, fxs_setup, fxs_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_predicted_is_delivered);
    tcase_add_test(tc, test_tokenize_turns);
    tcase_add_test(tc, test_ranks_content_hash);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
