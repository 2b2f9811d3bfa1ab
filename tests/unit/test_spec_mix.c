/* The "mix" section of a spec (common/spec/spec_mix.c, docs/mixing.md):
 * every refused input names its field; the canonical JSON round-trips;
 * samples_per_epoch follows "stop". */
#include <check.h>
#include <jansson.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec/mix.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures.h"

#define SRC_A                                                                                      \
    "{\"name\": \"caps\", \"weight\": 0.7, \"source\": {\"type\": \"webdataset\", "                \
    "\"path\": \"wds\"}}"
#define SRC_B                                                                                      \
    "{\"name\": \"docs\", \"weight\": 0.3, \"source\": {\"type\": \"jsonl\", "                     \
    "\"path\": \"m.jsonl\"}}"

static int parse_mix(const char *mix, const char *extra, sl_spec_t *s, char *err, size_t errlen)
{
    char buf[8192];
    snprintf(buf, sizeof(buf), "{\"mix\": %s, \"stages\": []%s}", mix, extra);
    return sl_spec_parse("t.json", buf, strlen(buf), s, err, errlen);
}

START_TEST(test_mix_refused)
{
    static const struct {
        const char *mix, *extra, *says;
    } BAD[] = {
        {"{\"sources\": [" SRC_A "]}", ", \"source\": {\"type\": \"jsonl\", \"path\": \"x\"}",
         "mix: and \"source\" both given"},
        {"[]", "", "mix: must be an object"},
        {"{\"sources\": []}", "", "mix.sources: must be an array of 1..16"},
        {"{\"sources\": [{\"name\": \"a\", \"weight\": 0, \"source\": {\"type\": \"tar\", "
         "\"path\": \"t\"}}]}",
         "", "mix.sources[0].weight: must be a finite number > 0, got 0"},
        {"{\"sources\": [{\"name\": \"a\", \"weight\": -1, \"source\": {\"type\": \"tar\", "
         "\"path\": \"t\"}}]}",
         "", "mix.sources[0].weight: must be a finite number > 0"},
        {"{\"sources\": [{\"name\": \"a\", \"weight\": \"NaN\", \"source\": {\"type\": \"tar\", "
         "\"path\": \"t\"}}]}",
         "", "mix.sources[0].weight: must be a finite number > 0, got \"NaN\""},
        {"{\"sources\": [{\"name\": \"\", \"weight\": 1, \"source\": {\"type\": \"tar\", "
         "\"path\": \"t\"}}]}",
         "", "mix.sources[0].name: must be a string of 1..63 bytes"},
        {"{\"sources\": [" SRC_A ", " SRC_A "]}", "",
         "mix.sources[1].name: duplicate: sources[0] is also called \"caps\""},
        {"{\"sources\": [{\"name\": \"a\", \"weight\": 1, \"source\": {\"type\": \"tar\", "
         "\"path\": \"../t\"}}]}",
         "", "mix.sources[0].source.path: must not contain a \"..\""},
        {"{\"sources\": [{\"name\": \"a\", \"weight\": 1, \"source\": {\"type\": \"nope\", "
         "\"path\": \"t\"}}]}",
         "", "mix.sources[0].source.type"},
        {"{\"sources\": [{\"name\": \"a\", \"weight\": 1, \"stages\": [{\"op\": \"flip\"}], "
         "\"source\": {\"type\": \"tar\", \"path\": \"t\"}}]}",
         "", "mix.sources[0].stages[0]: this \"flip\" stage is not one of the job's \"stages\""},
        {"{\"sources\": [{\"name\": \"a\", \"weight\": 1, \"stages\": {}, "
         "\"source\": {\"type\": \"tar\", \"path\": \"t\"}}]}",
         "", "mix.sources[0].stages: must be an array of the job's stages"},
        {"{\"sources\": [" SRC_A ", {\"name\": \"imgs\", \"weight\": 1, \"source\": "
         "{\"type\": \"imagefolder\", \"path\": \"f\"}}]}",
         "",
         "mix.sources: sources[1] (imagefolder) and sources[0] (webdataset) make "
         "different sample kinds"},
        {"{\"sources\": [" SRC_A ", " SRC_B "], \"schedule\": [{\"from_step\": 10, "
         "\"weights\": {\"caps\": 1}}, {\"from_step\": 5, \"weights\": {\"docs\": 1}}]}",
         "", "mix.schedule[1].from_step: must be larger than the previous entry's (10)"},
        {"{\"sources\": [" SRC_A ", " SRC_B "], \"schedule\": [{\"from_step\": 10, "
         "\"weights\": {\"caps\": 0, \"docs\": 0}}]}",
         "", "mix.schedule[0].weights: must give some source a weight > 0 (all are 0)"},
        {"{\"sources\": [" SRC_A ", " SRC_B "], \"schedule\": [{\"from_step\": 10, "
         "\"weights\": {\"other\": 1}}]}",
         "", "mix.schedule[0].weights.other: names no source"},
        {"{\"sources\": [" SRC_A ", " SRC_B "], \"schedule\": [{\"from_step\": 10, "
         "\"weights\": {\"caps\": -0.5}}]}",
         "", "mix.schedule[0].weights.caps: must be a finite number >= 0"},
        {"{\"sources\": [" SRC_A "], \"stop\": \"never\"}", "", "mix.stop"},
        {"{\"sources\": [" SRC_A "], \"samples_per_epoch\": 0}", "", "mix.samples_per_epoch"},
        {"{\"sources\": [" SRC_A "], \"weights\": 1}", "", "mix.weights"},
    };
    for (size_t i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
        sl_spec_t s;
        char err[1024] = "";
        ck_assert_msg(parse_mix(BAD[i].mix, BAD[i].extra, &s, err, sizeof(err)) == -EINVAL,
                      "accepted: %s", BAD[i].mix);
        ck_assert_msg(strstr(err, BAD[i].says) != NULL, "%zu: want '%s', got: %s", i, BAD[i].says,
                      err);
    }
}
END_TEST

START_TEST(test_mix_round_trip)
{
    sl_spec_t s, s2;
    char err[1024] = "";
    const char *mix = "{\"sources\": [" SRC_A ", " SRC_B "], \"seed\": 7, \"stop\": "
                      "\"first_exhausted\", \"schedule\": [{\"from_step\": 100, "
                      "\"weights\": {\"caps\": 0.2, \"docs\": 0.8}}]}";
    ck_assert_msg(parse_mix(mix, "", &s, err, sizeof(err)) == 0, "%s", err);
    ck_assert_ptr_nonnull(s.mix);
    ck_assert_uint_eq(s.mix->nsources, 2);
    ck_assert_uint_eq(s.seed, 7);
    ck_assert_int_eq(s.source_type, SL_SRC_WEBDATASET);
    ck_assert_str_eq(s.source_path, "mix:caps+docs"); /* what messages call it */
    ck_assert_int_eq(s.mix->stop, SL_MIX_STOP_FIRST);
    ck_assert_uint_eq(s.mix->nsteps, 1);
    double w[SL_MIX_MAX_SOURCES];
    sl_mix_weights_at(s.mix, 99, w);
    ck_assert(w[0] == 0.7 && w[1] == 0.3);
    sl_mix_weights_at(s.mix, 100, w);
    ck_assert(w[0] == 0.2 && w[1] == 0.8);
    /* Resolved (what the opening host does), then through JSON and back. */
    uint64_t counts[2] = {70, 90};
    ck_assert_int_eq(sl_mix_resolve(s.mix, counts, err, sizeof(err)), 0);
    ck_assert_uint_eq(s.mix->samples_per_epoch, 100); /* min(70/0.7, 90/0.3) */
    char *j = sl_spec_to_json(&s);
    ck_assert_ptr_nonnull(j);
    json_t *root = json_loads(j, 0, NULL);
    ck_assert_ptr_nonnull(json_object_get(root, "mix"));
    ck_assert_ptr_null(json_object_get(root, "source")); /* "mix" in its place */
    json_decref(root);
    ck_assert_msg(sl_spec_parse("j", j, strlen(j), &s2, err, sizeof(err)) == 0, "%s: %s", j, err);
    char *j2 = sl_spec_to_json(&s2);
    ck_assert_str_eq(j, j2);
    ck_assert_uint_eq(s2.mix->src[1].count, 90);
    ck_assert_uint_eq(s2.mix->samples_per_epoch, 100);
    ck_assert(sl_mix_resolved(s2.mix));
    /* A travelled spec checks the counts it holds. */
    uint64_t other[2] = {70, 91};
    ck_assert_int_eq(sl_mix_resolve(s2.mix, other, err, sizeof(err)), -ESTALE);
    ck_assert_msg(strstr(err, "mix.sources[1] (\"docs\")") != NULL, "%s", err);
    uint64_t empty[2] = {70, 0};
    ck_assert_int_eq(sl_mix_resolve(s2.mix, empty, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "has no samples") != NULL, "%s", err);
    /* What the dispatcher checks of a spec that travelled. */
    ck_assert_int_eq(sl_spec_mix_check(&s2, 160, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_spec_mix_check(&s2, 161, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "counts sum to 160, num_samples is 161") != NULL, "%s", err);
    /* A copy owns its own mix. */
    sl_spec_t s3;
    ck_assert_int_eq(sl_spec_copy(&s3, &s2), 0);
    ck_assert_ptr_ne(s3.mix, s2.mix);
    char *j3 = sl_spec_to_json(&s3);
    ck_assert_str_eq(j, j3);
    free(j);
    free(j2);
    free(j3);
    sl_spec_clear(&s);
    sl_spec_clear(&s2);
    sl_spec_clear(&s3);
}
END_TEST

/* Per-source stages (docs/mixing.md): a record source may leave out image
 * stages, an image source none; the canonical JSON keeps them. */
START_TEST(test_mix_own_stages)
{
    static const char *const REC =
        "{\"mix\": {\"sources\": [" SRC_A ", {\"name\": \"text\", \"weight\": 1, "
        "\"stages\": [{\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\"}], \"source\": "
        "{\"type\": \"jsonl\", \"path\": \"t.jsonl\"}}]}, \"stages\": [{\"op\": "
        "\"decode_image\"}, {\"op\": \"tokenize\", \"vocab\": \"v.tiktoken\"}]}";
    sl_spec_t s, s2;
    char err[1024] = "";
    ck_assert_msg(sl_spec_parse("t.json", REC, strlen(REC), &s, err, sizeof(err)) == 0, "%s", err);
    ck_assert(!s.mix->src[0].own_stages);
    ck_assert(s.mix->src[1].own_stages);
    ck_assert_uint_eq(s.mix->src[1].keep, 2u); /* stage 1 only */
    char *j = sl_spec_to_json(&s);
    ck_assert_msg(sl_spec_parse("j", j, strlen(j), &s2, err, sizeof(err)) == 0, "%s: %s", j, err);
    ck_assert_uint_eq(s2.mix->src[1].keep, 2u);
    char *j2 = sl_spec_to_json(&s2);
    ck_assert_str_eq(j, j2);
    free(j);
    free(j2);
    sl_spec_clear(&s);
    sl_spec_clear(&s2);
    static const struct {
        const char *json, *says;
    } BAD[] = {
        /* an image source leaving out an augmentation: another tensor kind */
        {"{\"mix\": {\"sources\": [{\"name\": \"a\", \"weight\": 1, \"stages\": "
         "[{\"op\": \"decode_jpeg\"}], \"source\": {\"type\": \"tar\", \"path\": \"t\"}}]}, "
         "\"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"flip\"}]}",
         "mix.sources[0].stages: leaves out the job's stage 1 (\"flip\"): the sources must make "
         "one sample kind, so an image source may leave out none"},
        /* a record source leaving out tokenize */
        {"{\"mix\": {\"sources\": [{\"name\": \"a\", \"weight\": 1, \"stages\": "
         "[{\"op\": \"decode_image\"}], \"source\": {\"type\": \"jsonl\", \"path\": "
         "\"t\"}}]}, \"stages\": [{\"op\": \"decode_image\"}, {\"op\": \"tokenize\", "
         "\"vocab\": \"v.tiktoken\"}]}",
         "mix.sources[0].stages: leaves out the job's stage 1 (\"tokenize\")"},
        /* pixels without their decode */
        {"{\"mix\": {\"sources\": [{\"name\": \"a\", \"weight\": 1, \"stages\": "
         "[{\"op\": \"image_tiles\", \"tile\": 32}], \"source\": {\"type\": \"jsonl\", "
         "\"path\": \"t\"}}]}, \"stages\": [{\"op\": \"decode_image\"}, {\"op\": "
         "\"image_tiles\", \"tile\": 32}]}",
         "mix.sources[0].stages: keeps the job's stage 1 (\"image_tiles\") but leaves out the "
         "decode before it"},
        /* the same op, other parameters: not the job's stage */
        {"{\"mix\": {\"sources\": [{\"name\": \"a\", \"weight\": 1, \"stages\": "
         "[{\"op\": \"tokenize\", \"vocab\": \"w.tiktoken\"}], \"source\": {\"type\": "
         "\"jsonl\", \"path\": \"t\"}}]}, \"stages\": [{\"op\": \"tokenize\", \"vocab\": "
         "\"v.tiktoken\"}]}",
         "mix.sources[0].stages[0]: this \"tokenize\" stage is not one of the job's"},
    };
    for (size_t i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(sl_spec_parse("t.json", BAD[i].json, strlen(BAD[i].json), &s, err,
                                       sizeof(err)),
                         -EINVAL);
        ck_assert_msg(strstr(err, BAD[i].says) != NULL, "%s: %s", BAD[i].json, err);
    }
}
END_TEST

START_TEST(test_mix_epoch_defaults)
{
    sl_spec_t s;
    char err[1024] = "";
    ck_assert_msg(parse_mix("{\"sources\": [" SRC_A ", " SRC_B "]}", "", &s, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_int_eq(s.mix->stop, SL_MIX_STOP_ALL);
    ck_assert_int_eq(sl_spec_mix_check(&s, 160, err, sizeof(err)), -EINVAL); /* unresolved */
    ck_assert_msg(strstr(err, "mix: the sources' \"count\"s") != NULL, "%s", err);
    uint64_t counts[2] = {70, 90};
    /* all_exhausted: the source that needs the longest epoch to be seen
     * whole: docs, 90 / 0.3. */
    ck_assert_uint_eq(sl_mix_default_spe(s.mix, counts), 300);
    s.mix->stop = SL_MIX_STOP_FIRST;
    ck_assert_uint_eq(sl_mix_default_spe(s.mix, counts), 100);
    sl_spec_clear(&s);
    /* An explicit samples_per_epoch wins. */
    ck_assert_int_eq(parse_mix("{\"sources\": [" SRC_A ", " SRC_B "], \"samples_per_epoch\": 33}",
                               "", &s, err, sizeof(err)),
                     0);
    ck_assert_int_eq(sl_mix_resolve(s.mix, counts, err, sizeof(err)), 0);
    ck_assert_uint_eq(s.mix->samples_per_epoch, 33);
    sl_spec_clear(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spec_mix");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_mix_refused);
    tcase_add_test(tc, test_mix_round_trip);
    tcase_add_test(tc, test_mix_epoch_defaults);
    tcase_add_test(tc, test_mix_own_stages);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
