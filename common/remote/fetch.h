/* fetch: one HTTP(S) request through libcurl, with the limits every remote
 * read has (connect timeout, a floor on the transfer rate, a size cap) and
 * without following redirects itself: a 3xx comes back with its resolved
 * Location so the caller can check it against remote_roots first
 * (remote.c). Bodies go to a file descriptor. No state: each call has its
 * own easy handle, so any thread may call. Libraries never log: errors are
 * returned and described in err; no header value is ever put in err (an
 * Authorization header carries a signature). */
#ifndef SL_REMOTE_FETCH_H
#define SL_REMOTE_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/remote/url.h"

/* What a response said about its object. */
typedef struct sl_fetch_resp_s {
    long status;            /* HTTP status, 0 when no response came */
    char etag[128];         /* "" when absent */
    char last_modified[64]; /* "" when absent */
    uint64_t length;        /* Content-Length (HEAD) or bytes written (GET) */
    bool have_length;
    uint64_t range_total;      /* a 206's Content-Range "bytes A-B/TOTAL", else 0 */
    char location[SL_URL_MAX]; /* a 3xx's absolute target, else "" */
} sl_fetch_resp_t;

/* Tunables (sl_fetch_opts_default gives the defaults). */
typedef struct sl_fetch_opts_s {
    long connect_timeout_ms; /* 5000 */
    long low_speed_bytes;    /* abort below this rate ... (1024 B/s) */
    long low_speed_secs;     /* ... for this long (15 s) */
    uint64_t max_bytes;      /* refuse a body larger than this */
    const int *cancel;       /* not NULL and set (atomic load): cut the transfer,
                              * -ECANCELED (a prefetch its host stops) */
} sl_fetch_opts_t;

void sl_fetch_opts_default(sl_fetch_opts_t *o);

/* One request. url is the wire URL (encoded); hdrs are "Name: value"
 * lines (NULL-terminated, may be NULL). head: a HEAD request; otherwise
 * the body is written to out_fd from its current offset. Returns 0 when a
 * response arrived (any status: the caller judges it), -ETIMEDOUT,
 * -ECONNREFUSED, -ECONNRESET (cut mid-body, also a short body), -EFBIG
 * (over max_bytes), -EHOSTUNREACH (name or route), -ECANCELED (o->cancel),
 * -EIO (other transport errors); err says which. */
int sl_fetch(const char *url, const char *const *hdrs, bool head, int out_fd,
             const sl_fetch_opts_t *o, sl_fetch_resp_t *ret, char *err, size_t errlen);

/* Process-wide libcurl set-up; call once before any thread calls sl_fetch
 * (sl_remote_new does). Returns 0 or -EIO. */
int sl_fetch_global_init(void);

#endif
