/* Tests for the record sources (common/data/source_wds*.c, source_jsonl.c),
 * the shared tar walk they use, and sl_utf8_check: tar shards and manifests
 * are written here, in a fresh temp dir per test; every record read is
 * checked with sl_rec_parse and its fields' bytes. Images are small
 * deterministic fakes (sources do not decode). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/utf8.h"
#include "common/data/skip.h"
#include "common/data/source.h"
#include "common/sample/record.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures_source.h"
#include "tests/unit/fixtures_tar.h"

/* ---- helpers ----------------------------------------------------------- */

/* What a record must hold. images: fake seeds in order (count nimg). */
typedef struct want_s {
    const char *key;
    int32_t label;
    const char *text;
    const char *meta; /* NULL: no META field */
    unsigned nimg;
    unsigned seeds[8];
    const char *roles; /* NULL: no TURNS field; else a letter a turn: s, u, a */
} want_t;

/* The TURNS field: one row a role letter, spans that cover the text's
 * '\n'-joined turns exactly, token ends still 0. */
static void check_turns(const sl_rec_t *r, const want_t *w)
{
    const sl_rfield_t *f = sl_rec_find(r, SL_RF_TURNS);
    if (w->roles == NULL) {
        ck_assert_ptr_null(f);
        return;
    }
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->h, strlen(w->roles));
    uint32_t off = 0;
    for (uint32_t i = 0; i < f->h; i++) {
        const uint32_t *t = (const uint32_t *)f->data + i * SL_RF_TURN_WORDS;
        ck_assert_int_eq("sua"[t[SL_RF_TURN_ROLE]], w -> roles[i]);
        ck_assert_uint_eq(t[SL_RF_TURN_OFF], off);
        ck_assert_uint_eq(t[SL_RF_TURN_TOK_END], 0);
        off += t[SL_RF_TURN_LEN] + 1;
    }
    ck_assert_uint_eq(off - 1, sl_rec_find(r, SL_RF_TEXT)->nbytes);
}

static void check_rec(const sl_tensor_t *t, const want_t *w)
{
    sl_rec_t r;
    char err[256] = "";
    ck_assert_int_eq(t->dtype, SL_DT_RECORD);
    ck_assert_msg(sl_rec_parse(t->data, t->nbytes, &r, err, sizeof(err)) == 0, "parse: %s", err);
    const sl_rfield_t *f = sl_rec_find(&r, SL_RF_KEY);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->nbytes, strlen(w->key));
    ck_assert_mem_eq(f->data, w->key, f->nbytes);
    ck_assert_int_eq(sl_rec_label(&r), w->label);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_LABEL), w->label >= 0 ? 1 : 0);
    f = sl_rec_find(&r, SL_RF_TEXT);
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(f->nbytes == strlen(w->text) && memcmp(f->data, w->text, f->nbytes) == 0,
                  "text '%.*s' want '%s'", (int)f->nbytes, f->data, w->text);
    f = sl_rec_find(&r, SL_RF_META);
    if (w->meta == NULL) {
        ck_assert_ptr_null(f);
    } else {
        ck_assert_ptr_nonnull(f);
        ck_assert_msg(f->nbytes == strlen(w->meta) && memcmp(f->data, w->meta, f->nbytes) == 0,
                      "meta '%.*s' want '%s'", (int)f->nbytes, f->data, w->meta);
    }
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE_ENC), w->nimg);
    unsigned k = 0;
    for (uint32_t i = 0; i < r.n; i++) {
        if (r.f[i].kind != SL_RF_IMAGE_ENC) {
            continue;
        }
        unsigned char buf[400];
        fake_fill(w->seeds[k], buf);
        ck_assert_uint_eq(r.f[i].nbytes, fake_len(w->seeds[k]));
        ck_assert_mem_eq(r.f[i].data, buf, r.f[i].nbytes);
        k++;
    }
    check_turns(&r, w);
    ck_assert_uint_eq(r.n, 2 + (w->label >= 0) + (w->meta != NULL) + w->nimg + (w->roles != NULL));
}

static void read_check(const sl_source_t *src, uint64_t i, const want_t *w)
{
    sl_tensor_t t;
    char err[512] = "";
    sl_tensor_init(&t);
    int rc = sl_source_read(src, i, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "read %s: %d %s", sl_source_name(src, i), rc, err);
    check_rec(&t, w);
    sl_tensor_free(&t);
}

/* Reads sample i expecting rc, with err containing what (if not NULL). */
static void read_fails(const sl_source_t *src, uint64_t i, int want, const char *what)
{
    char err[512] = "";
    int rc = read_rc(src, i, err, sizeof(err));
    ck_assert_msg(rc == want, "read %s: %d (want %d) %s", sl_source_name(src, i), rc, want,
                  err);
    if (what != NULL) {
        ck_assert_msg(strstr(err, what) != NULL, "'%s' not in '%s'", what, err);
    }
}

static void t_text(const char *rel, const char *s) { t_write(rel, s, strlen(s)); }

/* ---- a filelist of clips ------------------------------------------------ */

static sl_source_t *open_spec_ok(const char *json, bool want_record)
{
    sl_spec_t spec;
    char err[1024] = "";
    ck_assert_msg(sl_spec_parse("t.json", json, strlen(json), &spec, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert(sl_spec_is_record(&spec) == want_record);
    sl_source_t *src = NULL;
    ck_assert_msg(sl_source_open_spec(g_root, NULL, &spec, &src, err, sizeof(err)) == 0, "%s", err);
    ck_assert(sl_source_is_record(src) == want_record);
    sl_spec_clear(&spec);
    return src;
}

/* Sample i: a record of KEY (the path), LABEL and one visual field of kind
 * holding fake seed's bytes (its first max bytes and nothing else for a
 * head, max > 0). */
static void check_clip_rec(const sl_source_t *src, uint64_t i, size_t max, sl_rf_kind_e kind,
                           unsigned seed)
{
    unsigned char want[400];
    fake_fill(seed, want);
    size_t n = max > 0 && max < fake_len(seed) ? max : fake_len(seed);
    sl_tensor_t t;
    sl_tensor_init(&t);
    char err[256] = "";
    int rc = max > 0 ? sl_source_read_head(src, i, max, &t, err, sizeof(err))
                     : sl_source_read(src, i, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "read %s: %d %s", sl_source_name(src, i), rc, err);
    sl_rec_t r;
    ck_assert_msg(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(r.n, max > 0 ? 1 : 3);
    const sl_rfield_t *f = &r.f[r.n - 1];
    ck_assert_int_eq(f->kind, kind);
    ck_assert_uint_eq(f->nbytes, n);
    ck_assert_mem_eq(f->data, want, n);
    if (max == 0) {
        const char *key = sl_source_name(src, i);
        ck_assert_int_eq(r.f[0].kind, SL_RF_KEY);
        ck_assert_msg(r.f[0].nbytes == strlen(key) && memcmp(r.f[0].data, key, r.f[0].nbytes) == 0,
                      "key of %s", key);
        ck_assert_int_eq(sl_rec_label(&r), (int32_t)i + 1);
    }
    sl_tensor_free(&t);
}

/* With decode_video in its stages a filelist's lines are records: the file
 * as VIDEO_ENC when its extension is a clip's (any case), else IMAGE_ENC;
 * heads hold the visual field alone; a zero-byte clip is -ENODATA. The
 * same list without decode_video stays one encoded image per sample, and
 * a mix of filelists does not turn into records. */
START_TEST(test_filelist_clips)
{
    t_mkdir("c");
    t_fake("c/a.mp4", 1);
    t_fake("c/B.MKV", 2);
    t_fake("c/s.jpg", 3);
    t_fake("c/x.mov.txt", 4);
    t_fake("c/y.Webm", 5);
    t_write("c/e.webm", "", 0);
    t_fake("c/m.mp4x", 7);
    t_text("l.txt", "c/a.mp4 1\nc/B.MKV 2\nc/s.jpg 3\n# a comment\nc/x.mov.txt 4\n"
                    "./c/y.Webm 5\nc/e.webm 6\nc/m.mp4x 7\n");
    sl_source_t *src = open_spec_ok("{\"source\": {\"type\": \"filelist\", \"path\": \"l.txt\"},"
                                    " \"stages\": [{\"op\": \"decode_video\"}]}",
                                    true);
    ck_assert_uint_eq(sl_source_count(src), 7);
    const sl_rf_kind_e kinds[] = {SL_RF_VIDEO_ENC, SL_RF_VIDEO_ENC, SL_RF_IMAGE_ENC,
                                  SL_RF_IMAGE_ENC, SL_RF_VIDEO_ENC};
    for (unsigned i = 0; i < 5; i++) {
        check_clip_rec(src, i, 0, kinds[i], i + 1);
        check_clip_rec(src, i, 10, kinds[i], i + 1);
        check_clip_rec(src, i, 100000, kinds[i], i + 1);
        sl_src_features_t f;
        ck_assert_int_eq(sl_source_record_features(src, i, &f), 0);
        ck_assert_uint_eq(f.nimages, 1);
        ck_assert_uint_eq(f.image_bytes, fake_len(i + 1));
        ck_assert(f.image_bytes_known && f.text_bytes == 0);
    }
    ck_assert_str_eq(sl_source_name(src, 4), "c/y.Webm");
    read_fails(src, 5, -ENODATA, "c/e.webm");
    check_clip_rec(src, 6, 0, SL_RF_IMAGE_ENC, 7); /* ".mp4x" is not a clip's */
    uint64_t fp = sl_source_fingerprint(src);
    sl_source_free(src);
    /* Without decode_video: images, as before, and another fingerprint. */
    src = open_spec_ok("{\"source\": {\"type\": \"filelist\", \"path\": \"l.txt\"},"
                       " \"stages\": [{\"op\": \"decode_image\"}]}",
                       false);
    check_read(src, 0, 1);
    ck_assert(sl_source_fingerprint(src) != fp);
    sl_source_free(src);
}
END_TEST

/* ---- utf8 -------------------------------------------------------------- */

START_TEST(test_utf8)
{
    size_t off = 99;
    ck_assert_int_eq(sl_utf8_check("", 0, &off), 0);
    ck_assert_int_eq(sl_utf8_check("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15, &off), 0);
    ck_assert_uint_eq(off, 99); /* untouched on success */
    ck_assert_int_eq(sl_utf8_check("a\0b", 3, NULL), 0);
    ck_assert_int_eq(sl_utf8_check("\xf4\x8f\xbf\xbf", 4, NULL), 0);     /* U+10FFFF */
    ck_assert_int_eq(sl_utf8_check("\xed\x9f\xbf", 3, NULL), 0);         /* U+D7FF */
    ck_assert_int_eq(sl_utf8_check("\xee\x80\x80", 3, NULL), 0);         /* U+E000 */
    const struct {
        const char *s;
        size_t n, bad;
    } bad[] = {
        {"ab\xc0\xaf", 4, 2},         /* overlong '/' */
        {"\xe0\x80\xaf", 3, 0},       /* overlong, 3 bytes */
        {"x\xf0\x80\x80\xaf", 5, 1},  /* overlong, 4 bytes */
        {"\xc1\xbf", 2, 0},           /* overlong lead C1 */
        {"ok\xed\xa0\x80", 5, 2},     /* surrogate U+D800 */
        {"\xed\xbf\xbf", 3, 0},       /* surrogate U+DFFF */
        {"abc\xe2\x82", 5, 3},        /* truncated sequence */
        {"\xc3", 1, 0},               /* truncated at the end */
        {"\xe2\x28\xa1", 3, 0},       /* bad continuation */
        {"\xf4\x90\x80\x80", 4, 0},   /* U+110000 */
        {"\xf5\x80\x80\x80", 4, 0},   /* lead F5 */
        {"a\x80", 2, 1},              /* stray continuation */
        {"\xff", 1, 0},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        off = 99;
        ck_assert_msg(sl_utf8_check(bad[i].s, bad[i].n, &off) == -EDOM, "case %zu", i);
        ck_assert_msg(off == bad[i].bad, "case %zu: offset %zu", i, off);
    }
}
END_TEST

/* ---- webdataset -------------------------------------------------------- */

/* The main shard: 0, 1 and several images, numbered order, conversations. */
static void make_main_shard(const char *rel, unsigned salt)
{
    tbuf_t b = {0};
    tb_text(&b, "a.txt", "just text");
    tb_text(&b, "b.txt", "caption b");
    tb_text(&b, "b.json", "{\"src\": \"x\"}");
    tb_text(&b, "b.cls", "7\n");
    tb_fake(&b, "b.jpg", 1 + salt);
    /* Several images, written out of order: unnumbered first, then by N. */
    tb_fake(&b, "d/c.10.jpg", 10);
    tb_fake(&b, "d/c.2.png", 2);
    tb_text(&b, "d/c.txt", "many");
    tb_fake(&b, "d/c.jpeg", 3);
    tb_fake(&b, "d/c.0.jpg", 4);
    tb_text(&b, "d/c.foo", "ignored");
    tb_text(&b, "e.json",
            "{\"conversations\": [{\"from\": \"human\", \"value\": \"<image>\\nWhat?\"}, "
            "{\"from\": \"gpt\", \"value\": \"A cat.\"}]}");
    tb_fake(&b, "e.png", 5);
    tb_end(&b);
    tb_save(&b, rel);
}

START_TEST(test_wds_samples)
{
    make_main_shard("s.tar", 0);
    sl_source_t *src = open_ok(SL_SRC_WEBDATASET, "s.tar");
    ck_assert(sl_source_is_record(src));
    ck_assert_uint_eq(sl_source_count(src), 4);
    ck_assert_str_eq(sl_source_name(src, 0), "s.tar:a");
    ck_assert_str_eq(sl_source_name(src, 2), "s.tar:d/c");
    ck_assert_uint_eq(sl_source_num_classes(src), 8);
    ck_assert_int_eq(sl_source_label(src, 1), 7);
    ck_assert_int_eq(sl_source_label(src, 0), -1);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "1 member(s) with other"));
    read_check(src, 0, &(want_t){.key = "a", .label = -1, .text = "just text"});
    read_check(src, 1, &(want_t){.key = "b", .label = 7, .text = "caption b",
                                 .meta = "{\"src\": \"x\"}", .nimg = 1, .seeds = {1}});
    read_check(src, 2, &(want_t){.key = "d/c", .label = -1, .text = "many", .nimg = 4,
                                 .seeds = {3, 4, 2, 10}});
    read_check(src, 3,
               &(want_t){.key = "e",
                         .label = -1,
                         .text = "<image>\nWhat?\nA cat.",
                         .meta = "{\"conversations\": [{\"from\": \"human\", \"value\": "
                                 "\"<image>\\nWhat?\"}, {\"from\": \"gpt\", \"value\": "
                                 "\"A cat.\"}]}",
                         .nimg = 1,
                         .seeds = {5},
                         .roles = "ua"});
    /* Sizes and features from the index. */
    ck_assert_uint_eq(sl_source_size(src, 0), 9);
    sl_src_features_t f;
    ck_assert_int_eq(sl_source_record_features(src, 2, &f), 0);
    ck_assert_uint_eq(f.nimages, 4);
    ck_assert_uint_eq(f.image_bytes, fake_len(2) + fake_len(3) + fake_len(4) + fake_len(10));
    ck_assert(f.image_bytes_known);
    ck_assert_uint_eq(f.text_bytes, 4);
    ck_assert(f.text_bytes_exact);
    ck_assert_int_eq(sl_source_record_features(src, 3, &f), 0);
    ck_assert(!f.text_bytes_exact);
    ck_assert_int_eq(sl_source_record_features(src, 4, &f), -ERANGE);
    /* Head reads: a record of each image's first bytes, in the sample's order. */
    sl_tensor_t t;
    char err[256];
    sl_tensor_init(&t);
    ck_assert_int_eq(sl_source_read_head(src, 2, 10, &t, err, sizeof(err)), 0);
    sl_rec_t r;
    ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(r.n, 4);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE_ENC), 4);
    ck_assert_uint_eq(r.f[0].nbytes, 10);
    ck_assert_int_eq(sl_source_read_head(src, 0, 10, &t, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(r.n, 0); /* text only: no images */
    sl_tensor_free(&t);
    sl_source_free(src);
    /* A non-record source has no features. */
    t_mkdir("imgs");
    t_mkdir("imgs/c");
    t_fake("imgs/c/x.jpg", 1);
    src = open_ok(SL_SRC_IMAGEFOLDER, "imgs");
    ck_assert(!sl_source_is_record(src));
    ck_assert_int_eq(sl_source_record_features(src, 0, &f), -EINVAL);
    sl_source_free(src);
}
END_TEST

static void small_shard(const char *rel, const char *key, unsigned seed)
{
    tbuf_t b = {0};
    char n[256];
    snprintf(n, sizeof(n), "%s.txt", key);
    tb_text(&b, n, key);
    snprintf(n, sizeof(n), "%s.jpg", key);
    tb_fake(&b, n, seed);
    tb_end(&b);
    tb_save(&b, rel);
}

/* WebP members are images like the others: numbered order, then by
 * extension text; a member named .webp under another name is still ignored. */
START_TEST(test_wds_webp)
{
    tbuf_t b = {0};
    tb_text(&b, "w.txt", "webp");
    tb_fake(&b, "w.1.webp", 21);
    tb_fake(&b, "w.WEBP", 22);
    tb_fake(&b, "w.0.png", 23);
    tb_text(&b, "w.webpx", "ignored");
    tb_end(&b);
    tb_save(&b, "webp.tar");
    sl_source_t *src = open_ok(SL_SRC_WEBDATASET, "webp.tar");
    ck_assert_uint_eq(sl_source_count(src), 1);
    read_check(src, 0, &(want_t){.key = "w", .label = -1, .text = "webp", .nimg = 3,
                                 .seeds = {22, 23, 21}});
    sl_source_free(src);
}
END_TEST

START_TEST(test_wds_patterns)
{
    t_mkdir("sh");
    t_mkdir("sh/x");
    t_mkdir("sh/y");
    small_shard("sh/s-008.tar", "k8", 8);
    small_shard("sh/s-009.tar", "k9", 9);
    small_shard("sh/s-010.tar", "k10", 10);
    small_shard("sh/x/p.tar", "px", 1);
    small_shard("sh/y/p.tar", "py", 2);
    small_shard("sh/y/q.tar", "qy", 3);
    sl_source_t *src = open_ok(SL_SRC_WEBDATASET, "sh/s-{008..010}.tar");
    ck_assert_uint_eq(sl_source_count(src), 3);
    ck_assert_str_eq(sl_source_name(src, 0), "sh/s-008.tar:k8");
    ck_assert_str_eq(sl_source_name(src, 2), "sh/s-010.tar:k10");
    read_check(src, 2, &(want_t){.key = "k10", .label = -1, .text = "k10", .nimg = 1,
                                 .seeds = {10}});
    sl_source_free(src);
    /* Lists, in the order written, and over directories. */
    src = open_ok(SL_SRC_WEBDATASET, "sh/{y,x}/p.tar");
    ck_assert_uint_eq(sl_source_count(src), 2);
    ck_assert_str_eq(sl_source_name(src, 0), "sh/y/p.tar:py");
    ck_assert_str_eq(sl_source_name(src, 1), "sh/x/p.tar:px");
    sl_source_free(src);
    src = open_ok(SL_SRC_WEBDATASET, "sh/{x/p,y/{p,q}}.tar");
    ck_assert_uint_eq(sl_source_count(src), 3);
    ck_assert_str_eq(sl_source_name(src, 2), "sh/y/q.tar:qy");
    sl_source_free(src);
    src = open_ok(SL_SRC_WEBDATASET, "sh/y/{p,q}.tar");
    ck_assert_uint_eq(sl_source_count(src), 2);
    sl_source_free(src);
    /* A directory of shards: sorted, sub-directories not walked. */
    src = open_ok(SL_SRC_WEBDATASET, "sh");
    ck_assert_uint_eq(sl_source_count(src), 3);
    ck_assert_str_eq(sl_source_name(src, 0), "sh/s-008.tar:k8");
    sl_source_free(src);
    /* Bad patterns, each with a clear error. */
    char err[512];
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "sh/s-{008..010.tar", err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "unclosed"));
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "sh/s-{010..008}.tar", err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "reversed"));
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "sh/s-}{.tar", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "sh/s-{abc}.tar", err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "neither"));
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "s-{0..100000}.tar", err, sizeof(err)),
                     -E2BIG);
    ck_assert_ptr_nonnull(strstr(err, "100000"));
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "s{0..999}-{000..999}.tar", err, sizeof(err)),
                     -E2BIG);
    /* A listed shard that does not exist is named. */
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "sh/s-{008..011}.tar", err, sizeof(err)),
                     -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "sh/s-011.tar"));
    /* Expansions stay beneath the root. */
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "sh/{x,../../outside}/p.tar", err,
                               sizeof(err)),
                     -EPERM);
    ck_assert_int_eq(open_fail(SL_SRC_WEBDATASET, "../outside", err, sizeof(err)), -EPERM);
}
END_TEST

START_TEST(test_wds_damage)
{
    /* Truncated: the sample before the cut reads, the cut one is -ENOMSG. */
    tbuf_t b = {0};
    tb_text(&b, "a.txt", "first");
    tb_fake(&b, "a.jpg", 1);
    tb_text(&b, "b.txt", "second");
    size_t at_b = b.len;
    tb_fake(&b, "b.jpg", 300); /* fake_len(300) = 50 + 11100 % 300 = 50 */
    size_t cut = at_b + 512 + 30; /* 30 of its 50 bytes */
    tb_end(&b);
    b.len = cut;
    tb_save(&b, "trunc.tar");
    sl_source_t *src = open_ok(SL_SRC_WEBDATASET, "trunc.tar");
    ck_assert_uint_eq(sl_source_count(src), 2);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "past the end"));
    read_check(src, 0, &(want_t){.key = "a", .label = -1, .text = "first", .nimg = 1,
                                 .seeds = {1}});
    read_fails(src, 1, -ENOMSG, "trunc.tar:b.jpg");
    ck_assert_int_eq(sl_skip_from_errno(-ENOMSG), SL_SKIP_TRUNCATED);
    sl_source_free(src);

    /* A corrupt header stops the shard with a warning; what came before stays. */
    tb_text(&b, "a.txt", "first");
    tb_text(&b, "b.txt", "second");
    size_t h = b.len;
    tb_text(&b, "c.txt", "third");
    tb_end(&b);
    b.p[h + 148] ^= 0x01; /* checksum */
    tb_save(&b, "corrupt.tar");
    src = open_ok(SL_SRC_WEBDATASET, "corrupt.tar");
    ck_assert_uint_eq(sl_source_count(src), 2);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "checksum"));
    read_check(src, 1, &(want_t){.key = "b", .label = -1, .text = "second"});
    sl_source_free(src);

    /* A member without an extension is a warning, not a sample. */
    tb_text(&b, "README", "hello");
    tb_text(&b, "a.txt", "first");
    tb_text(&b, "a.xyz", "other");
    tb_end(&b);
    tb_save(&b, "noext.tar");
    src = open_ok(SL_SRC_WEBDATASET, "noext.tar");
    ck_assert_uint_eq(sl_source_count(src), 1);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "noext.tar:README"));
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "without an extension"));
    sl_source_free(src);
}
END_TEST

START_TEST(test_wds_skips)
{
    tbuf_t b = {0};
    tb_file(&b, "overlong.txt", "a\xc0\xaf", 3);
    tb_file(&b, "surrogate.txt", "\xed\xa0\x80", 3);
    tb_file(&b, "cut.txt", "ab\xe2\x82", 4);
    tb_file(&b, "big.txt", "\xf4\x90\x80\x80", 4);
    tb_fake(&b, "notext.jpg", 1);
    tb_text(&b, "notext.cls", "1");
    tb_text(&b, "many.txt", "many");
    for (unsigned i = 0; i <= SL_REC_MAX_IMAGES; i++) {
        char n[64];
        snprintf(n, sizeof(n), "many.%u.jpg", i);
        tb_fake(&b, n, i);
    }
    tb_text(&b, "empty.txt", "x");
    tb_file(&b, "empty.jpg", "", 0);
    tb_text(&b, "nojson.json", "{not json");
    tb_text(&b, "noconv.json", "{\"a\": 1}");
    tb_text(&b, "badconv.json", "{\"conversations\": [{\"value\": 3}]}");
    tb_file(&b, "badjson.json", "{\"conversations\": [{\"value\": \"\xed\xa0\x80\"}]}", 37);
    tb_text(&b, "ok.txt", "fine");
    tb_end(&b);
    tb_save(&b, "s.tar");
    sl_source_t *src = open_ok(SL_SRC_WEBDATASET, "s.tar");
    ck_assert_uint_eq(sl_source_count(src), 12);
    for (int i = 0; i < 4; i++) {
        read_fails(src, (uint64_t)i, -EDOM, ".txt");
    }
    read_fails(src, 0, -EDOM, "s.tar:overlong.txt");
    ck_assert_int_eq(sl_skip_from_errno(-EDOM), SL_SKIP_BAD_TEXT);
    read_fails(src, 4, -ENOSTR, "s.tar:notext");
    ck_assert_int_eq(sl_skip_from_errno(-ENOSTR), SL_SKIP_NO_TEXT);
    read_fails(src, 5, -ETOOMANYREFS, "s.tar:many");
    ck_assert_int_eq(sl_skip_from_errno(-ETOOMANYREFS), SL_SKIP_TOO_MANY_IMAGES);
    sl_src_features_t f;
    ck_assert_int_eq(sl_source_record_features(src, 5, &f), 0);
    ck_assert_uint_eq(f.nimages, SL_REC_MAX_IMAGES + 1);
    read_fails(src, 6, -ENODATA, "s.tar:empty.jpg");
    read_fails(src, 7, -EPROTO, "s.tar:nojson.json");
    read_fails(src, 8, -ENOSTR, "s.tar:noconv.json");
    read_fails(src, 9, -EPROTO, "value");
    read_fails(src, 10, -EDOM, "s.tar:badjson.json");
    read_check(src, 11, &(want_t){.key = "ok", .label = -1, .text = "fine"});
    /* Exactly SL_REC_MAX_IMAGES is fine. */
    sl_source_free(src);
    tb_text(&b, "max.txt", "max");
    for (unsigned i = 0; i < SL_REC_MAX_IMAGES; i++) {
        char n[64];
        snprintf(n, sizeof(n), "max.%u.jpg", i);
        tb_fake(&b, n, i);
    }
    tb_end(&b);
    tb_save(&b, "max.tar");
    src = open_ok(SL_SRC_WEBDATASET, "max.tar");
    sl_tensor_t t;
    char err[256];
    sl_tensor_init(&t);
    ck_assert_int_eq(sl_source_read(src, 0, &t, err, sizeof(err)), 0);
    sl_rec_t r;
    ck_assert_int_eq(sl_rec_parse(t.data, t.nbytes, &r, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_rec_count(&r, SL_RF_IMAGE_ENC), SL_REC_MAX_IMAGES);
    sl_tensor_free(&t);
    sl_source_free(src);
}
END_TEST

/* One sample k: text and one image named NAME (same size whatever NAME). */
static void fp_shard(const char *rel, const char *img, unsigned seed)
{
    tbuf_t b = {0};
    tb_text(&b, "k.txt", "x");
    tb_fake(&b, img, seed);
    tb_end(&b);
    tb_save(&b, rel);
}

START_TEST(test_wds_fingerprint)
{
    make_main_shard("a.tar", 0);
    sl_source_t *a = open_ok(SL_SRC_WEBDATASET, "a.tar");
    sl_source_t *a2 = open_ok(SL_SRC_WEBDATASET, "a.tar");
    ck_assert_uint_eq(sl_source_fingerprint(a), sl_source_fingerprint(a2));
    sl_source_free(a2);
    /* One image member of another size. */
    make_main_shard("a.tar", 1);
    a2 = open_ok(SL_SRC_WEBDATASET, "a.tar");
    ck_assert_uint_ne(sl_source_fingerprint(a), sl_source_fingerprint(a2));
    sl_source_free(a2);
    sl_source_free(a);
    /* Same sample names and sizes, one member renamed (k.2.jpg -> k.3.jpg). */
    fp_shard("n.tar", "k.2.jpg", 5);
    a = open_ok(SL_SRC_WEBDATASET, "n.tar");
    fp_shard("n.tar", "k.3.jpg", 5);
    a2 = open_ok(SL_SRC_WEBDATASET, "n.tar");
    ck_assert_uint_eq(sl_source_size(a, 0), sl_source_size(a2, 0));
    ck_assert_uint_ne(sl_source_fingerprint(a), sl_source_fingerprint(a2));
    sl_source_free(a2);
    fp_shard("n.tar", "k.2.jpg", 5);
    a2 = open_ok(SL_SRC_WEBDATASET, "n.tar");
    ck_assert_uint_eq(sl_source_fingerprint(a), sl_source_fingerprint(a2));
    sl_source_free(a2);
    sl_source_free(a);
}
END_TEST

/* Many shards with a small fd budget (most opened per read), read from four
 * threads at once: every record is whole and right. */
enum { MT_SHARDS = 40, MT_THREADS = 4 };

static void *mt_reader(void *arg)
{
    const sl_source_t *src = arg;
    for (int round = 0; round < 3; round++) {
        for (unsigned i = 0; i < MT_SHARDS; i++) {
            char key[16];
            snprintf(key, sizeof(key), "k%u", i);
            read_check(src, i, &(want_t){.key = key, .label = -1, .text = key, .nimg = 1,
                                         .seeds = {i}});
        }
    }
    return NULL;
}

START_TEST(test_wds_budget_threads)
{
    struct rlimit old, rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    rl = old;
    rl.rlim_cur = 64; /* at most 16 shard fds kept */
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    t_mkdir("many");
    for (unsigned i = 0; i < MT_SHARDS; i++) {
        char rel[64], key[16];
        snprintf(rel, sizeof(rel), "many/s%03u.tar", i);
        snprintf(key, sizeof(key), "k%u", i);
        small_shard(rel, key, i);
    }
    sl_source_t *src = open_ok(SL_SRC_WEBDATASET, "many/s{000..039}.tar");
    ck_assert_uint_eq(sl_source_count(src), MT_SHARDS);
    pthread_t th[MT_THREADS];
    for (int i = 0; i < MT_THREADS; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, mt_reader, src), 0);
    }
    for (int i = 0; i < MT_THREADS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    }
    sl_source_free(src);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
}
END_TEST

/* ---- jsonl ------------------------------------------------------------- */

START_TEST(test_jsonl)
{
    t_mkdir("img");
    t_fake("img/a.jpg", 1);
    t_fake("img/b.png", 2);
    t_fake("@outside/x.jpg", 3);
    t_write("img/empty.jpg", "", 0);
    const char *m =
        "{\"id\": \"s1\", \"text\": \"hello\", \"images\": [\"img/a.jpg\", \"img/b.png\"], "
        "\"label\": 3, \"z\": 1, \"src\": {\"b\": 2, \"a\": 1}}\n"
        "\n"
        "   \n"
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"Q\"}, {\"from\": \"gpt\", "
        "\"value\": \"A\"}], \"image\": \"./img/a.jpg\"}\n"
        "{\"id\": \"broken\", \"text\": \n"
        "{\"id\": 5, \"text\": \"no image\"}\n"
        "{\"text\": \"esc\", \"images\": [\"../outside/x.jpg\"]}\n"
        "{\"text\": \"gone\", \"images\": [\"img/missing.jpg\"]}\n"
        "{\"id\": \"nt\", \"images\": [\"img/a.jpg\"]}\n"
        "[1, 2]\n"
        "{\"text\": \"bad\\u00e9\", \"image\": \"img/empty.jpg\"}\n"
        "{\"text\": \"x\", \"label\": \"one\"}\n"
        "{\"text\": \"overlong \xc0\xaf\"}\n"
        "{\"text\": \"last, no newline\"}";
    t_text("m.jsonl", m);
    sl_source_t *src = open_ok(SL_SRC_JSONL, "m.jsonl");
    ck_assert(sl_source_is_record(src));
    ck_assert_uint_eq(sl_source_count(src), 12);
    ck_assert_str_eq(sl_source_name(src, 0), "m.jsonl:s1");
    ck_assert_str_eq(sl_source_name(src, 1), "m.jsonl:L4");
    ck_assert_str_eq(sl_source_name(src, 2), "m.jsonl:L5"); /* no parse, no id */
    ck_assert_str_eq(sl_source_name(src, 3), "m.jsonl:L6");
    ck_assert_int_eq(sl_source_label(src, 0), 3);
    ck_assert_uint_eq(sl_source_num_classes(src), 4);
    read_check(src, 0, &(want_t){.key = "s1", .label = 3, .text = "hello",
                                 .meta = "{\"id\":\"s1\",\"label\":3,\"src\":{\"a\":1,\"b\":2},"
                                         "\"z\":1}",
                                 .nimg = 2, .seeds = {1, 2}});
    read_check(src, 1,
               &(want_t){.key = "L4",
                         .label = -1,
                         .text = "Q\nA",
                         .nimg = 1,
                         .seeds = {1},
                         .roles = "ua"});
    /* A malformed line fails alone, naming manifest:line. */
    read_fails(src, 2, -EPROTO, "m.jsonl:5");
    ck_assert_int_eq(sl_skip_from_errno(-EPROTO), SL_SKIP_BAD_MANIFEST);
    read_check(src, 3, &(want_t){.key = "L6", .label = -1, .text = "no image",
                                 .meta = "{\"id\":5}"});
    read_fails(src, 4, -EPERM, "m.jsonl:7");
    ck_assert_int_eq(sl_skip_from_errno(-EPERM), SL_SKIP_OUTSIDE_ROOT);
    read_fails(src, 5, -ENOENT, "img/missing.jpg");
    read_fails(src, 6, -ENOSTR, "m.jsonl:9");
    read_fails(src, 7, -EPROTO, "not a JSON object");
    read_fails(src, 8, -ENODATA, "img/empty.jpg");
    read_fails(src, 9, -EPROTO, "label");
    read_fails(src, 10, -EDOM, "m.jsonl:13");
    read_check(src, 11, &(want_t){.key = "L14", .label = -1, .text = "last, no newline"});
    read_fails(src, 12, -ERANGE, NULL);
    sl_src_features_t f;
    ck_assert_int_eq(sl_source_record_features(src, 0, &f), 0);
    ck_assert_uint_eq(f.nimages, 2);
    ck_assert(!f.text_bytes_exact);
    ck_assert(!f.image_bytes_known);
    ck_assert_uint_eq(f.text_bytes, sl_source_size(src, 0));
    sl_tensor_t t;
    char err[256];
    sl_tensor_init(&t);
    ck_assert_int_eq(sl_source_read_head(src, 0, 10, &t, err, sizeof(err)), -ENOTSUP);
    sl_tensor_free(&t);
    /* Fingerprints: equal for equal data, different after one change. */
    t_text("m2.jsonl", m);
    sl_source_t *s2 = open_ok(SL_SRC_JSONL, "m2.jsonl");
    sl_source_t *s3 = open_ok(SL_SRC_JSONL, "m.jsonl");
    ck_assert_uint_eq(sl_source_fingerprint(src), sl_source_fingerprint(s3));
    sl_source_free(s3);
    char *m2 = strdup(m);
    *strstr(m2, "img/b.png") = 'I'; /* same length, other path */
    t_text("m.jsonl", m2);
    free(m2);
    s3 = open_ok(SL_SRC_JSONL, "m.jsonl");
    ck_assert_uint_ne(sl_source_fingerprint(src), sl_source_fingerprint(s3));
    sl_source_free(s3);
    sl_source_free(s2);
    sl_source_free(src);
    /* The manifest itself is confined and must exist. */
    ck_assert_int_eq(open_fail(SL_SRC_JSONL, "../outside/x.jsonl", err, sizeof(err)), -EPERM);
    ck_assert_int_eq(open_fail(SL_SRC_JSONL, "nope.jsonl", err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "nope.jsonl"));
}
END_TEST

START_TEST(test_jsonl_limits)
{
    /* Too many images; a line over the length limit is one bad sample. */
    size_t cap = 64 + 16 * (SL_REC_MAX_IMAGES + 2);
    char *line = malloc(cap);
    size_t o = (size_t)snprintf(line, cap, "{\"text\": \"t\", \"images\": [");
    for (unsigned i = 0; i <= SL_REC_MAX_IMAGES; i++) {
        o += (size_t)snprintf(line + o, cap - o, "%s\"a.jpg\"", i > 0 ? ", " : "");
    }
    snprintf(line + o, cap - o, "]}\n");
    size_t big = (size_t)SL_SOURCE_MAX_LINE_BYTES + 10;
    char *all = malloc(strlen(line) + big + 64);
    strcpy(all, line);
    size_t n = strlen(all);
    all[n++] = '{';
    memset(all + n, ' ', big);
    n += big;
    n += (size_t)sprintf(all + n, "}\n{\"text\": \"after\"}\n");
    t_write("l.jsonl", all, n);
    free(all);
    free(line);
    t_fake("a.jpg", 1);
    sl_source_t *src = open_ok(SL_SRC_JSONL, "l.jsonl");
    ck_assert_uint_eq(sl_source_count(src), 3);
    read_fails(src, 0, -ETOOMANYREFS, "l.jsonl:1");
    read_fails(src, 1, -EPROTO, "l.jsonl:2");
    read_check(src, 2, &(want_t){.key = "L3", .label = -1, .text = "after"});
    sl_source_free(src);
}
END_TEST

/* Roles: LLaVA {from, value} and chat {role, content} turns keep their role
 * and span; an unknown role, a turn without a value or a role, and empty
 * conversations are bad samples naming what is wrong. */
START_TEST(test_jsonl_roles)
{
    const char *m =
        "{\"conversations\": [{\"from\": \"system\", \"value\": \"Be brief.\"}, "
        "{\"from\": \"human\", \"value\": \"Hi\"}, {\"from\": \"gpt\", \"value\": \"Yo\"}]}\n"
        "{\"conversations\": [{\"role\": \"user\", \"content\": \"Q\"}, "
        "{\"role\": \"assistant\", \"content\": \"\"}, {\"role\": \"user\", "
        "\"content\": \"more\"}]}\n"
        "{\"conversations\": [{\"from\": \"robot\", \"value\": \"x\"}]}\n"
        "{\"conversations\": [{\"from\": \"human\"}]}\n"
        "{\"conversations\": [{\"value\": \"no role\"}]}\n"
        "{\"conversations\": []}\n"
        "{\"conversations\": [{\"role\": 3, \"content\": \"x\"}]}\n"
        "{\"text\": \"plain\"}\n";
    t_text("r.jsonl", m);
    sl_source_t *src = open_ok(SL_SRC_JSONL, "r.jsonl");
    ck_assert_uint_eq(sl_source_count(src), 8);
    read_check(src, 0,
               &(want_t){.key = "L1", .label = -1, .text = "Be brief.\nHi\nYo", .roles = "sua"});
    read_check(src, 1, &(want_t){.key = "L2", .label = -1, .text = "Q\n\nmore", .roles = "uau"});
    read_fails(src, 2, -EPROTO, "unknown \"from\"/\"role\"");
    read_fails(src, 3, -EPROTO, "no string \"value\"");
    read_fails(src, 4, -EPROTO, "no string \"from\"");
    read_fails(src, 5, -ENOSTR, "\"conversations\" is empty");
    read_fails(src, 6, -EPROTO, "r.jsonl:7");
    read_check(src, 7, &(want_t){.key = "L8", .label = -1, .text = "plain"});
    ck_assert_int_eq(sl_role_parse("gpt"), SL_ROLE_ASSISTANT);
    ck_assert_int_eq(sl_role_parse("human"), SL_ROLE_USER);
    ck_assert_int_eq(sl_role_parse("Human"), -EINVAL);
    ck_assert_str_eq(sl_role_name(SL_ROLE_SYSTEM), "system");
    sl_source_free(src);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("source_records");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, fxs_setup, fxs_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_wds_samples);
    tcase_add_test(tc, test_wds_patterns);
    tcase_add_test(tc, test_wds_webp);
    tcase_add_test(tc, test_wds_damage);
    tcase_add_test(tc, test_wds_skips);
    tcase_add_test(tc, test_wds_fingerprint);
    tcase_add_test(tc, test_wds_budget_threads);
    tcase_add_test(tc, test_jsonl);
    tcase_add_test(tc, test_jsonl_limits);
    tcase_add_test(tc, test_jsonl_roles);
    tcase_add_test(tc, test_filelist_clips);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
