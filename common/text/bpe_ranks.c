/* bpe_ranks: a tiktoken ranks file parsed into an immutable hash table from
 * token bytes to rank. Built once by sl_bpe_ranks_parse, then only read (any
 * number of threads). Single bytes and byte pairs -- the lookups the merge
 * does most -- also have direct tables, so they are never hashed. A slot
 * holds a token of up to 8 bytes itself (one cache line per lookup, no
 * memcmp); longer ones point into the bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/text/text_impl.h"
#include "common/text/tokenizer.h"

#define LINE_MAX_BYTES 1024

typedef struct entry_s {
    uint32_t off; /* into bytes */
    uint32_t len;
    uint32_t rank;
    uint32_t line; /* in the file, for errors */
} entry_t;

typedef struct slot_s {
    uint64_t key; /* len <= 8: the bytes, zero-padded; longer: offset into bytes */
    uint32_t rank;
    uint32_t len; /* 0: empty */
} slot_t;

struct sl_bpe_ranks_s {
    uint8_t *bytes; /* every token's bytes, back to back */
    entry_t *entries;
    uint32_t n;
    slot_t *slots; /* open addressing, linear probing, load <= 1/2 */
    uint32_t mask;
    uint32_t max_rank;
    uint32_t rank1[256];
    uint32_t *rank2; /* 65536 entries, a << 8 | b */
};

static inline uint64_t pack8(const uint8_t *p, size_t n)
{
    uint64_t w = 0;
    memcpy(&w, p, n < 8 ? n : 8);
    return w;
}

static inline uint64_t mix(uint64_t h)
{
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

/* Tokens are short (most under 8 bytes): one multiply-xorshift round per 8
 * bytes, the first word being the slot key of short tokens. */
static inline uint64_t hash_bytes(const uint8_t *p, size_t n, uint64_t first)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h = (first ^ ((uint64_t)n << 56)) * k;
    for (size_t i = 8; i < n; i += 8) {
        h = mix(h ^ pack8(p + i, n - i)) * k;
    }
    return mix(h);
}

uint32_t sl_bpe_rank(const sl_bpe_ranks_t *r, const uint8_t *p, size_t n)
{
    uint64_t first = pack8(p, n);
    uint64_t h = hash_bytes(p, n, first);
    for (uint32_t i = (uint32_t)h & r->mask;; i = (i + 1) & r->mask) {
        const slot_t *s = &r->slots[i];
        if (s->len == 0) {
            return SL_RANK_NONE;
        }
        if (s->len == n) {
            if (n <= 8 ? s->key == first : memcmp(r->bytes + s->key, p, n) == 0) {
                return s->rank;
            }
        }
    }
}

uint32_t sl_bpe_rank2(const sl_bpe_ranks_t *r, uint8_t a, uint8_t b)
{
    return r->rank2[(uint32_t)a << 8 | b];
}

uint32_t sl_bpe_rank1(const sl_bpe_ranks_t *r, uint8_t a) { return r->rank1[a]; }

uint32_t sl_bpe_ranks_max(const sl_bpe_ranks_t *r) { return r->max_rank; }

void sl_bpe_ranks_free(sl_bpe_ranks_t *r)
{
    if (r == NULL) {
        return;
    }
    free(r->rank2);
    free(r->slots);
    free(r->entries);
    free(r->bytes);
    free(r);
}

static int b64_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

/* Strict standard base64 (padded, no whitespace, zero trailing bits) of
 * s[0, n) into out; returns the byte count or -1. */
static int b64_decode(const uint8_t *s, size_t n, uint8_t *out, size_t outcap)
{
    if (n == 0 || n % 4 != 0) {
        return -1;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad > 0 || (v[k] = b64_value(s[i + k])) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        if ((pad == 1 && (w & 0xff) != 0) || (pad == 2 && (w & 0xffff) != 0)) {
            return -1; /* non-canonical trailing bits */
        }
        size_t nb = 3 - (size_t)pad;
        if (o + nb > outcap) {
            return -1;
        }
        for (size_t k = 0; k < nb; k++) {
            out[o++] = (uint8_t)(w >> (16 - 8 * k));
        }
    }
    return (int)o;
}

static int table_insert(sl_bpe_ranks_t *r, uint32_t idx, uint32_t *ret_dup)
{
    const entry_t *e = &r->entries[idx];
    const uint8_t *p = r->bytes + e->off;
    uint64_t first = pack8(p, e->len);
    uint64_t h = hash_bytes(p, e->len, first);
    for (uint32_t i = (uint32_t)h & r->mask;; i = (i + 1) & r->mask) {
        slot_t *s = &r->slots[i];
        if (s->len == 0) {
            s->key = e->len <= 8 ? first : e->off;
            s->rank = e->rank;
            s->len = e->len;
            return 0;
        }
        if (s->len == e->len &&
            (e->len <= 8 ? s->key == first : memcmp(r->bytes + s->key, p, e->len) == 0)) {
            /* Which line had it: by rank (ranks are not yet known unique). */
            for (uint32_t k = 0; k < idx; k++) {
                const entry_t *o = &r->entries[k];
                if (o->len == e->len && memcmp(r->bytes + o->off, p, e->len) == 0) {
                    *ret_dup = k;
                    break;
                }
            }
            return -EEXIST;
        }
    }
}

static int cmp_rank(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->rank != y->rank) {
        return x->rank < y->rank ? -1 : 1;
    }
    return x->line < y->line ? -1 : x->line > y->line;
}

/* One line "BASE64 RANK" (fields split by spaces or tabs, as Python's
 * str.split() in tiktoken's loader; a trailing CR is allowed). */
static int parse_line(const uint8_t *s, size_t n, uint8_t *tok, size_t *ret_toklen,
                      uint32_t *ret_rank, const char **why)
{
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) {
        n--;
    }
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) {
        i++;
    }
    size_t b0 = i;
    while (i < n && s[i] != ' ' && s[i] != '\t') {
        i++;
    }
    size_t b1 = i;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) {
        i++;
    }
    if (i == n) {
        *why = "expected \"BASE64-TOKEN RANK\": no rank";
        return -1;
    }
    uint64_t rank = 0;
    size_t d0 = i;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        rank = rank * 10 + (uint64_t)(s[i] - '0');
        if (rank > SL_TOK_MAX_RANK) {
            *why = "rank over the limit of 16777215";
            return -1;
        }
    }
    if (i != n || i == d0) {
        *why = "the rank is not a decimal number (or there are more than two fields)";
        return -1;
    }
    int tl = b64_decode(s + b0, b1 - b0, tok, SL_TOK_MAX_TOKEN_BYTES);
    if (tl <= 0) {
        *why = b1 - b0 > (SL_TOK_MAX_TOKEN_BYTES + 2) / 3 * 4
                   ? "token longer than 256 bytes"
                   : "the token is not canonical padded base64";
        return -1;
    }
    *ret_toklen = (size_t)tl;
    *ret_rank = (uint32_t)rank;
    return 0;
}

/* Every non-blank line into r->entries and r->bytes (sized by the caller
 * from len). */
static int read_lines(sl_bpe_ranks_t *r, const uint8_t *p, size_t len, const char *name,
                      char *err, size_t errlen)
{
    size_t line = 0, nlines = 0, nbytes = 0;
    for (size_t i = 0; i < len;) {
        const uint8_t *nl = memchr(p + i, '\n', len - i);
        size_t end = nl != NULL ? (size_t)(nl - p) : len;
        line++;
        if (end - i > LINE_MAX_BYTES) {
            return sl_err(err, errlen, -EINVAL, "%s:%zu: line longer than %d bytes", name, line,
                          LINE_MAX_BYTES);
        }
        size_t blank = i;
        while (blank < end && (p[blank] == ' ' || p[blank] == '\t' || p[blank] == '\r')) {
            blank++;
        }
        if (blank < end) { /* tiktoken's loader skips empty lines */
            uint8_t tok[SL_TOK_MAX_TOKEN_BYTES];
            size_t tl;
            uint32_t rank;
            const char *why = NULL;
            if (parse_line(p + i, end - i, tok, &tl, &rank, &why) < 0) {
                return sl_err(err, errlen, -EINVAL, "%s:%zu: %s", name, line, why);
            }
            entry_t *e = &r->entries[nlines++];
            e->off = (uint32_t)nbytes;
            e->len = (uint32_t)tl;
            e->rank = rank;
            e->line = (uint32_t)line;
            memcpy(r->bytes + nbytes, tok, tl);
            nbytes += tl;
            if (rank > r->max_rank) {
                r->max_rank = rank;
            }
        }
        i = end + 1;
    }
    if (nlines == 0) {
        return sl_err(err, errlen, -EINVAL, "%s: no tokens (empty file)", name);
    }
    r->n = (uint32_t)nlines;
    return 0;
}

/* The hash table; a token twice is an error naming both lines. */
static int build_table(sl_bpe_ranks_t *r, const char *name, char *err, size_t errlen)
{
    uint32_t cap = 16;
    while (cap < 2 * r->n) {
        cap *= 2;
    }
    r->mask = cap - 1;
    r->slots = calloc(cap, sizeof(slot_t));
    if (r->slots == NULL) {
        return sl_err(err, errlen, -ENOMEM, "%s: out of memory", name);
    }
    for (uint32_t k = 0; k < r->n; k++) {
        uint32_t dup = k;
        if (table_insert(r, k, &dup) < 0) {
            return sl_err(err, errlen, -EINVAL, "%s:%u: the token of line %u again", name,
                          r->entries[k].line, r->entries[dup].line);
        }
    }
    return 0;
}

/* A rank given twice (found by sorting) names both lines. */
static int check_ranks(const sl_bpe_ranks_t *r, const char *name, char *err, size_t errlen)
{
    entry_t *sorted = malloc(r->n * sizeof(entry_t));
    if (sorted == NULL) {
        return sl_err(err, errlen, -ENOMEM, "%s: out of memory", name);
    }
    memcpy(sorted, r->entries, r->n * sizeof(entry_t));
    qsort(sorted, r->n, sizeof(entry_t), cmp_rank);
    int rc = 0;
    for (uint32_t k = 1; k < r->n; k++) {
        if (sorted[k].rank == sorted[k - 1].rank) {
            entry_t *a = &sorted[k - 1], *b = &sorted[k];
            if (a->line > b->line) {
                entry_t *t = a;
                a = b;
                b = t;
            }
            rc = sl_err(err, errlen, -EINVAL, "%s:%u: rank %u was already given on line %u",
                        name, b->line, b->rank, a->line);
            break;
        }
    }
    free(sorted);
    return rc;
}

/* The one- and two-byte fast paths; every byte must have a token. */
static int fill_short(sl_bpe_ranks_t *r, const char *name, char *err, size_t errlen)
{
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        r->rank1[b] = sl_bpe_rank(r, &c, 1);
        if (r->rank1[b] == SL_RANK_NONE) {
            return sl_err(err, errlen, -EINVAL,
                          "%s: byte 0x%02x has no token (a byte-level BPE needs all 256)", name,
                          b);
        }
    }
    for (uint32_t k = 0; k < 65536; k++) {
        uint8_t two[2] = {(uint8_t)(k >> 8), (uint8_t)k};
        r->rank2[k] = sl_bpe_rank(r, two, 2);
    }
    return 0;
}

int sl_bpe_ranks_parse(const char *buf, size_t len, const char *name, sl_bpe_ranks_t **ret,
                       char *err, size_t errlen)
{
    sl_bpe_ranks_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return sl_err(err, errlen, -ENOMEM, "%s: out of memory", name);
    }
    /* Upper bounds from the size: every line is at least "XX== 0" (6 bytes
     * plus newline) and decodes to at most 3/4 of its length. */
    size_t maxlines = len / 7 + 1;
    r->entries = malloc(maxlines * sizeof(entry_t));
    r->bytes = malloc(len / 4 * 3 + 4);
    r->rank2 = malloc(65536 * sizeof(uint32_t));
    int rc = 0;
    if (r->entries == NULL || r->bytes == NULL || r->rank2 == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "%s: out of memory", name);
    }
    if (rc == 0) {
        rc = read_lines(r, (const uint8_t *)buf, len, name, err, errlen);
    }
    if (rc == 0) {
        rc = build_table(r, name, err, errlen);
    }
    if (rc == 0) {
        rc = check_ranks(r, name, err, errlen);
    }
    if (rc == 0) {
        rc = fill_short(r, name, err, errlen);
    }
    if (rc < 0) {
        sl_bpe_ranks_free(r);
        return rc;
    }
    free(r->entries); /* only loading and its errors need them */
    r->entries = NULL;
    *ret = r;
    return 0;
}
