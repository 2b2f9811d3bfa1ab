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
#include <string.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

/* While indexing: the URL and its validator into the fingerprint; the
 * validator is the one the shard added next records. */
static void fold(const sl_source_t *src, const char *url, uint64_t tag)
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
    fold(src, url, o.tag);
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
    fold(src, url, o.tag);
    *ret_size = o.size;
    return 0;
}
