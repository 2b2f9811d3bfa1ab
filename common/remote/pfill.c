/* pfill: range reads kept, whole fills of the missing ranges (pfill.h). */
#include "common/remote/pfill.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/remote/partial.h"
#include "common/remote/remote_impl.h"
#include "common/remote/rread.h"

/* The cache key of (url, tag): 0, or -errno (not a URL this host reads). */
static int key_of(const sl_remote_t *r, const char *url, uint64_t tag, char key[SL_CACHE_KEY_MAX])
{
    char *canon = malloc(SL_URL_MAX);
    if (canon == NULL) {
        return -ENOMEM;
    }
    int rc = sl_remote_check(r, url, canon, SL_URL_MAX, NULL, 0);
    if (rc == 0) {
        sl_cache_key(canon, tag, key);
    }
    free(canon);
    return rc;
}

/* A fetch of partial.h's read-through: one range GET (no HEAD; the
 * answer's validator must be the tag). */
typedef struct fetch_ctx_s {
    const sl_remote_t *r;
    const char *url;
    uint64_t tag;
    const int *cancel; /* a fill's: the process ends */
    char *err;
    size_t errlen;
} fetch_ctx_t;

static int fetch_range(void *arg, uint64_t off, uint64_t len, int fd)
{
    const fetch_ctx_t *c = arg;
    return sl_remote_read_range_cancel(c->r, c->url, c->tag, off, len, fd, c->cancel, c->err,
                                       c->errlen);
}

/* The entry is whole: the prefetcher makes it a whole cache entry with no
 * request (over a quarter of cache_bytes it is not queued and stays a
 * partial entry, still read locally). */
static void whole_now(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size)
{
    (void)sl_remote_prefetch(r, url, tag, size);
}

/* Releases p; an entry that holds nothing (its first fetch failed: a
 * server without Range, a changed object) is removed, not left behind. */
static void drop_or_release(const sl_remote_t *r, sl_part_t *p)
{
    if (sl_part_held(r->parts, p) == 0) {
        sl_part_remove(r->parts, p);
    } else {
        sl_parts_release(r->parts, p);
    }
}

int sl_remote_read_part(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size,
                        uint64_t off, uint64_t len, int fd, char *err, size_t errlen)
{
    char key[SL_CACHE_KEY_MAX];
    sl_part_t *p;
    if (r == NULL || r->parts == NULL || tag == 0 || key_of(r, url, tag, key) < 0) {
        return -ENOENT;
    }
    /* Whole meanwhile (its partial entry is gone): not started again. */
    int cfd = sl_cache_lookup(r->cache, key);
    if (cfd >= 0) {
        close(cfd);
        return -EALREADY;
    }
    if (sl_parts_get(r->parts, key, size, true, &p) < 0) {
        return -ENOENT;
    }
    cfd = sl_cache_lookup(r->cache, key); /* made whole just now: the entry just made goes */
    if (cfd >= 0) {
        close(cfd);
        drop_or_release(r, p);
        return -EALREADY;
    }
    fetch_ctx_t c = {.r = r, .url = url, .tag = tag, .err = err, .errlen = errlen};
    bool whole = false;
    int rc = sl_part_read_through(r->parts, p, off, len, fd, SL_PFILL_WAIT_MS, fetch_range, &c,
                                  &whole);
    drop_or_release(r, p);
    if (whole) {
        whole_now(r, url, tag, size);
    }
    return rc;
}

int sl_remote_keep(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size, int src_fd,
                   uint64_t src_off, uint64_t off, uint64_t len)
{
    char key[SL_CACHE_KEY_MAX];
    sl_part_t *p;
    if (r == NULL || r->parts == NULL || tag == 0) {
        return -EPERM;
    }
    int rc = key_of(r, url, tag, key);
    if (rc == 0) {
        rc = sl_parts_get(r->parts, key, size, true, &p);
    }
    if (rc < 0) {
        return rc;
    }
    rc = sl_part_write(r->parts, p, src_fd, src_off, off, len);
    sl_parts_release(r->parts, p);
    if (rc == 1) {
        whole_now(r, url, tag, size);
        rc = 0;
    }
    return rc;
}

int sl_remote_read_held(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size,
                        uint64_t off, uint64_t len, int fd)
{
    char key[SL_CACHE_KEY_MAX];
    sl_part_t *p;
    if (r == NULL || r->parts == NULL || tag == 0 || key_of(r, url, tag, key) < 0 ||
        sl_parts_get(r->parts, key, size, false, &p) < 0) {
        return -ENOENT;
    }
    int rc = sl_part_read_at(r->parts, p, off, len, fd, 0, 0);
    sl_parts_release(r->parts, p);
    return rc;
}

/* Fetches the ranges p lacks, chunk by chunk, into it. */
static int fill_missing(const sl_remote_t *r, const char *url, uint64_t tag, sl_part_t *p,
                        uint64_t size, const int *cancel, char *err, size_t errlen)
{
    fetch_ctx_t c =
        {.r = r, .url = url, .tag = tag, .cancel = cancel, .err = err, .errlen = errlen};
    bool whole = false;
    for (uint64_t at = 0; at < size; at += SL_PFILL_CHUNK) {
        if (cancel != NULL && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
            return sl_err(err, errlen, -ECANCELED, "%s: cancelled", url);
        }
        uint64_t len = size - at < SL_PFILL_CHUNK ? size - at : SL_PFILL_CHUNK;
        int rc = sl_part_read_through(r->parts, p, at, len, -1, SL_PFILL_WAIT_MS, fetch_range, &c,
                                      &whole);
        if (rc < 0) {
            /* A request's error names the URL; a keep's (the entry was
             * evicted, the disk is full) is named here. */
            if (errlen > 0 && err[0] == '\0') {
                sl_err(err, errlen, rc, "%s: cache: %s", url, strerror(-rc));
            }
            return rc;
        }
    }
    return 0;
}

int sl_remote_fill_ranged(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size,
                          const int *cancel, char *err, size_t errlen)
{
    char key[SL_CACHE_KEY_MAX];
    if (r == NULL || r->parts == NULL || tag == 0 || size == 0) {
        return -ENOTSUP;
    }
    int rc = key_of(r, url, tag, key);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "URL '%s': not allowed", url);
    }
    int fd = sl_cache_lookup(r->cache, key);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    sl_part_t *p;
    if (sl_parts_get(r->parts, key, size, true, &p) < 0) {
        return -ENOTSUP;
    }
    /* The fill lock: another process filling the same object waits, then
     * finds it whole. */
    sl_cache_fill_t fill;
    bool hit;
    rc = sl_cache_fill_begin(r->cache, key, &fill, &hit);
    if (rc < 0 || hit) {
        if (hit) {
            close(rc);
        }
        /* Whole meanwhile: an entry this call made (another process
         * committed the shard and removed its own between our look and
         * our open) holds nothing and goes. */
        drop_or_release(r, p);
        return hit ? 0 : sl_err(err, errlen, rc, "%s: cache: %s", url, strerror(-rc));
    }
    if (errlen > 0) {
        err[0] = '\0';
    }
    rc = fill_missing(r, url, tag, p, size, cancel, err, errlen);
    if (rc == 0) {
        rc = sl_part_copy_out(r->parts, p, fill.tmp_fd);
        if (rc < 0) {
            sl_err(err, errlen, rc, "%s: cache: %s", url, strerror(-rc));
        }
    }
    if (rc < 0) {
        sl_cache_fill_abort(r->cache, &fill);
        drop_or_release(r, p);
        return rc;
    }
    /* Whole first, then the partial entry goes: a reader in between
     * finds one or the other, never neither (it would fetch again). The
     * commit's eviction pass counts the object twice meanwhile. */
    fd = sl_cache_fill_commit(r->cache, &fill);
    if (fd < 0) {
        sl_parts_release(r->parts, p);
        return sl_err(err, errlen, fd, "%s: cache: %s", url, strerror(-fd));
    }
    close(fd);
    sl_part_remove(r->parts, p);
    return 0;
}
