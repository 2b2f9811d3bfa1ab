/* remote: what a host may fetch and how -- remote_roots, the shard cache,
 * S3 settings -- and the one call sources use: sl_remote_open, which gives
 * a read-only fd of a URL's bytes from the cache, downloading them first
 * when needed.
 *
 * One sl_remote_t per process (worker daemon, client job), made from that
 * host's own settings; it is never sent anywhere. Thread-safe after
 * sl_remote_new: sources on several threads may open URLs at once.
 *
 * sl_remote_open, in order:
 *  1. the URL is canonicalised and checked against remote_roots: outside
 *     every prefix is -EPERM before any request is made;
 *  2. a HEAD gives the object's validator (ETag, Last-Modified, size) as a
 *     64-bit tag; expect_tag != 0 and a different tag is -ESTALE (the
 *     object changed since the source indexed it);
 *  3. the cache entry (URL, tag) is opened, or filled by a GET with
 *     If-Match, whose body must be exactly the HEAD's size;
 *  4. redirects (HTTP only) are followed by hand, at most 5, each target
 *     checked against remote_roots like the first URL.
 * Transient failures (connect/timeout/reset, a short body, 5xx, 429) are
 * retried up to SL_REMOTE_ATTEMPTS times with jittered exponential
 * back-off (still failing: their error, -EHOSTDOWN for 5xx/429); 404 is -ENOENT, 401/403 -EACCES, 412 -ESTALE, other 4xx -EIO,
 * all without retry. */
#ifndef SL_REMOTE_H
#define SL_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/remote/url.h"

typedef struct sl_remote_s sl_remote_t;

/* Attempts per request (1 + retries). */
#define SL_REMOTE_ATTEMPTS 4
/* Default cache budget: 10 GiB. */
#define SL_REMOTE_DEFAULT_CACHE_BYTES ((uint64_t)10 << 30)

typedef struct sl_remote_conf_s {
    const char *roots;       /* comma-separated URL prefixes; NULL/"": none */
    const char *cache_dir;   /* NULL/"": $XDG_CACHE_HOME/sluice or ~/.cache/sluice */
    uint64_t cache_bytes;    /* 0: SL_REMOTE_DEFAULT_CACHE_BYTES */
    long connect_timeout_ms; /* 0: 5000 */
    long low_speed_secs;     /* 0: 15 (abort below 1 KiB/s for this long) */
} sl_remote_conf_t;

/* Parses the roots and opens (creating) the cache directory. Returns 0,
 * -EINVAL (a root that is not a URL, a bad AWS_* variable: err names it),
 * -errno for the cache directory. */
int sl_remote_new(const sl_remote_conf_t *conf, sl_remote_t **ret, char *err, size_t errlen);
void sl_remote_free(sl_remote_t *r);

/* True when s looks like a URL (http://, https://, s3://). */
bool sl_remote_is_url(const char *s);

/* Canonicalises url into canon and checks it against r's roots (r NULL:
 * no roots). Returns 0, -EINVAL (malformed), -EPERM (outside every root:
 * err names the URL and the remote_roots setting). */
int sl_remote_check(const sl_remote_t *r, const char *url, char *canon, size_t canonlen, char *err,
                    size_t errlen);

/* What sl_remote_open learned of the object. */
typedef struct sl_remote_obj_s {
    uint64_t tag; /* validator: hash of ETag, Last-Modified and size; never 0 */
    uint64_t size;
} sl_remote_obj_t;

/* Returns a read-only fd of url's bytes (the caller closes it) and fills
 * *ret_obj, or -EPERM, -ENOENT, -EACCES, -ESTALE, -EFBIG (over the cache
 * budget), -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET (truncated), -EHOSTDOWN
 * (5xx/429 on every attempt), -EIO; err
 * names the URL (never a credential). */
int sl_remote_open(const sl_remote_t *r, const char *url, uint64_t expect_tag,
                   sl_remote_obj_t *ret_obj, char *err, size_t errlen);

/* sl_remote_open of an object whose validator the caller knows (tag != 0,
 * from an earlier open): the cache entry (URL, tag) when present, with no
 * request at all; otherwise sl_remote_open(r, url, tag, ...). */
int sl_remote_open_known(const sl_remote_t *r, const char *url, uint64_t tag,
                         sl_remote_obj_t *ret_obj, char *err, size_t errlen);

/* The cache entry of (url, tag) when the cache holds it: a read-only fd
 * (marked used), with no request; -ENOENT otherwise. */
int sl_remote_lookup(const sl_remote_t *r, const char *url, uint64_t tag);

/* Queues a background fetch of the whole object (validator tag, size
 * bytes) into the cache, on the host's prefetch threads (prefetch.h:
 * SL_RPF_THREADS at once, SL_RPF_QUEUE queued). Returns 0 queued, 1
 * nothing to do (cached, queued or in flight), -EAGAIN the queue is full,
 * -EFBIG over a quarter of cache_bytes (it would push out the rest),
 * -EPERM no cache. A failed fetch is only counted: the read reports. */
int sl_remote_prefetch(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size);
/* What remote reads cost on this host so far (rstats.h): bytes/s while a
 * request was in flight (0 before 1 MiB was read) and the mean HEAD time
 * in seconds (0: none). r NULL: both 0. */
void sl_remote_read_cost(const sl_remote_t *r, double *ret_bytes_per_sec, double *ret_latency_sec);
void sl_remote_prefetch_counts(const sl_remote_t *r, uint64_t *ret_done, uint64_t *ret_failed);
/* Range requests sent a second time (hedge.h) and those the second won. */
void sl_remote_hedge_counts(const sl_remote_t *r, uint64_t *ret_hedged, uint64_t *ret_won);

/* One object of a listing: its canonical URL, size and a validator (from
 * the listing's ETag and size: not the tag sl_remote_open gives). */
typedef int (*sl_remote_list_fn)(void *ctx, const char *url, uint64_t size, uint64_t tag);

/* Lists every object under dir_url (s3://bucket/prefix/, checked against
 * remote_roots first) with S3 ListObjectsV2, in key order, calling fn for
 * each; stops at fn's first error and returns it. Returns 0, -EPERM,
 * -ENOTSUP (http(s): no listing), -EPROTO (a malformed answer), the
 * errors of sl_remote_open; err names the URL. */
int sl_remote_list(const sl_remote_t *r, const char *dir_url, sl_remote_list_fn fn, void *ctx,
                   char *err, size_t errlen);

/* A one-line description for a daemon's start-up log: the roots, the cache
 * directory and budget, whether S3 credentials were found (never them). */
void sl_remote_describe(const sl_remote_t *r, char *out, size_t outlen);

#endif
