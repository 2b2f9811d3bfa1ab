/* rread: range reads of a remote object with a cached index entry of the
 * bytes an indexer read (rread.h has the sequence). */
#include "common/remote/rread.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/remote/pfill.h"
#include "common/remote/remote_impl.h"

/* Index entry: magic, object size, validator, extent count, then each
 * extent's (offset, length), then their bytes back to back. Host byte
 * order: the cache is the host's own. */
#define IDX_MAGIC "SLRIDX1\n"
#define IDX_HEAD (8 + 3 * 8)
#define IDX_MAX_EXTENTS ((uint64_t)1 << 24)

typedef struct ext_s {
    uint64_t off, len;
    size_t at; /* of its bytes in the blob */
} ext_t;

struct sl_rread_s {
    const sl_remote_t *r;
    sl_url_t u;
    char canon[SL_URL_MAX];
    char etag[128];
    char key[SL_CACHE_KEY_MAX];
    uint64_t tag, size;
    sl_rread_mode_e mode;
    int whole_fd;
    int win_fd; /* the current window's bytes (a memfd) */
    uint64_t win_off, win_len;
    unsigned char *idx; /* INDEX: the entry as read; its extents in ext */
    ext_t *ext;
    size_t next, extcap;
    unsigned char *blob; /* RANGES: the bytes read, logged as extents in ext */
    size_t blob_len, blob_cap;
    bool log_ok;
    uint64_t requests;
    char err[SL_URL_MAX + 512];
};

const char *sl_rread_error(const sl_rread_t *rr) { return rr->err; }
sl_rread_mode_e sl_rread_mode(const sl_rread_t *rr) { return rr->mode; }
uint64_t sl_rread_requests(const sl_rread_t *rr) { return rr->requests; }

static void idx_key(const char *key, char *out)
{
    snprintf(out, SL_CACHE_KEY_MAX, "%.49s.idx", key); /* the key is 49 characters */
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Checks an entry and, when ext is not NULL, lists its extents. */
static int parse_index(const unsigned char *b, size_t n, uint64_t size, uint64_t tag, ext_t *ext,
                       uint64_t *ret_count)
{
    if (n < IDX_HEAD || memcmp(b, IDX_MAGIC, 8) != 0 || get64(b + 8) != size ||
        get64(b + 16) != tag) {
        return -EINVAL;
    }
    uint64_t count = get64(b + 24);
    if (count > IDX_MAX_EXTENTS || count > (n - IDX_HEAD) / 16) {
        return -EINVAL;
    }
    size_t at = IDX_HEAD + (size_t)count * 16;
    uint64_t end = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t off = get64(b + IDX_HEAD + i * 16), len = get64(b + IDX_HEAD + i * 16 + 8);
        if (len == 0 || off < end || off > size || len > size - off || len > n - at) {
            return -EINVAL;
        }
        if (ext != NULL) {
            ext[i] = (ext_t){.off = off, .len = len, .at = at};
        }
        at += (size_t)len;
        end = off + len;
    }
    if (at != n) {
        return -EINVAL;
    }
    *ret_count = count;
    return 0;
}

int sl_rread_index_check(const void *buf, size_t n, uint64_t size, uint64_t tag)
{
    uint64_t count;
    return parse_index(buf, n, size, tag, NULL, &count);
}

/* Loads the cached index entry; any damage is a miss. */
static void load_index(sl_rread_t *rr)
{
    char k[SL_CACHE_KEY_MAX];
    idx_key(rr->key, k);
    int fd = sl_cache_lookup(rr->r->cache, k);
    if (fd < 0) {
        return;
    }
    struct stat st;
    unsigned char *b = NULL;
    ext_t *ext = NULL;
    uint64_t count = 0;
    if (fstat(fd, &st) < 0 || st.st_size < IDX_HEAD || (uint64_t)st.st_size > SL_RREAD_INDEX_MAX) {
        goto miss;
    }
    size_t n = (size_t)st.st_size;
    b = malloc(n);
    if (b == NULL || pread(fd, b, n, 0) != (ssize_t)n ||
        parse_index(b, n, rr->size, rr->tag, NULL, &count) < 0) {
        goto miss;
    }
    ext = calloc(count > 0 ? count : 1, sizeof(*ext));
    if (ext == NULL || parse_index(b, n, rr->size, rr->tag, ext, &count) < 0) {
        goto miss;
    }
    close(fd);
    rr->idx = b;
    rr->ext = ext;
    rr->next = (size_t)count;
    rr->mode = SL_RREAD_INDEX;
    return;
miss:
    /* Damaged (a bad disk, another version's writer): dropped, so the walk
     * that follows stores a good one. */
    free(b);
    free(ext);
    close(fd);
    sl_cache_remove(rr->r->cache, k);
}

/* HEAD: the validator and size; -ESTALE when expect_tag differs. */
static int head(sl_rread_t *rr, uint64_t expect_tag, char *err, size_t errlen)
{
    sl_fetch_resp_t *resp = malloc(sizeof(*resp));
    if (resp == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    sl_remote_req_t hq = {.head = true};
    int rc = sl_remote_request_retry(rr->r, &rr->u, rr->canon, &hq, -1, NULL, resp, err, errlen);
    if (rc == 0 && !resp->have_length) {
        rc = sl_err(err, errlen, -EIO, "%s: the server gave no Content-Length", rr->canon);
    }
    if (rc == 0) {
        rr->tag = sl_remote_tag_of(resp);
        rr->size = resp->length;
        snprintf(rr->etag, sizeof(rr->etag), "%s", resp->etag);
        if (expect_tag != 0 && rr->tag != expect_tag) {
            rc = sl_err(err, errlen, -ESTALE,
                        "%s: changed since the job indexed it (ETag/Last-Modified/size differ); "
                        "restart the job to read the new data",
                        rr->canon);
        }
    }
    free(resp);
    return rc;
}

int sl_rread_open(const sl_remote_t *r, const char *url, uint64_t expect_tag, sl_rread_t **ret,
                  sl_remote_obj_t *ret_obj, char *err, size_t errlen)
{
    sl_rread_t *rr = calloc(1, sizeof(*rr));
    if (rr == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    rr->r = r;
    rr->whole_fd = -1;
    rr->win_fd = -1;
    rr->log_ok = true;
    int rc = sl_remote_check_url(r, url, &rr->u, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    if (r->cache == NULL || sl_url_format(&rr->u, rr->canon, sizeof(rr->canon)) < 0) {
        rc = sl_err(err, errlen, -EPERM, "URL '%s': no cache", url);
        goto fail;
    }
    rc = head(rr, expect_tag, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    sl_cache_key(rr->canon, rr->tag, rr->key);
    rr->whole_fd = sl_cache_lookup(r->cache, rr->key);
    if (rr->whole_fd >= 0) {
        rr->mode = SL_RREAD_WHOLE;
    } else {
        load_index(rr);
    }
    rr->win_fd = memfd_create("sluice-range", MFD_CLOEXEC);
    if (rr->win_fd < 0) {
        rc = sl_err(err, errlen, -errno, "memfd: %s", strerror(errno));
        goto fail;
    }
    ret_obj->tag = rr->tag;
    ret_obj->size = rr->size;
    *ret = rr;
    return 0;
fail:
    sl_rread_close(rr);
    return rc;
}

/* The server ignored Range: the whole object in one pass into the cache. */
static int read_whole(sl_rread_t *rr)
{
    sl_remote_obj_t o;
    int fd = sl_remote_open(rr->r, rr->canon, rr->tag, &o, rr->err, sizeof(rr->err));
    if (fd < 0) {
        return fd;
    }
    rr->whole_fd = fd;
    rr->mode = SL_RREAD_WHOLE;
    return 0;
}

/* A range GET of at least SL_RREAD_WINDOW bytes from off into the window. */
static int fetch_window(sl_rread_t *rr, uint64_t off, size_t n)
{
    uint64_t len = n > SL_RREAD_WINDOW ? n : SL_RREAD_WINDOW;
    if (len > rr->size - off) {
        len = rr->size - off;
    }
    sl_fetch_opts_t opts = rr->r->fetch;
    opts.max_bytes = len; /* a 200 with the whole object stops here */
    sl_remote_req_t q = {.if_match = rr->etag,
                         .range = true,
                         .range_off = off,
                         .range_len = len,
                         .opts = &opts};
    rr->win_len = 0;
    /* What a partial entry holds (kept by an earlier run's windows and
     * reads: its index entry was evicted) is not fetched again. */
    const uint64_t tries[2] = {len, n}; /* the window, else the bytes asked for */
    for (int i = 0; i < 2; i++) {
        if (sl_remote_read_held(rr->r, rr->canon, rr->tag, rr->size, off, tries[i], rr->win_fd) ==
            0) {
            rr->win_off = off;
            rr->win_len = tries[i];
            return 0;
        }
    }
    sl_fetch_resp_t *resp = malloc(sizeof(*resp));
    if (resp == NULL) {
        return sl_err(rr->err, sizeof(rr->err), -ENOMEM, "out of memory");
    }
    int rc = sl_remote_request_retry(rr->r, &rr->u, rr->canon, &q, rr->win_fd, &len, resp, rr->err,
                                     sizeof(rr->err));
    rr->requests++;
    bool whole_body = resp->status == 200 && off == 0 && len == rr->size;
    if ((rc == 0 && resp->status == 206) || (rc == 0 && whole_body)) {
        rr->win_off = off;
        rr->win_len = len;
        /* Kept: the samples' reads and the shard's fill do not fetch the
         * window's bytes again (pfill.h). */
        (void)sl_remote_keep(rr->r, rr->canon, rr->tag, rr->size, rr->win_fd, 0, off, len);
    } else if ((rc == 0 || rc == -EFBIG) && resp->status == 200) {
        rc = read_whole(rr);
    } else if (rc == 0) {
        rc = sl_err(rr->err, sizeof(rr->err), -EIO, "%s: HTTP %ld to a range request", rr->canon,
                    resp->status);
    }
    free(resp);
    return rc;
}

/* Serves [off, off + n) from the cached index entry when it holds it. */
static bool from_index(const sl_rread_t *rr, void *buf, size_t n, uint64_t off)
{
    size_t lo = 0, hi = rr->next;
    while (lo < hi) { /* the last extent starting at or before off */
        size_t mid = lo + (hi - lo) / 2;
        if (rr->ext[mid].off <= off) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0) {
        return false;
    }
    const ext_t *e = &rr->ext[lo - 1];
    if (off + n > e->off + e->len) {
        return false;
    }
    memcpy(buf, rr->idx + e->at + (off - e->off), n);
    return true;
}

/* Appends what a caller read to the log, merged into the last extent when
 * it continues it. */
static void log_add(sl_rread_t *rr, const void *buf, size_t n, uint64_t off)
{
    if (!rr->log_ok) {
        return;
    }
    ext_t *last = rr->next > 0 ? &rr->ext[rr->next - 1] : NULL;
    uint64_t end = last != NULL ? last->off + last->len : 0;
    if (last != NULL && off < end) {
        if (off >= last->off && off + n <= end) {
            return; /* read again: already logged */
        }
        rr->log_ok = false; /* out of order: not an indexer's walk, not stored */
        return;
    }
    if (rr->blob_len + n > SL_RREAD_INDEX_MAX / 2) {
        rr->log_ok = false;
        return;
    }
    if (rr->blob_len + n > rr->blob_cap) {
        size_t cap = rr->blob_cap ? rr->blob_cap : 16384;
        while (cap < rr->blob_len + n) {
            cap *= 2;
        }
        unsigned char *g = realloc(rr->blob, cap);
        if (g == NULL) {
            rr->log_ok = false;
            return;
        }
        rr->blob = g;
        rr->blob_cap = cap;
    }
    memcpy(rr->blob + rr->blob_len, buf, n);
    if (last != NULL && off == end) {
        last->len += n;
    } else {
        if (rr->next == rr->extcap) {
            size_t cap = rr->extcap ? rr->extcap * 2 : 64;
            ext_t *g = realloc(rr->ext, cap * sizeof(*g));
            if (g == NULL) {
                rr->log_ok = false;
                return;
            }
            rr->ext = g;
            rr->extcap = cap;
        }
        rr->ext[rr->next++] = (ext_t){.off = off, .len = n, .at = rr->blob_len};
    }
    rr->blob_len += n;
}

static ssize_t pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            return -errno;
        }
        if (k == 0) {
            break;
        }
        got += (size_t)k;
    }
    return (ssize_t)got;
}

ssize_t sl_rread_pread(sl_rread_t *rr, void *buf, size_t n, uint64_t off)
{
    if (off >= rr->size) {
        return 0;
    }
    if (n > rr->size - off) {
        n = (size_t)(rr->size - off);
    }
    if (rr->mode == SL_RREAD_INDEX && from_index(rr, buf, n, off)) {
        return (ssize_t)n;
    }
    if (rr->mode != SL_RREAD_WHOLE &&
        (rr->win_len == 0 || off < rr->win_off || off + n > rr->win_off + rr->win_len)) {
        int rc = fetch_window(rr, off, n);
        if (rc < 0) {
            return rc;
        }
    }
    if (rr->mode == SL_RREAD_WHOLE) {
        ssize_t k = pread_all(rr->whole_fd, buf, n, off);
        if (k < 0) {
            sl_err(rr->err, sizeof(rr->err), (int)k, "%s: cache: %s", rr->canon, strerror((int)-k));
        }
        return k;
    }
    ssize_t k = pread_all(rr->win_fd, buf, n, off - rr->win_off);
    if (k >= 0 && (size_t)k != n) {
        k = -EIO;
    }
    if (k < 0) {
        sl_err(rr->err, sizeof(rr->err), (int)k, "%s: range buffer: %s", rr->canon,
               strerror((int)-k));
        return k;
    }
    if (rr->mode == SL_RREAD_RANGES) {
        log_add(rr, buf, n, off);
    }
    return (ssize_t)n;
}

static int write_all(int fd, const void *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0) {
            return -errno;
        }
        off += (size_t)w;
    }
    return 0;
}

int sl_rread_finish(sl_rread_t *rr)
{
    if (rr->mode != SL_RREAD_RANGES || !rr->log_ok || rr->next == 0) {
        return 0;
    }
    char k[SL_CACHE_KEY_MAX];
    idx_key(rr->key, k);
    sl_cache_fill_t fill;
    bool hit;
    int rc = sl_cache_fill_begin(rr->r->cache, k, &fill, &hit);
    if (rc < 0 || hit) {
        if (rc >= 0) {
            close(rc);
        }
        return rc < 0 ? rc : 0;
    }
    unsigned char head[IDX_HEAD];
    uint64_t v[3] = {rr->size, rr->tag, rr->next};
    memcpy(head, IDX_MAGIC, 8);
    memcpy(head + 8, v, sizeof(v));
    rc = write_all(fill.tmp_fd, head, sizeof(head));
    for (size_t i = 0; rc == 0 && i < rr->next; i++) {
        uint64_t e[2] = {rr->ext[i].off, rr->ext[i].len};
        rc = write_all(fill.tmp_fd, e, sizeof(e));
    }
    if (rc == 0) {
        rc = write_all(fill.tmp_fd, rr->blob, rr->blob_len);
    }
    if (rc < 0) {
        sl_cache_fill_abort(rr->r->cache, &fill);
        return rc;
    }
    int fd = sl_cache_fill_commit(rr->r->cache, &fill);
    if (fd < 0) {
        return fd;
    }
    close(fd);
    return 0;
}

void sl_rread_close(sl_rread_t *rr)
{
    if (rr == NULL) {
        return;
    }
    if (rr->whole_fd >= 0) {
        close(rr->whole_fd);
    }
    if (rr->win_fd >= 0) {
        close(rr->win_fd);
    }
    free(rr->idx);
    free(rr->ext);
    free(rr->blob);
    free(rr);
}

/* The answer's validator equals tag: a 206's total size, or a whole 200. */
static bool same_version(const sl_fetch_resp_t *resp, uint64_t tag)
{
    sl_fetch_resp_t v = *resp;
    if (resp->status == 206) {
        v.length = resp->range_total;
    }
    return sl_remote_tag_of(&v) == tag;
}

int sl_remote_read_range(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t off,
                         uint64_t len, int fd, char *err, size_t errlen)
{
    return sl_remote_read_range_cancel(r, url, tag, off, len, fd, NULL, err, errlen);
}

int sl_remote_read_range_cancel(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t off,
                                uint64_t len, int fd, const int *cancel, char *err, size_t errlen)
{
    sl_url_t *u = malloc(sizeof(*u));
    char *canon = malloc(SL_URL_MAX);
    sl_fetch_resp_t *resp = malloc(sizeof(*resp));
    int rc = -ENOMEM;
    if (u == NULL || canon == NULL || resp == NULL) {
        sl_err(err, errlen, rc, "out of memory");
        goto out;
    }
    rc = sl_remote_check_url(r, url, u, err, errlen);
    if (rc == 0 && (len == 0 || r->cache == NULL || sl_url_format(u, canon, SL_URL_MAX) < 0)) {
        rc = sl_err(err, errlen, -EINVAL, "URL '%s': no range to read", url);
    }
    if (rc < 0) {
        goto out;
    }
    sl_fetch_opts_t opts = r->fetch;
    opts.max_bytes = len; /* a 200 with the whole object stops here */
    opts.cancel = cancel;
    sl_remote_req_t q = {.range = true,
                         .range_off = off,
                         .range_len = len,
                         .opts = &opts,
                         .fd_off = off};
    rc = sl_remote_request_retry(r, u, canon, &q, fd, &len, resp, err, errlen);
    if ((rc == 0 || rc == -EFBIG) && resp->status == 200 && !(off == 0 && rc == 0)) {
        rc = sl_err(err, errlen, -ENOTSUP, "%s: the server ignores Range", canon);
    } else if (rc == 0 && resp->status != 206 && resp->status != 200) {
        rc = sl_err(err, errlen, -EIO, "%s: HTTP %ld to a range request", canon, resp->status);
    } else if (rc == 0 && !same_version(resp, tag)) {
        rc = sl_err(err, errlen, -ESTALE,
                    "%s: changed since the job indexed it (ETag/Last-Modified/size differ); "
                    "restart the job to read the new data",
                    canon);
    }
out:
    free(u);
    free(canon);
    free(resp);
    return rc;
}
