/* httpd: a tiny read-only HTTP server (libevent evhttp) for daemon status
 * pages: /status, /metrics, /healthz.
 *
 * GET and HEAD only (anything else: 405 with an Allow header), unknown paths
 * 404, header block and body sizes bounded (oversized: 413/400 from evhttp),
 * idle connections time out. The event_base lives on the server's own thread;
 * route callbacks run on that thread, one at a time, so a callback that reads
 * daemon state takes the daemon's own mutex (and must not block long).
 *
 * Library code: nothing here logs; errors come back in the caller's buffer.
 * libevent 2.1 has no connection limit on evhttp: the idle timeout is what
 * bounds connections a peer can hold open. */
#ifndef SL_HTTPD_H
#define SL_HTTPD_H

#include <stddef.h>

#define SL_HTTPD_MAX_ROUTES 16

typedef struct sl_httpd_s sl_httpd_t;

typedef struct sl_httpd_opts_s {
    const char *listen;      /* "HOST:PORT" or "[V6]:PORT"; port 0 picks a free one */
    size_t max_header_bytes; /* 0 = 8 KiB */
    size_t max_body_bytes;   /* 0 = 4 KiB (GET bodies are not used) */
    int timeout_sec;         /* idle/read timeout per connection; 0 = 10 */
    /* Non-NULL and non-empty: every request needs "Authorization: Bearer
     * TOKEN" (else 401). Copied; at most SL_HTTPD_TOKEN_MAX - 1 bytes. */
    const char *bearer_token;
    /* Optional: other tokens the daemon accepts (tenants, docs/protocol.md
     * "Tenants"): called on the http thread with a presented token that is
     * not bearer_token; non-zero admits the request, and the route sees the
     * token in sl_httpd_resp_t.bearer to decide what to show. */
    int (*token_ok)(void *ctx, const char *token);
    void *token_ctx;
} sl_httpd_opts_t;

#define SL_HTTPD_TOKEN_MAX 512

/* What a route callback fills. status defaults to 200, content_type to
 * "text/plain; charset=utf-8". body is malloc'd by the callback and freed by
 * the server (NULL = empty body). content_type must be a static string. */
typedef struct sl_httpd_resp_s {
    int status;
    const char *content_type;
    char *body;
    size_t len;
    /* Set by the server before the route runs: the bearer token the request
     * presented (NULL = none; valid during the call), and whether it was the
     * server's own bearer_token. */
    const char *bearer;
    int own_token;
} sl_httpd_resp_t;

/* Runs on the http thread. query is the raw query string ("" if none). */
typedef void (*sl_httpd_fn)(void *ctx, const char *query, sl_httpd_resp_t *resp);

sl_httpd_t *sl_httpd_new(const sl_httpd_opts_t *opts, char *err, size_t errlen);
/* Exact path match ("/status"). Before sl_httpd_start only. Returns -ENOSPC
 * beyond SL_HTTPD_MAX_ROUTES, -EINVAL for a path not starting with '/'. */
int sl_httpd_route(sl_httpd_t *h, const char *path, sl_httpd_fn fn, void *ctx);

/* A daemon's routes as a table; every row gets the same ctx. */
typedef struct sl_httpd_route_s {
    const char *path;
    sl_httpd_fn fn;
} sl_httpd_route_t;

/* sl_httpd_route for each of the n rows, in order; the first error stops. */
int sl_httpd_routes(sl_httpd_t *h, const sl_httpd_route_t *routes, size_t n, void *ctx);

/* A callback answering "ok\n" (200; 500 when out of memory): /healthz. */
void sl_httpd_healthz(void *ctx, const char *query, sl_httpd_resp_t *resp);
/* Binds, then starts the http thread. Writes the bound "HOST:PORT" (resolved
 * port) to ret_addr. */
int sl_httpd_start(sl_httpd_t *h, char *ret_addr, size_t addrlen, char *err, size_t errlen);
/* Stops the loop and joins the thread; callbacks have returned when this
 * returns. Idempotent; any thread except the http thread. */
void sl_httpd_stop(sl_httpd_t *h);
void sl_httpd_free(sl_httpd_t *h); /* stops first; NULL ok */

#endif
