#include "common/base/utf8.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* The well-formed byte sequences of the Unicode standard (table 3-7): the
 * second byte's range depends on the first, which is what excludes
 * overlongs (E0, F0), surrogates (ED) and code points past U+10FFFF (F4). */
int sl_utf8_check(const char *s, size_t n, size_t *ret_bad_offset)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs, 8 bytes at a time (text is mostly ASCII). */
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
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) {
                lo = 0xa0; /* below: overlong */
            } else if (c == 0xed) {
                hi = 0x9f; /* above: surrogates */
            }
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) {
                lo = 0x90; /* below: overlong */
            } else if (c == 0xf4) {
                hi = 0x8f; /* above: past U+10FFFF */
            }
        } else {
            goto bad; /* continuation byte, C0/C1 overlong lead, F5..FF */
        }
        if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) {
            goto bad;
        }
        for (size_t k = 2; k < len; k++) {
            if (p[i + k] < 0x80 || p[i + k] > 0xbf) {
                goto bad;
            }
        }
        i += len;
    }
    return 0;
bad:
    if (ret_bad_offset != NULL) {
        *ret_bad_offset = i;
    }
    return -EDOM;
}
