/* rpc_server: an rpc server's set-up, method registration, start and
 * shutdown -- the owner's side (rpc_server_impl.h describes the threads;
 * rpc_call.c, rpc_unary.c and rpc_stream.c serve the calls). */
#include "common/rpc/rpc_server_impl.h"

#include <errno.h>
#include <grpc/support/alloc.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/addr.h"
#include "common/base/clock.h"
#include "common/base/err.h"
#include "common/rpc/rpc_creds.h"
#include "common/rpc/rpc_keepalive.h"

#define MAX_CQ_THREADS 16
#define MAX_HANDLER_THREADS 256
#define MAX_STREAMS 4096

/* The thread counts and limits of opts, defaults applied. */
static int server_limits(sl_rpc_server_t *srv, const sl_rpc_server_opts_t *opts,
                         size_t *ret_max_msg, size_t *ret_max_recv, char *err, size_t errlen)
{
    srv->n_cq = opts->cq_threads == 0 ? 1 : opts->cq_threads;
    srv->n_pool = opts->handler_threads == 0 ? 4 : opts->handler_threads;
    srv->max_streams = opts->max_streams == 0 ? 64 : opts->max_streams;
    if (srv->n_cq > MAX_CQ_THREADS || srv->n_pool > MAX_HANDLER_THREADS ||
        srv->max_streams > MAX_STREAMS) {
        return sl_err(err, errlen, -EINVAL,
                      "limits: cq_threads <= %d, handler_threads <= %d, max_streams <= %d",
                      MAX_CQ_THREADS, MAX_HANDLER_THREADS, MAX_STREAMS);
    }
    size_t max_msg = opts->max_msg_bytes == 0 ? SL_RPC_DEFAULT_MAX_MSG : opts->max_msg_bytes;
    size_t max_recv = opts->max_recv_bytes == 0 ? max_msg : opts->max_recv_bytes;
    srv->q_bytes_max = opts->max_queued_bytes != 0 ? opts->max_queued_bytes : 4 * max_recv;
    *ret_max_msg = max_msg;
    *ret_max_recv = max_recv;
    return 0;
}

/* The lock and condvars; on failure none is left initialised. */
static int server_sync_init(sl_rpc_server_t *srv)
{
    if (pthread_mutex_init(&srv->mu, NULL) != 0) {
        return -ENOMEM;
    }
    if (pthread_cond_init(&srv->cv_pool, NULL) != 0) {
        pthread_mutex_destroy(&srv->mu);
        return -ENOMEM;
    }
    if (sl_cond_init_mono(&srv->cv_state) < 0) {
        pthread_cond_destroy(&srv->cv_pool);
        pthread_mutex_destroy(&srv->mu);
        return -ENOMEM;
    }
    if (pthread_mutex_init(&srv->tenants_mu, NULL) != 0) {
        pthread_cond_destroy(&srv->cv_state);
        pthread_cond_destroy(&srv->cv_pool);
        pthread_mutex_destroy(&srv->mu);
        return -ENOMEM;
    }
    return 0;
}

/* The gRPC server and its completion queue, with the transport's limits. */
static int server_create(sl_rpc_server_t *srv, size_t max_msg, size_t max_recv, char *err,
                         size_t errlen)
{
    /* Keepalive (rpc_keepalive.h): accept our clients' idle pings (strikes
     * and GOAWAY otherwise, after which every call on the connection fails),
     * and ping clients too, so a stream thread serving a client that vanished
     * without a FIN is freed within 30 s instead of holding a slot. */
    const struct {
        const char *key;
        int value;
    } ints[] = {
        {GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, max_recv > INT_MAX ? INT_MAX : (int)max_recv},
        {GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, max_msg > INT_MAX ? INT_MAX : (int)max_msg},
        /* Linux lets a second server bind a port with SO_REUSEPORT and
         * silently split the traffic; a taken port must fail instead. */
        {GRPC_ARG_ALLOW_REUSEPORT, 0},
        {GRPC_ARG_KEEPALIVE_TIME_MS, SL_RPC_KEEPALIVE_TIME_MS},
        {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, SL_RPC_KEEPALIVE_TIMEOUT_MS},
        {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
        {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, SL_RPC_MIN_RECV_PING_INTERVAL_MS},
        {GRPC_ARG_HTTP2_MAX_PING_STRIKES, SL_RPC_MAX_PING_STRIKES},
        {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0},
    };
    enum { N_ARGS = sizeof(ints) / sizeof(ints[0]) };
    grpc_arg args[N_ARGS];
    for (size_t i = 0; i < N_ARGS; i++) {
        args[i].type = GRPC_ARG_INTEGER;
        args[i].key = (char *)ints[i].key;
        args[i].value.integer = ints[i].value;
    }
    grpc_channel_args cargs = {.num_args = N_ARGS, .args = args};
    srv->server = grpc_server_create(&cargs, NULL);
    srv->cq = grpc_completion_queue_create_for_next(NULL);
    if (srv->server == NULL || srv->cq == NULL) {
        return sl_err(err, errlen, -ENOMEM, "cannot create the gRPC server");
    }
    grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
    return 0;
}

sl_rpc_server_t *sl_rpc_server_new(const sl_rpc_server_opts_t *opts, char *err, size_t errlen)
{
    size_t max_msg = 0, max_recv = 0;
    if (opts == NULL || opts->listen == NULL || opts->listen[0] == '\0') {
        sl_err(err, errlen, -EINVAL, "no listen address");
        return NULL;
    }
    sl_rpc_server_t *srv = calloc(1, sizeof(*srv));
    if (srv == NULL) {
        sl_err(err, errlen, -ENOMEM, "out of memory");
        return NULL;
    }
    grpc_init(); /* released by sl_rpc_server_free */
    srv->state = SRV_NEW;
    srv->tag_shutdown = (srv_tag_t){TAG_SHUTDOWN, NULL};
    if (server_limits(srv, opts, &max_msg, &max_recv, err, errlen) < 0) {
        goto fail_early;
    }
    if (server_sync_init(srv) < 0) {
        sl_err(err, errlen, -ENOMEM, "cannot create a mutex or condvar");
        goto fail_early;
    }
    /* From here on sl_rpc_server_free can clean up whatever is set. */
    unsigned queue_cap = srv->n_pool * 16 < 64 ? 64 : srv->n_pool * 16;
    srv->listen = strdup(opts->listen);
    srv->slots = calloc(srv->max_streams, sizeof(*srv->slots));
    srv->cq_tids = calloc(srv->n_cq, sizeof(*srv->cq_tids));
    srv->pool_tids = calloc(srv->n_pool, sizeof(*srv->pool_tids));
    if (srv->listen == NULL || srv->slots == NULL || srv->cq_tids == NULL ||
        srv->pool_tids == NULL || sl_ring_init(&srv->queue, sizeof(srv_call_t *), queue_cap) < 0) {
        sl_err(err, errlen, -ENOMEM, "out of memory");
        goto fail;
    }
    if (sl_rpc_creds_server(opts->security, &srv->creds, err, errlen) < 0 ||
        sl_rpc_creds_bearer(opts->security, &srv->bearer, err, errlen) < 0 ||
        server_create(srv, max_msg, max_recv, err, errlen) < 0) {
        goto fail;
    }
    return srv;

fail:
    sl_rpc_server_free(srv);
    return NULL;
fail_early:
    free(srv);
    grpc_shutdown();
    return NULL;
}

static int add_method(sl_rpc_server_t *srv, const char *path,
                      const ProtobufCMessageDescriptor *req_desc, method_t *proto)
{
    if (srv->state != SRV_NEW) {
        return -EBUSY;
    }
    if (path == NULL || path[0] != '/' || !sl_rpc_pb_has_version(req_desc)) {
        return -EINVAL; /* every request message needs `uint32 version = 1` */
    }
    if (srv->n_methods >= SL_RPC_MAX_METHODS) {
        return -ENOSPC;
    }
    for (unsigned i = 0; i < srv->n_methods; i++) {
        if (strcmp(srv->methods[i].path, path) == 0) {
            return -EEXIST;
        }
    }
    method_t *m = &srv->methods[srv->n_methods];
    *m = *proto;
    m->req_desc = req_desc;
    m->path = strdup(path);
    if (m->path == NULL) {
        return -ENOMEM;
    }
    /* host NULL: gRPC never matches calls to a method registered with a host.
     * A unary request is read with the call, so the pool gets it whole. */
    m->handle = grpc_server_register_method(srv->server, path, NULL,
                                            m->kind == METHOD_UNARY
                                                ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER
                                                : GRPC_SRM_PAYLOAD_NONE,
                                            0);
    if (m->handle == NULL) {
        free(m->path);
        m->path = NULL;
        return -EINVAL;
    }
    srv->n_methods++;
    return 0;
}

int sl_rpc_server_add_unary(sl_rpc_server_t *srv, const char *method,
                            const ProtobufCMessageDescriptor *req_desc, sl_rpc_unary_fn fn,
                            void *ctx)
{
    if (fn == NULL) {
        return -EINVAL;
    }
    method_t proto = {.kind = METHOD_UNARY, .unary_fn = fn, .ctx = ctx};
    return add_method(srv, method, req_desc, &proto);
}

int sl_rpc_server_add_stream(sl_rpc_server_t *srv, const char *method,
                             const ProtobufCMessageDescriptor *req_desc, sl_rpc_stream_fn fn,
                             void *ctx)
{
    if (fn == NULL) {
        return -EINVAL;
    }
    method_t proto = {.kind = METHOD_STREAM, .stream_fn = fn, .ctx = ctx};
    return add_method(srv, method, req_desc, &proto);
}

/* gRPC only says "0" when it cannot listen; find out why by binding the
 * address ourselves (gRPC sets SO_REUSEADDR too). */
static int diagnose_bind(const char *addr, char *err, size_t errlen)
{
    char host[256];
    unsigned portnum = 0;
    char why[300];
    if (sl_addr_split(addr, host, sizeof(host), &portnum, why, sizeof(why)) < 0) {
        return sl_err(err, errlen, -EINVAL, "bad listen address: %s", why);
    }
    char port[8];
    snprintf(port, sizeof(port), "%u", portnum);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int g = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints, &res);
    if (g != 0) {
        return sl_err(err, errlen, -EINVAL, "cannot resolve listen address \"%s\": %s", addr,
                      gai_strerror(g));
    }
    int in_use = 0;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno == EADDRINUSE) {
            in_use = 1;
        }
        close(fd);
    }
    freeaddrinfo(res);
    if (in_use) {
        return sl_err(err, errlen, -EADDRINUSE, "cannot listen on %s: address in use", addr);
    }
    return sl_err(err, errlen, -EIO, "gRPC cannot listen on %s", addr);
}

/* Stops and joins the threads of a server that never started serving. */
static void stop_unstarted(sl_rpc_server_t *srv)
{
    if (!srv->cq_shut && srv->cq != NULL) {
        grpc_completion_queue_shutdown(srv->cq);
        srv->cq_shut = 1;
    }
    for (unsigned i = 0; i < srv->cq_started; i++) {
        pthread_join(srv->cq_tids[i], NULL);
    }
    srv->cq_started = 0;
    pthread_mutex_lock(&srv->mu);
    srv->pool_stop = 1;
    pthread_cond_broadcast(&srv->cv_pool);
    pthread_mutex_unlock(&srv->mu);
    for (unsigned i = 0; i < srv->pool_started; i++) {
        pthread_join(srv->pool_tids[i], NULL);
    }
    srv->pool_started = 0;
}

int sl_rpc_server_start(sl_rpc_server_t *srv, char *ret_addr, size_t addrlen, char *err,
                        size_t errlen)
{
    if (srv->state != SRV_NEW || srv->cq_shut) {
        return sl_err(err, errlen, -EINVAL, "server already started");
    }
    int r;
    for (unsigned i = 0; i < srv->n_pool; i++) {
        int e = pthread_create(&srv->pool_tids[i], NULL, sl_rpc_srv_pool_main, srv);
        if (e != 0) {
            r = sl_err(err, errlen, -e, "cannot start handler threads: %s", strerror(e));
            goto fail;
        }
        srv->pool_started++;
    }
    for (unsigned i = 0; i < srv->n_cq; i++) {
        int e = pthread_create(&srv->cq_tids[i], NULL, sl_rpc_srv_cq_main, srv);
        if (e != 0) {
            r = sl_err(err, errlen, -e, "cannot start completion-queue threads: %s",
                       strerror(e));
            goto fail;
        }
        srv->cq_started++;
    }
    int port = grpc_server_add_http2_port(srv->server, srv->listen, srv->creds);
    grpc_server_credentials_release(srv->creds); /* the port keeps its own ref */
    srv->creds = NULL;
    if (port == 0) {
        r = diagnose_bind(srv->listen, err, errlen);
        goto fail;
    }
    grpc_server_start(srv->server);
    pthread_mutex_lock(&srv->mu);
    srv->state = SRV_RUNNING;
    pthread_mutex_unlock(&srv->mu);

    /* The generic request: without one, a call to an unknown method is never
     * answered and its client waits until its deadline. It gets UNIMPLEMENTED. */
    r = sl_rpc_srv_post_request(srv, NULL);
    for (unsigned i = 0; i < srv->n_methods && r == 0; i++) {
        r = sl_rpc_srv_post_request(srv, &srv->methods[i]);
    }
    if (r < 0) {
        sl_rpc_server_shutdown(srv, 0);
        return sl_err(err, errlen, r, "cannot request calls from gRPC");
    }
    if (ret_addr != NULL && addrlen > 0) {
        const char *colon = strrchr(srv->listen, ':');
        int hostlen = colon != NULL ? (int)(colon - srv->listen) : (int)strlen(srv->listen);
        snprintf(ret_addr, addrlen, "%.*s:%d", hostlen, srv->listen, port);
    }
    return 0;

fail:
    stop_unstarted(srv);
    return r;
}

/* All calls over, streams ended and gRPC's shutdown tag back. mu held. */
static int quiet_locked(const sl_rpc_server_t *srv)
{
    return srv->shutdown_done && srv->live_calls == 0 && srv->active_streams == 0;
}

void sl_rpc_server_shutdown(sl_rpc_server_t *srv, int grace_ms)
{
    if (srv == NULL) {
        return;
    }
    pthread_mutex_lock(&srv->mu);
    if (srv->state != SRV_RUNNING) {
        pthread_mutex_unlock(&srv->mu);
        return; /* never started, or another thread is stopping / stopped it */
    }
    srv->state = SRV_STOPPING; /* no more re-arming or new streams */
    pthread_mutex_unlock(&srv->mu);

    /* Pending requests come back with success=0, calls in progress may
     * finish within the grace period; then everything left is cancelled.
     * The queue is shut down only after gRPC's shutdown tag, and the server
     * destroyed only after the queue is drained. */
    grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->tag_shutdown);
    double until = sl_mono_sec() + (grace_ms > 0 ? grace_ms : 0) / 1000.0;
    pthread_mutex_lock(&srv->mu);
    while (!quiet_locked(srv)) {
        if (sl_cond_wait_until(&srv->cv_state, &srv->mu, until) == ETIMEDOUT) {
            break;
        }
    }
    int quiet = quiet_locked(srv);
    pthread_mutex_unlock(&srv->mu);
    if (!quiet) {
        /* Handlers see -ECANCELED from send/recv and queued unary calls skip
         * their handler; every outstanding batch fails. */
        grpc_server_cancel_all_calls(srv->server);
        pthread_mutex_lock(&srv->mu);
        while (!quiet_locked(srv)) {
            pthread_cond_wait(&srv->cv_state, &srv->mu);
        }
        pthread_mutex_unlock(&srv->mu);
    }

    grpc_completion_queue_shutdown(srv->cq);
    srv->cq_shut = 1;
    for (unsigned i = 0; i < srv->cq_started; i++) {
        pthread_join(srv->cq_tids[i], NULL); /* each drains to GRPC_QUEUE_SHUTDOWN */
    }
    srv->cq_started = 0;
    stop_unstarted(srv); /* the pool threads */
    for (unsigned i = 0; i < srv->max_streams; i++) {
        if (srv->slots[i].state == SLOT_DONE) {
            pthread_join(srv->slots[i].tid, NULL);
            srv->slots[i].state = SLOT_FREE;
        }
    }
    grpc_server_destroy(srv->server);
    srv->server = NULL;
    grpc_completion_queue_destroy(srv->cq);
    srv->cq = NULL;

    pthread_mutex_lock(&srv->mu);
    srv->state = SRV_STOPPED;
    pthread_mutex_unlock(&srv->mu);
}

void sl_rpc_server_free(sl_rpc_server_t *srv)
{
    if (srv == NULL) {
        return;
    }
    sl_rpc_server_shutdown(srv, 0); /* no-op unless running */
    if (srv->state == SRV_NEW) {
        stop_unstarted(srv);
        if (srv->server != NULL) {
            grpc_server_destroy(srv->server);
        }
        if (srv->cq != NULL) {
            if (!srv->cq_shut) {
                grpc_completion_queue_shutdown(srv->cq);
            }
            grpc_event ev;
            do {
                ev = grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                NULL);
            } while (ev.type != GRPC_QUEUE_SHUTDOWN);
            grpc_completion_queue_destroy(srv->cq);
        }
    }
    if (srv->creds != NULL) {
        grpc_server_credentials_release(srv->creds);
    }
    for (unsigned i = 0; i < srv->n_methods; i++) {
        free(srv->methods[i].path);
    }
    free(srv->bearer);
    sl_rpc_srv_tenants_free(srv);
    pthread_mutex_destroy(&srv->tenants_mu);
    free(srv->listen);
    sl_ring_free(&srv->queue);
    free(srv->slots);
    free(srv->cq_tids);
    free(srv->pool_tids);
    pthread_cond_destroy(&srv->cv_state);
    pthread_cond_destroy(&srv->cv_pool);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
    grpc_shutdown();
}
