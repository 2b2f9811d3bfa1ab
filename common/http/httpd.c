/* httpd: evhttp on its own event_base and thread. The only cross-thread
 * call is sl_httpd_stop, which uses event_base_loopbreak on a base made
 * notifiable by evthread_use_pthreads: the base belongs to the http thread,
 * and nothing else touches it. */
#include "common/base/addr.h"
#include "common/http/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/base/err.h"

#define DEFAULT_MAX_HEADER (8 * 1024)
#define DEFAULT_MAX_BODY (4 * 1024)
#define DEFAULT_TIMEOUT_SEC 10
#define PATH_MAX_BYTES 256

typedef struct route_s {
    char path[PATH_MAX_BYTES];
    sl_httpd_fn fn;
    void *ctx;
} route_t;

typedef enum {
    HTTPD_NEW = 0, /* routes may be added */
    HTTPD_RUNNING, /* thread started */
    HTTPD_STOPPED, /* thread joined */
} httpd_state_e;

struct sl_httpd_s {
    sl_httpd_opts_t opts;
    char listen[300]; /* copy of opts.listen */
    char token[SL_HTTPD_TOKEN_MAX]; /* "" = no authorization required */
    struct event_base *base; /* owned; used only on the http thread once running */
    struct evhttp *http;
    struct event *stop_ev; /* activated by sl_httpd_stop; breaks the loop from inside */
    pthread_t thread;
    httpd_state_e state;
    pthread_mutex_t mu; /* guards state against concurrent stop calls */
    route_t routes[SL_HTTPD_MAX_ROUTES];
    size_t nroutes;
};

static void send_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
    evhttp_add_header(hdr, "Content-Type", "text/plain; charset=utf-8");
    evhttp_add_header(hdr, "Cache-Control", "no-store");
    if (out != NULL && text != NULL) {
        evbuffer_add(out, text, strlen(text));
    }
    evhttp_send_reply(req, code, reason, NULL);
}

static const char *reason_of(int code)
{
    switch (code) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Status";
    }
}

/* The token after "Bearer " in the Authorization header, or NULL. */
static const char *presented(struct evhttp_request *req)
{
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req),
                                          "Authorization");
    static const char PREFIX[] = "Bearer ";
    if (auth == NULL || strncmp(auth, PREFIX, sizeof(PREFIX) - 1) != 0) {
        return NULL;
    }
    return auth + sizeof(PREFIX) - 1;
}

/* Compares in time independent of where the strings differ, so response
 * timing does not reveal a token prefix. */
static int own_token(const sl_httpd_t *h, const char *auth)
{
    if (h->token[0] == '\0' || auth == NULL) {
        return 0;
    }
    size_t n = strlen(h->token);
    size_t m = strnlen(auth, SL_HTTPD_TOKEN_MAX);
    unsigned diff = (unsigned)(n != m);
    for (size_t i = 0; i < n; i++) {
        diff |= (unsigned)(h->token[i] ^ (i < m ? auth[i] : 0));
    }
    return diff == 0;
}

/* No token configured: anyone (the route may still show more to a token
 * it knows); else the own token or one the daemon's hook accepts. */
static int token_ok(const sl_httpd_t *h, const char *auth, int own)
{
    if (h->token[0] == '\0' || own) {
        return 1;
    }
    return auth != NULL && h->opts.token_ok != NULL && h->opts.token_ok(h->opts.token_ctx, auth);
}

/* The one request callback: method check, exact path routing. */
static void on_request(struct evhttp_request *req, void *arg)
{
    sl_httpd_t *h = arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        send_text(req, 405, "Method Not Allowed", "method not allowed\n");
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    if (path == NULL || path[0] == '\0') {
        path = "/";
    }
    const char *auth = presented(req);
    int own = own_token(h, auth);
    /* /healthz says only "ok" or why not, and liveness probes (systemd,
     * kubelet, load balancers) cannot send a bearer token. */
    if (strcmp(path, "/healthz") != 0 && !token_ok(h, auth, own)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"sluice\"");
        send_text(req, 401, "Unauthorized", "unauthorized: missing or wrong bearer token\n");
        return;
    }
    const route_t *r = NULL;
    for (size_t i = 0; i < h->nroutes; i++) {
        if (strcmp(h->routes[i].path, path) == 0) {
            r = &h->routes[i];
            break;
        }
    }
    if (r == NULL) {
        send_text(req, 404, "Not Found", "not found\n");
        return;
    }
    sl_httpd_resp_t resp = {.status = 200, .content_type = NULL, .body = NULL, .len = 0,
                            .bearer = auth, .own_token = own};
    r->fn(r->ctx, query != NULL ? query : "", &resp);
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
    evhttp_add_header(hdr, "Content-Type",
                      resp.content_type != NULL ? resp.content_type
                                                : "text/plain; charset=utf-8");
    evhttp_add_header(hdr, "Cache-Control", "no-store");
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    int code = resp.status > 0 ? resp.status : 200;
    if (resp.body != NULL && out != NULL && evbuffer_add(out, resp.body, resp.len) != 0) {
        code = 500;
    }
    free(resp.body);
    /* evhttp drops the body itself for HEAD but keeps Content-Length. */
    evhttp_send_reply(req, code, reason_of(code), NULL);
}

/* Runs on the http thread. event_base_loopbreak from another thread could
 * be lost if it came before event_base_dispatch started (the loop clears the
 * flag on entry); an activated event is not. */
static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    sl_httpd_t *h = arg;
    event_base_loopbreak(h->base);
}

sl_httpd_t *sl_httpd_new(const sl_httpd_opts_t *opts, char *err, size_t errlen)
{
    if (opts == NULL || opts->listen == NULL || strlen(opts->listen) >= 300) {
        sl_err(err, errlen, -EINVAL, "http: no or overlong listen address");
        return NULL;
    }
    /* Needed for event_base_loopbreak from the stopping thread. Idempotent. */
    if (evthread_use_pthreads() != 0) {
        sl_err(err, errlen, -ENOSYS, "http: evthread_use_pthreads failed");
        return NULL;
    }
    sl_httpd_t *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        sl_err(err, errlen, -ENOMEM, "http: out of memory");
        return NULL;
    }
    h->opts = *opts;
    snprintf(h->listen, sizeof(h->listen), "%s", opts->listen);
    h->opts.listen = h->listen;
    if (opts->bearer_token != NULL) {
        if (strlen(opts->bearer_token) >= sizeof(h->token)) {
            free(h);
            sl_err(err, errlen, -EINVAL, "http: bearer token longer than %d bytes",
                   SL_HTTPD_TOKEN_MAX - 1);
            return NULL;
        }
        snprintf(h->token, sizeof(h->token), "%s", opts->bearer_token);
    }
    h->opts.bearer_token = NULL; /* the copy in h->token is what counts */
    if (h->opts.max_header_bytes == 0) {
        h->opts.max_header_bytes = DEFAULT_MAX_HEADER;
    }
    if (h->opts.max_body_bytes == 0) {
        h->opts.max_body_bytes = DEFAULT_MAX_BODY;
    }
    if (h->opts.timeout_sec <= 0) {
        h->opts.timeout_sec = DEFAULT_TIMEOUT_SEC;
    }
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h);
        sl_err(err, errlen, -ENOMEM, "http: mutex init failed");
        return NULL;
    }
    h->base = event_base_new();
    if (h->base == NULL) {
        sl_err(err, errlen, -ENOMEM, "http: event_base_new failed");
        goto fail;
    }
    h->http = evhttp_new(h->base);
    if (h->http == NULL) {
        sl_err(err, errlen, -ENOMEM, "http: evhttp_new failed");
        goto fail;
    }
    evhttp_set_max_headers_size(h->http, (ev_ssize_t)h->opts.max_header_bytes);
    evhttp_set_max_body_size(h->http, (ev_ssize_t)h->opts.max_body_bytes);
    evhttp_set_timeout(h->http, h->opts.timeout_sec);
    /* Accept every standard method so that we, not evhttp (501), answer
     * the ones we do not serve with 405. */
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                            EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(h->http, on_request, h);
    h->stop_ev = event_new(h->base, -1, 0, on_stop, h);
    if (h->stop_ev == NULL) {
        sl_err(err, errlen, -ENOMEM, "http: event_new failed");
        goto fail;
    }
    return h;
fail:
    sl_httpd_free(h);
    return NULL;
}

int sl_httpd_route(sl_httpd_t *h, const char *path, sl_httpd_fn fn, void *ctx)
{
    if (h == NULL || path == NULL || path[0] != '/' || fn == NULL ||
        strlen(path) >= PATH_MAX_BYTES || h->state != HTTPD_NEW) {
        return -EINVAL;
    }
    if (h->nroutes >= SL_HTTPD_MAX_ROUTES) {
        return -ENOSPC;
    }
    route_t *r = &h->routes[h->nroutes++];
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->fn = fn;
    r->ctx = ctx;
    return 0;
}

int sl_httpd_routes(sl_httpd_t *h, const sl_httpd_route_t *routes, size_t n, void *ctx)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = sl_httpd_route(h, routes[i].path, routes[i].fn, ctx);
    }
    return rc;
}

void sl_httpd_healthz(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    (void)ctx;
    (void)query;
    resp->body = strdup("ok\n");
    resp->len = resp->body != NULL ? 3 : 0;
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static void *http_main(void *arg)
{
    sl_httpd_t *h = arg;
    event_base_dispatch(h->base);
    return NULL;
}

int sl_httpd_start(sl_httpd_t *h, char *ret_addr, size_t addrlen, char *err, size_t errlen)
{
    char host[256];
    unsigned port = 0;
    if (h == NULL || h->state != HTTPD_NEW) {
        return sl_err(err, errlen, -EINVAL, "http: server already started");
    }
    char why[300];
    if (sl_addr_split(h->listen, host, sizeof(host), &port, why, sizeof(why)) != 0) {
        return sl_err(err, errlen, -EINVAL, "http: %s", why);
    }
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(h->http, host,
                                                                    (ev_uint16_t)port);
    if (bs == NULL) {
        int e = errno != 0 ? errno : EADDRNOTAVAIL;
        return sl_err(err, errlen, -e, "http: cannot bind %s: %s", h->listen, strerror(e));
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    evutil_socket_t fd = evhttp_bound_socket_get_fd(bs);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        return sl_err(err, errlen, -errno, "http: getsockname: %s", strerror(errno));
    }
    unsigned bound = 0;
    if (ss.ss_family == AF_INET6) {
        bound = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    } else {
        bound = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    if (ret_addr != NULL && addrlen > 0) {
        if (strchr(host, ':') != NULL) {
            snprintf(ret_addr, addrlen, "[%s]:%u", host, bound);
        } else {
            snprintf(ret_addr, addrlen, "%s:%u", host, bound);
        }
    }
    int rc = pthread_create(&h->thread, NULL, http_main, h);
    if (rc != 0) {
        return sl_err(err, errlen, -rc, "http: cannot start thread: %s", strerror(rc));
    }
    pthread_mutex_lock(&h->mu);
    h->state = HTTPD_RUNNING;
    pthread_mutex_unlock(&h->mu);
    return 0;
}

void sl_httpd_stop(sl_httpd_t *h)
{
    if (h == NULL) {
        return;
    }
    pthread_mutex_lock(&h->mu);
    int join = h->state == HTTPD_RUNNING;
    if (join) {
        h->state = HTTPD_STOPPED;
        event_active(h->stop_ev, EV_READ, 0);
    }
    pthread_mutex_unlock(&h->mu);
    if (join) {
        pthread_join(h->thread, NULL);
    }
}

void sl_httpd_free(sl_httpd_t *h)
{
    if (h == NULL) {
        return;
    }
    sl_httpd_stop(h);
    if (h->http != NULL) {
        evhttp_free(h->http);
    }
    if (h->stop_ev != NULL) {
        event_free(h->stop_ev);
    }
    if (h->base != NULL) {
        event_base_free(h->base);
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}
