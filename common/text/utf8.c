/* utf8: strict validation (RFC 3629): no overlong forms, no surrogates
 * (U+D800..U+DFFF), nothing above U+10FFFF, no truncated or stray bytes.
 * tiktoken works on Rust strings, which are valid UTF-8 by construction, so
 * invalid input is refused rather than guessed at. */
#include <errno.h>
#include <string.h>

#include "common/text/tokenizer.h"

int sl_utf8_validate(const uint8_t *p, size_t n, size_t *ret_bad)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII runs, 8 bytes at a time. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ull) {
                break;
            }
            i += 8;
        }
        if (i >= n) {
            break;
        }
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint8_t lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            if (c == 0xe0) {
                lo = 0xa0; /* overlong below U+0800 */
            } else if (c == 0xed) {
                hi = 0x9f; /* surrogates */
            }
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            if (c == 0xf0) {
                lo = 0x90; /* overlong below U+10000 */
            } else if (c == 0xf4) {
                hi = 0x8f; /* above U+10FFFF */
            }
        } else {
            goto bad; /* continuation byte, 0xc0/0xc1 (overlong), 0xf5.. */
        }
        if (n - i <= need || p[i + 1] < lo || p[i + 1] > hi) {
            goto bad;
        }
        for (size_t k = 2; k <= need; k++) {
            if ((p[i + k] & 0xc0) != 0x80) {
                goto bad;
            }
        }
        i += need + 1;
        continue;
bad:
        *ret_bad = i;
        return -EILSEQ;
    }
    return 0;
}
