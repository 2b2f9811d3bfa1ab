/* tokenize: Sluice's tokenizer (common/text/) from the command line, for the
 * oracle comparison (tests/integration/test_tokenizer_oracle.sh) and the
 * benchmark (scripts/bench-tokenizer).
 *
 *   tokenize --ranks FILE --encoding ENC [--special] [--max-tokens N]
 *            [--bench SECONDS] FILE...
 *
 * Default: one line per input FILE, its ids separated by spaces (an empty
 * line for no ids), the same format the node oracle prints. --special: every
 * special token is one (encode(allowed_special="all")); without it special
 * tokens are plain text (encode_ordinary). --max-tokens N: at most N ids.
 * A file that cannot be encoded prints "ERROR <message>" as its line.
 *
 * --bench S: reads all files into memory, encodes them round-robin on one
 * thread for at least S seconds and one full pass, prints one JSON line
 *   {"bytes": B, "tokens": T, "seconds": S, "mb_per_sec": M}
 * (MB = 1e6 bytes; the ranks file's load time is not included).
 * Exit status: 0 ok, 1 runtime failure, 2 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/file.h"
#include "common/text/tokenizer.h"

static int usage(void)
{
    fprintf(stderr, "usage: tokenize --ranks FILE --encoding ENC [--special] "
                    "[--max-tokens N] [--bench SECONDS] FILE...\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *ranks = NULL, *encoding = NULL;
    sl_tok_special_e special = SL_TOK_ORDINARY;
    size_t max_tokens = 0;
    double bench = -1;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
            ranks = argv[++i];
        } else if (strcmp(argv[i], "--encoding") == 0 && i + 1 < argc) {
            encoding = argv[++i];
        } else if (strcmp(argv[i], "--special") == 0) {
            special = SL_TOK_ALLOW_SPECIAL;
        } else if (strcmp(argv[i], "--max-tokens") == 0 && i + 1 < argc) {
            max_tokens = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--bench") == 0 && i + 1 < argc) {
            bench = strtod(argv[++i], NULL);
        } else {
            return usage();
        }
    }
    if (ranks == NULL || encoding == NULL || i >= argc) {
        return usage();
    }
    char err[256];
    sl_tokenizer_t *t = NULL;
    if (sl_tokenizer_open(ranks, encoding, &t, err, sizeof(err)) < 0) {
        fprintf(stderr, "tokenize: %s\n", err);
        return 1;
    }
    sl_tok_scratch_t *s = sl_tok_scratch_new(t);
    int nfiles = argc - i, rc = 0;
    char **bufs = calloc((size_t)nfiles, sizeof(char *));
    size_t *lens = calloc((size_t)nfiles, sizeof(size_t));
    uint32_t *ids = NULL;
    size_t cap = 0, n = 0;
    if (s == NULL || bufs == NULL || lens == NULL) {
        fprintf(stderr, "tokenize: out of memory\n");
        rc = 1;
        goto out;
    }
    for (int f = 0; f < nfiles; f++) {
        if (sl_file_read(argv[i + f], SL_TOK_MAX_TEXT, &bufs[f], &lens[f], err, sizeof(err)) <
            0) {
            fprintf(stderr, "tokenize: %s\n", err);
            rc = 1;
            goto out;
        }
    }
    if (bench < 0) {
        /* Big output: one buffered stream, ids formatted by hand. */
        static char line[1 << 16];
        for (int f = 0; f < nfiles; f++) {
            if (sl_tokenizer_encode(t, s, bufs[f], lens[f], special, max_tokens, &ids, &cap, &n,
                                    err, sizeof(err)) < 0) {
                printf("ERROR %s\n", err);
                continue;
            }
            size_t used = 0;
            for (size_t k = 0; k < n; k++) {
                if (used > sizeof(line) - 16) {
                    fwrite(line, 1, used, stdout);
                    used = 0;
                }
                used += (size_t)snprintf(line + used, 16, k ? " %u" : "%u", ids[k]);
            }
            line[used++] = '\n';
            fwrite(line, 1, used, stdout);
        }
        goto out;
    }
    size_t bytes = 0, tokens = 0;
    double t0 = sl_mono_sec(), el = 0;
    for (int pass = 0; pass == 0 || el < bench; pass++) {
        for (int f = 0; f < nfiles; f++) {
            if (sl_tokenizer_encode(t, s, bufs[f], lens[f], special, max_tokens, &ids, &cap, &n,
                                    err, sizeof(err)) < 0) {
                fprintf(stderr, "tokenize: %s: %s\n", argv[i + f], err);
                rc = 1;
                goto out;
            }
            bytes += lens[f];
            tokens += n;
        }
        el = sl_mono_sec() - t0;
    }
    printf("{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.3f, \"mb_per_sec\": %.2f}\n", bytes,
           tokens, el, (double)bytes / el / 1e6);
out:
    for (int f = 0; bufs != NULL && f < nfiles; f++) {
        free(bufs[f]);
    }
    free(bufs);
    free(lens);
    free(ids);
    sl_tok_scratch_free(s);
    sl_tokenizer_free(t);
    return rc;
}
