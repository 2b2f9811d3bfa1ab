/* remote: the allow-list check, HEAD + cached GET with retries and
 * redirects checked hop by hop (remote.h has the sequence). */
#include "common/remote/remote.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/remote/partial.h"
#include "common/remote/remote_impl.h"
#include "common/remote/s3.h"
#include "common/remote/s3_list.h"
#include "common/remote/url.h"

/* Most redirects one request follows. */
#define REMOTE_MAX_REDIRECTS 5
/* Back-off: base * 2^attempt, times a jitter in [0.5, 1.5), at most cap. */
#define REMOTE_BACKOFF_BASE_MS 100
#define REMOTE_BACKOFF_CAP_MS 2000

static const char *env_get(const char *name) { return getenv(name); }

bool sl_remote_is_url(const char *s) { return sl_url_is_url(s); }

static void default_cache_dir(char *out, size_t outlen)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg != NULL && xdg[0] == '/') {
        snprintf(out, outlen, "%s/sluice", xdg);
    } else if (home != NULL && home[0] == '/') {
        snprintf(out, outlen, "%s/.cache/sluice", home);
    } else {
        snprintf(out, outlen, "/var/cache/sluice");
    }
}

int sl_remote_new(const sl_remote_conf_t *conf, sl_remote_t **ret, char *err, size_t errlen)
{
    sl_remote_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = sl_fetch_global_init();
    if (rc < 0) {
        sl_err(err, errlen, rc, "libcurl: global init failed");
        goto fail;
    }
    rc = sl_roots_parse(conf->roots, &r->roots, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    snprintf(r->roots_text, sizeof(r->roots_text), "%s", conf->roots != NULL ? conf->roots : "");
    if (conf->cache_dir != NULL && conf->cache_dir[0] != '\0') {
        snprintf(r->cache_dir, sizeof(r->cache_dir), "%s", conf->cache_dir);
    } else {
        default_cache_dir(r->cache_dir, sizeof(r->cache_dir));
    }
    uint64_t bytes = conf->cache_bytes != 0 ? conf->cache_bytes : SL_REMOTE_DEFAULT_CACHE_BYTES;
    /* The cache directory is made only when there is something to fetch:
     * a host without remote_roots never touches it. */
    if (r->roots.n > 0) {
        rc = sl_cache_new(r->cache_dir, bytes, &r->cache, err, errlen);
        if (rc == 0) {
            rc = sl_rpf_new(r, &r->pf);
        }
        if (rc == 0) {
            rc = sl_parts_new(r->cache, &r->parts);
        }
        if (rc < 0) {
            sl_err(err, errlen, rc, "cache_dir '%s': %s", r->cache_dir, strerror(-rc));
            goto fail;
        }
    }
    r->stats = malloc(sizeof(*r->stats));
    if (r->stats != NULL) {
        sl_rstats_init(r->stats);
    }
    rc = sl_hedge_lat_new(&r->lat);
    if (rc < 0 || r->stats == NULL) {
        rc = rc < 0 ? rc : -ENOMEM;
        sl_err(err, errlen, rc, "out of memory");
        goto fail;
    }
    rc = sl_s3_conf_load(&r->s3, env_get, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    sl_fetch_opts_default(&r->fetch);
    if (conf->connect_timeout_ms > 0) {
        r->fetch.connect_timeout_ms = conf->connect_timeout_ms;
    }
    if (conf->low_speed_secs > 0) {
        r->fetch.low_speed_secs = conf->low_speed_secs;
    }
    r->fetch.max_bytes = bytes;
    *ret = r;
    return 0;
fail:
    sl_remote_free(r);
    return rc;
}

void sl_remote_free(sl_remote_t *r)
{
    if (r == NULL) {
        return;
    }
    sl_rpf_free(r->pf); /* its threads use the cache */
    sl_parts_free(r->parts);
    sl_hedge_lat_free(r->lat);
    if (r->stats != NULL) {
        sl_rstats_destroy(r->stats);
        free(r->stats);
    }
    sl_roots_free(&r->roots);
    sl_cache_free(r->cache);
    memset(&r->s3, 0, sizeof(r->s3)); /* no secret left in freed memory */
    free(r);
}

void sl_remote_describe(const sl_remote_t *r, char *out, size_t outlen)
{
    if (r == NULL || r->roots.n == 0) {
        snprintf(out, outlen, "remote_roots=none (URL sources refused)");
        return;
    }
    snprintf(out, outlen,
             "remote_roots=%s cache_dir=%s cache_bytes=%" PRIu64
             " s3_endpoint=%s s3_credentials=%s",
             r->roots_text, r->cache_dir, sl_cache_max_bytes(r->cache), r->s3.endpoint,
             r->s3.have_creds ? "found" : "none (unsigned requests)");
}

int sl_remote_check_url(const sl_remote_t *r, const char *url, sl_url_t *u, char *err,
                        size_t errlen)
{
    char why[256];
    int rc = sl_url_parse(url, u, why, sizeof(why));
    if (rc < 0) {
        return sl_err(err, errlen, rc == -EPERM ? -EPERM : -EINVAL, "URL '%s': %s", url, why);
    }
    if (r == NULL || !sl_roots_allow(&r->roots, u)) {
        bool none = r == NULL || r->roots.n == 0;
        return sl_err(err, errlen, -EPERM,
                      "URL '%s' is outside remote_roots (%s%s%s; set remote_roots or "
                      "--remote-roots to allow it)",
                      url, none ? "none set" : "'", none ? "" : r->roots_text, none ? "" : "'");
    }
    return 0;
}

int sl_remote_check(const sl_remote_t *r, const char *url, char *canon, size_t canonlen, char *err,
                    size_t errlen)
{
    sl_url_t *u = malloc(sizeof(*u));
    if (u == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = sl_remote_check_url(r, url, u, err, errlen);
    if (rc == 0 && sl_url_format(u, canon, canonlen) < 0) {
        rc = sl_err(err, errlen, -ENAMETOOLONG, "URL '%.64s...' too long", url);
    }
    free(u);
    return rc;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001b3ULL;
    }
    return h;
}

uint64_t sl_remote_tag_of(const sl_fetch_resp_t *resp)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    h = fnv(h, resp->etag, strlen(resp->etag) + 1);
    h = fnv(h, resp->last_modified, strlen(resp->last_modified) + 1);
    h = fnv(h, &resp->length, sizeof(resp->length));
    return h != 0 ? h : 1;
}

/* Jittered exponential back-off before attempt (1-based retry number). */
static void backoff(int attempt, uint64_t *seed)
{
    *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
    double jitter = 0.5 + (double)(*seed >> 11) / (double)(1ULL << 53);
    double ms = REMOTE_BACKOFF_BASE_MS * (double)(1u << (attempt - 1)) * jitter;
    if (ms > REMOTE_BACKOFF_CAP_MS) {
        ms = REMOTE_BACKOFF_CAP_MS;
    }
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                          .tv_nsec = (long)((ms - 1000.0 * (double)(time_t)(ms / 1000)) * 1e6)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* What an HTTP status means here: 0 ok, 1 redirect, -EAGAIN retry, or the
 * final error. */
static int judge(long status, const char *url, char *err, size_t errlen)
{
    if (status >= 200 && status < 300) {
        return 0;
    }
    if (status >= 300 && status < 400) {
        return 1;
    }
    if (status == 404 || status == 410) {
        return sl_err(err, errlen, -ENOENT, "%s: not found (HTTP %ld)", url, status);
    }
    if (status == 401 || status == 403) {
        return sl_err(err, errlen, -EACCES,
                      "%s: access denied (HTTP %ld; for s3:// check the host's AWS credentials)",
                      url, status);
    }
    if (status == 412) {
        return sl_err(err, errlen, -ESTALE, "%s: changed while being read (HTTP 412)", url);
    }
    if (status == 429 || status >= 500) {
        sl_err(err, errlen, -EAGAIN, "%s: HTTP %ld", url, status);
        return -EAGAIN;
    }
    return sl_err(err, errlen, -EIO, "%s: HTTP %ld", url, status);
}

/* The wire URL and header lines of one request to u. */
static int build(const sl_remote_t *r, const sl_url_t *u, const sl_remote_req_t *q, char *wire,
                 size_t wirelen, char *hbuf, size_t hbuflen, const char *hdrs[SL_S3_MAX_HDRS + 1])
{
    const char *if_match = q->if_match;
    if (u->scheme == SL_URL_S3) {
        return sl_s3_request(&r->s3, u, q->head ? "HEAD" : "GET", (long)time(NULL), if_match,
                             q->query, wire, wirelen, hbuf, hbuflen, hdrs);
    }
    if (q->query != NULL && q->query[0] != '\0') {
        return -EINVAL;
    }
    char enc[SL_URL_MAX * 3];
    if (sl_url_encode_path(u->path, enc, sizeof(enc)) < 0) {
        return -ENAMETOOLONG;
    }
    sl_url_t bare = *u;
    bare.path[0] = '\0';
    if (sl_url_format(&bare, wire, wirelen) < 0 || strlen(wire) + strlen(enc) >= wirelen) {
        return -ENAMETOOLONG;
    }
    strcat(wire, enc);
    hdrs[0] = NULL;
    if (if_match != NULL && if_match[0] != '\0') {
        int n = snprintf(hbuf, hbuflen, "If-Match: %s", if_match);
        if (n < 0 || (size_t)n >= hbuflen) {
            return -ENAMETOOLONG;
        }
        hdrs[0] = hbuf;
        hdrs[1] = NULL;
    }
    return 0;
}

/* Appends "Range: bytes=A-B" to hdrs (not signed: SigV4 signs only the
 * headers it lists, and a range does not change what the object is). */
static int add_range(const sl_remote_req_t *q, const char **hdrs, char *buf, size_t buflen)
{
    if (q->range_len == 0) {
        return -EINVAL;
    }
    size_t n = 0;
    while (hdrs[n] != NULL) {
        n++;
    }
    if (n > SL_S3_MAX_HDRS) {
        return -E2BIG;
    }
    snprintf(buf, buflen, "Range: bytes=%" PRIu64 "-%" PRIu64, q->range_off,
             q->range_off + q->range_len - 1);
    hdrs[n] = buf;
    hdrs[n + 1] = NULL;
    return 0;
}

/* One request to the checked u, following redirects that stay inside
 * remote_roots. shown names the source URL in messages. */
static int request(const sl_remote_t *r, const sl_url_t *u0, const char *shown,
                   const sl_remote_req_t *q, int fd, sl_fetch_resp_t *resp, char *err,
                   size_t errlen)
{
    sl_url_t *u = malloc(sizeof(*u));
    char *wire = malloc(SL_URL_MAX * 4);
    char *hbuf = malloc(8192);
    int rc = -ENOMEM;
    if (u == NULL || wire == NULL || hbuf == NULL) {
        sl_err(err, errlen, rc, "out of memory");
        goto out;
    }
    *u = *u0;
    char range[64];
    for (int hop = 0;; hop++) {
        const char *hdrs[SL_S3_MAX_HDRS + 2]; /* room for a Range line */
        rc = build(r, u, q, wire, SL_URL_MAX * 4, hbuf, 8192, hdrs);
        if (rc == 0 && q->range) {
            rc = add_range(q, hdrs, range, sizeof(range));
        }
        if (rc < 0) {
            sl_err(err, errlen, rc, "%s: cannot build the request", shown);
            goto out;
        }
        if (fd >= 0 &&
            (ftruncate(fd, (off_t)q->fd_off) < 0 || lseek(fd, (off_t)q->fd_off, SEEK_SET) < 0)) {
            rc = sl_err(err, errlen, -errno, "%s: cache file: %s", shown, strerror(errno));
            goto out;
        }
        const sl_fetch_opts_t *o = q->opts != NULL ? q->opts : &r->fetch;
        /* A range is small and latency-bound: a slow first answer is worth
         * a second request (hedge.h); whole objects are not. */
        int64_t t0 = r->stats != NULL ? sl_rstats_begin(r->stats) : 0;
        rc = q->range && !q->head && r->lat != NULL
                 ? sl_fetch_hedged(wire, hdrs, fd, o, r->lat, resp, err, errlen)
                 : sl_fetch(wire, hdrs, q->head, fd, o, resp, err, errlen);
        if (r->stats != NULL) {
            sl_rstats_end(r->stats, t0, q->head && rc == 0, rc == 0 && !q->head ? resp->length : 0);
        }
        memset(hbuf, 0, 8192); /* it held a signature */
        if (rc < 0) {
            goto out;
        }
        rc = judge(resp->status, shown, err, errlen);
        if (rc != 1) {
            goto out;
        }
        if (u->scheme == SL_URL_S3 || resp->location[0] == '\0') {
            rc = sl_err(err, errlen, -EIO, "%s: HTTP %ld without a usable Location", shown,
                        resp->status);
            goto out;
        }
        if (hop == REMOTE_MAX_REDIRECTS) {
            rc = sl_err(err, errlen, -ELOOP, "%s: more than %d redirects", shown,
                        REMOTE_MAX_REDIRECTS);
            goto out;
        }
        char why[SL_URL_MAX + 512];
        rc = sl_remote_check_url(r, resp->location, u, why, sizeof(why));
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "%s: redirected: %s", shown, why);
            goto out;
        }
    }
out:
    free(u);
    free(wire);
    free(hbuf);
    return rc;
}

/* request() with retries of what may pass: no response, 5xx/429, a body
 * shorter than expect_size (when known). */
int sl_remote_request_retry(const sl_remote_t *r, const sl_url_t *u, const char *shown,
                            const sl_remote_req_t *q, int fd, const uint64_t *expect_size,
                            sl_fetch_resp_t *resp, char *err, size_t errlen)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    int rc = 0;
    for (int attempt = 0; attempt < SL_REMOTE_ATTEMPTS; attempt++) {
        if (attempt > 0) {
            backoff(attempt, &seed);
        }
        rc = request(r, u, shown, q, fd, resp, err, errlen);
        if (rc == 0 && !q->head && expect_size != NULL && resp->length != *expect_size) {
            rc = sl_err(err, errlen, -ECONNRESET,
                        "%s: truncated body: got %" PRIu64 " of %" PRIu64 " bytes", shown,
                        resp->length, *expect_size);
        }
        bool transient = rc == -EAGAIN ||
                         (rc < 0 && resp->status == 0 && rc != -EFBIG && rc != -ENOMEM &&
                          rc != -ENAMETOOLONG && rc != -ECANCELED) ||
                         rc == -ECONNRESET;
        if (!transient) {
            return rc;
        }
    }
    if (rc == -EAGAIN) {
        rc = -EHOSTDOWN; /* 5xx/429 every time: as good as gone (source_remote.c) */
    }
    return sl_err_prefix(err, errlen, rc, "after %d attempts", SL_REMOTE_ATTEMPTS);
}

int sl_remote_open(const sl_remote_t *r, const char *url, uint64_t expect_tag,
                   sl_remote_obj_t *ret_obj, char *err, size_t errlen)
{
    return sl_remote_open_opts(r, url, expect_tag, NULL, ret_obj, err, errlen);
}

int sl_remote_open_opts(const sl_remote_t *r, const char *url, uint64_t expect_tag,
                        const sl_fetch_opts_t *opts, sl_remote_obj_t *ret_obj, char *err,
                        size_t errlen)
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
    if (rc < 0) {
        goto out;
    }
    if (r->cache == NULL || sl_url_format(u, canon, SL_URL_MAX) < 0) {
        rc = sl_err(err, errlen, -EPERM, "URL '%s': no cache", url);
        goto out;
    }
    sl_remote_req_t hq = {.head = true, .opts = opts};
    rc = sl_remote_request_retry(r, u, canon, &hq, -1, NULL, resp, err, errlen);
    if (rc < 0) {
        goto out;
    }
    if (!resp->have_length) {
        rc = sl_err(err, errlen, -EIO, "%s: the server gave no Content-Length", canon);
        goto out;
    }
    uint64_t tag = sl_remote_tag_of(resp), size = resp->length;
    char etag[sizeof(resp->etag)];
    snprintf(etag, sizeof(etag), "%s", resp->etag);
    if (expect_tag != 0 && tag != expect_tag) {
        rc = sl_err(err, errlen, -ESTALE,
                    "%s: changed since the job indexed it (ETag/Last-Modified/size differ); "
                    "restart the job to read the new data",
                    canon);
        goto out;
    }
    if (size > sl_cache_max_bytes(r->cache)) {
        rc = sl_err(err, errlen, -EFBIG, "%s: %" PRIu64 " bytes is over cache_bytes (%" PRIu64 ")",
                    canon, size, sl_cache_max_bytes(r->cache));
        goto out;
    }
    char key[SL_CACHE_KEY_MAX];
    sl_cache_key(canon, tag, key);
    rc = sl_cache_lookup(r->cache, key);
    if (rc >= 0) {
        goto found;
    }
    sl_cache_fill_t fill;
    bool hit;
    rc = sl_cache_fill_begin(r->cache, key, &fill, &hit);
    if (rc < 0) {
        rc = sl_err(err, errlen, rc, "%s: cache: %s", canon, strerror(-rc));
        goto out;
    }
    if (hit) {
        goto found;
    }
    sl_remote_req_t gq = {.if_match = etag, .opts = opts};
    rc = sl_remote_request_retry(r, u, canon, &gq, fill.tmp_fd, &size, resp, err, errlen);
    if (rc < 0) {
        sl_cache_fill_abort(r->cache, &fill);
        goto out;
    }
    rc = sl_cache_fill_commit(r->cache, &fill);
    if (rc < 0) {
        rc = sl_err(err, errlen, rc, "%s: cache: %s", canon, strerror(-rc));
        goto out;
    }
found:
    ret_obj->tag = tag;
    ret_obj->size = size;
out:
    free(u);
    free(canon);
    free(resp);
    return rc;
}

int sl_remote_lookup(const sl_remote_t *r, const char *url, uint64_t tag)
{
    if (tag == 0 || r == NULL || r->cache == NULL) {
        return -ENOENT;
    }
    char *canon = malloc(SL_URL_MAX);
    if (canon == NULL) {
        return -ENOMEM;
    }
    int fd = -ENOENT;
    if (sl_remote_check(r, url, canon, SL_URL_MAX, NULL, 0) == 0) {
        char key[SL_CACHE_KEY_MAX];
        sl_cache_key(canon, tag, key);
        fd = sl_cache_lookup(r->cache, key);
    }
    free(canon);
    return fd;
}

int sl_remote_open_known(const sl_remote_t *r, const char *url, uint64_t tag,
                         sl_remote_obj_t *ret_obj, char *err, size_t errlen)
{
    int fd = sl_remote_lookup(r, url, tag);
    if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0) {
            ret_obj->tag = tag;
            ret_obj->size = (uint64_t)st.st_size;
            return fd;
        }
        close(fd);
    }
    return sl_remote_open(r, url, tag, ret_obj, err, errlen);
}

int sl_remote_prefetch(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size)
{
    if (r == NULL || r->pf == NULL || tag == 0) {
        return -EPERM;
    }
    if (size > sl_cache_max_bytes(r->cache) / 4) {
        return -EFBIG; /* would push out what the cache is for */
    }
    int fd = sl_remote_lookup(r, url, tag);
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return sl_rpf_add(r->pf, url, tag, size);
}

void sl_remote_read_cost(const sl_remote_t *r, double *ret_bytes_per_sec, double *ret_latency_sec)
{
    *ret_bytes_per_sec = 0.0;
    *ret_latency_sec = 0.0;
    if (r != NULL && r->stats != NULL) {
        sl_rstats_get(r->stats, ret_bytes_per_sec, ret_latency_sec);
    }
}

void sl_remote_hedge_counts(const sl_remote_t *r, uint64_t *ret_hedged, uint64_t *ret_won)
{
    *ret_hedged = 0;
    *ret_won = 0;
    if (r != NULL && r->lat != NULL) {
        sl_hedge_counts(r->lat, ret_hedged, ret_won);
    }
}

void sl_remote_prefetch_counts(const sl_remote_t *r, uint64_t *ret_done, uint64_t *ret_failed)
{
    *ret_done = 0;
    *ret_failed = 0;
    if (r != NULL && r->pf != NULL) {
        sl_rpf_counts(r->pf, ret_done, ret_failed);
    }
}

/* ---- listings (S3 ListObjectsV2) ----------------------------------------- */

/* Most pages one listing reads (1000 keys each at most). */
#define REMOTE_LIST_MAX_PAGES 100000u
/* Largest page answer we read. */
#define REMOTE_LIST_PAGE_MAX ((uint64_t)64 << 20)

typedef struct list_ctx_s {
    const sl_remote_t *r;
    const char *bucket;
    const char *prefix; /* decoded */
    sl_remote_list_fn fn;
    void *ctx;
    char *err;
    size_t errlen;
} list_ctx_t;

static int on_object(void *arg, const char *key, uint64_t size, const char *etag)
{
    list_ctx_t *c = arg;
    char raw[SL_URL_MAX + 300], canon[SL_URL_MAX];
    if (strncmp(key, c->prefix, strlen(c->prefix)) != 0) {
        return sl_err(c->err, c->errlen, -EPROTO, "s3://%s/%s: listed a key outside the prefix",
                      c->bucket, c->prefix);
    }
    int n = snprintf(raw, sizeof(raw), "s3://%s/%s", c->bucket, key);
    if (n < 0 || (size_t)n >= sizeof(raw)) {
        return sl_err(c->err, c->errlen, -ENAMETOOLONG, "s3://%s/%.64s...: too long", c->bucket,
                      key);
    }
    /* A key S3 allows but a URL here cannot name ("a/../b", "a//b" stay
     * names; "." segments do not) is refused, naming it. */
    int rc = sl_remote_check(c->r, raw, canon, sizeof(canon), c->err, c->errlen);
    if (rc < 0) {
        return rc;
    }
    sl_fetch_resp_t v = {.length = size};
    snprintf(v.etag, sizeof(v.etag), "%s", etag);
    return c->fn(c->ctx, canon, size, sl_remote_tag_of(&v));
}

/* Reads the page the fetch wrote into fd and parses it. */
static int parse_page(int fd, uint64_t len, list_ctx_t *c, bool *ret_more, char *token,
                      const char *shown)
{
    if (len > REMOTE_LIST_PAGE_MAX) {
        return sl_err(c->err, c->errlen, -EFBIG, "%s: a listing page over 64 MiB", shown);
    }
    char *buf = malloc(len + 1);
    if (buf == NULL) {
        return sl_err(c->err, c->errlen, -ENOMEM, "out of memory");
    }
    ssize_t got = pread(fd, buf, len, 0);
    int rc;
    if (got < 0 || (uint64_t)got != len) {
        rc = sl_err(c->err, c->errlen, -EIO, "%s: reading the listing back", shown);
    } else {
        buf[len] = '\0';
        rc = sl_s3_list_parse(buf, len, on_object, c, ret_more, token, SL_S3_TOKEN_MAX);
        if (rc == -EPROTO &&
            (c->err == NULL || c->err[0] == '\0' || strstr(c->err, "listed a key") == NULL)) {
            rc = sl_err(c->err, c->errlen, rc, "%s: not a ListObjectsV2 answer", shown);
        }
    }
    free(buf);
    return rc;
}

/* The decoded key prefix of the canonical path ("/a%20b/" -> "a b/"). */
static void decode_prefix(const char *path, char *out, size_t outlen)
{
    size_t o = 0;
    for (const char *p = path + 1; *p != '\0' && o + 1 < outlen; p++) {
        if (p[0] == '%' && p[1] != '\0' && p[2] != '\0') {
            char hex[3] = {p[1], p[2], '\0'};
            out[o++] = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

int sl_remote_list(const sl_remote_t *r, const char *dir_url, sl_remote_list_fn fn, void *ctx,
                   char *err, size_t errlen)
{
    sl_url_t *u = malloc(sizeof(*u));
    char *prefix = malloc(SL_URL_MAX), *query = malloc(SL_URL_MAX * 4);
    char *token = malloc(SL_S3_TOKEN_MAX), *shown = malloc(SL_URL_MAX);
    sl_fetch_resp_t *resp = malloc(sizeof(*resp));
    int fd = -1, rc = -ENOMEM;
    if (u == NULL || prefix == NULL || query == NULL || token == NULL || shown == NULL ||
        resp == NULL) {
        sl_err(err, errlen, rc, "out of memory");
        goto out;
    }
    rc = sl_remote_check_url(r, dir_url, u, err, errlen);
    if (rc < 0) {
        goto out;
    }
    if (u->scheme != SL_URL_S3) {
        rc = sl_err(err, errlen, -ENOTSUP,
                    "URL '%s': http(s) has no listing (only s3:// can be listed; name the files "
                    "in a filelist or a jsonl manifest of URLs instead)",
                    dir_url);
        goto out;
    }
    sl_url_format(u, shown, SL_URL_MAX);
    decode_prefix(u->path, prefix, SL_URL_MAX);
    list_ctx_t c = {.r = r,
                    .bucket = u->host,
                    .prefix = prefix,
                    .fn = fn,
                    .ctx = ctx,
                    .err = err,
                    .errlen = errlen};
    sl_url_t bucket = *u;
    snprintf(bucket.path, sizeof(bucket.path), "/");
    fd = memfd_create("sluice-s3-list", MFD_CLOEXEC);
    if (fd < 0) {
        rc = sl_err(err, errlen, -errno, "memfd: %s", strerror(errno));
        goto out;
    }
    token[0] = '\0';
    bool more = true;
    for (unsigned page = 0; more; page++) {
        if (page == REMOTE_LIST_MAX_PAGES) {
            rc = sl_err(err, errlen, -E2BIG, "%s: more than %u listing pages", shown, page);
            goto out;
        }
        if (sl_s3_list_query(prefix, token, query, SL_URL_MAX * 4) < 0) {
            rc = sl_err(err, errlen, -ENAMETOOLONG, "%s: listing query too long", shown);
            goto out;
        }
        sl_remote_req_t q = {.query = query};
        rc = sl_remote_request_retry(r, &bucket, shown, &q, fd, NULL, resp, err, errlen);
        if (rc == 0) {
            rc = parse_page(fd, resp->length, &c, &more, token, shown);
        }
        if (rc < 0) {
            goto out;
        }
    }
out:
    if (fd >= 0) {
        close(fd);
    }
    free(u);
    free(prefix);
    free(query);
    free(token);
    free(shown);
    free(resp);
    return rc;
}
