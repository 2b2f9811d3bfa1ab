/* source_arena: the index storage every kind fills while indexing -- the
 * string arena holding sample names and shard paths, the per-sample arrays
 * (the optional ones kept as the kind's row asks: sl_src_kind_t.keep), the
 * shard table, the bounded warning summary and the FNV-1a hash the
 * fingerprints use. Built by one thread at open, read-only afterwards. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

/* Makes room for n more bytes in the arena. */
static int arena_reserve(sl_source_t *src, size_t n)
{
    if (n > SIZE_MAX / 4 - src->arena_len) {
        return -E2BIG;
    }
    size_t need = src->arena_len + n;
    if (need <= src->arena_cap) {
        return 0;
    }
    size_t cap = src->arena_cap ? src->arena_cap : 65536;
    while (cap < need) {
        cap *= 2;
    }
    char *p = realloc(src->arena, cap);
    if (p == NULL) {
        return -ENOMEM;
    }
    src->arena = p;
    src->arena_cap = cap;
    return 0;
}

int sl_src_arena_add(sl_source_t *src, const char *s, size_t len, uint64_t *ret_off)
{
    int rc = arena_reserve(src, len + 1);
    if (rc < 0) {
        return rc;
    }
    memcpy(src->arena + src->arena_len, s, len);
    src->arena[src->arena_len + len] = '\0';
    *ret_off = src->arena_len;
    src->arena_len += len + 1;
    return 0;
}

int sl_src_arena_add2(sl_source_t *src, const char *a, char sep, const char *b, uint64_t *ret_off)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t ls = sep != '\0' && la > 0 ? 1 : 0; /* no separator after an empty prefix */
    if (la > SIZE_MAX / 8 || lb > SIZE_MAX / 8) {
        return -E2BIG;
    }
    int rc = arena_reserve(src, la + ls + lb + 1);
    if (rc < 0) {
        return rc;
    }
    char *p = src->arena + src->arena_len;
    memcpy(p, a, la);
    if (ls) {
        p[la] = sep;
    }
    memcpy(p + la + ls, b, lb);
    p[la + ls + lb] = '\0';
    *ret_off = src->arena_len;
    src->arena_len += la + ls + lb + 1;
    return 0;
}

int sl_src_reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t n = *cap > 0 ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem) {
            return -ENOMEM;
        }
        n *= 2;
    }
    void *q = realloc(*p, n * elem);
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    *cap = n;
    return 0;
}

static int grow_array(void **p, size_t elem, uint64_t cap)
{
    void *q = realloc(*p, (size_t)cap * elem);
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    return 0;
}

int sl_src_add_sample(sl_source_t *src, uint64_t name_off, uint64_t size, int32_t label)
{
    if (src->count >= SL_SOURCE_MAX_SAMPLES) {
        return -E2BIG;
    }
    if (src->count == src->cap) {
        uint64_t cap = src->cap ? src->cap * 2 : 1024;
        if (cap > SL_SOURCE_MAX_SAMPLES) {
            cap = SL_SOURCE_MAX_SAMPLES;
        }
        /* Each array grows on its own; one failing leaves the others merely
         * larger than needed, which is harmless since cap is not updated. */
        if (grow_array((void **)&src->name_off, sizeof(*src->name_off), cap) < 0 ||
            grow_array((void **)&src->size, sizeof(*src->size), cap) < 0 ||
            grow_array((void **)&src->label, sizeof(*src->label), cap) < 0) {
            return -ENOMEM;
        }
        unsigned keep = src->kind->keep;
        if ((keep & SL_SRC_KEEP_OFFSETS) &&
            (grow_array((void **)&src->data_off, sizeof(*src->data_off), cap) < 0 ||
             grow_array((void **)&src->shard, sizeof(*src->shard), cap) < 0)) {
            return -ENOMEM;
        }
        /* first[] has a sentinel entry past the last sample. */
        if ((keep & SL_SRC_KEEP_FIRST) &&
            grow_array((void **)&src->first, sizeof(*src->first), cap + 1) < 0) {
            return -ENOMEM;
        }
        if ((keep & SL_SRC_KEEP_NIMAGES) &&
            grow_array((void **)&src->nimages, sizeof(*src->nimages), cap) < 0) {
            return -ENOMEM;
        }
        src->cap = cap;
    }
    src->name_off[src->count] = name_off;
    src->size[src->count] = size;
    src->label[src->count] = label;
    if (src->kind->keep & SL_SRC_KEEP_OFFSETS) {
        src->data_off[src->count] = 0;
        src->shard[src->count] = 0;
    }
    if (src->kind->keep & SL_SRC_KEEP_NIMAGES) {
        src->nimages[src->count] = 0;
    }
    src->count++;
    return 0;
}

int sl_src_add_shard(sl_source_t *src, uint64_t path_off, int fd, uint32_t *ret_idx)
{
    if (src->nshards == src->shards_cap) {
        if (src->shards_cap >= UINT32_MAX / 2) {
            return -E2BIG;
        }
        uint32_t cap = src->shards_cap ? src->shards_cap * 2 : 16;
        sl_src_shard_t *p = realloc(src->shards, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        src->shards = p;
        src->shards_cap = cap;
    }
    src->shards[src->nshards].path_off = path_off;
    src->shards[src->nshards].fd = fd;
    /* A URL shard was opened just before it is added (source_tar.c,
     * source_wds.c): its validator is the one indexing saw last. */
    src->shards[src->nshards].remote_tag = src->rs != NULL &&
                                                   sl_remote_is_url(src->arena + path_off)
                                               ? src->rs->last_tag
                                               : 0;
    src->shards[src->nshards].remote_size = src->shards[src->nshards].remote_tag != 0
                                                ? src->rs->last_size
                                                : 0;
    *ret_idx = src->nshards++;
    return 0;
}

/* Keeps room for the " (+N more)" suffix appended when the source is done. */
#define WARN_SUFFIX_ROOM 32

void sl_src_warn(sl_source_t *src, const char *fmt, ...)
{
    char one[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(one, sizeof(one), fmt, ap);
    va_end(ap);
    if (n < 0) {
        src->warn_dropped++;
        return;
    }
    sl_err_scrub(one); /* names from the data set: one line of text */
    size_t len = strlen(one);
    size_t sep = src->warn_len > 0 ? 2 : 0;
    if (src->warn_len + sep + len + 1 > sizeof(src->warnings) - WARN_SUFFIX_ROOM) {
        src->warn_dropped++;
        return;
    }
    if (sep) {
        memcpy(src->warnings + src->warn_len, "; ", 2);
    }
    memcpy(src->warnings + src->warn_len + sep, one, len + 1);
    src->warn_len += sep + len;
}

uint64_t sl_src_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
