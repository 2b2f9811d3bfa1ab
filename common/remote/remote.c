/* remote: the allow-list check, HEAD + cached GET with retries and
 * redirects checked hop by hop (remote.h has the sequence). */
#include "common/remote/remote.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/remote/cache.h"
#include "common/remote/fetch.h"
#include "common/remote/s3.h"
#include "common/remote/url.h"

/* Most redirects one request follows. */
#define REMOTE_MAX_REDIRECTS 5
/* Back-off: base * 2^attempt, times a jitter in [0.5, 1.5), at most cap. */
#define REMOTE_BACKOFF_BASE_MS 100
#define REMOTE_BACKOFF_CAP_MS 2000

struct sl_remote_s {
    sl_roots_t roots;
    char roots_text[1024]; /* for messages */
    char cache_dir[4096];
    sl_cache_t *cache;
    sl_s3_conf_t s3;
    sl_fetch_opts_t fetch;
};

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
        if (rc < 0) {
            goto fail;
        }
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

static int check_url(const sl_remote_t *r, const char *url, sl_url_t *u, char *err, size_t errlen)
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
    int rc = check_url(r, url, u, err, errlen);
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

static uint64_t tag_of(const sl_fetch_resp_t *resp)
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
static int build(const sl_remote_t *r, const sl_url_t *u, bool head, const char *if_match,
                 char *wire, size_t wirelen, char *hbuf, size_t hbuflen,
                 const char *hdrs[SL_S3_MAX_HDRS + 1])
{
    if (u->scheme == SL_URL_S3) {
        return sl_s3_request(&r->s3, u, head ? "HEAD" : "GET", (long)time(NULL), if_match, wire,
                             wirelen, hbuf, hbuflen, hdrs);
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

/* One request to the checked u, following redirects that stay inside
 * remote_roots. shown names the source URL in messages. */
static int request(const sl_remote_t *r, const sl_url_t *u0, const char *shown, bool head,
                   const char *if_match, int fd, sl_fetch_resp_t *resp, char *err, size_t errlen)
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
    for (int hop = 0;; hop++) {
        const char *hdrs[SL_S3_MAX_HDRS + 1];
        rc = build(r, u, head, if_match, wire, SL_URL_MAX * 4, hbuf, 8192, hdrs);
        if (rc < 0) {
            sl_err(err, errlen, rc, "%s: cannot build the request", shown);
            goto out;
        }
        if (fd >= 0 && (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)) {
            rc = sl_err(err, errlen, -errno, "%s: cache file: %s", shown, strerror(errno));
            goto out;
        }
        rc = sl_fetch(wire, hdrs, head, fd, &r->fetch, resp, err, errlen);
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
        rc = check_url(r, resp->location, u, why, sizeof(why));
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
static int request_retry(const sl_remote_t *r, const sl_url_t *u, const char *shown, bool head,
                         const char *if_match, int fd, const uint64_t *expect_size,
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
        rc = request(r, u, shown, head, if_match, fd, resp, err, errlen);
        if (rc == 0 && !head && expect_size != NULL && resp->length != *expect_size) {
            rc = sl_err(err, errlen, -ECONNRESET,
                        "%s: truncated body: got %" PRIu64 " of %" PRIu64 " bytes", shown,
                        resp->length, *expect_size);
        }
        bool transient = rc == -EAGAIN ||
                         (rc < 0 && resp->status == 0 && rc != -EFBIG && rc != -ENOMEM &&
                          rc != -ENAMETOOLONG) ||
                         rc == -ECONNRESET;
        if (!transient) {
            return rc;
        }
    }
    if (rc == -EAGAIN) {
        rc = -EIO;
    }
    return sl_err_prefix(err, errlen, rc, "after %d attempts", SL_REMOTE_ATTEMPTS);
}

int sl_remote_open(const sl_remote_t *r, const char *url, uint64_t expect_tag,
                   sl_remote_obj_t *ret_obj, char *err, size_t errlen)
{
    sl_url_t *u = malloc(sizeof(*u));
    char *canon = malloc(SL_URL_MAX);
    sl_fetch_resp_t *resp = malloc(sizeof(*resp));
    int rc = -ENOMEM;
    if (u == NULL || canon == NULL || resp == NULL) {
        sl_err(err, errlen, rc, "out of memory");
        goto out;
    }
    rc = check_url(r, url, u, err, errlen);
    if (rc < 0) {
        goto out;
    }
    if (r->cache == NULL || sl_url_format(u, canon, SL_URL_MAX) < 0) {
        rc = sl_err(err, errlen, -EPERM, "URL '%s': no cache", url);
        goto out;
    }
    rc = request_retry(r, u, canon, true, NULL, -1, NULL, resp, err, errlen);
    if (rc < 0) {
        goto out;
    }
    if (!resp->have_length) {
        rc = sl_err(err, errlen, -EIO, "%s: the server gave no Content-Length", canon);
        goto out;
    }
    uint64_t tag = tag_of(resp), size = resp->length;
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
    rc = request_retry(r, u, canon, false, etag, fill.tmp_fd, &size, resp, err, errlen);
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
