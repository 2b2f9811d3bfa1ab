/* text_impl: what the tokenizer's files share inside common/text (not API).
 * bpe_ranks.c owns the ranks table, bpe_merge.c the merge, pretok.c the
 * per-encoding regexes and special tokens, tokenizer.c ties them together. */
#ifndef SL_TEXT_IMPL_H
#define SL_TEXT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define SL_RANK_NONE UINT32_MAX

/* ---- bpe_ranks.c: immutable byte-string -> rank table. */
typedef struct sl_bpe_ranks_s sl_bpe_ranks_t;

/* Parses a ranks file already in memory (buf[0, len)); name for errors.
 * -EINVAL names name:line for a malformed line, a duplicate token or rank;
 * a file without all 256 single bytes is refused too (BPE could not encode
 * every text). */
int sl_bpe_ranks_parse(const char *buf, size_t len, const char *name, sl_bpe_ranks_t **ret,
                       char *err, size_t errlen);
void sl_bpe_ranks_free(sl_bpe_ranks_t *r);
uint32_t sl_bpe_ranks_max(const sl_bpe_ranks_t *r); /* largest rank */
/* Rank of the token p[0, n), or SL_RANK_NONE. */
uint32_t sl_bpe_rank(const sl_bpe_ranks_t *r, const uint8_t *p, size_t n);
/* Rank of the two-byte token a b (a table, no hashing), or SL_RANK_NONE. */
uint32_t sl_bpe_rank2(const sl_bpe_ranks_t *r, uint8_t a, uint8_t b);
uint32_t sl_bpe_rank1(const sl_bpe_ranks_t *r, uint8_t a);

/* ---- bpe_merge.c: tiktoken's byte_pair_encode of one piece (n >= 2 bytes,
 * not itself a token). Scratch buffers grow as needed. */
typedef struct sl_bpe_buf_s {
    uint64_t *a; /* parts (small pieces) or heap entries (long pieces) */
    size_t acap;
    uint32_t *link; /* long pieces: next/prev/rank per position */
    size_t lcap;
} sl_bpe_buf_t;

#define SL_BPE_HEAP_MIN 96 /* pieces this long or longer merge through a heap */

/* Appends the piece's ids to out (room for n ids); *ret_n ids written.
 * algo: 0 picks by length, 1 forces the linear scan, 2 the heap (tests). */
int sl_bpe_merge(const sl_bpe_ranks_t *r, sl_bpe_buf_t *b, const uint8_t *p, size_t n,
                 uint32_t *out, size_t *ret_n, int algo);
void sl_bpe_buf_release(sl_bpe_buf_t *b);

/* ---- pretok.c: one encoding's regex and special tokens. */
typedef struct sl_special_s {
    const char *text;
    uint32_t id;
} sl_special_t;

typedef struct sl_encoding_s {
    const char *name;
    const char *pattern; /* tiktoken's pat_str, verbatim */
    const sl_special_t *specials;
    size_t nspecials;
} sl_encoding_t;

const sl_encoding_t *sl_encoding_find(const char *name); /* NULL: unknown */
/* The pattern as PCRE2 must see it (\s and \S as Unicode White_Space, the
 * definition tiktoken's Rust regex uses; PCRE2's \s also takes U+180E):
 * a malloc'd string, NULL on out of memory. */
char *sl_encoding_pcre_pattern(const sl_encoding_t *e);
/* Finds the first special token in text[from, len): 0 with *ret_at and
 * *ret_sp, or -ENOENT. */
int sl_special_find(const sl_encoding_t *e, const uint8_t *text, size_t from, size_t len,
                    size_t *ret_at, const sl_special_t **ret_sp);

#endif
