/* fuzz_tokenizer: the BPE tokenizer (common/text/tokenizer.c, bpe_ranks.c,
 * bpe_merge.c, pretok.c) on arbitrary text, and its ranks-file parser on
 * arbitrary file bytes -- a sample's text and a data root's vocabulary are
 * both the data set's.
 *
 * Input: byte 0 = flags (bit 0: the rest is a ranks file, else text; bits
 * 1-2: the encoding, cl100k_base / o200k_base / gpt2 / r50k_base), bytes 1-2
 * = max_tokens (u16 LE, 0: no limit), then the text or the file.
 *
 * Text is encoded with a small byte-level vocabulary written at start-up
 * (every byte, plus merges of ASCII, CJK and emoji prefixes), ORDINARY and
 * ALLOW_SPECIAL, with and without max_tokens. Contracts (tokenizer.h):
 *   - encode returns 0, -EILSEQ, -E2BIG or -ENOMEM with a printable message;
 *     -EILSEQ exactly when sl_utf8_check (common/base/utf8.h) refuses the text;
 *   - every id is below sl_tokenizer_vocab_size, and is a rank of the file
 *     or (ALLOW_SPECIAL only) a special token of the encoding;
 *   - decoding the ids through the ranks gives the text back, byte for byte
 *     (specials decode to their text); with max_tokens the ids are the first
 *     max_tokens of the unlimited encoding, and decode to a prefix of the text;
 *   - without "<|" in the text, ORDINARY and ALLOW_SPECIAL agree.
 * A ranks file opens (0) or is refused with -EINVAL or -E2BIG and a printable,
 * non-empty message; one that opens encodes a fixed text to ids below its
 * vocabulary size. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/utf8.h"
#include "common/text/text_impl.h"
#include "common/text/tokenizer.h"
#include "tests/fuzz/fuzz.h"
#include "tests/unit/fixtures.h"

static const char *const FZ_TOK_ENCODINGS[4] = {"cl100k_base", "o200k_base", "gpt2",
                                                 "r50k_base"};

/* Ranks 256.. : multi-byte tokens, each reachable by merging two tokens. */
static const char *const FZ_TOK_EXTRA[] = {
    "th",       "the",      " t",       " the",         "in",           "ing",
    "  ",       "    ",     "\n\n",     "<|",           "|>",           "12",
    "123",      "\xe4\xbd", "\xe4\xbd\xa0", "\xe5\xa5", "\xe5\xa5\xbd", "\xf0\x9f",
    "\xf0\x9f\x98", "\xf0\x9f\x98\x80", "\xc3\xa9", "'s", " '",
};
#define FZ_TOK_NEXTRA (sizeof(FZ_TOK_EXTRA) / sizeof(FZ_TOK_EXTRA[0]))

static fz_tmpfile_t fz_tok_vocab, fz_tok_file;
static sl_tokenizer_t *fz_tok[4];
static sl_tok_scratch_t *fz_tok_scratch[4];

static void fz_tok_cleanup(void)
{
    for (int i = 0; i < 4; i++) {
        sl_tok_scratch_free(fz_tok_scratch[i]);
        sl_tokenizer_free(fz_tok[i]);
        fz_tok_scratch[i] = NULL;
        fz_tok[i] = NULL;
    }
    fz_tmpfile_remove(&fz_tok_vocab);
}

static void fz_tok_file_cleanup(void) { fz_tmpfile_remove(&fz_tok_file); }

/* The vocabulary file and one tokenizer per encoding, once per process. */
static void fz_tok_setup(void)
{
    if (fz_tok[0] != NULL) {
        return;
    }
    fz_tmpfile_setup(&fz_tok_vocab, "tok", "tiny.tiktoken", fz_tok_cleanup);
    char buf[16384];
    size_t o = 0;
    for (unsigned r = 0; r < 256 + FZ_TOK_NEXTRA; r++) {
        uint8_t b = (uint8_t)r;
        const uint8_t *tok = r < 256 ? &b : (const uint8_t *)FZ_TOK_EXTRA[r - 256];
        size_t n = r < 256 ? 1 : strlen(FZ_TOK_EXTRA[r - 256]);
        o += fx_base64(tok, n, buf + o);
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, " %u\n", r);
    }
    fz_tmpfile_write(&fz_tok_vocab, (const uint8_t *)buf, o);
    for (int i = 0; i < 4; i++) {
        char err[512];
        int rc = sl_tokenizer_open(fz_tok_vocab.path, FZ_TOK_ENCODINGS[i], &fz_tok[i], err,
                                   sizeof(err));
        FZ_CHECK(rc == 0, "the fuzz vocabulary does not open: %s", err);
        fz_tok_scratch[i] = sl_tok_scratch_new(fz_tok[i]);
        FZ_CHECK(fz_tok_scratch[i] != NULL, "out of memory");
    }
}

/* Appends the bytes of id to out; 0, or -1 for an id that is not ours. */
static int fz_tok_decode1(const sl_encoding_t *enc, int allow, uint32_t id, uint8_t *out,
                          size_t *o)
{
    const char *s = NULL;
    size_t n = 1;
    if (id < 256) {
        out[(*o)++] = (uint8_t)id;
        return 0;
    }
    if (id < 256 + FZ_TOK_NEXTRA) {
        s = FZ_TOK_EXTRA[id - 256];
    }
    for (size_t k = 0; s == NULL && allow && k < enc->nspecials; k++) {
        if (enc->specials[k].id == id) {
            s = enc->specials[k].text;
        }
    }
    if (s == NULL) {
        return -1;
    }
    n = strlen(s);
    memcpy(out + *o, s, n);
    *o += n;
    return 0;
}

/* Encodes, checks the result, returns rc; ids/n hold the result. */
static int fz_tok_encode(int e, const uint8_t *text, size_t len, sl_tok_special_e sp,
                         size_t max, uint32_t **ids, size_t *cap, size_t *n)
{
    char err[512];
    size_t got = (size_t)-1;
    int rc = sl_tokenizer_encode(fz_tok[e], fz_tok_scratch[e], (const char *)text, len, sp, max,
                                 ids, cap, &got, err, sizeof(err));
    size_t bad = 0;
    int valid = sl_utf8_check((const char *)text, len, &bad) == 0;
    FZ_CHECK(rc == 0 || rc == -EILSEQ || rc == -E2BIG || rc == -ENOMEM,
             "%s: encode returned %d: %s", FZ_TOK_ENCODINGS[e], rc, err);
    FZ_CHECK((rc == -EILSEQ) == !valid, "%s: encode returned %d, utf8 check says %s at %zu",
             FZ_TOK_ENCODINGS[e], rc, valid ? "valid" : "invalid", bad);
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)) && err[0] != '\0', "bad error message");
        FZ_CHECK(got == (size_t)-1, "ret_n written on failure");
        return rc;
    }
    FZ_CHECK(max == 0 || got <= max, "%zu ids, max_tokens %zu", got, max);
    FZ_CHECK(got == 0 || *ids != NULL, "ids NULL");
    FZ_CHECK(got <= *cap, "%zu ids in a buffer of %zu", got, *cap);
    *n = got;
    uint32_t vs = sl_tokenizer_vocab_size(fz_tok[e]);
    const sl_encoding_t *enc = sl_encoding_find(FZ_TOK_ENCODINGS[e]);
    uint8_t *dec = malloc(got * 16 + 1);
    FZ_CHECK(dec != NULL, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < got; i++) {
        uint32_t id = (*ids)[i];
        FZ_CHECK(id < vs, "id %u >= vocab size %u", id, vs);
        FZ_CHECK(fz_tok_decode1(enc, sp == SL_TOK_ALLOW_SPECIAL, id, dec, &o) == 0,
                 "%s: id %u at %zu is neither a rank nor an allowed special",
                 FZ_TOK_ENCODINGS[e], id, i);
    }
    if (max == 0 || got < max) {
        FZ_CHECK(o == len && (len == 0 || memcmp(dec, text, len) == 0),
                 "%s (%s): %zu bytes decode to %zu different bytes", FZ_TOK_ENCODINGS[e],
                 sp == SL_TOK_ALLOW_SPECIAL ? "allow" : "ordinary", len, o);
    } else {
        FZ_CHECK(o <= len && (o == 0 || memcmp(dec, text, o) == 0),
                 "%s: %zu truncated ids do not decode to a prefix", FZ_TOK_ENCODINGS[e], got);
    }
    free(dec);
    return 0;
}

static void fz_tok_text(int e, const uint8_t *text, size_t len, size_t max)
{
    uint32_t *full[2] = {NULL, NULL}, *cut = NULL;
    size_t cap[2] = {0, 0}, ccap = 0, n[2] = {0, 0}, nc = 0;
    static const sl_tok_special_e SP[2] = {SL_TOK_ORDINARY, SL_TOK_ALLOW_SPECIAL};
    for (int k = 0; k < 2; k++) {
        int rc = fz_tok_encode(e, text, len, SP[k], 0, &full[k], &cap[k], &n[k]);
        if (rc != 0) {
            goto out;
        }
        if (max > 0) {
            rc = fz_tok_encode(e, text, len, SP[k], max, &cut, &ccap, &nc);
            FZ_CHECK(rc == 0, "max_tokens %zu made encode fail: %d", max, rc);
            FZ_CHECK(nc == (n[k] < max ? n[k] : max) &&
                         (nc == 0 || memcmp(cut, full[k], nc * 4) == 0),
                     "max_tokens %zu: %zu ids, not the first of %zu", max, nc, n[k]);
        }
    }
    if (memmem(text, len, "<|", 2) == NULL) {
        FZ_CHECK(n[0] == n[1] && (n[0] == 0 || memcmp(full[0], full[1], n[0] * 4) == 0),
                 "ordinary and allow_special differ without a special token");
    }
out:
    free(full[0]);
    free(full[1]);
    free(cut);
}

static void fz_tok_ranks(int e, const uint8_t *data, size_t size)
{
    fz_tmpfile_setup(&fz_tok_file, "tokf", "fuzz.tiktoken", fz_tok_file_cleanup);
    fz_tmpfile_write(&fz_tok_file, data, size);
    int fd = open(fz_tok_file.path, O_RDONLY | O_CLOEXEC);
    FZ_CHECK(fd >= 0, "cannot open %s", fz_tok_file.path);
    sl_tokenizer_t *t = NULL;
    char err[512] = "";
    int rc = sl_tokenizer_open_fd(fd, "fuzz.tiktoken", FZ_TOK_ENCODINGS[e], &t, err, sizeof(err));
    close(fd);
    FZ_CHECK(rc == 0 || rc == -EINVAL || rc == -E2BIG, "open returned %d: %s", rc, err);
    if (rc != 0) {
        FZ_CHECK(t == NULL, "*ret set on failure");
        FZ_CHECK(fz_err_ok(err, sizeof(err)) && strncmp(err, "fuzz.tiktoken", 13) == 0,
                 "bad error message: %s", err);
        return;
    }
    uint32_t vs = sl_tokenizer_vocab_size(t);
    FZ_CHECK(vs >= 256, "vocab size %u", vs);
    sl_tok_scratch_t *sc = sl_tok_scratch_new(t);
    FZ_CHECK(sc != NULL, "out of memory");
    static const char TEXT[] = "The quick fox's 12345 <|endoftext|> \xe4\xbd\xa0\xe5\xa5\xbd "
                               "\xf0\x9f\x98\x80!!\n\n   tabs\there";
    for (int k = 0; k < 2; k++) {
        uint32_t *ids = NULL;
        size_t cap = 0, n = 0;
        rc = sl_tokenizer_encode(t, sc, TEXT, sizeof(TEXT) - 1,
                                 k ? SL_TOK_ALLOW_SPECIAL : SL_TOK_ORDINARY, 0, &ids, &cap, &n,
                                 err, sizeof(err));
        FZ_CHECK(rc == 0 || rc == -ENOMEM, "encode with a fuzzed vocabulary: %d: %s", rc, err);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            FZ_CHECK(ids[i] < vs, "id %u >= vocab size %u", ids[i], vs);
        }
        free(ids);
    }
    sl_tok_scratch_free(sc);
    sl_tokenizer_free(t);
}

int fuzz_tokenizer_one(const uint8_t *data, size_t size)
{
    fz_tok_setup();
    fz_reader_t r = {data, size};
    uint32_t flags = fz_take(&r, 1);
    size_t max = fz_take(&r, 2);
    int e = (int)((flags >> 1) & 3);
    if (flags & 1) {
        fz_tok_ranks(e, r.p, r.n);
    } else {
        fz_tok_text(e, r.p, r.n, max);
    }
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_tokenizer_one)
