#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/spec/spec.h"
#include "common/spec/spec_lines.h"
#include "tests/unit/fixtures.h"

/* The docs/design.md example. Tests below edit one piece of it and check that the
 * error names the file, the line and the field: keep the line numbers. */
static const char GOOD[] =
    "{\n"                                                                          /* 1 */
    "  \"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"shuffle\": true, "
    "\"seed\": 42},\n"                                                             /* 2 */
    "  \"stages\": [\n"                                                            /* 3 */
    "    {\"op\": \"decode_jpeg\"},\n"                                             /* 4 */
    "    {\"op\": \"random_resized_crop\", \"size\": 224, \"scale\": [0.08, 1.0], "
    "\"ratio\": [0.75, 1.3333]},\n"                                                /* 5 */
    "    {\"op\": \"flip\", \"p\": 0.5},\n"                                        /* 6 */
    "    {\"op\": \"normalize\", \"mean\": [0.485, 0.456, 0.406], "
    "\"std\": [0.229, 0.224, 0.225]},\n"                                           /* 7 */
    "    {\"op\": \"to_chw\"}\n"                                                   /* 8 */
    "  ],\n"                                                                       /* 9 */
    "  \"batch_size\": 256,\n"                                                     /* 10 */
    "  \"epochs\": 90,\n"                                                          /* 11 */
    "  \"offload\": \"auto\"\n"                                                    /* 12 */
    "}\n";                                                                         /* 13 */

#define ERRLEN 1024

/* GOOD with the first occurrence of from replaced by to; caller frees. */
static char *edit(const char *from, const char *to)
{
    const char *at = strstr(GOOD, from);
    ck_assert_msg(at != NULL, "test bug: \"%s\" not in GOOD", from);
    size_t pre = (size_t)(at - GOOD);
    size_t n = strlen(GOOD) - strlen(from) + strlen(to);
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memcpy(s, GOOD, pre);
    memcpy(s + pre, to, strlen(to));
    strcpy(s + pre + strlen(to), at + strlen(from));
    return s;
}

/* The first line of err (every error is reported, one a line: the first is
 * the one a parse that stopped there would report). */
static const char *first_line(const char *err, char *out, size_t outlen)
{
    size_t n = strcspn(err, "\n");
    snprintf(out, outlen, "%.*s", (int)n, err);
    return out;
}

/* Parses GOOD edited, expects -EINVAL and an error message containing want
 * (which carries "t.json:LINE: field: ...") in its first line. ret_spec must
 * stay untouched. */
static void expect_edit_err(const char *from, const char *to, const char *want)
{
    char *text = edit(from, to);
    char err[ERRLEN] = "";
    sl_spec_t spec;
    memset(&spec, 0xA5, sizeof(spec));
    int rc = sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "rc %d for edit \"%s\" -> \"%s\" (err \"%s\")", rc, from, to,
                  err);
    char first[ERRLEN];
    ck_assert_msg(strstr(first_line(err, first, sizeof(first)), want) != NULL,
                  "error \"%s\"\n  lacks \"%s\" in its first line", err, want);
    const unsigned char *b = (const unsigned char *)&spec;
    for (size_t i = 0; i < sizeof(spec); i++) {
        ck_assert_msg(b[i] == 0xA5, "ret_spec written on failure");
    }
    free(text);
}

/* The same for a whole text. */
static void expect_text_err(const char *text, size_t len, int want_rc, const char *want)
{
    char err[ERRLEN] = "";
    sl_spec_t spec;
    int rc = sl_spec_parse("t.json", text, len, &spec, err, sizeof(err));
    ck_assert_msg(rc == want_rc, "rc %d, want %d (err \"%s\")", rc, want_rc, err);
    char first[ERRLEN];
    ck_assert_msg(strstr(first_line(err, first, sizeof(first)), want) != NULL,
                  "error \"%s\"\n  lacks \"%s\" in its first line", err, want);
}

/* Every field of the stage's op, exactly (the parameters are a union:
 * the other ops' fields alias these; the owned strings by value). */
static void assert_stage_eq(const sl_stage_spec_t *x, const sl_stage_spec_t *y)
{
    ck_assert_int_eq(x->op, y->op);
    unsigned flags = sl_op_flags(x->op);
    if (flags & SL_OPF_GEOMETRY) {
        ck_assert_uint_eq(x->size_h, y->size_h);
        ck_assert_uint_eq(x->size_w, y->size_w);
        ck_assert_int_eq(x->resize_shorter, y->resize_shorter);
        ck_assert_uint_eq(x->resize_interp, y->resize_interp);
        for (int k = 0; k < 2; k++) {
            ck_assert(x->scale[k] == y->scale[k]);
            ck_assert(x->ratio[k] == y->ratio[k]);
        }
    } else if (x->op == SL_OP_FLIP || x->op == SL_OP_VERTICAL_FLIP) {
        ck_assert(x->p == y->p);
    } else if (x->op == SL_OP_NORMALIZE) {
        for (int k = 0; k < 3; k++) {
            ck_assert(x->mean[k] == y->mean[k]);
            ck_assert(x->std[k] == y->std[k]);
        }
        ck_assert_int_eq(x->on_device, y->on_device);
    } else if (x->op == SL_OP_IMAGE_TILES) {
        ck_assert_uint_eq(x->tile, y->tile);
        ck_assert_uint_eq(x->min_tiles, y->min_tiles);
        ck_assert_uint_eq(x->max_tiles, y->max_tiles);
        ck_assert_int_eq(x->thumbnail, y->thumbnail);
    } else if (x->op == SL_OP_TOKENIZE) {
        ck_assert_str_eq(x->vocab, y->vocab);
        ck_assert_int_eq(x->encoding, y->encoding);
        ck_assert_uint_eq(x->max_tokens, y->max_tokens);
        ck_assert_int_eq(x->allow_special, y->allow_special);
    } else if (x->op == SL_OP_TEMPLATE) {
        ck_assert_int_eq(x->image_token, y->image_token);
        ck_assert_int_eq(x->bos, y->bos);
        ck_assert_int_eq(x->eos, y->eos);
        ck_assert_uint_eq(x->tokens_per_tile, y->tokens_per_tile);
    } else if (x->op == SL_OP_PLUGIN) {
        ck_assert_str_eq(x->plugin, y->plugin);
        ck_assert_str_eq(x->plugin_sha256, y->plugin_sha256);
        ck_assert_str_eq(x->plugin_params, y->plugin_params);
    } else if (flags & SL_OPF_AUGMENT) {
        ck_assert(memcmp(&x->aug, &y->aug, sizeof(x->aug)) == 0);
    }
}

/* Every field, exactly (floats too: the round trip must be lossless). */
static void assert_spec_eq(const sl_spec_t *a, const sl_spec_t *b)
{
    ck_assert_int_eq(a->source_type, b->source_type);
    ck_assert_str_eq(a->source_path, b->source_path);
    ck_assert_int_eq(a->shuffle, b->shuffle);
    ck_assert_uint_eq(a->seed, b->seed);
    ck_assert_uint_eq(a->nstages, b->nstages);
    for (uint32_t i = 0; i < a->nstages; i++) {
        assert_stage_eq(&a->stages[i], &b->stages[i]);
    }
    ck_assert_uint_eq(a->batch_size, b->batch_size);
    ck_assert_uint_eq(a->epochs, b->epochs);
    ck_assert_int_eq(a->drop_last, b->drop_last);
    ck_assert_int_eq(a->deterministic, b->deterministic);
    ck_assert_int_eq(a->offload, b->offload);
    ck_assert_uint_eq(a->split, b->split);
    ck_assert(a->local_share == b->local_share);
    ck_assert_int_eq(a->on_error, b->on_error);
    ck_assert_uint_eq(a->max_pixels, b->max_pixels);
    ck_assert_uint_eq(a->world_size, b->world_size);
    ck_assert_uint_eq(a->rank, b->rank);
    ck_assert_int_eq(a->rank_padding, b->rank_padding);
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->shuffle_block, b->shuffle_block);
    ck_assert_uint_eq(a->num_classes, b->num_classes);
    ck_assert_uint_eq(a->nbatch_tfs, b->nbatch_tfs);
    for (uint32_t i = 0; i < a->nbatch_tfs; i++) {
        ck_assert_int_eq(a->batch_tfs[i].op, b->batch_tfs[i].op);
        ck_assert(a->batch_tfs[i].alpha == b->batch_tfs[i].alpha);
        ck_assert(a->batch_tfs[i].p == b->batch_tfs[i].p);
    }
}

/* parse(to_json(s)) == s, and to_json is a fixed point after one trip. */
static void assert_round_trip(const sl_spec_t *s)
{
    char *j1 = sl_spec_to_json(s);
    ck_assert_ptr_nonnull(j1);
    char err[ERRLEN] = "";
    sl_spec_t back;
    int rc = sl_spec_parse("<rpc>", j1, strlen(j1), &back, err, sizeof(err));
    ck_assert_msg(rc == 0, "re-parse of %s failed: %s", j1, err);
    assert_spec_eq(s, &back);
    char *j2 = sl_spec_to_json(&back);
    ck_assert_ptr_nonnull(j2);
    ck_assert_str_eq(j1, j2);
    sl_spec_clear(&back);
    free(j1);
    free(j2);
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* ---- good specs ----------------------------------------------------------------------- */

START_TEST(test_good_design_example)
{
    char err[ERRLEN] = "";
    sl_spec_t s;
    int rc = sl_spec_parse("t.json", GOOD, strlen(GOOD), &s, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(s.source_type, SL_SRC_IMAGEFOLDER);
    ck_assert_str_eq(s.source_path, "train");
    ck_assert(s.shuffle);
    ck_assert_uint_eq(s.seed, 42);
    ck_assert_uint_eq(s.nstages, 5);
    ck_assert_int_eq(s.stages[0].op, SL_OP_DECODE_JPEG);
    ck_assert_int_eq(s.stages[1].op, SL_OP_RANDOM_RESIZED_CROP);
    ck_assert_uint_eq(s.stages[1].size_h, 224);
    ck_assert_uint_eq(s.stages[1].size_w, 224);
    ck_assert(!s.stages[1].resize_shorter);
    ck_assert(s.stages[1].scale[0] == 0.08 && s.stages[1].scale[1] == 1.0);
    ck_assert(s.stages[1].ratio[0] == 0.75 && s.stages[1].ratio[1] == 1.3333);
    ck_assert_int_eq(s.stages[2].op, SL_OP_FLIP);
    ck_assert(s.stages[2].p == 0.5);
    ck_assert_int_eq(s.stages[3].op, SL_OP_NORMALIZE);
    ck_assert(s.stages[3].mean[0] == 0.485f && s.stages[3].mean[2] == 0.406f);
    ck_assert(s.stages[3].std[1] == 0.224f);
    ck_assert_int_eq(s.stages[4].op, SL_OP_TO_CHW);
    ck_assert_uint_eq(s.batch_size, 256);
    ck_assert_uint_eq(s.epochs, 90);
    ck_assert(!s.drop_last);
    ck_assert(!s.deterministic);
    ck_assert_int_eq(s.offload, SL_OFFLOAD_AUTO);
    ck_assert_int_eq(s.on_error, SL_ON_ERROR_SKIP);
    ck_assert_uint_eq(s.max_pixels, 100000000);
}
END_TEST

START_TEST(test_defaults)
{
    const char *text = "{\"source\": {\"type\": \"tar\", \"path\": \"shards\"}}";
    char err[ERRLEN] = "";
    sl_spec_t s, d;
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &s, err, sizeof(err)), 0);
    sl_spec_init(&d);
    d.source_type = SL_SRC_TAR;
    strcpy(d.source_path, "shards");
    assert_spec_eq(&s, &d);
    ck_assert(s.shuffle);
    ck_assert_uint_eq(s.seed, 0);
    ck_assert_uint_eq(s.nstages, 0);
    ck_assert_uint_eq(s.batch_size, 32);
    ck_assert_uint_eq(s.epochs, 1);
    ck_assert_int_eq(s.offload, SL_OFFLOAD_AUTO);
    ck_assert_int_eq(s.on_error, SL_ON_ERROR_SKIP);
    ck_assert_uint_eq(s.max_pixels, 100000000);

    /* Stage defaults: scale, ratio, p, ImageNet mean/std; resize N keeps aspect. */
    text = "{\"source\": {\"type\": \"filelist\", \"path\": \"list.txt\"}, \"stages\": ["
           "{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 256},"
           "{\"op\": \"random_resized_crop\", \"size\": [200, 300]}, {\"op\": \"flip\"},"
           "{\"op\": \"center_crop\", \"size\": 7}, {\"op\": \"normalize\"}], "
           "\"offload\": {\"split\": 6, \"local_share\": 1}, \"on_error\": \"fail\", "
           "\"max_pixels\": 1099511627776, \"drop_last\": true, \"deterministic\": true}";
    ck_assert_msg(sl_spec_parse("t.json", text, strlen(text), &s, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(s.source_type, SL_SRC_FILELIST);
    ck_assert_uint_eq(s.nstages, 6);
    ck_assert(s.stages[1].resize_shorter);
    ck_assert_uint_eq(s.stages[1].size_h, 256);
    ck_assert_uint_eq(s.stages[1].size_w, 256);
    ck_assert(!s.stages[2].resize_shorter);
    ck_assert_uint_eq(s.stages[2].size_h, 200);
    ck_assert_uint_eq(s.stages[2].size_w, 300);
    ck_assert(s.stages[2].scale[0] == 0.08 && s.stages[2].scale[1] == 1.0);
    ck_assert(s.stages[2].ratio[0] == 0.75 && s.stages[2].ratio[1] == 4.0 / 3.0);
    ck_assert(s.stages[2].ratio[1] == 1.3333333333333333);
    ck_assert(s.stages[3].p == 0.5);
    ck_assert_uint_eq(s.stages[4].size_h, 7);
    ck_assert_uint_eq(s.stages[4].size_w, 7);
    ck_assert(s.stages[5].mean[0] == 0.485f && s.stages[5].mean[1] == 0.456f &&
              s.stages[5].mean[2] == 0.406f);
    ck_assert(s.stages[5].std[0] == 0.229f && s.stages[5].std[1] == 0.224f &&
              s.stages[5].std[2] == 0.225f);
    ck_assert_int_eq(s.offload, SL_OFFLOAD_FIXED);
    ck_assert_uint_eq(s.split, 6);
    ck_assert(s.local_share == 1.0); /* an integer where a real is expected */
    ck_assert_int_eq(s.on_error, SL_ON_ERROR_FAIL);
    ck_assert_uint_eq(s.max_pixels, 1ull << 40);
    ck_assert(s.drop_last && s.deterministic);
}
END_TEST

START_TEST(test_empty_stages_and_offload_strings)
{
    const char *modes[] = {"auto", "off", "all", "fastflow"};
    const sl_offload_e want[] = {SL_OFFLOAD_AUTO, SL_OFFLOAD_OFF, SL_OFFLOAD_ALL,
                                 SL_OFFLOAD_FASTFLOW};
    for (int i = 0; i < 4; i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "{\"source\": {\"type\": \"imagefolder\", \"path\": \"a/b/..c\"}, "
                 "\"stages\": [], \"offload\": \"%s\"}",
                 modes[i]);
        char err[ERRLEN] = "";
        sl_spec_t s;
        ck_assert_msg(sl_spec_parse("t.json", text, strlen(text), &s, err, sizeof(err)) == 0,
                      "%s", err);
        ck_assert_uint_eq(s.nstages, 0);
        ck_assert_int_eq(s.offload, want[i]);
        ck_assert_str_eq(s.source_path, "a/b/..c");
        assert_round_trip(&s);
    }
}
END_TEST

START_TEST(test_conf_examples)
{
    const char *files[] = {"conf/imagenet-train.json", "conf/eval-center-crop.json",
                           "conf/tar-shards.json"};
    sl_spec_t s[3];
    for (int i = 0; i < 3; i++) {
        char err[ERRLEN] = "";
        int rc = sl_spec_parse_file(files[i], &s[i], err, sizeof(err));
        ck_assert_msg(rc == 0, "%s (run from the source tree): %s", files[i], err);
        assert_round_trip(&s[i]);
    }
    ck_assert_str_eq(s[0].source_path, "train");
    ck_assert_uint_eq(s[0].batch_size, 64);
    ck_assert_uint_eq(s[0].epochs, 1);
    ck_assert_uint_eq(s[0].nstages, 5);
    ck_assert(!s[1].shuffle);
    ck_assert_int_eq(s[1].stages[1].op, SL_OP_RESIZE);
    ck_assert(s[1].stages[1].resize_shorter);
    ck_assert_uint_eq(s[1].stages[1].size_h, 256);
    ck_assert_int_eq(s[1].stages[2].op, SL_OP_CENTER_CROP);
    ck_assert_uint_eq(s[1].stages[2].size_w, 224);
    ck_assert_int_eq(s[2].source_type, SL_SRC_TAR);
    ck_assert_str_eq(s[2].source_path, "shards");
}
END_TEST

/* ---- broken specs: each names file, line and field ---------------------------------- */

START_TEST(test_syntax_error)
{
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90,,", "t.json:11: column ");
    expect_edit_err("\"offload\": \"auto\"\n", "\"offload\": \"auto\",\n", "t.json:13: column ");
    /* duplicate keys are refused, not silently last-wins */
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90, \"epochs\": 3,", "duplicate object key");
    expect_edit_err("\"seed\": 42", "\"seed\": 99999999999999999999", "t.json:2: column ");
    expect_edit_err("\"p\": 0.5", "\"p\": 1e999", "t.json:6: column ");
}
END_TEST

START_TEST(test_unknown_keys)
{
    expect_edit_err("\"epochs\": 90", "\"epoch\": 90",
                    "t.json:11: epoch: unknown key (expected one of: source, stages,");
    expect_edit_err("\"shuffle\": true", "\"shufle\": true",
                    "t.json:2: source.shufle: unknown key (expected one of: type, path, shuffle, "
                    "seed, shuffle_block)");
    expect_edit_err("\"p\": 0.5", "\"p\": 0.5, \"size\": 3",
                    "t.json:6: stages[2].size: unknown key for flip (expected one of: op, p)");
    expect_edit_err("{\"op\": \"to_chw\"}", "{\"op\": \"to_chw\", \"\\u0001\": 1}",
                    "t.json:8: stages[4].\\x01: unknown key for to_chw");
    expect_edit_err("\"offload\": \"auto\"",
                    "\"offload\": {\"split\": 1, \"local_share\": 0.5, \"share\": 1}",
                    "t.json:12: offload.share: unknown key (expected one of: split, local_share)");
}
END_TEST

/* Parses text, expects -EINVAL and exactly the lines want[0..n) in order,
 * each found in its line. */
static void expect_lines(const char *text, size_t errlen, const char *const *want, size_t n)
{
    char *err = malloc(errlen);
    ck_assert_ptr_nonnull(err);
    sl_spec_t spec;
    int rc = sl_spec_parse("t.json", text, strlen(text), &spec, err, errlen);
    ck_assert_msg(rc == -EINVAL, "rc %d (err \"%s\")", rc, err);
    const char *line = err;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(line != NULL, "%zu lines, want %zu: \"%s\"", i, n, err);
        char one[ERRLEN];
        first_line(line, one, sizeof(one));
        ck_assert_msg(strstr(one, want[i]) != NULL, "line %zu \"%s\" lacks \"%s\"", i, one,
                      want[i]);
        line = strchr(line, '\n');
        line = line != NULL ? line + 1 : NULL;
    }
    ck_assert_msg(line == NULL, "more lines than %zu: \"%s\"", n, err);
    free(err);
}

START_TEST(test_all_errors)
{
    /* Three independent errors (a source key, a stage's value, a top-level
     * value): all three, in order, the first as when it is the only one. */
    char *one = edit("\"shuffle\": true", "\"shuffle\": 3");
    char err1[ERRLEN] = "";
    sl_spec_t spec;
    ck_assert_int_eq(sl_spec_parse("t.json", one, strlen(one), &spec, err1, sizeof(err1)), -EINVAL);
    ck_assert_ptr_null(strchr(err1, '\n')); /* one error: one line, as always */
    char *two = malloc(strlen(one) + 64);
    char *three = malloc(strlen(one) + 64);
    ck_assert(two != NULL && three != NULL);
    const char *at = strstr(one, "\"p\": 0.5");
    snprintf(two, strlen(one) + 64, "%.*s\"p\": 7%s", (int)(at - one), one, at + 8);
    at = strstr(two, "\"batch_size\": 256");
    snprintf(three, strlen(one) + 64, "%.*s\"batch_size\": 0%s", (int)(at - two), two, at + 17);
    const char *want[] = {err1, "t.json:6: stages[2].p: ", "t.json:10: batch_size: "};
    expect_lines(three, ERRLEN, want, 3);

    /* A JSON syntax error stops the parse: one error. */
    char *syn = edit("\"epochs\": 90,", "\"epochs\": 90,, \"bogus\": 1,");
    const char *want_syn[] = {"t.json:11: column "};
    expect_lines(syn, ERRLEN, want_syn, 1);

    /* Every unknown key of an object; a bad stage does not hide the next
     * stage's error, nor does it make the later stages' order wrong. */
    char *keys = edit("\"epochs\": 90,", "\"epoch\": 90, \"offlod\": 1,");
    const char *want_keys[] = {"t.json:11: epoch: unknown key", "t.json:11: offlod: unknown key"};
    expect_lines(keys, ERRLEN, want_keys, 2);
    char *stages = edit("{\"op\": \"decode_jpeg\"}", "{\"op\": \"decode_jpg\"}");
    char *stages2 = malloc(strlen(stages) + 64);
    ck_assert_ptr_nonnull(stages2);
    at = strstr(stages, "\"p\": 0.5");
    snprintf(stages2, strlen(stages) + 64, "%.*s\"p\": -1%s", (int)(at - stages), stages, at + 8);
    const char *want_st[] = {"t.json:4: stages[0].op: unknown op \"decode_jpg\"",
                             "t.json:6: stages[2].p: "};
    expect_lines(stages2, ERRLEN, want_st, 2);

    /* At most SPEC_ERRORS_SHOWN (20), then a count of the rest. */
    char many[4096] = "{";
    for (int i = 0; i < 25; i++) {
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s\"bad%d\": %d",
                 i > 0 ? ",\n" : "", i, i);
    }
    strcat(many, "}");
    const char *want_many[21];
    char names[20][64];
    for (int i = 0; i < 20; i++) {
        snprintf(names[i], sizeof(names[i]), "t.json:%d: bad%d: unknown key", i + 1, i);
        want_many[i] = names[i];
    }
    want_many[20] = "t.json: 6 more errors"; /* 5 keys and the missing source */
    expect_lines(many, 16384, want_many, 21);
    /* A small buffer lists what fits, and still ends with the count. */
    char small[300];
    ck_assert_int_eq(sl_spec_parse("t.json", many, strlen(many), &spec, small, sizeof(small)),
                     -EINVAL);
    ck_assert_msg(strstr(small, "t.json:1: bad0: unknown key") == small, "%s", small);
    ck_assert_msg(strstr(small, " more errors") != NULL, "%s", small);
    free(one);
    free(two);
    free(three);
    free(syn);
    free(keys);
    free(stages);
    free(stages2);
}
END_TEST

START_TEST(test_unknown_op)
{
    expect_edit_err("\"op\": \"flip\"", "\"op\": \"flipp\"",
                    "t.json:6: stages[2].op: unknown op \"flipp\" (valid: decode_jpeg, "
                    "random_resized_crop, resize, center_crop, flip, normalize, to_chw, "
                    "decode_image, image_tiles, tokenize, template, plugin, color_jitter, "
                    "random_grayscale, gaussian_blur, random_erasing, random_rotation, "
                    "random_affine, solarize, posterize, auto_contrast, equalize, "
                    "trivial_augment_wide, rand_augment, vertical_flip, random_crop, "
                    "random_apply, random_choice, decode_video)");
    expect_edit_err("\"op\": \"flip\"", "\"op\": 3", "t.json:6: stages[2].op: unknown op 3");
    expect_edit_err("{\"op\": \"flip\", \"p\": 0.5}", "{\"p\": 0.5}",
                    "t.json:6: stages[2].op: missing (required)");
    expect_edit_err("{\"op\": \"flip\", \"p\": 0.5}", "\"flip\"",
                    "t.json:6: stages[2]: must be an object");
}
END_TEST

START_TEST(test_missing_source)
{
    expect_edit_err("\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"shuffle\": "
                    "true, \"seed\": 42},\n",
                    "\n", "t.json:1: source: missing (required)");
    expect_edit_err("\"type\": \"imagefolder\", ", "",
                    "t.json:2: source.type: missing (required): one of imagefolder, tar, "
                    "filelist");
    expect_edit_err("\"type\": \"imagefolder\"", "\"type\": \"folder\"",
                    "t.json:2: source.type: must be one of imagefolder, tar, filelist, "
                    "webdataset, jsonl, got "
                    "\"folder\"");
    expect_edit_err("\"path\": \"train\", ", "", "t.json:2: source.path: missing (required)");
    expect_edit_err("\"path\": \"train\"", "\"path\": \"\"", "t.json:2: source.path: must not be "
                                                             "empty");
    expect_edit_err("\"path\": \"train\"", "\"path\": 5", "t.json:2: source.path: must be a "
                                                          "string");
    expect_edit_err("\"seed\": 42", "\"seed\": -1", "t.json:2: source.seed: must be an integer in "
                                                    "0..9223372036854775807, got -1");
    expect_edit_err("\"shuffle\": true", "\"shuffle\": 1",
                    "t.json:2: source.shuffle: must be true or false, got 1");
    /* the source on its own lines: the error points inside it */
    expect_edit_err("\"seed\": 42}", "\n\n  \"seed\": \"x\"}", "t.json:4: source.seed:");
    expect_edit_err("\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"shuffle\": "
                    "true, \"seed\": 42}",
                    "\"source\":\n [\"train\"]", "t.json:2: source: must be an object");
}
END_TEST

START_TEST(test_sizes)
{
    expect_edit_err("\"size\": 224, ", "",
                    "t.json:5: stages[1].size: missing (required): an integer in 1..16384");
    expect_edit_err("\"size\": 224", "\"size\": 0",
                    "t.json:5: stages[1].size: must be an integer in 1..16384, got 0");
    expect_edit_err("\"size\": 224", "\"size\": 16385",
                    "t.json:5: stages[1].size: must be an integer in 1..16384, got 16385");
    expect_edit_err("\"size\": 224", "\"size\": 224.0",
                    "t.json:5: stages[1].size: must be an integer in 1..16384 or [H, W], got "
                    "224.0");
    expect_edit_err("\"size\": 224", "\"size\": \"224\"",
                    "t.json:5: stages[1].size: must be an integer in 1..16384 or [H, W], got "
                    "\"224\"");
    expect_edit_err("\"size\": 224", "\"size\": [224]",
                    "t.json:5: stages[1].size: must be an integer in 1..16384 or [H, W], got an "
                    "array of 1");
    expect_edit_err("\"size\": 224", "\"size\": [224,\n 0]",
                    "t.json:6: stages[1].size[1]: must be an integer in 1..16384, got 0");
    expect_edit_err("{\"op\": \"to_chw\"}", "{\"op\": \"to_chw\"},\n{\"op\": \"center_crop\"}",
                    "t.json:9: stages[5].size: missing");
}
END_TEST

START_TEST(test_wrong_types)
{
    expect_edit_err("\"batch_size\": 256", "\"batch_size\": \"256\"",
                    "t.json:10: batch_size: must be an integer in 1..65536, got \"256\"");
    expect_edit_err("\"batch_size\": 256", "\"batch_size\": 65537",
                    "t.json:10: batch_size: must be an integer in 1..65536, got 65537");
    expect_edit_err("\"epochs\": 90", "\"epochs\": 0",
                    "t.json:11: epochs: must be an integer in 1..1000000, got 0");
    expect_edit_err("\"epochs\": 90", "\"epochs\": null",
                    "t.json:11: epochs: must be an integer in 1..1000000, got null");
    expect_edit_err("\"epochs\": 90", "\"epochs\": 90, \"drop_last\": \"yes\"",
                    "t.json:11: drop_last: must be true or false, got \"yes\"");
    expect_edit_err("\"epochs\": 90", "\"epochs\": 90, \"max_pixels\": 1099511627777",
                    "t.json:11: max_pixels: must be an integer in 1..1099511627776");
    const char *obj_stages = "{\"source\": {\"type\": \"tar\", \"path\": \"s\"},\n \"stages\": {}}";
    expect_text_err(obj_stages, strlen(obj_stages), -EINVAL,
                    "t.json:2: stages: must be an array of stage objects, got an object");
    expect_edit_err("\"p\": 0.5", "\"p\": true", "t.json:6: stages[2].p: must be a probability "
                                                 "in 0..1, got true");
    expect_text_err("[1, 2]", 6, -EINVAL, "t.json:1: (top level): must be an object");
}
END_TEST

START_TEST(test_ranges)
{
    expect_edit_err("\"scale\": [0.08, 1.0]", "\"scale\": [0.08, 1.5]",
                    "t.json:5: stages[1].scale: must be [min, max] with 0 < min <= max <= 1, got "
                    "[0.08, 1.5]");
    expect_edit_err("\"scale\": [0.08, 1.0]", "\"scale\": [0, 1]",
                    "t.json:5: stages[1].scale: must be [min, max] with 0 < min <= max <= 1");
    expect_edit_err("\"scale\": [0.08, 1.0]", "\"scale\": [0.08, \"1\"]",
                    "t.json:5: stages[1].scale[1]: must be a number, got \"1\"");
    expect_edit_err("\"ratio\": [0.75, 1.3333]", "\"ratio\": [1.3333, 0.75]",
                    "t.json:5: stages[1].ratio: must be [min, max] with 0 < min <= max, got "
                    "[1.3333, 0.75]");
    expect_edit_err("\"ratio\": [0.75, 1.3333]", "\"ratio\": [0.75, 1.3333, 2]",
                    "t.json:5: stages[1].ratio: must be [min, max], an array of 2 numbers");
    expect_edit_err("\"p\": 0.5", "\"p\": 1.5",
                    "t.json:6: stages[2].p: must be a probability in 0..1, got 1.5");
    expect_edit_err("\"p\": 0.5", "\"p\": -0.0000001", "t.json:6: stages[2].p: must be a "
                                                       "probability in 0..1, got -1e-07");
    expect_edit_err("\"std\": [0.229, 0.224, 0.225]", "\"std\": [0.229, 0, 0.225]",
                    "t.json:7: stages[3].std[1]: must be a number > 0");
    expect_edit_err("\"std\": [0.229, 0.224, 0.225]", "\"std\": [0.229, 0.224, 1e-300]",
                    "t.json:7: stages[3].std[2]: must be a number > 0");
    expect_edit_err("\"mean\": [0.485, 0.456, 0.406]", "\"mean\": [0.485, 0.456]",
                    "t.json:7: stages[3].mean: must be [R, G, B], an array of 3 numbers, got an "
                    "array of 2");
    expect_edit_err("\"mean\": [0.485, 0.456, 0.406]", "\"mean\": [0.485, 0.456, 1e300]",
                    "t.json:7: stages[3].mean[2]: must fit a float");
}
END_TEST

START_TEST(test_order)
{
    expect_edit_err("{\"op\": \"to_chw\"}", "{\"op\": \"decode_jpeg\"}",
                    "t.json:8: stages[4].op: decode_jpeg must be the first stage");
    expect_edit_err("{\"op\": \"decode_jpeg\"},", "{\"op\": \"flip\"},",
                    "t.json:4: stages[0].op: the first stage must be decode_jpeg or "
                    "decode_image, got flip");
    expect_edit_err("{\"op\": \"to_chw\"}", "{\"op\": \"resize\", \"size\": 256}",
                    "t.json:8: stages[4].op: resize must come before normalize (stages[3])");
    expect_edit_err("{\"op\": \"normalize\", \"mean\": [0.485, 0.456, 0.406], "
                    "\"std\": [0.229, 0.224, 0.225]},",
                    "{\"op\": \"to_chw\"}, {\"op\": \"center_crop\", \"size\": 3},",
                    "t.json:7: stages[4].op: center_crop must come before to_chw (stages[3])");
    expect_edit_err("{\"op\": \"to_chw\"}", "{\"op\": \"normalize\"}",
                    "t.json:8: stages[4].op: normalize appears twice (also stages[3])");
    expect_edit_err("{\"op\": \"to_chw\"}", "{\"op\": \"to_chw\"}, {\"op\": \"to_chw\"}",
                    "t.json:8: stages[5].op: to_chw appears twice (also stages[4])");

    char text[4096];
    int n = snprintf(text, sizeof(text),
                     "{\"source\": {\"type\": \"tar\", \"path\": \"s\"}, \"stages\": "
                     "[{\"op\": \"decode_jpeg\"}");
    for (int i = 0; i < SL_SPEC_MAX_STAGES; i++) {
        n += snprintf(text + n, sizeof(text) - (size_t)n, ", {\"op\": \"flip\"}");
    }
    snprintf(text + n, sizeof(text) - (size_t)n, "]}");
    expect_text_err(text, strlen(text), -EINVAL, "t.json:1: stages: has 33 stages, the limit "
                                                 "is 32");
}
END_TEST

START_TEST(test_offload_object)
{
    expect_edit_err("\"offload\": \"auto\"", "\"offload\": {\"split\": 6, \"local_share\": 0.5}",
                    "t.json:12: offload.split: must be an integer in 0..5, got 6");
    expect_edit_err("\"offload\": \"auto\"", "\"offload\": {\"split\": 2, \"local_share\": 1.5}",
                    "t.json:12: offload.local_share: must be a number in 0..1, got 1.5");
    expect_edit_err("\"offload\": \"auto\"", "\"offload\": {\"split\": 2}",
                    "t.json:12: offload.local_share: missing (required)");
    expect_edit_err("\"offload\": \"auto\"", "\"offload\": {\"local_share\": 0.5}",
                    "t.json:12: offload.split: missing (required)");
    expect_edit_err("\"offload\": \"auto\"", "\"offload\": \"fixed\"",
                    "t.json:12: offload: must be \"auto\", \"off\", \"all\", \"fastflow\" or "
                    "{\"split\": K, \"local_share\": F}, got \"fixed\"");
    expect_edit_err("\"offload\": \"auto\"", "\"offload\": \"auto\", \"on_error\": \"ignore\"",
                    "t.json:12: on_error: must be one of skip, fail, got \"ignore\"");
}
END_TEST

START_TEST(test_paths)
{
    const char *bad_dotdot[] = {"..", "../etc", "a/../b", "train/..", "a//..//b"};
    for (size_t i = 0; i < sizeof(bad_dotdot) / sizeof(bad_dotdot[0]); i++) {
        char to[64];
        snprintf(to, sizeof(to), "\"path\": \"%s\"", bad_dotdot[i]);
        expect_edit_err("\"path\": \"train\"", to,
                        "t.json:2: source.path: must not contain a \"..\" component");
    }
    expect_edit_err("\"path\": \"train\"", "\"path\": \"/data/train\"",
                    "t.json:2: source.path: must be relative to the data root, not absolute");
    /* SL_SPEC_PATH_MAX - 1 bytes fit, one more does not */
    char to[SL_SPEC_PATH_MAX + 32];
    int n = snprintf(to, sizeof(to), "\"path\": \"");
    memset(to + n, 'a', SL_SPEC_PATH_MAX);
    snprintf(to + n + SL_SPEC_PATH_MAX, sizeof(to) - (size_t)n - SL_SPEC_PATH_MAX, "\"");
    expect_edit_err("\"path\": \"train\"", to, "t.json:2: source.path: is 1024 bytes, the "
                                               "limit is 1023");
    snprintf(to + n + SL_SPEC_PATH_MAX - 1, sizeof(to) - (size_t)n - SL_SPEC_PATH_MAX + 1, "\"");
    char *text = edit("\"path\": \"train\"", to);
    sl_spec_t s;
    char err[ERRLEN] = "";
    ck_assert_msg(sl_spec_parse("t.json", text, strlen(text), &s, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_uint_eq(strlen(s.source_path), SL_SPEC_PATH_MAX - 1);
    assert_round_trip(&s);
    free(text);
}
END_TEST

START_TEST(test_hostile_input)
{
    /* NUL bytes: in a string, between tokens, first byte */
    static const char nul1[] = "{\"source\": {\"type\": \"tar\", \"path\": \"a\0b\"}}";
    expect_text_err(nul1, sizeof(nul1) - 1, -EINVAL, "t.json:1: column ");
    static const char nul2[] = "{\"source\"\0: 1}";
    expect_text_err(nul2, sizeof(nul2) - 1, -EINVAL, "t.json:1: column ");
    static const char nul3[] = "\0{}";
    expect_text_err(nul3, sizeof(nul3) - 1, -EINVAL, "t.json:1: column ");
    static const char nul4[] = "{\"source\": {\"type\": \"tar\", \"path\": \"a\\u0000b\"}}";
    expect_text_err(nul4, sizeof(nul4) - 1, -EINVAL, "t.json:1: column ");

    /* not UTF-8: refused; the message must not echo raw bytes */
    static const char bad8[] = "{\"source\": \"\xff\xfe\x01\"}";
    char err[ERRLEN] = "";
    sl_spec_t s;
    ck_assert_int_eq(sl_spec_parse("t.json", bad8, sizeof(bad8) - 1, &s, err, sizeof(err)),
                     -EINVAL);
    for (const char *p = err; *p != '\0'; p++) {
        ck_assert_msg((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7F, "raw byte in %s",
                      err);
    }

    /* deep nesting, far past jansson's depth limit: an error, not a stack overflow */
    size_t depth = 200000;
    char *deep = malloc(2 * depth + 64);
    ck_assert_ptr_nonnull(deep);
    size_t n = (size_t)sprintf(deep, "{\"stages\": ");
    memset(deep + n, '[', depth);
    memset(deep + n + depth, ']', depth);
    n += 2 * depth;
    deep[n++] = '}';
    expect_text_err(deep, n, -EINVAL, "t.json:1: column ");

    /* nesting jansson accepts: the spec checks and the line scanner cope */
    depth = 1500;
    n = (size_t)sprintf(deep, "{\"stages\": ");
    memset(deep + n, '[', depth);
    memset(deep + n + depth, ']', depth);
    n += 2 * depth;
    n += (size_t)sprintf(deep + n, ",\n\"bogus\": 1}");
    expect_text_err(deep, n, -EINVAL, "t.json:2: bogus: unknown key");
    n = (size_t)sprintf(deep, "{\"source\": {\"type\": \"tar\", \"path\": \"s\"},\n\"stages\": ");
    memset(deep + n, '[', depth);
    memset(deep + n + depth, ']', depth);
    n += 2 * depth;
    deep[n++] = '}';
    expect_text_err(deep, n, -EINVAL, "t.json:2: stages[0]: must be an object");
    free(deep);

    /* a key that is long and full of control bytes is cut and escaped */
    char key[4096];
    memset(key, '\x01', sizeof(key));
    size_t kl = 0;
    kl += (size_t)sprintf(key, "{\"");
    for (int i = 0; i < 500; i++) {
        kl += (size_t)sprintf(key + kl, "\\u0007");
    }
    kl += (size_t)sprintf(key + kl, "\": 1}");
    err[0] = '\0';
    ck_assert_int_eq(sl_spec_parse("t.json", key, kl, &s, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "t.json:1: \\x07\\x07") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "...: unknown key") != NULL, "%s", err);
    ck_assert_uint_lt(strlen(err), 600);

    /* a tiny error buffer is filled and terminated, a NULL one is fine */
    char small[8];
    ck_assert_int_eq(sl_spec_parse("t.json", "{}", 2, &s, small, sizeof(small)), -EINVAL);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
    ck_assert_int_eq(sl_spec_parse("t.json", "{}", 2, &s, NULL, 0), -EINVAL);
    ck_assert_int_eq(sl_spec_parse(NULL, NULL, 0, &s, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(test_sizes_and_files)
{
    char err[ERRLEN] = "";
    sl_spec_t s;

    /* over 1 MiB: refused before parsing, in memory and from a file */
    size_t big = SL_SPEC_MAX_BYTES + 1;
    char *buf = malloc(big);
    ck_assert_ptr_nonnull(buf);
    memset(buf, ' ', big);
    const char *small_spec = "{\"source\": {\"type\": \"tar\", \"path\": \"s\"}}";
    memcpy(buf, small_spec, strlen(small_spec));
    ck_assert_int_eq(sl_spec_parse("t.json", buf, big, &s, err, sizeof(err)), -E2BIG);
    ck_assert_msg(strstr(err, "t.json: the spec is 1048577 bytes, the limit is 1048576") != NULL,
                  "%s", err);
    /* exactly the limit is fine */
    ck_assert_msg(sl_spec_parse("t.json", buf, big - 1, &s, err, sizeof(err)) == 0, "%s", err);

    char dir[] = "/tmp/test_spec.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/big.json", dir);
    write_file(path, buf, big);
    ck_assert_int_eq(sl_spec_parse_file(path, &s, err, sizeof(err)), -E2BIG);
    ck_assert_msg(strstr(err, path) != NULL, "%s", err);
    unlink(path);
    free(buf);

    /* empty file: a syntax error at line 1 */
    snprintf(path, sizeof(path), "%s/empty.json", dir);
    write_file(path, "", 0);
    ck_assert_int_eq(sl_spec_parse_file(path, &s, err, sizeof(err)), -EINVAL);
    char want[400];
    snprintf(want, sizeof(want), "%s:1: column 1: ", path);
    ck_assert_msg(strstr(err, want) != NULL, "%s", err);
    unlink(path);

    /* a file error names the file and the line */
    snprintf(path, sizeof(path), "%s/train.json", dir);
    char *text = edit("\"size\": 224", "\"size\": 0");
    write_file(path, text, strlen(text));
    free(text);
    ck_assert_int_eq(sl_spec_parse_file(path, &s, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s:5: stages[1].size: must be an integer in 1..16384", path);
    ck_assert_msg(strstr(err, want) != NULL, "%s", err);
    unlink(path);

    /* not found, a directory */
    snprintf(path, sizeof(path), "%s/missing.json", dir);
    ck_assert_int_eq(sl_spec_parse_file(path, &s, err, sizeof(err)), -ENOENT);
    ck_assert_msg(strstr(err, path) != NULL && strstr(err, "No such file or directory") != NULL,
                  "%s", err);
    ck_assert_int_eq(sl_spec_parse_file(dir, &s, err, sizeof(err)), -EISDIR);
    ck_assert_msg(strstr(err, dir) != NULL, "%s", err);
    ck_assert_int_eq(rmdir(dir), 0);

    /* a pipe has no size: read to EOF */
    ck_assert_msg(sl_spec_parse_file("/dev/null", &s, err, sizeof(err)) == -EINVAL, "%s", err);
}
END_TEST

/* ---- the line scanner on its own ---------------------------------------------------- */

START_TEST(test_line_scanner)
{
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), ""), 1);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "source"), 2);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "source.path"), 2);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "stages"), 3);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "stages[0]"), 4);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "stages[3].std[2]"), 7);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "stages[4].op"), 8);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "offload"), 12);
    /* missing: the enclosing value's line */
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "stages[9]"), 3);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "stages[2].q"), 6);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "nothing.here"), 1);
    ck_assert_uint_eq(sl_spec_line_str(GOOD, strlen(GOOD), "offload.split"), 12);

    /* strings holding brackets, quotes and escaped keys do not confuse it */
    const char *t = "{\"a\": \"}]\\\"{[\",\n"
                    " \"b\\\"c\": [\"x\\\\\", {\"k\": \"]\"},\n"
                    "   {\"\\u0073ize\"\n: 1}],\n"
                    " \"\\ud83d\\ude00\": true}";
    ck_assert_uint_eq(sl_spec_line_str(t, strlen(t), "b\"c[2].size"), 3);
    ck_assert_uint_eq(sl_spec_line_str(t, strlen(t), "b\"c[1].k"), 2);
    ck_assert_uint_eq(sl_spec_line_str(t, strlen(t), "\xF0\x9F\x98\x80"), 5);
    /* bad paths and bad text: still a line, no overrun */
    ck_assert_uint_eq(sl_spec_line_str(t, strlen(t), "b\"c[x"), 1);
    ck_assert_uint_eq(sl_spec_line_str(t, strlen(t), "[99999999999999999999999]"), 1);
    ck_assert_uint_eq(sl_spec_line_str("{\"a\": [1, 2", 11, "a[5]"), 1);
    ck_assert_uint_eq(sl_spec_line_str("{\"a\"", 4, "a.b"), 1);
    ck_assert_uint_eq(sl_spec_line_str("\n\n[,,:}", 7, "[2]"), 3);
    ck_assert_uint_eq(sl_spec_line_str(NULL, 0, "a"), 1);

    sl_spec_pathc_t p[3] = {{.key = "stages", .keylen = 6},
                            {.key = NULL, .index = 12},
                            {.key = "a\x01\\b", .keylen = 4}};
    char out[64];
    ck_assert_str_eq(sl_spec_path_format(p, 3, out, sizeof(out)), "stages[12].a\\x01\\x5Cb");
    ck_assert_str_eq(sl_spec_path_format(p, 0, out, sizeof(out)), "(top level)");
    ck_assert_str_eq(sl_spec_path_format(p, 3, out, 9), "stages[1");
    /* a cut never splits a UTF-8 sequence */
    ck_assert_str_eq(sl_spec_quote("ab\xC3\xA9", 4, out, 4), "ab");
}
END_TEST

/* ---- offload flag ----------------------------------------------------------------------- */

START_TEST(test_offload_parse)
{
    sl_offload_e m;
    uint32_t k = 99;
    double f = 99;
    char err[ERRLEN] = "";
    const char *names[] = {"auto", "off", "all", "fastflow"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(sl_offload_parse(names[i], &m, &k, &f, err, sizeof(err)), 0);
        ck_assert_str_eq(sl_offload_name(m), names[i]);
        ck_assert_uint_eq(k, 0);
        ck_assert(f == 0.0);
    }
    ck_assert_int_eq(sl_offload_parse("2:0.25", &m, &k, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(m, SL_OFFLOAD_FIXED);
    ck_assert_uint_eq(k, 2);
    ck_assert(f == 0.25);
    ck_assert_int_eq(sl_offload_parse("0:1", &m, &k, &f, err, sizeof(err)), 0);
    ck_assert_uint_eq(k, 0);
    ck_assert(f == 1.0);
    ck_assert_int_eq(sl_offload_parse("32:.5", &m, NULL, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(sl_offload_name(SL_OFFLOAD_FIXED), "fixed");

    struct {
        const char *in, *want;
    } bad[] = {
        {"33:0.5", "split K must be in 0..32"},
        {"99999999999999999999999:0.5", "split K must be in 0..32"},
        {"2:1.5", "local share F must be in 0..1"},
        {"2:-0.5", "expected off, all, auto, fastflow or K:F"},
        {"2:nan", "expected off, all, auto, fastflow or K:F"},
        {"2:1e999", "local share F must be in 0..1"},
        {"2:0.5x", "F in K:F must be a number"},
        {"2x:0.5", "K in K:F must be a whole number"},
        {"2:", "expected off, all, auto, fastflow or K:F"},
        {":0.5", "expected off, all, auto, fastflow or K:F"},
        {"-1:0.5", "expected off, all, auto, fastflow or K:F"},
        {" 2:0.5", "expected off, all, auto, fastflow or K:F"},
        {"fixed", "expected off, all, auto, fastflow or K:F"},
        {"", "expected off, all, auto, fastflow or K:F"},
        {"OFF", "offload \"OFF\": expected"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        m = SL_OFFLOAD_ALL;
        k = 77;
        f = 0.75;
        err[0] = '\0';
        ck_assert_msg(sl_offload_parse(bad[i].in, &m, &k, &f, err, sizeof(err)) == -EINVAL,
                      "\"%s\" accepted", bad[i].in);
        ck_assert_msg(strstr(err, bad[i].want) != NULL, "\"%s\": \"%s\" lacks \"%s\"", bad[i].in,
                      err, bad[i].want);
        /* outputs untouched on failure */
        ck_assert_int_eq(m, SL_OFFLOAD_ALL);
        ck_assert_uint_eq(k, 77);
        ck_assert(f == 0.75);
    }
    ck_assert_int_eq(sl_offload_parse(NULL, &m, &k, &f, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(test_names)
{
    const char *ops[] = {"decode_jpeg",
                         "random_resized_crop",
                         "resize",
                         "center_crop",
                         "flip",
                         "normalize",
                         "to_chw",
                         "decode_image",
                         "image_tiles",
                         "tokenize",
                         "template",
                         "plugin",
                         "color_jitter",
                         "random_grayscale",
                         "gaussian_blur",
                         "random_erasing",
                         "random_rotation",
                         "random_affine",
                         "solarize",
                         "posterize",
                         "auto_contrast",
                         "equalize",
                         "trivial_augment_wide",
                         "rand_augment",
                         "vertical_flip",
                         "random_crop",
                         "random_apply",
                         "random_choice",
                         "decode_video"};
    ck_assert_int_eq(sizeof(ops) / sizeof(ops[0]), SL_OP__COUNT);
    for (int i = 0; i < SL_OP__COUNT; i++) {
        ck_assert_str_eq(sl_op_name((sl_op_e)i), ops[i]);
    }
    ck_assert_str_eq(sl_op_name(SL_OP__COUNT), "unknown");
    ck_assert_str_eq(sl_offload_name(SL_OFFLOAD_AUTO), "auto");
    ck_assert_str_eq(sl_offload_name(SL_OFFLOAD_OFF), "off");
    ck_assert_str_eq(sl_offload_name(SL_OFFLOAD_ALL), "all");
    ck_assert_str_eq(sl_offload_name(SL_OFFLOAD_FASTFLOW), "fastflow");
    ck_assert_str_eq(sl_offload_name((sl_offload_e)42), "unknown");
}
END_TEST

/* ---- canonical JSON ------------------------------------------------------------------- */

/* Multi-rank keys (common/order/ranks.h): bounds, and errors naming line and field. */
START_TEST(test_rank_keys)
{
    char *text = edit("\"epochs\": 90,", "\"epochs\": 90, \"world_size\": 8, \"rank\": 7, "
                                         "\"rank_padding\": \"pad\",");
    sl_spec_t spec;
    char err[ERRLEN] = "";
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err)), 0);
    ck_assert_uint_eq(spec.world_size, 8);
    ck_assert_uint_eq(spec.rank, 7);
    ck_assert_int_eq(spec.rank_padding, SL_RANK_PAD);
    assert_round_trip(&spec);
    free(text);
    ck_assert_int_eq(sl_spec_parse("t.json", GOOD, strlen(GOOD), &spec, err, sizeof(err)), 0);
    ck_assert_uint_eq(spec.world_size, 1);
    ck_assert_uint_eq(spec.rank, 0);
    ck_assert_int_eq(spec.rank_padding, SL_RANK_DROP);
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90, \"world_size\": 2, \"rank\": 2,",
                    "t.json:11: rank: must be an integer in 0..1");
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90, \"world_size\": 0,",
                    "t.json:11: world_size: must be an integer in 1..4096");
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90, \"rank_padding\": \"wrap\",",
                    "rank_padding");
}
END_TEST

/* "name": what status pages call the job; kept through the canonical form
 * (absent from it when the spec has none), bounded, one printable line. */
START_TEST(test_name_key)
{
    char *text = edit("\"epochs\": 90,", "\"epochs\": 90, \"name\": \"resnet50 train\",");
    sl_spec_t spec;
    char err[ERRLEN] = "";
    ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &spec, err, sizeof(err)), 0);
    ck_assert_str_eq(spec.name, "resnet50 train");
    assert_round_trip(&spec);
    char *j = sl_spec_to_json(&spec);
    ck_assert_ptr_nonnull(strstr(j, "\"name\":\"resnet50 train\""));
    free(j);
    free(text);
    ck_assert_int_eq(sl_spec_parse("t.json", GOOD, strlen(GOOD), &spec, err, sizeof(err)), 0);
    ck_assert_str_eq(spec.name, "");
    j = sl_spec_to_json(&spec);
    ck_assert_ptr_null(strstr(j, "\"name\""));
    free(j);
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90, \"name\": 3,",
                    "t.json:11: name: must be a string, got 3");
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90, \"name\": \"\",",
                    "t.json:11: name: must be 1..63 bytes, got 0");
    expect_edit_err("\"epochs\": 90,", "\"epochs\": 90, \"name\": \"a\\nb\",",
                    "t.json:11: name: must not contain control characters");
    char long_name[128];
    snprintf(long_name, sizeof(long_name), "\"epochs\": 90, \"name\": \"%064d\",", 0);
    expect_edit_err("\"epochs\": 90,", long_name, "t.json:11: name: must be 1..63 bytes, got 64");
}
END_TEST

/* normalize "on": "device": parsed, canonical only when set, refused when wrong. */
START_TEST(test_normalize_on_device)
{
    char err[ERRLEN] = "";
    sl_spec_t s;
    float mean[3], sd[3];
    ck_assert_int_eq(sl_spec_parse("t.json", GOOD, strlen(GOOD), &s, err, sizeof(err)), 0);
    ck_assert(!s.stages[3].on_device);
    ck_assert(!sl_spec_device_norm(&s, mean, sd));
    char *j = sl_spec_to_json(&s);
    ck_assert_msg(strstr(j, "\"on\"") == NULL, "a CPU normalize changed form: %s", j);
    free(j);
    const char *texts[] = {"\"std\": [0.229, 0.224, 0.225], \"on\": \"device\"",
                           "\"std\": [0.229, 0.224, 0.225], \"on\": \"cpu\""};
    for (int k = 0; k < 2; k++) {
        char *text = edit("\"std\": [0.229, 0.224, 0.225]", texts[k]);
        ck_assert_int_eq(sl_spec_parse("t.json", text, strlen(text), &s, err, sizeof(err)), 0);
        free(text);
        ck_assert_int_eq(s.stages[3].on_device, k == 0);
        ck_assert_int_eq(sl_spec_device_norm(&s, mean, sd), k == 0);
        assert_round_trip(&s);
        j = sl_spec_to_json(&s);
        ck_assert_int_eq(strstr(j, "\"on\":\"device\"") != NULL, k == 0);
        free(j);
    }
    ck_assert(mean[0] == 0.485f && mean[2] == 0.406f && sd[1] == 0.224f);
    ck_assert(sl_spec_device_norm(&s, NULL, NULL) == false);
    expect_edit_err("\"std\": [0.229, 0.224, 0.225]",
                    "\"std\": [0.229, 0.224, 0.225], \"on\": \"gpu\"",
                    "t.json:7: stages[3].on: must be one of cpu, device, got \"gpu\"");
    expect_edit_err("\"std\": [0.229, 0.224, 0.225]",
                    "\"std\": [0.229, 0.224, 0.225], \"on\": true",
                    "t.json:7: stages[3].on: must be one of cpu, device, got true");
    expect_edit_err("\"p\": 0.5", "\"p\": 0.5, \"on\": \"device\"",
                    "t.json:6: stages[2].on: unknown key for flip");
    /* Geometry after a device normalize is refused like after any normalize. */
    expect_edit_err("\"std\": [0.229, 0.224, 0.225]},\n    {\"op\": \"to_chw\"}",
                    "\"std\": [0.229, 0.224, 0.225], \"on\": \"device\"},\n"
                    "    {\"op\": \"resize\", \"size\": 8}",
                    "t.json:8: stages[4].op: resize must come before normalize (stages[3])");
}
END_TEST

static const char MM[] =
    "{\"source\": {\"type\": \"webdataset\", \"path\": \"shards/s-{0..9}.tar\"},\n"
    " \"stages\": [{\"op\": \"decode_image\"},\n"
    "  {\"op\": \"image_tiles\", \"tile\": 336, \"max_tiles\": 9},\n"
    "  {\"op\": \"tokenize\", \"vocab\": \"tok/o200k_base.tiktoken\", \"encoding\": "
    "\"o200k_base\", \"max_tokens\": 4096, \"special\": \"allow\"},\n"
    "  {\"op\": \"template\", \"image_token\": 200000, \"tokens_per_tile\": 144},\n"
    "  {\"op\": \"normalize\", \"on\": \"device\"}]}";

static void expect_mm_err(const char *from, const char *to, const char *want)
{
    char *text = malloc(strlen(MM) + strlen(to) + 1);
    const char *at = strstr(MM, from);
    ck_assert_msg(at != NULL, "'%s' not in MM", from);
    size_t pre = (size_t)(at - MM);
    memcpy(text, MM, pre);
    strcpy(text + pre, to);
    strcat(text, at + strlen(from));
    expect_text_err(text, strlen(text), -EINVAL, want);
    free(text);
}

/* "batch_transforms" + "num_classes": values, defaults, round trip (specs
 * without them keep their canonical form), and an error naming the field
 * for each wrong value or spec they cannot mix. */
START_TEST(test_batch_transforms)
{
    const char *at = "\"offload\": \"auto\"\n";
    char err[ERRLEN] = "";
    sl_spec_t s;
    ck_assert_int_eq(sl_spec_parse("t.json", GOOD, strlen(GOOD), &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(s.nbatch_tfs, 0);
    ck_assert_uint_eq(s.num_classes, 0);
    char *j = sl_spec_to_json(&s);
    ck_assert(strstr(j, "batch_transforms") == NULL && strstr(j, "num_classes") == NULL);
    free(j);
    char *text = edit(at,
                      "\"offload\": \"auto\", \"num_classes\": 10, \"batch_transforms\": "
                      "[{\"op\": \"mixup\", \"alpha\": 0.2}, {\"op\": \"cutmix\", \"p\": 0.5}]\n");
    ck_assert_msg(sl_spec_parse("t.json", text, strlen(text), &s, err, sizeof(err)) == 0, "%s",
                  err);
    free(text);
    ck_assert_uint_eq(s.num_classes, 10);
    ck_assert_uint_eq(s.nbatch_tfs, 2);
    ck_assert_int_eq(s.batch_tfs[0].op, SL_BATCH_TF_MIXUP);
    ck_assert(s.batch_tfs[0].alpha == 0.2 && s.batch_tfs[0].p == 1.0);
    ck_assert_int_eq(s.batch_tfs[1].op, SL_BATCH_TF_CUTMIX);
    ck_assert(s.batch_tfs[1].alpha == 1.0 && s.batch_tfs[1].p == 0.5);
    assert_round_trip(&s);
    static const char *const bad[][2] = {
        {"[{\"op\": \"mixup\", \"alpha\": 0}]",
         "t.json:12: batch_transforms[0].alpha: must be a number > 0, got 0"},
        {"[{\"op\": \"mixup\", \"alpha\": -1}]", "batch_transforms[0].alpha: must be"},
        {"[{\"op\": \"cutmix\", \"p\": 1.5}]",
         "batch_transforms[0].p: must be a number from 0 to 1, got 1.5"},
        {"[{\"op\": \"mosaic\"}]", "batch_transforms[0].op: must be one of mixup, cutmix"},
        {"[{\"op\": \"mixup\", \"beta\": 1}]", "batch_transforms[0].beta: unknown key"},
        {"[{\"op\": \"mixup\"}, {\"op\": \"mixup\"}]",
         "batch_transforms[1].op: \"mixup\" is already in batch_transforms"},
        {"[]", "batch_transforms: must be a list of one or two"},
        {"{\"op\": \"mixup\"}", "batch_transforms: must be a list"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char to[256];
        snprintf(to, sizeof(to),
                 "\"offload\": \"auto\", \"num_classes\": 10, "
                 "\"batch_transforms\": %s\n",
                 bad[i][0]);
        expect_edit_err(at, to, bad[i][1]);
    }
    expect_edit_err(at, "\"offload\": \"auto\", \"num_classes\": 1\n", "num_classes: must be");
    expect_edit_err(at, "\"offload\": \"auto\", \"batch_transforms\": [{\"op\": \"mixup\"}]\n",
                    "num_classes: is required with batch_transforms");
    /* uint8 batches: a device normalize, or none at all. */
    char *dev = edit("\"std\": [0.229, 0.224, 0.225]}",
                     "\"std\": [0.229, 0.224, 0.225], \"on\": \"device\"}");
    char *tail = strstr(dev, at);
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "%.*s\"offload\": \"auto\", \"num_classes\": 3, "
             "\"batch_transforms\": [{\"op\": \"mixup\"}]}",
             (int)(tail - dev), dev);
    expect_text_err(buf, strlen(buf), -EINVAL,
                    "batch_transforms: needs float32 images, but normalize has \"on\": \"device\"");
    free(dev);
    static const char nonorm[] =
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"}, \"stages\": "
        "[{\"op\": \"decode_jpeg\"}], \"num_classes\": 3, \"batch_transforms\": "
        "[{\"op\": \"cutmix\"}]}";
    expect_text_err(nonorm, strlen(nonorm), -EINVAL,
                    "batch_transforms: needs float32 images: add a \"normalize\" stage");
    snprintf(buf, sizeof(buf),
             "%.*s, \"num_classes\": 3, \"batch_transforms\": "
             "[{\"op\": \"mixup\"}]}",
             (int)(strlen(MM) - 1), MM);
    expect_text_err(buf, strlen(buf), -EINVAL, "batch_transforms: needs an image source");
}
END_TEST

/* The multimodal ops: defaults, every key, round trip, and the errors. */
START_TEST(test_multimodal_ops)
{
    sl_spec_t s;
    char err[ERRLEN] = "";
    ck_assert_msg(sl_spec_parse("t.json", MM, strlen(MM), &s, err, sizeof(err)) == 0, "%s", err);
    ck_assert(sl_spec_is_record(&s));
    ck_assert_uint_eq(s.shuffle_block, 64); /* webdataset's default */
    ck_assert_uint_eq(s.stages[1].tile, 336);
    ck_assert_uint_eq(s.stages[1].min_tiles, 1);
    ck_assert(s.stages[1].thumbnail);
    ck_assert_str_eq(s.stages[2].vocab, "tok/o200k_base.tiktoken");
    ck_assert_int_eq(s.stages[2].encoding, SL_TOKENIZER_O200K);
    ck_assert(s.stages[2].allow_special);
    ck_assert_int_eq(s.stages[3].bos, -1);
    ck_assert_uint_eq(s.stages[3].tokens_per_tile, 144);
    assert_round_trip(&s);
    sl_spec_clear(&s);

    expect_mm_err("\"max_tiles\": 9", "\"max_tiles\": 9, \"min_tiles\": 10",
                  "t.json:3: stages[1].min_tiles: must be <= max_tiles (9), got 10");
    expect_mm_err("\"tile\": 336", "\"tile\": 0", "stages[1].tile");
    expect_mm_err("\"vocab\": \"tok/o200k_base.tiktoken\", ", "",
                  "t.json:4: stages[2].vocab: missing (required)");
    expect_mm_err("tok/o200k", "../o200k", "stages[2].vocab: must not contain a \"..\"");
    expect_mm_err("\"encoding\": \"o200k_base\"", "\"encoding\": \"p50k\"",
                  "stages[2].encoding: must be one of cl100k_base, o200k_base, gpt2");
    expect_mm_err("\"special\": \"allow\"", "\"special\": \"all\"", "stages[2].special");
    expect_mm_err("\"image_token\": 200000, ", "", "stages[3].image_token: missing");
    expect_mm_err("\"image_token\": 200000", "\"image_token\": 4294967296",
                  "stages[3].image_token");
    /* Order: template without tokenize; geometry after image_tiles; a decode twice. */
    expect_mm_err("  {\"op\": \"tokenize\", \"vocab\": \"tok/o200k_base.tiktoken\", \"encoding\": "
                  "\"o200k_base\", \"max_tokens\": 4096, \"special\": \"allow\"},\n",
                  "", "stages[2].op: template needs the text's token ids: put tokenize before it");
    expect_mm_err("{\"op\": \"tokenize\"", "{\"op\": \"flip\"}, {\"op\": \"x\"",
                  "stages[2].op: flip must come before image_tiles");
    expect_mm_err("\"source\": {\"type\": \"webdataset\"", "\"source\": {\"type\": \"tar\"",
                  "stages[1].op: image_tiles needs a multimodal source (webdataset or jsonl)");
    expect_mm_err("{\"op\": \"decode_image\"},", "{\"op\": \"flip\"},",
                  "stages[0].op: flip needs decoded images: put decode_image before it");
    expect_mm_err("{\"op\": \"normalize\", \"on\": \"device\"}",
                  "{\"op\": \"decode_image\"}", "stages[4].op: decode_image appears twice");
    expect_mm_err("\"path\": \"shards", "\"shuffle_block\": 2000000, \"path\": \"shards",
                  "source.shuffle_block");
    /* batching */
    expect_mm_err("\"stages\"", "\"batching\": {\"mode\": \"even\"}, \"stages\"",
                  "batching.mode: must be one of count, balanced");
    expect_mm_err("\"stages\"", "\"batching\": {\"mode\": \"balanced\", \"model\": "
                  "{\"a\": -1}}, \"stages\"", "batching.model.a: must be a number >= 0");
    expect_mm_err("\"stages\"", "\"batching\": {\"mode\": \"balanced\", "
                  "\"microbatches\": 0}, \"stages\"", "batching.microbatches");
    expect_mm_err("\"stages\"", "\"batching\": {\"mode\": \"balanced\", \"x\": 1}, \"stages\"",
                  "batching.x: unknown key");
    {
        const char *bal = "{\"source\": {\"type\": \"jsonl\", \"path\": \"m.jsonl\"}, "
                          "\"batching\": {\"mode\": \"balanced\", \"microbatches\": 3, "
                          "\"token_budget\": 9000, \"model\": {\"b\": 0.5}}}";
        ck_assert_msg(sl_spec_parse("t.json", bal, strlen(bal), &s, err, sizeof(err)) == 0, "%s",
                      err);
        ck_assert_int_eq(s.batching.mode, SL_BATCHING_BALANCED);
        ck_assert_uint_eq(s.batching.microbatches, 3);
        ck_assert(s.batching.b == 0.5 && s.batching.a == 1.0); /* the rest default */
        ck_assert(s.deterministic); /* implied */
        char *j = sl_spec_to_json(&s);
        sl_spec_t back;
        ck_assert_int_eq(sl_spec_parse("<rpc>", j, strlen(j), &back, err, sizeof(err)), 0);
        ck_assert_int_eq(back.batching.mode, s.batching.mode);
        ck_assert_uint_eq(back.batching.microbatches, 3);
        ck_assert_uint_eq(back.batching.token_budget, 9000);
        ck_assert_uint_eq(back.batching.lookahead, s.batching.lookahead);
        ck_assert(back.batching.a == s.batching.a && back.batching.b == 0.5 &&
                  back.batching.c == s.batching.c && back.batching.d == s.batching.d);
        free(j);
        const char *img = "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"}, "
                          "\"batching\": {\"mode\": \"balanced\"}}";
        expect_text_err(img, strlen(img), -EINVAL, "batching.mode: \"balanced\" needs a "
                                                   "multimodal source");
    }
}
END_TEST

START_TEST(test_to_json_round_trip)
{
    char err[ERRLEN] = "";
    sl_spec_t s;
    ck_assert_int_eq(sl_spec_parse("t.json", GOOD, strlen(GOOD), &s, err, sizeof(err)), 0);
    assert_round_trip(&s);

    char *j = sl_spec_to_json(&s);
    ck_assert_ptr_nonnull(j);
    /* canonical: compact, sorted keys, the seed an integer */
    ck_assert_msg(strncmp(j, "{\"batch_size\":256,\"deterministic\":false,", 40) == 0, "%s", j);
    ck_assert_msg(strstr(j, "\"seed\":42") != NULL, "%s", j);
    ck_assert_msg(strstr(j, "\"offload\":\"auto\"") != NULL, "%s", j);
    free(j);

    /* values chosen to need all 17 digits, every op, fixed offload */
    const char *text =
        "{\"source\": {\"type\": \"filelist\", \"path\": \"l\\u00e9st.txt\", \"shuffle\": false, "
        "\"seed\": 9223372036854775807}, \"stages\": [{\"op\": \"decode_jpeg\"},"
        "{\"op\": \"random_resized_crop\", \"size\": [17, 16384], \"scale\": [0.1, 0.3], "
        "\"ratio\": [0.123456789012345678, 7]}, {\"op\": \"resize\", \"size\": [5, 6]},"
        "{\"op\": \"resize\", \"size\": 9}, {\"op\": \"center_crop\", \"size\": 3},"
        "{\"op\": \"flip\", \"p\": 0.30000000000000004},"
        "{\"op\": \"to_chw\"}, {\"op\": \"normalize\", \"mean\": [0.1, -2, 1e-7], "
        "\"std\": [0.3, 1e30, 1]}], \"batch_size\": 65536, \"epochs\": 1000000, "
        "\"drop_last\": true, \"deterministic\": true, "
        "\"offload\": {\"split\": 3, \"local_share\": 0.3333333333333333}, "
        "\"on_error\": \"fail\", \"max_pixels\": 1}";
    ck_assert_msg(sl_spec_parse("t.json", text, strlen(text), &s, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_uint_eq(s.seed, 9223372036854775807ull);
    ck_assert(s.stages[5].p == 0.30000000000000004);
    assert_round_trip(&s);

    /* a spec changed in code (CLI overrides) round-trips too */
    s.local_share = 1.0 / 7.0;
    s.split = 0;
    s.stages[1].scale[0] = 0.3 / 7;
    assert_round_trip(&s);
    s.offload = SL_OFFLOAD_FASTFLOW;
    s.split = 0;
    s.local_share = 0;
    assert_round_trip(&s);

    /* a seed JSON cannot carry as an integer: refused rather than mangled */
    s.seed = UINT64_MAX;
    ck_assert_ptr_null(sl_spec_to_json(&s));
}
END_TEST

/* The op table: every op has a distinct name, a stage of only that op
 * and the flags say which ops are augmentations, which draw randomness
 * and which fuse into a decode. */
START_TEST(test_op_table)
{
    for (int a = 0; a < SL_OP__COUNT; a++) {
        ck_assert_str_ne(sl_op_name((sl_op_e)a), "unknown");
        for (int b = a + 1; b < SL_OP__COUNT; b++) {
            ck_assert_str_ne(sl_op_name((sl_op_e)a), sl_op_name((sl_op_e)b));
        }
    }
    ck_assert_str_eq(sl_op_name(SL_OP__COUNT), "unknown");
    ck_assert_uint_eq(sl_op_flags(SL_OP__COUNT), 0);
    for (int op = 0; op < SL_OP__COUNT; op++) {
        bool aug = (op >= SL_OP_COLOR_JITTER && op <= SL_OP_RAND_AUGMENT) ||
                   op == SL_OP_RANDOM_CROP || op == SL_OP_RANDOM_APPLY || op == SL_OP_RANDOM_CHOICE;
        ck_assert(sl_op_is_augment((sl_op_e)op) == aug);
        bool rnd = aug || op == SL_OP_RANDOM_RESIZED_CROP || op == SL_OP_FLIP ||
                   op == SL_OP_PLUGIN || op == SL_OP_VERTICAL_FLIP || op == SL_OP_DECODE_VIDEO;
        ck_assert_msg(sl_op_draws_random((sl_op_e)op) == rnd, "%s", sl_op_name((sl_op_e)op));
    }
    ck_assert(sl_op_flags(SL_OP_DECODE_IMAGE) & SL_OPF_DECODE);
    ck_assert(sl_op_flags(SL_OP_CENTER_CROP) & SL_OPF_FUSES_DECODE);
    ck_assert(!(sl_op_flags(SL_OP_RESIZE) & SL_OPF_FUSES_DECODE));
}
END_TEST

/* sl_spec_copy: a deep copy (the stage strings and the resume section
 * its own), equal to the source field by field and in canonical JSON, and
 * still whole after the source is cleared (ASan checks the ownership). */
START_TEST(test_spec_copy)
{
    static const char *text =
        "{\"source\": {\"type\": \"webdataset\", \"path\": \"x\"}, \"stages\": ["
        "{\"op\": \"tokenize\", \"vocab\": \"v/cl100k.tiktoken\"}, {\"op\": \"decode_image\"},"
        " {\"op\": \"plugin\", \"name\": \"sharpen\", \"sha256\": "
        "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
        " \"params\": {\"amount\": 2}}, {\"op\": \"center_crop\", \"size\": 8}],"
        " \"resume\": {\"epochs\": [{\"epoch\": 0, \"gens\": [{\"world\": 1, \"runs\":"
        " [[0, 0, 5]]}]}]}}";
    sl_spec_t *a = malloc(sizeof(*a));
    sl_spec_t *b = malloc(sizeof(*b));
    ck_assert(a != NULL && b != NULL);
    char err[ERRLEN] = "";
    ck_assert_msg(sl_spec_parse("t.json", text, strlen(text), a, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(sl_spec_copy(b, a), 0);
    ck_assert_ptr_ne(b->stages[0].vocab, a->stages[0].vocab);
    ck_assert_ptr_ne(b->stages[2].plugin_params, a->stages[2].plugin_params);
    ck_assert_ptr_nonnull(b->resume);
    ck_assert_ptr_ne(b->resume, a->resume);
    char *ja = sl_spec_to_json(a);
    sl_spec_clear(a);
    ck_assert_ptr_null(a->stages[0].vocab);
    ck_assert_ptr_null(a->resume);
    free(a);
    char *jb = sl_spec_to_json(b);
    ck_assert_ptr_nonnull(ja);
    ck_assert_ptr_nonnull(jb);
    ck_assert_str_eq(ja, jb);
    ck_assert_str_eq(b->stages[0].vocab, "v/cl100k.tiktoken");
    ck_assert_str_eq(b->stages[2].plugin_params, "{\"amount\":2}");
    sl_spec_clear(b);
    free(b);
    free(ja);
    free(jb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_good_design_example);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_op_table);
    tcase_add_test(tc, test_spec_copy);
    tcase_add_test(tc, test_empty_stages_and_offload_strings);
    tcase_add_test(tc, test_conf_examples);
    tcase_add_test(tc, test_syntax_error);
    tcase_add_test(tc, test_unknown_keys);
    tcase_add_test(tc, test_all_errors);
    tcase_add_test(tc, test_unknown_op);
    tcase_add_test(tc, test_missing_source);
    tcase_add_test(tc, test_sizes);
    tcase_add_test(tc, test_wrong_types);
    tcase_add_test(tc, test_ranges);
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_offload_object);
    tcase_add_test(tc, test_rank_keys);
    tcase_add_test(tc, test_paths);
    tcase_add_test(tc, test_hostile_input);
    tcase_add_test(tc, test_sizes_and_files);
    tcase_add_test(tc, test_line_scanner);
    tcase_add_test(tc, test_offload_parse);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_name_key);
    tcase_add_test(tc, test_normalize_on_device);
    tcase_add_test(tc, test_to_json_round_trip);
    tcase_add_test(tc, test_multimodal_ops);
    tcase_add_test(tc, test_batch_transforms);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
