/* url_vers: pairs of (URL hash, validator) a sample read (url_vers.h). */
#include "common/data/url_vers.h"

#include <errno.h>
#include <string.h>

uint64_t sl_url_hash(const char *url)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)url; *p != '\0'; p++) {
        h = (h ^ *p) * 0x100000001b3ULL;
    }
    return h != 0 ? h : 1;
}

int sl_url_vers_add(sl_url_vers_t *v, uint64_t url, uint64_t tag)
{
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->v[i].url == url) {
            return 0; /* the same image named twice: one read, one pin */
        }
    }
    if (v->n >= SL_URL_VERS_MAX) {
        return -ENOSPC;
    }
    v->v[v->n++] = (sl_url_ver_t){url, tag};
    return 0;
}
