/* common/text: the tokenizer against a tiny hand-made ranks file (merge
 * order by rank, leftmost on ties, merged ranks looked up by bytes, the
 * whole-piece fast path, special tokens on and off, max_tokens), strict
 * UTF-8, every malformed ranks file refused with name:line, and both merge
 * algorithms (linear, heap) giving the same ids. With SLUICE_TOKENIZER_FILES
 * naming a directory of real ranks files (tests/integration/
 * test_tokenizer_oracle.sh sets it) a few known ids of cl100k_base,
 * o200k_base and gpt2 too; without it those cases print a note and pass. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/text_impl.h"
#include "common/base/utf8.h"
#include "common/text/tokenizer.h"
#include "tests/unit/fixtures.h"

static char g_dir[FX_TMPDIR_LEN];

/* Writes DIR/name: byte b has rank b (lines 1..256, byte `skip` left out
 * when >= 0), then `extra` verbatim. Returns the path (static buffer). */
static const char *ranks_file(const char *name, int skip, const char *extra)
{
    static char path[256];
    char *buf = malloc(256 * 16 + strlen(extra) + 1);
    ck_assert_ptr_nonnull(buf);
    size_t o = 0;
    for (int b = 0; b < 256; b++) {
        if (b == skip) {
            continue;
        }
        uint8_t c = (uint8_t)b;
        char enc[8];
        fx_base64(&c, 1, enc);
        o += (size_t)sprintf(buf + o, "%s %d\n", enc, b);
    }
    memcpy(buf + o, extra, strlen(extra));
    o += strlen(extra);
    snprintf(path, sizeof(path), "%s/%s", g_dir, name);
    ck_assert_int_eq(fx_write_file(path, buf, o), 0);
    free(buf);
    return path;
}

/* "aa" 256, "bc" 260, "abc" 261, "ab" 300, "cd" 301, "xyz" 400. */
#define TINY_EXTRA "YWE= 256\nYmM= 260\nYWJj 261\nYWI= 300\nY2Q= 301\neHl6 400\n"

static sl_tokenizer_t *tiny(const char *encoding)
{
    char err[256];
    sl_tokenizer_t *t = NULL;
    int rc = sl_tokenizer_open(ranks_file("tiny.tiktoken", -1, TINY_EXTRA), encoding, &t, err,
                               sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    return t;
}

/* Encodes s and compares with want[0, nwant). */
static void expect(const sl_tokenizer_t *t, const char *s, sl_tok_special_e sp, size_t max,
                   const uint32_t *want, size_t nwant)
{
    sl_tok_scratch_t *sc = sl_tok_scratch_new(t);
    ck_assert_ptr_nonnull(sc);
    uint32_t *ids = NULL;
    size_t cap = 0, n = 0;
    char err[256];
    int rc = sl_tokenizer_encode(t, sc, s, strlen(s), sp, max, &ids, &cap, &n, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", s, err);
    ck_assert_msg(n == nwant, "\"%s\": %zu ids, expected %zu", s, n, nwant);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(ids[i] == want[i], "\"%s\": id %zu is %u, expected %u", s, i, ids[i],
                      want[i]);
    }
    free(ids);
    sl_tok_scratch_free(sc);
}

#define EXPECT(t, s, sp, max, ...)                                                          \
    do {                                                                                    \
        const uint32_t w_[] = {__VA_ARGS__};                                                \
        expect(t, s, sp, max, w_, sizeof(w_) / sizeof(w_[0]));                              \
    } while (0)

START_TEST(test_merge_rules)
{
    sl_tokenizer_t *t = tiny("cl100k_base");
    /* Tie: "aa" at 0 and at 1 -- the leftmost merges, the last 'a' stays. */
    EXPECT(t, "aaa", SL_TOK_ORDINARY, 0, 256, 'a');
    EXPECT(t, "aaaa", SL_TOK_ORDINARY, 0, 256, 256);
    /* Lowest rank first ("bc" 260 before "ab" 300), then "a"+"bc" is found
     * by its bytes ("abc" 261): not "ab" + "cd". */
    EXPECT(t, "abcd", SL_TOK_ORDINARY, 0, 261, 'd');
    /* Fast path: "xyz" is a token that no merge reaches. */
    EXPECT(t, "xyz", SL_TOK_ORDINARY, 0, 400);
    EXPECT(t, "xyzz", SL_TOK_ORDINARY, 0, 'x', 'y', 'z', 'z');
    /* Pieces: "\n" is its own piece; " q" is one piece of two bytes. */
    EXPECT(t, "aaa\nabcd\nxyz q", SL_TOK_ORDINARY, 0, 256, 'a', '\n', 261, 'd', '\n', 400,
           ' ', 'q');
    expect(t, "", SL_TOK_ORDINARY, 0, NULL, 0);
    sl_tokenizer_free(t);
}
END_TEST

START_TEST(test_special_and_max_tokens)
{
    sl_tokenizer_t *t = tiny("cl100k_base");
    ck_assert_uint_eq(sl_tokenizer_vocab_size(t), 100277);
    EXPECT(t, "a<|endoftext|>a", SL_TOK_ALLOW_SPECIAL, 0, 'a', 100257, 'a');
    EXPECT(t, "<|fim_prefix|><|endofprompt|>", SL_TOK_ALLOW_SPECIAL, 0, 100258, 100276);
    /* Not allowed: plain text ("<|" "endoftext" "|>" pieces, no merges). */
    EXPECT(t, "a<|endoftext|>", SL_TOK_ORDINARY, 0, 'a', '<', '|', 'e', 'n', 'd', 'o', 'f',
           't', 'e', 'x', 't', '|', '>');
    /* Almost special tokens are text even when specials are allowed. */
    EXPECT(t, "<|endoftext", SL_TOK_ALLOW_SPECIAL, 0, '<', '|', 'e', 'n', 'd', 'o', 'f', 't',
           'e', 'x', 't');
    /* max_tokens: the prefix of the full encoding. */
    EXPECT(t, "aaa\nabcd\nxyz", SL_TOK_ORDINARY, 1, 256);
    EXPECT(t, "aaa\nabcd\nxyz", SL_TOK_ORDINARY, 3, 256, 'a', '\n');
    EXPECT(t, "aaa\nabcd\nxyz", SL_TOK_ORDINARY, 100, 256, 'a', '\n', 261, 'd', '\n', 400);
    EXPECT(t, "<|endoftext|><|endoftext|>", SL_TOK_ALLOW_SPECIAL, 1, 100257);
    EXPECT(t, "a<|endoftext|>b", SL_TOK_ALLOW_SPECIAL, 2, 'a', 100257);
    sl_tokenizer_free(t);

    t = tiny("o200k_base");
    ck_assert_uint_eq(sl_tokenizer_vocab_size(t), 200019);
    EXPECT(t, "<|endofprompt|>", SL_TOK_ALLOW_SPECIAL, 0, 200018);
    sl_tokenizer_free(t);
    t = tiny("gpt2");
    ck_assert_uint_eq(sl_tokenizer_vocab_size(t), 50257);
    EXPECT(t, "<|endoftext|>", SL_TOK_ALLOW_SPECIAL, 0, 50256);
    sl_tokenizer_free(t);
}
END_TEST

START_TEST(test_invalid_utf8)
{
    static const struct {
        const char *s;
        size_t len, at;
    } bad[] = {
        {"\xc0\xaf", 2, 0},             /* overlong '/' */
        {"ab\xe0\x80\x80", 5, 2},       /* overlong 3-byte NUL */
        {"ab\xf0\x80\x80\x80", 6, 2},   /* overlong 4-byte */
        {"x\xed\xa0\x80", 4, 1},        /* surrogate U+D800 */
        {"x\xed\xbf\xbf", 4, 1},        /* surrogate U+DFFF */
        {"\xf4\x90\x80\x80", 4, 0},     /* U+110000 */
        {"\xf5\x80\x80\x80", 4, 0},     /* lead byte beyond U+10FFFF */
        {"\xff", 1, 0},
        {"abc\xe2\x82", 5, 3},          /* truncated at the end */
        {"abc\xe2\x82x", 6, 3},         /* truncated in the middle */
        {"a\x80", 2, 1},                /* stray continuation byte */
        {"hello\xc3", 6, 5},
    };
    sl_tokenizer_t *t = tiny("cl100k_base");
    sl_tok_scratch_t *sc = sl_tok_scratch_new(t);
    uint32_t *ids = NULL;
    size_t cap = 0, n = 12345;
    char err[256], want[64];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = sl_tokenizer_encode(t, sc, bad[i].s, bad[i].len, SL_TOK_ORDINARY, 0, &ids, &cap,
                                     &n, err, sizeof(err));
        ck_assert_msg(rc == -EILSEQ, "case %zu: rc %d", i, rc);
        snprintf(want, sizeof(want), "byte offset %zu", bad[i].at);
        ck_assert_msg(strstr(err, want) != NULL, "case %zu: \"%s\"", i, err);
        ck_assert_uint_eq(n, 12345); /* untouched on failure */
    }
    /* The edges that are valid. */
    static const char *good[] = {"\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80",
                                 "\xef\xbb\xbf", "\xc2\x80", "\xe0\xa0\x80", "\xf0\x90\x80\x80",
                                 "\x7f"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t at;
        ck_assert_int_eq(sl_utf8_check(good[i], strlen(good[i]), &at), 0);
        ck_assert_int_eq(sl_tokenizer_encode(t, sc, good[i], strlen(good[i]), SL_TOK_ORDINARY,
                                             0, &ids, &cap, &n, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(n, strlen(good[i])); /* no merges: one id per byte */
    }
    /* Too long: refused before any byte is read. */
    ck_assert_int_eq(sl_tokenizer_encode(t, sc, "x", SL_TOK_MAX_TEXT + 1, SL_TOK_ORDINARY, 0,
                                         &ids, &cap, &n, err, sizeof(err)),
                     -E2BIG);
    free(ids);
    sl_tok_scratch_free(sc);
    sl_tokenizer_free(t);
}
END_TEST

/* Opens a file made of the 256 bytes (one left out when skip >= 0) and
 * extra; expects -EINVAL and msg in the error. */
static void refused(int skip, const char *extra, const char *msg)
{
    char err[512];
    sl_tokenizer_t *t = NULL;
    const char *p = ranks_file("bad.tiktoken", skip, extra);
    int rc = sl_tokenizer_open(p, "cl100k_base", &t, err, sizeof(err));
    ck_assert_msg(rc == -EINVAL, "%s: rc %d", extra, rc);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err, msg) != NULL, "expected \"%s\" in \"%s\"", msg, err);
}

START_TEST(test_malformed_ranks_files)
{
    refused(-1, "Y*== 300\n", "bad.tiktoken:257: the token is not canonical padded base64");
    refused(-1, "YWJ 300\n", "bad.tiktoken:257: the token is not canonical");
    refused(-1, "YR== 300\n", "bad.tiktoken:257: the token is not canonical"); /* stray bits */
    refused(-1, "YWJj\n", "bad.tiktoken:257: expected \"BASE64-TOKEN RANK\": no rank");
    refused(-1, "YWJj 12x\n", "bad.tiktoken:257: the rank is not a decimal number");
    refused(-1, "YWJj 1 2\n", "bad.tiktoken:257: the rank is not a decimal number");
    refused(-1, "YWJj -1\n", "bad.tiktoken:257: the rank is not a decimal number");
    refused(-1, "YWJj 99999999999\n", "bad.tiktoken:257: rank over the limit");
    refused(-1, "YWJj 5\n", "bad.tiktoken:257: rank 5 was already given on line 6");
    refused(-1, "\nYQ== 999\n", "bad.tiktoken:258: the token of line 98 again");
    refused(97, "", "byte 0x61 has no token");
    char *huge = malloc(5000 + 16);
    memset(huge, 'A', 5000);
    strcpy(huge + 5000, " 300\n");
    refused(-1, huge, "bad.tiktoken:257: line longer than 1024 bytes");
    /* A token over 256 bytes in a line under the limit. */
    memset(huge, 'A', 400);
    strcpy(huge + 400, " 300\n");
    refused(-1, huge, "bad.tiktoken:257: token longer than 256 bytes");
    free(huge);

    char err[512], path[256];
    sl_tokenizer_t *t = NULL;
    snprintf(path, sizeof(path), "%s/empty.tiktoken", g_dir);
    ck_assert_int_eq(fx_write_file(path, "\n\n", 2), 0);
    ck_assert_int_eq(sl_tokenizer_open(path, "cl100k_base", &t, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "empty.tiktoken: no tokens (empty file)"));
    ck_assert_int_eq(fx_write_file(path, "", 0), 0);
    ck_assert_int_eq(sl_tokenizer_open(path, "cl100k_base", &t, err, sizeof(err)), -EINVAL);
    snprintf(path, sizeof(path), "%s/absent.tiktoken", g_dir);
    ck_assert_int_eq(sl_tokenizer_open(path, "cl100k_base", &t, err, sizeof(err)), -ENOENT);
    ck_assert_int_eq(sl_tokenizer_open(g_dir, "cl100k_base", &t, err, sizeof(err)), -EISDIR);
    /* Unknown encoding: refused before the file is read. */
    ck_assert_int_eq(sl_tokenizer_open(path, "p50k_base", &t, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "unknown encoding \"p50k_base\""));
    ck_assert_int_eq(sl_tokenizer_open(path, NULL, &t, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_null(t);
    /* CRLF line ends and blank lines are fine (tiktoken's loader takes them). */
    t = NULL;
    ck_assert_int_eq(sl_tokenizer_open(ranks_file("crlf.tiktoken", -1, "\r\nYWE=\t256\r\n\n"),
                                       "gpt2", &t, err, sizeof(err)),
                     0);
    EXPECT(t, "aa", SL_TOK_ORDINARY, 0, 256);
    sl_tokenizer_free(t);
}
END_TEST

static uint32_t g_rng = 12345;
static uint32_t rnd(void)
{
    g_rng = g_rng * 1103515245u + 12345u;
    return g_rng >> 8;
}

/* Parses a ranks file with the module's own parser (no regex). */
static sl_bpe_ranks_t *ranks_of(const char *path)
{
    uint8_t *buf;
    size_t len;
    char err[256];
    sl_bpe_ranks_t *r = NULL;
    ck_assert_int_eq(fx_read_file(path, &buf, &len), 0);
    int rc = sl_bpe_ranks_parse((const char *)buf, len, path, &r, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    free(buf);
    return r;
}

/* The linear scan and the heap must pick the same merges on any piece. */
static void cross_check(const sl_bpe_ranks_t *ranks, const char *alphabet, int rounds,
                        size_t maxlen)
{
    size_t na = strlen(alphabet);
    uint8_t *p = malloc(maxlen);
    uint32_t *a = malloc(maxlen * sizeof(uint32_t)), *b = malloc(maxlen * sizeof(uint32_t));
    sl_bpe_buf_t buf = {0};
    for (int r = 0; r < rounds; r++) {
        size_t n = 2 + rnd() % (maxlen - 1);
        for (size_t i = 0; i < n; i++) {
            p[i] = (uint8_t)alphabet[rnd() % na];
        }
        size_t n1, n2;
        ck_assert_int_eq(sl_bpe_merge(ranks, &buf, p, n, a, &n1, 1), 0);
        ck_assert_int_eq(sl_bpe_merge(ranks, &buf, p, n, b, &n2, 2), 0);
        ck_assert_uint_eq(n1, n2);
        ck_assert_msg(memcmp(a, b, n1 * sizeof(uint32_t)) == 0, "round %d, %zu bytes", r, n);
    }
    sl_bpe_buf_release(&buf);
    free(p);
    free(a);
    free(b);
}

START_TEST(test_linear_and_heap_agree)
{
    sl_bpe_ranks_t *r = ranks_of(ranks_file("tiny.tiktoken", -1, TINY_EXTRA));
    cross_check(r, "abcdxyz", 2000, 300);
    sl_bpe_ranks_free(r);
}
END_TEST

/* ---- real ranks files (SLUICE_TOKENIZER_FILES) */
static const char *real_dir(void)
{
    const char *d = getenv("SLUICE_TOKENIZER_FILES");
    if (d == NULL || *d == '\0') {
        printf("real ranks files: skipped (SLUICE_TOKENIZER_FILES is not set; "
               "tests/integration/test_tokenizer_oracle.sh sets it)\n");
        return NULL;
    }
    return d;
}

static sl_tokenizer_t *real(const char *enc)
{
    char path[512], err[512];
    snprintf(path, sizeof(path), "%s/%s.tiktoken", real_dir(), enc);
    sl_tokenizer_t *t = NULL;
    int rc = sl_tokenizer_open(path, enc, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    return t;
}

START_TEST(test_real_known_ids)
{
    if (real_dir() == NULL) {
        return;
    }
    sl_tokenizer_t *t = real("cl100k_base");
    ck_assert_uint_eq(sl_tokenizer_vocab_size(t), 100277);
    EXPECT(t, "hello world", SL_TOK_ORDINARY, 0, 15339, 1917);
    EXPECT(t, "tiktoken is great!", SL_TOK_ORDINARY, 0, 83, 1609, 5963, 374, 2294, 0);
    EXPECT(t, "<|endoftext|>x", SL_TOK_ALLOW_SPECIAL, 0, 100257, 87);
    EXPECT(t, "<|endoftext|>x", SL_TOK_ORDINARY, 0, 27, 91, 8862, 728, 428, 91, 29, 87);
    EXPECT(t, "I'm 12345  \n", SL_TOK_ORDINARY, 0, 40, 2846, 220, 4513, 1774, 2355);
    sl_tokenizer_free(t);
    t = real("o200k_base");
    ck_assert_uint_eq(sl_tokenizer_vocab_size(t), 200019);
    EXPECT(t, "hello world", SL_TOK_ORDINARY, 0, 24912, 2375);
    EXPECT(t, "tiktoken is great!", SL_TOK_ORDINARY, 0, 83, 8251, 2488, 382, 2212, 0);
    EXPECT(t, "I'm 12345  \n", SL_TOK_ORDINARY, 0, 15390, 220, 7633, 2548, 4066);
    sl_tokenizer_free(t);
    t = real("gpt2");
    ck_assert_uint_eq(sl_tokenizer_vocab_size(t), 50257);
    EXPECT(t, "hello world", SL_TOK_ORDINARY, 0, 31373, 995);
    EXPECT(t, "I'm 12345  \n", SL_TOK_ORDINARY, 0, 40, 1101, 17031, 2231, 220, 220, 198);
    EXPECT(t, "<|endoftext|>x", SL_TOK_ALLOW_SPECIAL, 0, 50256, 87);
    sl_tokenizer_free(t);
}
END_TEST

START_TEST(test_real_linear_and_heap_agree)
{
    if (real_dir() == NULL) {
        return;
    }
    static const char *encs[] = {"cl100k_base", "o200k_base", "gpt2"};
    for (int e = 0; e < 3; e++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.tiktoken", real_dir(), encs[e]);
        sl_bpe_ranks_t *r = ranks_of(path);
        cross_check(r, "etaoinshrdlu ETAO.,!-=_/'\"", 300, 400);
        cross_check(r, "!!!???..--==", 100, 2000);
        sl_bpe_ranks_free(r);
    }
}
END_TEST

static void setup(void) { ck_assert_int_eq(fx_mkdtemp(g_dir), 0); }
static void teardown(void) { fx_rmtree(g_dir); }

int main(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_merge_rules);
    tcase_add_test(tc, test_special_and_max_tokens);
    tcase_add_test(tc, test_invalid_utf8);
    tcase_add_test(tc, test_malformed_ranks_files);
    tcase_add_test(tc, test_linear_and_heap_agree);
    tcase_add_test(tc, test_real_known_ids);
    tcase_add_test(tc, test_real_linear_and_heap_agree);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
