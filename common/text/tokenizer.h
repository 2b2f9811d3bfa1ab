/* tokenizer: byte-level BPE that gives the same token ids as OpenAI's
 * tiktoken for cl100k_base, o200k_base and gpt2 (= r50k_base).
 *
 * A tokenizer owns its ranks (read once from a tiktoken ranks file: one line
 * "BASE64-TOKEN-BYTES RANK" per mergeable token, as OpenAI publishes them and
 * scripts/tokenizer-files writes them), the encoding's pre-tokenization
 * regex (PCRE2, JIT-compiled; the patterns are tiktoken's own) and its
 * special tokens. It is immutable after open: any number of threads may
 * encode with it at once, each with its own scratch.
 *
 * Text goes through: strict UTF-8 validation (common/base/utf8.h), optional splitting at
 * special tokens, regex pre-tokenization into pieces (pretok.c), then per
 * piece either the piece's own rank (when it is a token) or tiktoken's
 * lowest-rank-leftmost-first pair merging (bpe_merge.c) over the ranks'
 * hash table (bpe_ranks.c). No logging; errors through err/errlen. */
#ifndef SL_TOKENIZER_H
#define SL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#define SL_TOK_MAX_RANKS_FILE ((size_t)64 << 20) /* o200k_base's file is 3.6 MB */
#define SL_TOK_MAX_TEXT ((size_t)64 << 20)       /* bytes of one encode call */
#define SL_TOK_MAX_TOKEN_BYTES 256               /* tiktoken's longest token: 128 */
#define SL_TOK_MAX_RANK ((1u << 24) - 1)         /* o200k_base's largest: 199997 */

typedef struct sl_tokenizer_s sl_tokenizer_t;

typedef enum sl_tok_special_e {
    SL_TOK_ORDINARY = 0,      /* special-token text is plain text: encode_ordinary() */
    SL_TOK_ALLOW_SPECIAL = 1, /* every special token: encode(allowed_special="all") */
} sl_tok_special_e;

/* encoding: "cl100k_base" | "o200k_base" | "gpt2" ("r50k_base" is an alias)
 * picks the regex and the special tokens; the ranks come from fd, which the
 * caller opened (Sluice opens data files beneath a confined data root) and
 * still owns. name is the file's name in error messages ("name:line: ...").
 * Returns 0, -EINVAL (unknown encoding, malformed file: a bad line names
 * file:line), -E2BIG (file over SL_TOK_MAX_RANKS_FILE), -ENOMEM, or the
 * errno of a failed read. *ret is left untouched on failure. */
int sl_tokenizer_open_fd(int fd, const char *name, const char *encoding, sl_tokenizer_t **ret,
                         char *err, size_t errlen);
/* The same, opening path itself (O_RDONLY | O_CLOEXEC). */
int sl_tokenizer_open(const char *path, const char *encoding, sl_tokenizer_t **ret, char *err,
                      size_t errlen);
void sl_tokenizer_free(sl_tokenizer_t *t); /* NULL ok */

/* Largest id + 1, special tokens included (cl100k_base: 100277). */
uint32_t sl_tokenizer_vocab_size(const sl_tokenizer_t *t);

/* Per-thread scratch: PCRE2 match data and JIT stack, merge buffers (grown
 * to the longest piece seen, then reused: in steady state encoding allocates
 * nothing but growth of *ids). One scratch per thread, used only with the
 * tokenizer it was made for, freed before it. NULL on out of memory. */
typedef struct sl_tok_scratch_s sl_tok_scratch_t;
sl_tok_scratch_t *sl_tok_scratch_new(const sl_tokenizer_t *t);
void sl_tok_scratch_free(sl_tok_scratch_t *s); /* NULL ok */

/* Encodes text[0, len) (UTF-8) into ids: *ids is a buffer of *cap entries
 * that the caller owns (NULL/0 to start); it is realloc'd as needed and stays
 * the caller's on every return. At most max_tokens ids (0: no limit): the
 * result is then the first max_tokens ids of the full encoding, and the rest
 * of the text is not encoded. Returns 0 with *ret_n ids, -EILSEQ for invalid
 * UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated or stray bytes;
 * err names the byte offset), -E2BIG when len > SL_TOK_MAX_TEXT, -ENOMEM.
 * *ret_n is left untouched on failure. */
int sl_tokenizer_encode(const sl_tokenizer_t *t, sl_tok_scratch_t *s, const char *text,
                        size_t len, sl_tok_special_e special, size_t max_tokens, uint32_t **ids,
                        size_t *cap, size_t *ret_n, char *err, size_t errlen);

#endif
