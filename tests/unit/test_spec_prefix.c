/* The cacheable prefix of a spec (common/spec/spec_prefix.h): how many units
 * draw nothing, and the hash that keys their output (docs/cache.md). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec/spec.h"
#include "common/spec/spec_layout.h"
#include "common/spec/spec_prefix.h"

#define ERRLEN 1024

static void parse(const char *json, sl_spec_t *s)
{
    char err[ERRLEN] = "";
    int rc = sl_spec_parse("t.json", json, strlen(json), s, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
}

static uint32_t prefix_of(const char *json, unsigned flags, uint32_t *ret_nunits)
{
    sl_spec_t s;
    parse(json, &s);
    sl_layout_t l;
    ck_assert_int_eq(sl_spec_layout(&s, flags, &l), 0);
    uint32_t n = sl_spec_cache_prefix(&s, &l);
    *ret_nunits = l.nunits;
    sl_spec_clear(&s);
    return n;
}

static void hash_of(const char *json, uint8_t out[SL_PREFIX_HASH_LEN])
{
    sl_spec_t s;
    parse(json, &s);
    sl_layout_t l;
    ck_assert_int_eq(sl_spec_layout(&s, 0, &l), 0);
    ck_assert_int_eq(sl_spec_prefix_hash(&s, &l, sl_spec_cache_prefix(&s, &l), out), 0);
    ck_assert_int_eq(sl_spec_prefix_hash(&s, &l, l.nunits + 1, out), -EINVAL);
    sl_spec_clear(&s);
}

#define SRC "\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"

/* The multimodal example (examples/multimodal): nothing draws, the whole
 * pipeline is the prefix (normalize "on": "device" is no unit). */
static const char MM[] =
    "{\"source\": {\"type\": \"webdataset\", \"path\": \"mm-shards\", \"seed\": 1},"
    " \"stages\": [{\"op\": \"decode_image\"},"
    "  {\"op\": \"image_tiles\", \"tile\": 224, \"min_tiles\": 1, \"max_tiles\": 6,"
    "   \"thumbnail\": true},"
    "  {\"op\": \"tokenize\", \"vocab\": \"tok/cl100k_base.tiktoken\","
    "   \"encoding\": \"cl100k_base\", \"max_tokens\": 2048},"
    "  {\"op\": \"template\", \"image_token\": 100258, \"tokens_per_tile\": 64, \"eos\": 100257},"
    "  {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5], \"std\": [0.2, 0.2, 0.2],"
    "   \"on\": \"device\"}],"
    " \"batch_size\": 16, \"epochs\": 3}";

START_TEST(test_multimodal_whole)
{
    uint32_t nunits;
    ck_assert_uint_eq(prefix_of(MM, 0, &nunits), 4);
    ck_assert_uint_eq(nunits, 4);
}
END_TEST

/* A vision spec whose only random stage is the crop: the decode (and the
 * resize before the crop) are the prefix. */
START_TEST(test_vision_decode)
{
    uint32_t nunits;
    const char *v =
        "{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"},"
        " {\"op\": \"random_resized_crop\", \"size\": 224, \"interpolation\": \"bicubic\"},"
        " {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5], \"std\": [0.2, 0.2, 0.2]},"
        " {\"op\": \"to_chw\"}]}";
    ck_assert_uint_eq(prefix_of(v, 0, &nunits), 1); /* bicubic: not fused */
    ck_assert_uint_eq(nunits, 4);
    const char *r =
        "{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"},"
        " {\"op\": \"resize\", \"size\": 256}, {\"op\": \"random_crop\", \"size\": 224},"
        " {\"op\": \"flip\"}]}";
    ck_assert_uint_eq(prefix_of(r, 0, &nunits), 2);
    /* The fused decode + random_resized_crop draws (its crop): nothing to
     * cache in the pipeline every worker runs; unfused the decode would be. */
    const char *f = "{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"},"
                    " {\"op\": \"random_resized_crop\", \"size\": 224}, {\"op\": \"flip\"}]}";
    ck_assert_uint_eq(prefix_of(f, 0, &nunits), 0);
    ck_assert_uint_eq(prefix_of(f, SL_LAYOUT_NO_FUSE, &nunits), 1);
    /* center_crop draws nothing: the fused unit is cacheable. */
    const char *c = "{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"},"
                    " {\"op\": \"center_crop\", \"size\": 224}, {\"op\": \"flip\"}]}";
    ck_assert_uint_eq(prefix_of(c, 0, &nunits), 1);
}
END_TEST

START_TEST(test_random_first)
{
    uint32_t nunits;
    const char *v = "{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"flip\"},"
                    " {\"op\": \"resize\", \"size\": 64}]}";
    ck_assert_uint_eq(prefix_of(v, 0, &nunits), 1);
    const char *p = "{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"},"
                    " {\"op\": \"plugin\", \"name\": \"x\", \"sha256\": \""
                    "0000000000000000000000000000000000000000000000000000000000000000\"},"
                    " {\"op\": \"resize\", \"size\": 64}]}";
    ck_assert_uint_eq(prefix_of(p, 0, &nunits), 1); /* a plugin counts as drawing */
    const char *vid = "{\"source\": {\"type\": \"webdataset\", \"path\": \"v\"},"
                      " \"stages\": [{\"op\": \"decode_video\", \"frames\": 4}]}";
    ck_assert_uint_eq(prefix_of(vid, 0, &nunits), 0);
}
END_TEST

/* What the key covers: the prefix's stages and the source, not epochs,
 * batching, seed, shuffle or the stages after the prefix. */
START_TEST(test_hash_scope)
{
    uint8_t a[SL_PREFIX_HASH_LEN], b[SL_PREFIX_HASH_LEN];
    const char *base =
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 64},"
        " {\"op\": \"flip\"}], \"epochs\": 1}";
    hash_of(base, a);
    const char *same[] = {
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 9,"
        " \"shuffle\": false}, \"stages\": [{\"op\": \"decode_jpeg\"},"
        " {\"op\": \"resize\", \"size\": 64}, {\"op\": \"flip\", \"p\": 0.25}],"
        " \"epochs\": 7, \"batch_size\": 3, \"name\": \"x\"}",
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 64},"
        " {\"op\": \"flip\"}, {\"op\": \"to_chw\"}], \"cache\": \"off\"}",
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        hash_of(same[i], b);
        ck_assert_msg(memcmp(a, b, sizeof(a)) == 0, "same[%zu]", i);
    }
    const char *other[] = {
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"val\"},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 64},"
        " {\"op\": \"flip\"}]}",
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 65},"
        " {\"op\": \"flip\"}]}",
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"}, \"max_pixels\": 1000,"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": 64},"
        " {\"op\": \"flip\"}]}",
        "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\"},"
        " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"flip\"}]}",
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        hash_of(other[i], b);
        ck_assert_msg(memcmp(a, b, sizeof(a)) != 0, "other[%zu]", i);
    }
}
END_TEST

/* "cache": "auto" (default, not in the canonical form) or "off"; anything
 * else names the field. */
START_TEST(test_cache_key)
{
    sl_spec_t s;
    parse("{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"}], \"cache\": \"off\"}", &s);
    ck_assert_int_eq(s.cache, SL_CACHE_OFF);
    char *j = sl_spec_to_json(&s);
    ck_assert_ptr_nonnull(strstr(j, "\"cache\":\"off\""));
    free(j);
    sl_spec_clear(&s);
    parse("{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"}]}", &s);
    ck_assert_int_eq(s.cache, SL_CACHE_AUTO);
    j = sl_spec_to_json(&s);
    ck_assert_ptr_null(strstr(j, "cache"));
    free(j);
    sl_spec_clear(&s);
    const char *bad[] = {"\"on\"", "true", "1"};
    for (size_t i = 0; i < 3; i++) {
        char doc[512], err[ERRLEN] = "";
        snprintf(doc, sizeof(doc),
                 "{" SRC " \"stages\": [{\"op\": \"decode_jpeg\"}],\n \"cache\": %s}", bad[i]);
        ck_assert_int_eq(sl_spec_parse("t.json", doc, strlen(doc), &s, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "t.json:2: cache:") != NULL, "%s", err);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spec_prefix");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_multimodal_whole);
    tcase_add_test(tc, test_vision_decode);
    tcase_add_test(tc, test_random_first);
    tcase_add_test(tc, test_hash_scope);
    tcase_add_test(tc, test_cache_key);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
