/* tokenizer: open (ranks file + encoding), per-thread scratch, and encode
 * (validate, split at special tokens, regex pieces, ranks or merge). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "common/text/tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/base/file.h"
#include "common/base/utf8.h"
#include "common/text/text_impl.h"

#define JIT_STACK_MAX (1u << 20) /* backtracking in \s+(?!\S) over long runs */

struct sl_tokenizer_s {
    const sl_encoding_t *enc; /* static table row */
    sl_bpe_ranks_t *ranks;
    pcre2_code *re; /* JIT-compiled; shared read-only by all threads */
    uint32_t vocab_size;
};

struct sl_tok_scratch_s {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    sl_bpe_buf_t merge;
};

int sl_tokenizer_open_fd(int fd, const char *name, const char *encoding, sl_tokenizer_t **ret,
                         char *err, size_t errlen)
{
    int rc = 0;
    char *buf = NULL, *pat = NULL;
    size_t len = 0;
    const sl_encoding_t *enc = sl_encoding_find(encoding);
    if (enc == NULL) {
        return sl_err(err, errlen, -EINVAL,
                      "unknown encoding \"%s\" (cl100k_base, o200k_base, gpt2, r50k_base)",
                      encoding != NULL ? encoding : "(null)");
    }
    sl_tokenizer_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    t->enc = enc;
    if ((rc = sl_file_read_fd(fd, name, SL_TOK_MAX_RANKS_FILE, &buf, &len, err, errlen)) < 0 ||
        (rc = sl_bpe_ranks_parse(buf, len, name, &t->ranks, err, errlen)) < 0) {
        goto out;
    }
    t->vocab_size = sl_bpe_ranks_max(t->ranks) + 1;
    for (size_t k = 0; k < enc->nspecials; k++) {
        const sl_special_t *sp = &enc->specials[k];
        if (sp->id + 1 > t->vocab_size) {
            t->vocab_size = sp->id + 1;
        }
    }
    pat = sl_encoding_pcre_pattern(enc);
    if (pat == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    int ec;
    PCRE2_SIZE eoff;
    t->re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK,
                          &ec, &eoff, NULL);
    if (t->re == NULL) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof(msg));
        rc = sl_err(err, errlen, -EINVAL, "%s: regex at %zu: %s", enc->name, (size_t)eoff,
                    (const char *)msg);
        goto out;
    }
    /* Without the JIT (a kernel that forbids executable memory) pcre2_match
     * interprets the same pattern: slower, same ids. */
    (void)pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE);
    *ret = t;
    t = NULL;
out:
    free(pat);
    free(buf);
    sl_tokenizer_free(t);
    return rc;
}

int sl_tokenizer_open(const char *path, const char *encoding, sl_tokenizer_t **ret, char *err,
                      size_t errlen)
{
    if (sl_encoding_find(encoding) == NULL) { /* before touching the file */
        return sl_tokenizer_open_fd(-1, path, encoding, ret, err, errlen);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return sl_err(err, errlen, -e, "%s: cannot open: %s", path, strerror(e));
    }
    int rc = sl_tokenizer_open_fd(fd, path, encoding, ret, err, errlen);
    close(fd);
    return rc;
}

void sl_tokenizer_free(sl_tokenizer_t *t)
{
    if (t == NULL) {
        return;
    }
    pcre2_code_free(t->re);
    sl_bpe_ranks_free(t->ranks);
    free(t);
}

uint32_t sl_tokenizer_vocab_size(const sl_tokenizer_t *t) { return t->vocab_size; }

sl_tok_scratch_t *sl_tok_scratch_new(const sl_tokenizer_t *t)
{
    sl_tok_scratch_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->md = pcre2_match_data_create_from_pattern(t->re, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    s->jit = pcre2_jit_stack_create(32 * 1024, JIT_STACK_MAX, NULL);
    if (s->md == NULL || s->mctx == NULL || s->jit == NULL) {
        sl_tok_scratch_free(s);
        return NULL;
    }
    pcre2_jit_stack_assign(s->mctx, NULL, s->jit);
    /* \s*[\r\n] backtracks once per byte of a whitespace run: a run of
     * SL_TOK_MAX_TEXT bytes must not hit PCRE2's default limit of 10^7
     * (linear work per run, not a risk to bound). */
    pcre2_set_match_limit(s->mctx, UINT32_MAX);
    return s;
}

void sl_tok_scratch_free(sl_tok_scratch_t *s)
{
    if (s == NULL) {
        return;
    }
    pcre2_jit_stack_free(s->jit);
    pcre2_match_context_free(s->mctx);
    pcre2_match_data_free(s->md);
    sl_bpe_buf_release(&s->merge);
    free(s);
}

/* Makes room for `more` ids after n (never more than the limit needs). */
static int reserve(uint32_t **ids, size_t *cap, size_t n, size_t more)
{
    if (n + more <= *cap) {
        return 0;
    }
    size_t c = *cap ? *cap : 1024;
    while (c < n + more) {
        c *= 2;
    }
    uint32_t *p = realloc(*ids, c * sizeof(uint32_t));
    if (p == NULL) {
        return -ENOMEM;
    }
    *ids = p;
    *cap = c;
    return 0;
}

/* Encodes the ordinary text in [from, end) (a regex subject ending at end,
 * as tiktoken's slice up to the next special token) into ids from *n. */
static int encode_ordinary(const sl_tokenizer_t *t, sl_tok_scratch_t *s, const uint8_t *text,
                           size_t from, size_t end, size_t limit, uint32_t **ids, size_t *cap,
                           size_t *n, int *ret_pcre)
{
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
    size_t pos = from;
    while (pos < end && *n < limit) {
        int m = pcre2_match(t->re, text, end, pos, PCRE2_NO_UTF_CHECK, s->md, s->mctx);
        if (m == PCRE2_ERROR_NOMATCH) {
            break; /* find_iter: nothing more to find; the rest is dropped */
        }
        if (m < 0) {
            *ret_pcre = m;
            return m == PCRE2_ERROR_NOMEMORY || m == PCRE2_ERROR_JIT_STACKLIMIT ? -ENOMEM
                                                                                 : -EIO;
        }
        size_t a = ov[0], b = ov[1];
        if (b <= a) { /* cannot happen with these patterns; never loop */
            pos = a + 1;
            continue;
        }
        pos = b;
        const uint8_t *piece = text + a;
        size_t len = b - a, got;
        if (reserve(ids, cap, *n, len) < 0) {
            return -ENOMEM;
        }
        uint32_t r = len == 1   ? sl_bpe_rank1(t->ranks, piece[0])
                     : len == 2 ? sl_bpe_rank2(t->ranks, piece[0], piece[1])
                                : sl_bpe_rank(t->ranks, piece, len);
        if (r != SL_RANK_NONE) {
            (*ids)[(*n)++] = r;
            continue;
        }
        if (sl_bpe_merge(t->ranks, &s->merge, piece, len, *ids + *n, &got, 0) < 0) {
            return -ENOMEM;
        }
        *n += got;
    }
    return 0;
}

int sl_tokenizer_encode(const sl_tokenizer_t *t, sl_tok_scratch_t *s, const char *text,
                        size_t len, sl_tok_special_e special, size_t max_tokens, uint32_t **ids,
                        size_t *cap, size_t *ret_n, char *err, size_t errlen)
{
    const uint8_t *p = (const uint8_t *)text;
    size_t limit = max_tokens ? max_tokens : SIZE_MAX, n = 0, bad;
    if (len > SL_TOK_MAX_TEXT) {
        return sl_err(err, errlen, -E2BIG, "text of %zu bytes: the limit is %zu", len,
                      SL_TOK_MAX_TEXT);
    }
    if (sl_utf8_check(text, len, &bad) < 0) {
        return sl_err(err, errlen, -EILSEQ, "invalid UTF-8 at byte offset %zu", bad);
    }
    size_t pos = 0;
    while (n < limit) {
        size_t at = len;
        const sl_special_t *sp = NULL;
        if (special == SL_TOK_ALLOW_SPECIAL &&
            sl_special_find(t->enc, p, pos, len, &at, &sp) < 0) {
            at = len;
            sp = NULL;
        }
        int pcre_rc = 0, rc = encode_ordinary(t, s, p, pos, at, limit, ids, cap, &n, &pcre_rc);
        if (rc < 0 && pcre_rc != 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(pcre_rc, msg, sizeof(msg));
            return sl_err(err, errlen, rc, "pre-tokenizing after byte %zu: %s", pos,
                          (const char *)msg);
        }
        if (rc < 0) {
            return sl_err(err, errlen, rc, "out of memory");
        }
        if (sp == NULL || n >= limit) {
            break;
        }
        if (reserve(ids, cap, n, 1) < 0) {
            return sl_err(err, errlen, -ENOMEM, "out of memory");
        }
        (*ids)[n++] = sp->id;
        pos = at + strlen(sp->text);
    }
    *ret_n = n < limit ? n : limit;
    return 0;
}
