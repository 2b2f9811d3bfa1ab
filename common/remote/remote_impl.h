/* remote_impl: what the files of common/remote share (remote.c, rread.c);
 * not a public API. */
#ifndef SL_REMOTE_IMPL_H
#define SL_REMOTE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/remote/cache.h"
#include "common/remote/fetch.h"
#include "common/remote/hedge.h"
#include "common/remote/prefetch.h"
#include "common/remote/rstats.h"
#include "common/remote/remote.h"
#include "common/remote/s3.h"
#include "common/remote/url.h"

struct sl_remote_s {
    sl_roots_t roots;
    char roots_text[1024]; /* for messages */
    char cache_dir[4096];
    sl_cache_t *cache;
    sl_s3_conf_t s3;
    sl_fetch_opts_t fetch;
    sl_rpf_t *pf;        /* background fetches into the cache; NULL without a cache */
    sl_hedge_lat_t *lat; /* recent first-byte latencies: range GETs are hedged */
    sl_rstats_t *stats;  /* what reads cost here, for the planner (rstats.h) */
    struct sl_parts_s *parts; /* range-read bytes kept (partial.h); NULL without a cache */
};

/* What one request asks. */
typedef struct sl_remote_req_s {
    bool head;
    const char *if_match; /* an ETag the object must still have, or NULL */
    const char *query;    /* S3 only: encoded, canonical order; NULL = none */
    bool range;           /* ask for bytes [range_off, range_off + range_len) */
    uint64_t range_off, range_len;
    const sl_fetch_opts_t *opts; /* NULL: the host's */
    uint64_t fd_off;             /* the body goes to fd from here (a sparse file) */
} sl_remote_req_t;

/* Parses url into u and checks it against r's roots: 0, -EINVAL, -EPERM
 * (err names the URL and the setting). */
int sl_remote_check_url(const sl_remote_t *r, const char *url, sl_url_t *u, char *err,
                        size_t errlen);

/* The 64-bit validator of a response (ETag, Last-Modified, length). */
uint64_t sl_remote_tag_of(const sl_fetch_resp_t *resp);

/* One request to the checked u with retries of what may pass (no response,
 * 5xx/429, a body shorter than *expect_size when given), redirects inside
 * remote_roots followed; the body goes to fd (truncated first) unless q is
 * a HEAD. shown names the URL in messages. Returns 0 or the final error. */
int sl_remote_request_retry(const sl_remote_t *r, const sl_url_t *u, const char *shown,
                            const sl_remote_req_t *q, int fd, const uint64_t *expect_size,
                            sl_fetch_resp_t *resp, char *err, size_t errlen);

/* sl_remote_read_range (rread.h), cut when *cancel (may be NULL) is set:
 * -ECANCELED. */
int sl_remote_read_range_cancel(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t off,
                                uint64_t len, int fd, const int *cancel, char *err, size_t errlen);

/* sl_remote_open with these fetch options (NULL: the host's). */
int sl_remote_open_opts(const sl_remote_t *r, const char *url, uint64_t expect_tag,
                        const sl_fetch_opts_t *opts, sl_remote_obj_t *ret_obj, char *err,
                        size_t errlen);

#endif
