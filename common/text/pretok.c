/* pretok: each encoding's pre-tokenization regex and special tokens, as in
 * tiktoken's tiktoken_ext/openai_public.py (the patterns below are copied
 * verbatim from there: the possessive forms OpenAI documents as equivalent
 * to, and faster than, the ones the npm package ships). The ids of special
 * tokens were checked against the npm package tiktoken 1.0.22. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/text_impl.h"

#define ENDOFTEXT "<|endoftext|>"
#define FIM_PREFIX "<|fim_prefix|>"
#define FIM_MIDDLE "<|fim_middle|>"
#define FIM_SUFFIX "<|fim_suffix|>"
#define ENDOFPROMPT "<|endofprompt|>"

/* r50k_pat_str */
static const char R50K_PAT[] =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s";
static const char CL100K_PAT[] =
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++"
    "[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";
/* "|".join of o200k_base's seven alternatives */
static const char O200K_PAT[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*"
    "|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)"
    "|\\s+";

static const sl_special_t R50K_SPECIALS[] = {{ENDOFTEXT, 50256}};
static const sl_special_t CL100K_SPECIALS[] = {
    {ENDOFTEXT, 100257}, {FIM_PREFIX, 100258}, {FIM_MIDDLE, 100259},
    {FIM_SUFFIX, 100260}, {ENDOFPROMPT, 100276},
};
static const sl_special_t O200K_SPECIALS[] = {{ENDOFTEXT, 199999}, {ENDOFPROMPT, 200018}};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const sl_encoding_t ENCODINGS[] = {
    {"cl100k_base", CL100K_PAT, CL100K_SPECIALS, N_OF(CL100K_SPECIALS)},
    {"o200k_base", O200K_PAT, O200K_SPECIALS, N_OF(O200K_SPECIALS)},
    {"gpt2", R50K_PAT, R50K_SPECIALS, N_OF(R50K_SPECIALS)},
    {"r50k_base", R50K_PAT, R50K_SPECIALS, N_OF(R50K_SPECIALS)},
};

const sl_encoding_t *sl_encoding_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < N_OF(ENCODINGS); i++) {
        if (strcmp(ENCODINGS[i].name, name) == 0) {
            return &ENCODINGS[i];
        }
    }
    return NULL;
}

char *sl_encoding_pcre_pattern(const sl_encoding_t *e)
{
    static const char WS[] = "\\p{White_Space}", NWS[] = "\\P{White_Space}";
    size_t n = strlen(e->pattern);
    char *out = malloc(n * sizeof(WS) + 1), *o = out;
    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (e->pattern[i] == '\\' && i + 1 < n && (e->pattern[i + 1] | 0x20) == 's') {
            const char *w = e->pattern[i + 1] == 's' ? WS : NWS;
            memcpy(o, w, sizeof(WS) - 1);
            o += sizeof(WS) - 1;
            i++;
        } else if (e->pattern[i] == '\\' && i + 1 < n) {
            *o++ = e->pattern[i++];
            *o++ = e->pattern[i];
        } else {
            *o++ = e->pattern[i];
        }
    }
    *o = '\0';
    return out;
}

int sl_special_find(const sl_encoding_t *e, const uint8_t *text, size_t from, size_t len,
                    size_t *ret_at, const sl_special_t **ret_sp)
{
    /* Every special token starts with "<|"; none is a prefix of another, so
     * the first one found at the leftmost position is the match. */
    while (from + 2 <= len) {
        const uint8_t *q = memmem(text + from, len - from, "<|", 2);
        if (q == NULL) {
            return -ENOENT;
        }
        size_t at = (size_t)(q - text);
        for (size_t k = 0; k < e->nspecials; k++) {
            size_t sl = strlen(e->specials[k].text);
            if (sl <= len - at && memcmp(q, e->specials[k].text, sl) == 0) {
                *ret_at = at;
                *ret_sp = &e->specials[k];
                return 0;
            }
        }
        from = at + 1;
    }
    return -ENOENT;
}
