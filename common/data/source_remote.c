/* source_remote: URLs where a source takes a path. A URL is opened through
 * the host's sl_remote_t (common/remote/remote.h: remote_roots checked
 * before any request, bytes from the bounded shard cache) and read like a
 * file from then on, so every kind's reader works unchanged on it. While a
 * source indexes, each URL's validator (ETag, Last-Modified, size) goes into
 * the fingerprint: two hosts that index a changed object get different
 * fingerprints (a worker refuses the job, a resume refuses the dataset),
 * and a shard re-opened after indexing must still have the validator it
 * had (-ESTALE otherwise), so bytes of two versions are never mixed.
 * Tar shards are indexed by range reads of their headers
 * (sl_src_open_url_ranged, common/remote/rread.h) and fetched whole into
 * the cache at their first read; a read of a shard the cache holds makes
 * no request (sl_remote_open_known). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"
#include "common/remote/pfill.h"
#include "common/remote/probe.h"

/* While indexing: the URL and its validator into the fingerprint; the
 * validator is the one the shard added next records. */
static void fold(const sl_source_t *src, const char *url, uint64_t tag, uint64_t size)
{
    if (!src->rs->indexing) {
        return;
    }
    unsigned char t[8];
    for (int k = 0; k < 8; k++) {
        t[k] = (unsigned char)(tag >> (8 * k));
    }
    uint64_t h = src->rs->fp != 0 ? src->rs->fp : 0xcbf29ce484222325ULL;
    h = sl_src_fnv1a(h, url, strlen(url) + 1);
    src->rs->fp = sl_src_fnv1a(h, t, sizeof(t));
    src->rs->nurls++;
    src->rs->last_tag = tag;
    src->rs->last_size = size;
}

int sl_src_open_url(const sl_source_t *src, const char *url, uint64_t expect_tag, char *err,
                    size_t errlen)
{
    const sl_remote_t *remote = src->rs != NULL ? src->rs->remote : NULL;
    size_t n = strlen(url);
    if (n > 0 && url[n - 1] == '/') {
        return sl_err(err, errlen, -EISDIR,
                      "URL '%s' names a directory: a URL cannot be listed (name the shards "
                      "with a brace pattern, or list the files in a filelist or jsonl manifest)",
                      url);
    }
    if (remote == NULL) {
        char canon[SL_URL_MAX];
        return sl_remote_check(NULL, url, canon, sizeof(canon), err, errlen);
    }
    sl_remote_obj_t o;
    int fd = expect_tag != 0 ? sl_remote_open_known(remote, url, expect_tag, &o, err, errlen)
                             : sl_remote_open(remote, url, expect_tag, &o, err, errlen);
    if (fd < 0) {
        return fd;
    }
    fold(src, url, o.tag, o.size);
    return fd;
}

int sl_src_open_url_pinned(const sl_source_t *src, const char *url, sl_url_vers_t *vers, char *err,
                           size_t errlen)
{
    size_t n = strlen(url);
    if (src->rs == NULL || src->rs->indexing || (n > 0 && url[n - 1] == '/')) {
        return sl_src_open_url(src, url, 0, err, errlen);
    }
    uint64_t tag = sl_src_pin_get(src->rs, url);
    const sl_remote_t *remote = src->rs->remote;
    if (tag == 0 && remote == NULL) {
        return sl_src_open_url(src, url, 0, err, errlen);
    }
    int fd;
    if (tag != 0) {
        fd = sl_src_open_url(src, url, tag, err, errlen);
    } else {
        sl_remote_obj_t o;
        fd = sl_remote_open(remote, url, 0, &o, err, errlen);
        if (fd >= 0) {
            sl_src_pin_put(src->rs, url, o.tag);
            tag = o.tag; /* the bytes' own, also when another thread pinned first */
        }
    }
    if (fd >= 0 && vers != NULL && sl_url_vers_add(vers, sl_url_hash(url), tag) < 0) {
        close(fd); /* cannot happen: a record names at most SL_URL_VERS_MAX */
        return sl_err(err, errlen, -ETOOMANYREFS, "'%s': more than %u URLs in one sample", url,
                      SL_URL_VERS_MAX);
    }
    return fd;
}

int sl_src_open_url_ranged(const sl_source_t *src, const char *url, sl_rread_t **ret,
                           uint64_t *ret_size, char *err, size_t errlen)
{
    const sl_remote_t *remote = src->rs != NULL ? src->rs->remote : NULL;
    if (remote == NULL) {
        char canon[SL_URL_MAX];
        int rc = sl_remote_check(NULL, url, canon, sizeof(canon), err, errlen);
        return rc < 0 ? rc : -EPERM;
    }
    sl_remote_obj_t o;
    int rc = sl_rread_open(remote, url, 0, ret, &o, err, errlen);
    if (rc < 0) {
        return rc;
    }
    fold(src, url, o.tag, o.size);
    *ret_size = o.size;
    return 0;
}

int sl_src_url_read_error(int rc, char *err, size_t errlen)
{
    if (sl_remote_err_unreachable(rc)) {
        return sl_err_prefix(err, errlen, -ENOLINK, "data server unreachable");
    }
    return rc;
}

static int span_cmp(const void *a, const void *b)
{
    const sl_src_span_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Sorts and merges spans nearer than SL_SRC_SPAN_GAP; returns the count. */
static size_t coalesce(sl_src_span_t *sp, size_t n)
{
    qsort(sp, n, sizeof(*sp), span_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (sp[i].len == 0) {
            continue;
        }
        if (k > 0 && sp[i].off <= sp[k - 1].off + sp[k - 1].len + SL_SRC_SPAN_GAP) {
            uint64_t end = sp[i].off + sp[i].len;
            if (end > sp[k - 1].off + sp[k - 1].len) {
                sp[k - 1].len = end - sp[k - 1].off;
            }
        } else {
            sp[k++] = sp[i];
        }
    }
    return k;
}

/* The spans into a memfd, each through the shard's partial entry (held
 * bytes local, holes by range GETs kept there), or, where no partial entry
 * is possible (every one this process keeps open in use, or the disk
 * refuses it), by a range GET not kept: its fd,
 * -EALREADY (the download landed meanwhile: the cache has the shard),
 * -ENOTSUP (no Range), or the error. */
static int read_spans(const sl_remote_t *remote, const char *url, uint64_t tag, uint64_t size,
                      const sl_src_span_t *sp, size_t n, char *err, size_t errlen)
{
    int fd = memfd_create("sluice-span", MFD_CLOEXEC);
    if (fd < 0) {
        return sl_err(err, errlen, -errno, "memfd: %s", strerror(errno));
    }
    for (size_t i = 0; i < n; i++) {
        /* Through the shard's partial entry: what it holds is local, the
         * rest fetched once and kept (pfill.h); -ENOENT: none here. */
        int rc = sl_remote_read_part(remote, url, tag, size, sp[i].off, sp[i].len, fd, err, errlen);
        if (rc == 0) {
            continue;
        }
        if (rc != -ENOENT) {
            close(fd);
            return rc; /* -EALREADY: whole in the cache meanwhile */
        }
        rc = sl_remote_read_range(remote, url, tag, sp[i].off, sp[i].len, fd, err, errlen);
        if (rc < 0) {
            close(fd);
            return rc;
        }
    }
    return fd;
}

int sl_src_url_shard_fd(const sl_source_t *src, uint32_t shard, sl_src_span_t *sp, size_t n,
                        char *err, size_t errlen)
{
    const sl_src_shard_t *sh = &src->shards[shard];
    const sl_remote_t *remote = src->rs != NULL ? src->rs->remote : NULL;
    const char *url = src->arena + sh->path_off;
    int fd = sl_remote_lookup(remote, url, sh->remote_tag);
    if (fd >= 0) {
        return fd;
    }
    for (size_t i = 0; sp != NULL && i < n; i++) {
        /* Past the end (a cut shard): what is there, so the reader says
         * "truncated" as it does for a file. */
        uint64_t off = sp[i].off < sh->remote_size ? sp[i].off : sh->remote_size;
        sp[i].len = sp[i].len < sh->remote_size - off ? sp[i].len : sh->remote_size - off;
        sp[i].off = off;
    }
    n = sp != NULL ? coalesce(sp, n) : 0;
    if (n > 0 && n <= SL_SRC_MAX_SPANS && remote != NULL) {
        /* The whole shard comes into the cache meanwhile; until then each
         * read fetches what it needs. */
        sl_remote_prefetch(remote, url, sh->remote_tag, sh->remote_size);
        fd = read_spans(remote, url, sh->remote_tag, sh->remote_size, sp, n, err, errlen);
        if (fd == -EALREADY) {
            fd = sl_remote_lookup(remote, url, sh->remote_tag);
            if (fd >= 0) {
                return fd;
            } /* evicted at once: open it as below */
        } else if (fd != -ENOTSUP) {
            return fd;
        }
    }
    return sl_src_open_url(src, url, sh->remote_tag, err, errlen);
}

bool sl_source_prefetchable(const sl_source_t *src)
{
    bool shards = src->kind == &sl_src_kind_webdataset || src->kind == &sl_src_kind_tar;
    return src->rs != NULL && src->rs->remote != NULL && src->rs->nurls > 0 && src->mix == NULL &&
           shards;
}

void sl_source_read_cost(const sl_source_t *src, double *ret_bytes_per_sec, double *ret_latency_sec)
{
    *ret_bytes_per_sec = 0.0;
    *ret_latency_sec = 0.0;
    if (src != NULL && src->rs != NULL && src->rs->nurls > 0) {
        sl_remote_read_cost(src->rs->remote, ret_bytes_per_sec, ret_latency_sec);
    }
}

/* Distinct shards one call looks at: beyond them, the queue is full anyway. */
#define PREFETCH_SHARDS_MAX 64u

size_t sl_source_prefetch(const sl_source_t *src, const uint64_t *index, size_t n)
{
    const sl_remote_t *remote = src->rs != NULL ? src->rs->remote : NULL;
    bool wds = src->kind == &sl_src_kind_webdataset, tar = src->kind == &sl_src_kind_tar;
    if (remote == NULL || src->mix != NULL || (!wds && !tar)) {
        return 0;
    }
    uint32_t seen[PREFETCH_SHARDS_MAX];
    size_t nseen = 0, queued = 0;
    for (size_t i = 0; i < n && nseen < PREFETCH_SHARDS_MAX; i++) {
        if (index[i] >= src->count || (wds && src->first[index[i]] == src->first[index[i] + 1])) {
            continue;
        }
        uint32_t shard = wds ? src->members[src->first[index[i]]].shard : src->shard[index[i]];
        bool dup = false;
        for (size_t k = 0; k < nseen && !dup; k++) {
            dup = seen[k] == shard;
        }
        const sl_src_shard_t *sh = &src->shards[shard];
        if (dup || sh->remote_tag == 0 || sh->fd >= 0) {
            continue;
        }
        seen[nseen++] = shard;
        if (sl_remote_prefetch(remote, src->arena + sh->path_off, sh->remote_tag,
                               sh->remote_size) == 0) {
            queued++;
        }
    }
    return queued;
}
