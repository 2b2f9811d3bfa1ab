/* rpc_server: the gRPC server half of the rpc layer.
 *
 * Threads and who may touch what:
 *  - CQ threads (opts.cq_threads) block in grpc_completion_queue_next and only
 *    move call state machines forward (on_event): they never unpack, run
 *    handlers or wait for anything but a short mutex.
 *  - The handler pool (opts.handler_threads) runs unary calls taken from a
 *    bounded queue: unpack, version check, handler, final batch.
 *  - Each open stream has its own thread (at most opts.max_streams) that runs
 *    the stream handler; it blocks on the call's condvar, which CQ threads
 *    signal when a send or receive completes.
 *  - The thread that calls sl_rpc_server_start/shutdown/free (the owner).
 *
 * Every call is a srv_call_t with an explicit state and a reference count:
 * one reference per outstanding batch (each with its own tag struct) plus one
 * while a thread owns the call (from the request's completion until the final
 * status batch is posted). The struct is freed when the count reaches 0
 * (GRPC_CORE.md pitfall 6). Lock order: never hold a call's mutex and the
 * server mutex together. */
#include "common/base/addr.h"
#include "common/base/clock.h"
#include "common/rpc/rpc_impl.h"

#include <errno.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/rpc/rpc_keepalive.h"

#define MAX_METHODS 32
#define MAX_CQ_THREADS 16
#define MAX_HANDLER_THREADS 256
#define MAX_STREAMS 4096
#define STREAM_QUEUE_MAX 16 /* received messages buffered per stream */
#define DETAILS_MAX 512
#define TOKEN_MAX 4096

typedef enum {
    METHOD_UNARY,
    METHOD_STREAM,
} method_kind_e;

typedef struct method_s {
    char *path;
    const ProtobufCMessageDescriptor *req_desc;
    method_kind_e kind;
    sl_rpc_unary_fn unary_fn;
    sl_rpc_stream_fn stream_fn;
    void *ctx;
    void *handle; /* from grpc_server_register_method */
} method_t;

typedef enum {
    TAG_REQUEST,  /* grpc_server_request_(registered_)call: a call arrived */
    TAG_CLOSE,    /* RECV_CLOSE_ON_SERVER: the call is over (maybe cancelled) */
    TAG_SEND,     /* stream SEND_MESSAGE (the first one with initial metadata) */
    TAG_RECV,     /* stream RECV_MESSAGE */
    TAG_STATUS,   /* the final batch with SEND_STATUS_FROM_SERVER */
    TAG_SHUTDOWN, /* grpc_server_shutdown_and_notify */
} tag_kind_e;

typedef struct srv_call_s srv_call_t;

typedef struct srv_tag_s {
    tag_kind_e kind;
    srv_call_t *call; /* NULL for TAG_SHUTDOWN */
} srv_tag_t;

typedef enum {
    CALL_REQUESTED, /* request posted; no client yet */
    CALL_QUEUED,    /* unary: waiting in the handler pool's queue */
    CALL_HANDLING,  /* a pool or stream thread owns it */
    CALL_FINISHING, /* final status posted; waiting for the last tags */
} call_state_e;

typedef enum {
    RECV_IDLE,        /* nothing posted yet */
    RECV_POSTED,      /* one RECV_MESSAGE outstanding */
    RECV_PAUSED,      /* queue full: no receive posted (back-pressure) */
    RECV_HALF_CLOSED, /* the client will send nothing more */
    RECV_FAILED,      /* a receive failed: the call is broken */
} recv_state_e;

struct sl_rpc_reply_s {
    srv_call_t *call;
    int answered;
    int code;
    char details[DETAILS_MAX];
    grpc_byte_buffer *resp_bb; /* packed reply; handed to the final batch */
};

struct sl_rpc_stream_s {
    srv_call_t *call;
};

struct srv_call_s {
    sl_rpc_server_t *srv;
    const method_t *method; /* NULL: the generic request (unknown methods) */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* stream thread waits; CQ threads broadcast */
    call_state_e state;
    int refs;
    srv_tag_t tag_request, tag_close, tag_send, tag_recv, tag_status;

    /* Filled by gRPC when the request completes; must outlive the tag. */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_call_details details; /* generic request only */
    grpc_byte_buffer *payload; /* unary request message */
    int cancelled;             /* RECV_CLOSE_ON_SERVER's flag */
    int closed;                /* TAG_CLOSE returned */
    char *peer;                /* gpr_malloc'd, computed on first use */

    /* Streams: */
    recv_state_e recv_state;
    grpc_byte_buffer *recv_bb; /* target of the outstanding RECV_MESSAGE */
    size_t queued_bytes;       /* payload bytes counted in srv->q_bytes while queued */
    grpc_byte_buffer *rq[STREAM_QUEUE_MAX];
    unsigned rq_head, rq_len;
    int sent_initial_md;
    int send_in_flight;
    int send_reserved; /* a sender is packing; the next send waits */
    int send_failed;
    grpc_byte_buffer *send_bb; /* destroyed when TAG_SEND returns (B.6) */
    int bad_code;              /* non-zero: a message was refused; final status */
    char status_details[DETAILS_MAX];

    grpc_byte_buffer *final_bb; /* unary reply, destroyed when TAG_STATUS returns */
    sl_rpc_reply_t reply;
    sl_rpc_stream_t stream;
};

typedef enum {
    SLOT_FREE,
    SLOT_RUNNING,
    SLOT_DONE, /* thread finished, not yet joined */
} slot_state_e;

typedef struct stream_slot_s {
    pthread_t tid;
    slot_state_e state;
    srv_call_t *call;
} stream_slot_t;

typedef enum {
    SRV_NEW,
    SRV_RUNNING,
    SRV_STOPPING,
    SRV_STOPPED,
} srv_state_e;

struct sl_rpc_server_s {
    grpc_server *server;
    grpc_completion_queue *cq;
    grpc_server_credentials *creds; /* owned until start hands it to the port */
    char *listen;
    char *auth_value; /* "Bearer TOKEN" or NULL */
    unsigned n_cq, n_pool, max_streams, queue_cap;
    size_t q_bytes_max; /* budget of queue[]'s request payloads */
    method_t methods[MAX_METHODS];
    unsigned n_methods;

    pthread_mutex_t mu;
    pthread_cond_t cv_pool;  /* pool threads wait for work */
    pthread_cond_t cv_state; /* owner waits for calls, streams and shutdown */
    srv_state_e state;
    unsigned live_calls; /* srv_call_t structs allocated */
    int shutdown_done;   /* TAG_SHUTDOWN returned */
    srv_tag_t tag_shutdown;
    srv_call_t **queue; /* unary calls waiting for the pool (ring) */
    unsigned q_head, q_len;
    size_t q_bytes; /* payload bytes of the calls in queue[] */
    int pool_stop;
    unsigned active_streams;
    stream_slot_t *slots;

    pthread_t *cq_tids;
    unsigned cq_started;
    int cq_shut; /* grpc_completion_queue_shutdown called */
    pthread_t *pool_tids;
    unsigned pool_started;
};

/* ------------------------------------------------------------ helpers */

/* Waits on cv: forever when until < 0 (monotonic seconds otherwise).
 * Returns ETIMEDOUT or 0. */
static int cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until)
{
    if (until < 0) {
        pthread_cond_wait(cv, mu);
        return 0;
    }
    return sl_cond_wait_until(cv, mu, until);
}

static int consttime_eq(const void *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    unsigned char diff = alen != blen;
    const unsigned char *pa = a;
    for (size_t i = 0; i < blen; i++) {
        diff |= (unsigned char)((i < alen ? pa[i] : 0) ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

/* ------------------------------------------------------------ calls */

static srv_call_t *call_new(sl_rpc_server_t *srv, const method_t *m)
{
    srv_call_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    if (sl_cond_init_mono(&c->cv) < 0) {
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    c->srv = srv;
    c->method = m;
    c->state = CALL_REQUESTED;
    c->tag_request = (srv_tag_t){TAG_REQUEST, c};
    c->tag_close = (srv_tag_t){TAG_CLOSE, c};
    c->tag_send = (srv_tag_t){TAG_SEND, c};
    c->tag_recv = (srv_tag_t){TAG_RECV, c};
    c->tag_status = (srv_tag_t){TAG_STATUS, c};
    grpc_metadata_array_init(&c->md);
    grpc_call_details_init(&c->details);
    c->reply.call = c;
    c->stream.call = c;
    return c;
}

/* Any thread, after the last reference was dropped (no lock held). */
static void call_free(srv_call_t *c)
{
    sl_rpc_server_t *srv = c->srv;
    if (c->call != NULL) {
        grpc_call_unref(c->call);
    }
    grpc_metadata_array_destroy(&c->md);
    grpc_call_details_destroy(&c->details);
    grpc_byte_buffer *bbs[] = {c->payload, c->recv_bb, c->send_bb, c->final_bb, c->reply.resp_bb};
    for (size_t i = 0; i < sizeof(bbs) / sizeof(bbs[0]); i++) {
        if (bbs[i] != NULL) {
            grpc_byte_buffer_destroy(bbs[i]);
        }
    }
    for (unsigned i = 0; i < c->rq_len; i++) {
        grpc_byte_buffer_destroy(c->rq[(c->rq_head + i) % STREAM_QUEUE_MAX]);
    }
    gpr_free(c->peer);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);

    pthread_mutex_lock(&srv->mu);
    srv->live_calls--;
    pthread_cond_broadcast(&srv->cv_state);
    pthread_mutex_unlock(&srv->mu);
}

/* Drops one reference; returns 1 when the caller must call_free after
 * unlocking. Call mutex held. */
static int unref_locked(srv_call_t *c)
{
    return --c->refs == 0;
}

/* Starts a batch and takes a reference for its tag. Call mutex held (that is
 * also what serialises start_batch per call). */
static grpc_call_error start_locked(srv_call_t *c, const grpc_op *ops, size_t n, srv_tag_t *tag)
{
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, tag, NULL);
    if (e == GRPC_CALL_OK) {
        c->refs++;
    }
    return e;
}

/* Posts the final batch: initial metadata (unless a send already carried
 * it), the reply message if any (ownership taken), the status. Call mutex
 * held; the owning thread's reference is dropped by the caller. */
static void finish_locked(srv_call_t *c, int code, const char *details, grpc_byte_buffer *bb)
{
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!c->sent_initial_md) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    }
    if (bb != NULL) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = bb;
    }
    grpc_slice d = grpc_slice_from_copied_string(details != NULL ? details : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)code;
    ops[n++].data.send_status_from_server.status_details = &d; /* lives through start_batch */
    grpc_call_error e = start_locked(c, ops, n, &c->tag_status);
    grpc_slice_unref(d);
    c->sent_initial_md = 1;
    c->state = CALL_FINISHING;
    if (e != GRPC_CALL_OK) {
        /* No tag will come: end the call locally so RECV_CLOSE returns. */
        if (bb != NULL) {
            grpc_byte_buffer_destroy(bb);
        }
        grpc_call_cancel_with_status(c->call, (grpc_status_code)code, details, NULL);
        return;
    }
    c->final_bb = bb;
}

/* Finishes the call and drops the owner's reference, from a thread that
 * owns it but does not hold its mutex. */
static void finish_and_release(srv_call_t *c, int code, const char *details, grpc_byte_buffer *bb)
{
    pthread_mutex_lock(&c->mu);
    finish_locked(c, code, details, bb);
    int drop = unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        call_free(c);
    }
}

static void post_recv_locked(srv_call_t *c)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv_bb;
    if (start_locked(c, &op, 1, &c->tag_recv) == GRPC_CALL_OK) {
        c->recv_state = RECV_POSTED;
    } else {
        c->recv_state = RECV_FAILED;
    }
}

/* The stream can no longer send or receive. Call mutex held. */
static int stream_dead_locked(const srv_call_t *c)
{
    return c->cancelled || c->send_failed || c->recv_state == RECV_FAILED || c->bad_code != 0;
}

static const char *call_peer(srv_call_t *c)
{
    /* Only the owning handler thread calls this, so no lock is needed. */
    if (c->peer == NULL && c->call != NULL) {
        c->peer = grpc_call_get_peer(c->call);
    }
    return c->peer != NULL ? c->peer : "unknown";
}

static int token_ok(const sl_rpc_server_t *srv, const grpc_metadata_array *md)
{
    if (srv->auth_value == NULL) {
        return 1;
    }
    for (size_t i = 0; i < md->count; i++) {
        if (grpc_slice_str_cmp(md->metadata[i].key, "authorization") == 0) {
            grpc_slice v = md->metadata[i].value;
            return consttime_eq(GRPC_SLICE_START_PTR(v), GRPC_SLICE_LENGTH(v), srv->auth_value);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ requests */

/* Posts a request for method m (NULL = generic) unless the server is
 * stopping. Any thread. Returns 0 or a negative errno. */
static int post_request(sl_rpc_server_t *srv, const method_t *m)
{
    pthread_mutex_lock(&srv->mu);
    if (srv->state != SRV_RUNNING) {
        pthread_mutex_unlock(&srv->mu);
        return -ESHUTDOWN;
    }
    srv->live_calls++;
    pthread_mutex_unlock(&srv->mu);

    srv_call_t *c = call_new(srv, m);
    if (c == NULL) {
        pthread_mutex_lock(&srv->mu);
        srv->live_calls--;
        pthread_cond_broadcast(&srv->cv_state);
        pthread_mutex_unlock(&srv->mu);
        return -ENOMEM;
    }
    c->refs = 1; /* the request tag */
    grpc_call_error e;
    if (m == NULL) {
        e = grpc_server_request_call(srv->server, &c->call, &c->details, &c->md, srv->cq, srv->cq,
                                     &c->tag_request);
    } else {
        e = grpc_server_request_registered_call(
            srv->server, m->handle, &c->call, &c->deadline, &c->md,
            m->kind == METHOD_UNARY ? &c->payload : NULL, srv->cq, srv->cq, &c->tag_request);
    }
    if (e != GRPC_CALL_OK) {
        call_free(c);
        return -EIO;
    }
    return 0;
}

/* -EAGAIN: the queue is full by count, -ENOBUFS: by bytes. A call alone
 * always fits (it passed the transport's max_recv_bytes): the budget bounds
 * what many peers together make the server hold, not one request. */
static int pool_enqueue(sl_rpc_server_t *srv, srv_call_t *c)
{
    size_t bytes = c->payload != NULL ? grpc_byte_buffer_length(c->payload) : 0;
    pthread_mutex_lock(&srv->mu);
    if (srv->q_len >= srv->queue_cap || srv->pool_stop) {
        pthread_mutex_unlock(&srv->mu);
        return -EAGAIN;
    }
    if (srv->q_len > 0 && srv->q_bytes + bytes > srv->q_bytes_max) {
        pthread_mutex_unlock(&srv->mu);
        return -ENOBUFS;
    }
    srv->queue[(srv->q_head + srv->q_len) % srv->queue_cap] = c;
    srv->q_len++;
    srv->q_bytes += bytes;
    c->queued_bytes = bytes;
    pthread_cond_signal(&srv->cv_pool);
    pthread_mutex_unlock(&srv->mu);
    return 0;
}

static void *stream_main(void *arg);

/* Reserves a stream slot and starts the stream's thread. CQ thread. The
 * server mutex is held across pthread_create so that the new thread cannot
 * mark its slot done before tid is stored. */
static int stream_spawn(sl_rpc_server_t *srv, srv_call_t *c, char *why, size_t whylen)
{
    int r;
    pthread_mutex_lock(&srv->mu);
    if (srv->state != SRV_RUNNING) {
        r = sl_err(why, whylen, -ESHUTDOWN, "server shutting down");
        goto out;
    }
    if (srv->active_streams >= srv->max_streams) {
        r = sl_err(why, whylen, -EBUSY, "too many open streams (max %u)", srv->max_streams);
        goto out;
    }
    stream_slot_t *slot = NULL;
    for (unsigned i = 0; i < srv->max_streams; i++) {
        if (srv->slots[i].state != SLOT_RUNNING) {
            slot = &srv->slots[i];
            break;
        }
    }
    if (slot == NULL) { /* cannot happen: active_streams counts running slots */
        r = sl_err(why, whylen, -EBUSY, "no free stream slot");
        goto out;
    }
    if (slot->state == SLOT_DONE) {
        pthread_join(slot->tid, NULL); /* it has already left its last lock */
        slot->state = SLOT_FREE;
    }
    slot->call = c;
    int e = pthread_create(&slot->tid, NULL, stream_main, slot);
    if (e != 0) {
        r = sl_err(why, whylen, -e, "cannot start a stream thread: %s", strerror(e));
        goto out;
    }
    slot->state = SLOT_RUNNING;
    srv->active_streams++;
    r = 0;
out:
    pthread_mutex_unlock(&srv->mu);
    return r;
}

/* A request completed: a new call is ours. CQ thread. */
static void on_request(sl_rpc_server_t *srv, srv_call_t *c, int success)
{
    if (!success) {
        /* The server is shutting down: this request will never be matched. */
        pthread_mutex_lock(&c->mu);
        int drop = unref_locked(c);
        pthread_mutex_unlock(&c->mu);
        if (drop) {
            call_free(c);
        }
        return;
    }
    /* Re-arm first, or this method would serve one call at a time (pitfall 9).
     * It fails only while stopping (wanted) or when out of memory, where
     * gRPC's own allocations abort first; nothing better to do than go on. */
    (void)post_request(srv, c->method);

    char why[DETAILS_MAX];
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;

    pthread_mutex_lock(&c->mu);
    /* The request's reference now belongs to this thread (the owner). */
    c->state = CALL_HANDLING;
    if (start_locked(c, &op, 1, &c->tag_close) != GRPC_CALL_OK) {
        c->closed = 1; /* cannot watch for cancellation; finish right away */
        finish_locked(c, SL_RPC_INTERNAL, "cannot start call", NULL);
        goto release;
    }
    if (!token_ok(srv, &c->md)) { /* before anything else, unknown methods included */
        finish_locked(c, SL_RPC_UNAUTHENTICATED, "missing or wrong authorization token", NULL);
        goto release;
    }
    if (c->method == NULL) {
        char *m = grpc_slice_to_c_string(c->details.method);
        snprintf(why, sizeof(why), "unknown method %s", m);
        gpr_free(m); /* pitfall 11 */
        finish_locked(c, SL_RPC_UNIMPLEMENTED, why, NULL);
        goto release;
    }
    if (c->method->kind == METHOD_UNARY) {
        c->state = CALL_QUEUED;
        pthread_mutex_unlock(&c->mu);
        int q = pool_enqueue(srv, c);
        if (q == 0) {
            return; /* the pool thread owns it now */
        }
        pthread_mutex_lock(&c->mu);
        if (q == -ENOBUFS) {
            snprintf(why, sizeof(why), "server busy: requests of more than %zu bytes queued",
                     srv->q_bytes_max);
        } else {
            snprintf(why, sizeof(why), "server busy: %u requests queued", srv->queue_cap);
        }
        finish_locked(c, SL_RPC_RESOURCE_EXHAUSTED, why, NULL);
        goto release;
    }
    /* Stream: start receiving now; the stream thread takes the first message
     * off the queue like any other. */
    post_recv_locked(c);
    pthread_mutex_unlock(&c->mu);
    int r = stream_spawn(srv, c, why, sizeof(why));
    if (r == 0) {
        return; /* the stream thread owns it now */
    }
    pthread_mutex_lock(&c->mu);
    finish_locked(c, r == -ESHUTDOWN ? SL_RPC_UNAVAILABLE : SL_RPC_RESOURCE_EXHAUSTED, why, NULL);

release:;
    int drop = unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        call_free(c);
    }
}

/* A stream's RECV_MESSAGE returned. CQ thread. */
static void on_recv(srv_call_t *c, int success)
{
    pthread_mutex_lock(&c->mu);
    grpc_byte_buffer *bb = c->recv_bb;
    c->recv_bb = NULL;
    if (!success) {
        if (bb != NULL) {
            grpc_byte_buffer_destroy(bb);
        }
        c->recv_state = RECV_FAILED;
    } else if (bb == NULL) {
        /* No message: a clean half-close, or a call that failed (cancelled,
         * server shutting down) -- pitfall 10. */
        c->recv_state = grpc_call_failed_before_recv_message(c->call) ? RECV_FAILED
                                                                      : RECV_HALF_CLOSED;
    } else {
        c->rq[(c->rq_head + c->rq_len) % STREAM_QUEUE_MAX] = bb;
        c->rq_len++;
        if (c->state == CALL_FINISHING) {
            c->recv_state = RECV_IDLE; /* nobody will read it: stop */
        } else if (c->rq_len < STREAM_QUEUE_MAX) {
            post_recv_locked(c);
        } else {
            c->recv_state = RECV_PAUSED; /* the handler re-posts after taking one */
        }
    }
    pthread_cond_broadcast(&c->cv);
    int drop = unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        call_free(c);
    }
}

/* The completion-queue state machine. CQ thread. */
static void on_event(sl_rpc_server_t *srv, srv_tag_t *tag, int success)
{
    srv_call_t *c = tag->call;
    int drop = 0;
    switch (tag->kind) {
    case TAG_SHUTDOWN:
        pthread_mutex_lock(&srv->mu);
        srv->shutdown_done = 1;
        pthread_cond_broadcast(&srv->cv_state);
        pthread_mutex_unlock(&srv->mu);
        return;
    case TAG_REQUEST:
        on_request(srv, c, success);
        return;
    case TAG_RECV:
        on_recv(c, success);
        return;
    case TAG_CLOSE:
        pthread_mutex_lock(&c->mu);
        c->closed = 1;
        pthread_cond_broadcast(&c->cv); /* c->cancelled may have changed */
        drop = unref_locked(c);
        pthread_mutex_unlock(&c->mu);
        break;
    case TAG_SEND:
        pthread_mutex_lock(&c->mu);
        if (c->send_bb != NULL) {
            grpc_byte_buffer_destroy(c->send_bb);
            c->send_bb = NULL;
        }
        c->send_in_flight = 0;
        if (!success) {
            c->send_failed = 1; /* the peer went away */
        }
        pthread_cond_broadcast(&c->cv);
        drop = unref_locked(c);
        pthread_mutex_unlock(&c->mu);
        break;
    case TAG_STATUS:
        pthread_mutex_lock(&c->mu);
        if (c->final_bb != NULL) {
            grpc_byte_buffer_destroy(c->final_bb);
            c->final_bb = NULL;
        }
        drop = unref_locked(c);
        pthread_mutex_unlock(&c->mu);
        break;
    }
    if (drop) {
        call_free(c);
    }
}

static void *cq_main(void *arg)
{
    sl_rpc_server_t *srv = arg;
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        if (ev.type == GRPC_OP_COMPLETE) {
            on_event(srv, ev.tag, ev.success);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ unary */

static void run_unary(srv_call_t *c)
{
    const method_t *m = c->method;
    char details[DETAILS_MAX] = "";
    int code;
    grpc_byte_buffer *bb = NULL;

    pthread_mutex_lock(&c->mu);
    c->state = CALL_HANDLING;
    int cancelled = c->cancelled;
    grpc_byte_buffer *payload = c->payload;
    c->payload = NULL;
    pthread_mutex_unlock(&c->mu);

    if (cancelled) {
        /* Deadline passed or the client left while queued: skip the work. */
        code = SL_RPC_CANCELLED;
        snprintf(details, sizeof(details), "cancelled before the handler ran");
    } else {
        ProtobufCMessage *req = sl_rpc_pb_unpack(m->req_desc, payload);
        if (req == NULL) {
            code = SL_RPC_INVALID_ARGUMENT;
            snprintf(details, sizeof(details), "request to %s did not unpack as %s", m->path,
                     m->req_desc->name);
        } else if (sl_rpc_pb_check_version(req, details, sizeof(details)) < 0) {
            code = SL_RPC_FAILED_PRECONDITION;
        } else {
            m->unary_fn(m->ctx, req, &c->reply);
            if (!c->reply.answered) {
                code = SL_RPC_INTERNAL;
                snprintf(details, sizeof(details), "handler for %s did not reply", m->path);
            } else {
                code = c->reply.code;
                snprintf(details, sizeof(details), "%s", c->reply.details);
                bb = c->reply.resp_bb;
                c->reply.resp_bb = NULL;
            }
        }
        if (req != NULL) {
            protobuf_c_message_free_unpacked(req, NULL);
        }
    }
    if (payload != NULL) {
        grpc_byte_buffer_destroy(payload);
    }
    finish_and_release(c, code, details, bb);
}

static void *pool_main(void *arg)
{
    sl_rpc_server_t *srv = arg;
    for (;;) {
        pthread_mutex_lock(&srv->mu);
        while (srv->q_len == 0 && !srv->pool_stop) {
            pthread_cond_wait(&srv->cv_pool, &srv->mu);
        }
        if (srv->q_len == 0) {
            pthread_mutex_unlock(&srv->mu);
            break;
        }
        srv_call_t *c = srv->queue[srv->q_head];
        srv->q_head = (srv->q_head + 1) % srv->queue_cap;
        srv->q_len--;
        srv->q_bytes -= c->queued_bytes;
        pthread_mutex_unlock(&srv->mu);
        run_unary(c);
    }
    return NULL;
}

void sl_rpc_reply_ok(sl_rpc_reply_t *reply, const ProtobufCMessage *resp)
{
    if (reply->answered) {
        return;
    }
    reply->answered = 1;
    reply->resp_bb = sl_rpc_pb_pack(resp);
    if (reply->resp_bb == NULL) {
        reply->code = SL_RPC_INTERNAL;
        snprintf(reply->details, sizeof(reply->details), "cannot pack the reply");
        return;
    }
    reply->code = SL_RPC_OK;
    reply->details[0] = '\0';
}

void sl_rpc_reply_error(sl_rpc_reply_t *reply, int code, const char *fmt, ...)
{
    if (reply->answered) {
        return;
    }
    reply->answered = 1;
    /* OK without a message would look like a broken reply to the client. */
    reply->code = (code <= SL_RPC_OK || code > SL_RPC_UNAUTHENTICATED) ? SL_RPC_UNKNOWN : code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reply->details, sizeof(reply->details), fmt, ap);
    va_end(ap);
}

void sl_rpc_reply_finish(sl_rpc_reply_t *reply, int rc, const ProtobufCMessage *resp,
                         const char *details)
{
    if (rc == 0) {
        sl_rpc_reply_ok(reply, resp);
        return;
    }
    int code = sl_rpc_status_from_errno(rc);
    sl_rpc_reply_error(reply, code, "%s",
                       details != NULL && details[0] != '\0' ? details : sl_rpc_code_name(code));
}

const char *sl_rpc_reply_peer(const sl_rpc_reply_t *reply)
{
    return call_peer(reply->call);
}

/* ------------------------------------------------------------ streams */

/* Takes the next received message. Stream thread. See sl_rpc_stream_recv. */
static int stream_recv(srv_call_t *c, ProtobufCMessage **ret, int timeout_ms)
{
    double until = timeout_ms > 0 ? sl_mono_sec() + timeout_ms / 1000.0 : -1;
    grpc_byte_buffer *bb = NULL;
    int r = 0;
    *ret = NULL;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->bad_code != 0) {
            r = -EBADMSG;
            break;
        }
        if (c->rq_len > 0) {
            bb = c->rq[c->rq_head];
            c->rq_head = (c->rq_head + 1) % STREAM_QUEUE_MAX;
            c->rq_len--;
            if (c->recv_state == RECV_PAUSED && c->state != CALL_FINISHING) {
                post_recv_locked(c); /* room again: lift the back-pressure */
            }
            break;
        }
        if (stream_dead_locked(c)) {
            r = -ECANCELED;
            break;
        }
        if (c->recv_state == RECV_HALF_CLOSED) {
            r = 1;
            break;
        }
        if (timeout_ms == 0 || cond_wait_until(&c->cv, &c->mu, until) == ETIMEDOUT) {
            if (c->rq_len == 0) {
                r = -ETIMEDOUT;
                break;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (bb == NULL) {
        return r;
    }

    char details[DETAILS_MAX];
    int bad = 0;
    ProtobufCMessage *m = sl_rpc_pb_unpack(c->method->req_desc, bb);
    grpc_byte_buffer_destroy(bb);
    if (m == NULL) {
        bad = SL_RPC_INVALID_ARGUMENT;
        snprintf(details, sizeof(details), "message on %s did not unpack as %s", c->method->path,
                 c->method->req_desc->name);
    } else if (sl_rpc_pb_check_version(m, details, sizeof(details)) < 0) {
        bad = SL_RPC_FAILED_PRECONDITION;
        protobuf_c_message_free_unpacked(m, NULL);
        m = NULL;
    }
    if (bad != 0) {
        /* The layer ends the call with this status whatever the handler returns. */
        pthread_mutex_lock(&c->mu);
        c->bad_code = bad;
        snprintf(c->status_details, sizeof(c->status_details), "%s", details);
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return -EBADMSG;
    }
    *ret = m;
    return 0;
}

int sl_rpc_stream_recv(sl_rpc_stream_t *st, ProtobufCMessage **ret, int timeout_ms)
{
    return stream_recv(st->call, ret, timeout_ms);
}

int sl_rpc_stream_send(sl_rpc_stream_t *st, const ProtobufCMessage *msg, int timeout_ms)
{
    srv_call_t *c = st->call;
    double until = timeout_ms > 0 ? sl_mono_sec() + timeout_ms / 1000.0 : -1;
    /* Wait for the previous send first, so that a timeout does not cost a
     * pack of what may be a large batch (callers retry on -ETIMEDOUT). */
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (stream_dead_locked(c)) {
            pthread_mutex_unlock(&c->mu);
            return -ECANCELED;
        }
        if (!c->send_in_flight && !c->send_reserved) {
            break;
        }
        if (timeout_ms == 0 || cond_wait_until(&c->cv, &c->mu, until) == ETIMEDOUT) {
            if ((c->send_in_flight || c->send_reserved) && !stream_dead_locked(c)) {
                pthread_mutex_unlock(&c->mu);
                return -ETIMEDOUT;
            }
        }
    }
    c->send_reserved = 1; /* the slot is ours while we pack without the lock */
    pthread_mutex_unlock(&c->mu);

    grpc_byte_buffer *bb = sl_rpc_pb_pack(msg);
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    pthread_mutex_lock(&c->mu);
    c->send_reserved = 0;
    pthread_cond_broadcast(&c->cv);
    if (bb == NULL) {
        pthread_mutex_unlock(&c->mu);
        return -ENOMEM;
    }
    if (stream_dead_locked(c)) {
        pthread_mutex_unlock(&c->mu);
        grpc_byte_buffer_destroy(bb);
        return -ECANCELED;
    }
    if (!c->sent_initial_md) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA; /* the first send carries it (B.6) */
    }
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = bb;
    if (start_locked(c, ops, n, &c->tag_send) != GRPC_CALL_OK) {
        c->send_failed = 1;
        pthread_mutex_unlock(&c->mu);
        grpc_byte_buffer_destroy(bb);
        return -ECANCELED;
    }
    c->sent_initial_md = 1;
    c->send_in_flight = 1;
    c->send_bb = bb; /* destroyed by the CQ thread when TAG_SEND returns */
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int sl_rpc_stream_cancelled(const sl_rpc_stream_t *st)
{
    srv_call_t *c = st->call;
    pthread_mutex_lock(&c->mu);
    int r = stream_dead_locked(c);
    pthread_mutex_unlock(&c->mu);
    return r;
}

void sl_rpc_stream_set_details(sl_rpc_stream_t *st, const char *fmt, ...)
{
    srv_call_t *c = st->call;
    char buf[DETAILS_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->mu);
    if (c->bad_code == 0) { /* a refused message's explanation wins */
        snprintf(c->status_details, sizeof(c->status_details), "%s", buf);
    }
    pthread_mutex_unlock(&c->mu);
}

const char *sl_rpc_stream_peer(const sl_rpc_stream_t *st)
{
    return call_peer(st->call);
}

static void *stream_main(void *arg)
{
    stream_slot_t *slot = arg;
    srv_call_t *c = slot->call;
    sl_rpc_server_t *srv = c->srv;
    const method_t *m = c->method;

    ProtobufCMessage *first = NULL;
    int code;
    int r = stream_recv(c, &first, -1);
    if (r == 0) {
        code = m->stream_fn(m->ctx, &c->stream, first);
        protobuf_c_message_free_unpacked(first, NULL);
    } else if (r == 1) {
        code = SL_RPC_INVALID_ARGUMENT;
        sl_rpc_stream_set_details(&c->stream, "stream %s opened without a request", m->path);
    } else {
        code = SL_RPC_CANCELLED; /* -EBADMSG sets its own code below */
    }

    pthread_mutex_lock(&c->mu);
    /* One SEND_MESSAGE at a time: the status waits for the last send. It
     * returns on its own or when the call is cancelled. */
    while (c->send_in_flight || c->send_reserved) {
        pthread_cond_wait(&c->cv, &c->mu);
    }
    if (c->bad_code != 0) {
        code = c->bad_code;
    }
    if (code < SL_RPC_OK || code > SL_RPC_UNAUTHENTICATED) {
        code = SL_RPC_UNKNOWN;
    }
    char details[DETAILS_MAX];
    snprintf(details, sizeof(details), "%s", c->status_details);
    finish_locked(c, code, details, NULL);
    int drop = unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        call_free(c);
    }

    pthread_mutex_lock(&srv->mu);
    slot->state = SLOT_DONE; /* joined by the next spawn in this slot or by shutdown */
    slot->call = NULL;
    srv->active_streams--;
    pthread_cond_broadcast(&srv->cv_state);
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

/* ------------------------------------------------------------ server */

sl_rpc_server_t *sl_rpc_server_new(const sl_rpc_server_opts_t *opts, char *err, size_t errlen)
{
    char *ca = NULL, *cert = NULL, *key = NULL;
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
    srv->n_cq = opts->cq_threads == 0 ? 1 : opts->cq_threads;
    srv->n_pool = opts->handler_threads == 0 ? 4 : opts->handler_threads;
    srv->max_streams = opts->max_streams == 0 ? 64 : opts->max_streams;
    if (srv->n_cq > MAX_CQ_THREADS || srv->n_pool > MAX_HANDLER_THREADS ||
        srv->max_streams > MAX_STREAMS) {
        sl_err(err, errlen, -EINVAL, "limits: cq_threads <= %d, handler_threads <= %d, "
               "max_streams <= %d", MAX_CQ_THREADS, MAX_HANDLER_THREADS, MAX_STREAMS);
        goto fail_early;
    }
    srv->queue_cap = srv->n_pool * 16 < 64 ? 64 : srv->n_pool * 16;
    size_t max_msg = opts->max_msg_bytes == 0 ? SL_RPC_DEFAULT_MAX_MSG : opts->max_msg_bytes;
    int max_msg_int = max_msg > INT_MAX ? INT_MAX : (int)max_msg;
    size_t max_recv = opts->max_recv_bytes == 0 ? max_msg : opts->max_recv_bytes;
    int max_recv_int = max_recv > INT_MAX ? INT_MAX : (int)max_recv;
    srv->q_bytes_max = opts->max_queued_bytes != 0 ? opts->max_queued_bytes : 4 * max_recv;

    if (pthread_mutex_init(&srv->mu, NULL) != 0) {
        sl_err(err, errlen, -ENOMEM, "cannot create a mutex");
        goto fail_early;
    }
    if (pthread_cond_init(&srv->cv_pool, NULL) != 0) {
        pthread_mutex_destroy(&srv->mu);
        sl_err(err, errlen, -ENOMEM, "cannot create a condvar");
        goto fail_early;
    }
    if (sl_cond_init_mono(&srv->cv_state) < 0) {
        pthread_cond_destroy(&srv->cv_pool);
        pthread_mutex_destroy(&srv->mu);
        sl_err(err, errlen, -ENOMEM, "cannot create a condvar");
        goto fail_early;
    }
    /* From here on sl_rpc_server_free can clean up whatever is set. */
    srv->listen = strdup(opts->listen);
    srv->queue = calloc(srv->queue_cap, sizeof(*srv->queue));
    srv->slots = calloc(srv->max_streams, sizeof(*srv->slots));
    srv->cq_tids = calloc(srv->n_cq, sizeof(*srv->cq_tids));
    srv->pool_tids = calloc(srv->n_pool, sizeof(*srv->pool_tids));
    if (srv->listen == NULL || srv->queue == NULL || srv->slots == NULL || srv->cq_tids == NULL ||
        srv->pool_tids == NULL) {
        sl_err(err, errlen, -ENOMEM, "out of memory");
        goto fail;
    }

    const sl_rpc_security_t *sec = opts->security;
    if (sec != NULL && (sec->tls_cert != NULL || sec->tls_key != NULL || sec->tls_ca != NULL)) {
        if (sec->tls_cert == NULL || sec->tls_key == NULL) {
            sl_err(err, errlen, -EINVAL, "TLS needs both a certificate and a key");
            goto fail;
        }
        if (sl_rpc_read_pem(sec->tls_cert, &cert, err, errlen) < 0 ||
            sl_rpc_read_pem(sec->tls_key, &key, err, errlen) < 0 ||
            (sec->tls_ca != NULL && sl_rpc_read_pem(sec->tls_ca, &ca, err, errlen) < 0)) {
            goto fail;
        }
        grpc_ssl_pem_key_cert_pair pair = {key, cert};
        /* With a CA, clients must present a certificate it signed (mutual TLS). */
        srv->creds = grpc_ssl_server_credentials_create_ex(
            ca, &pair, 1,
            ca != NULL ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                       : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
    } else {
        srv->creds = grpc_insecure_server_credentials_create();
    }
    if (srv->creds == NULL) {
        sl_err(err, errlen, -EINVAL, "cannot create server credentials");
        goto fail;
    }
    if (sec != NULL && sec->token != NULL) {
        size_t n = strlen(sec->token);
        if (n == 0 || n > TOKEN_MAX) {
            sl_err(err, errlen, -EINVAL, "token must be 1..%d bytes", TOKEN_MAX);
            goto fail;
        }
        srv->auth_value = malloc(n + 8);
        if (srv->auth_value == NULL) {
            sl_err(err, errlen, -ENOMEM, "out of memory");
            goto fail;
        }
        snprintf(srv->auth_value, n + 8, "Bearer %s", sec->token);
    }

    /* Keepalive (rpc_keepalive.h): accept our clients' idle pings (strikes
     * and GOAWAY otherwise, after which every call on the connection fails),
     * and ping clients too, so a stream thread serving a client that vanished
     * without a FIN is freed within 30 s instead of holding a slot. */
    const struct {
        const char *key;
        int value;
    } ints[] = {
        {GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, max_recv_int},
        {GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, max_msg_int},
        {GRPC_ARG_ALLOW_REUSEPORT, 0}, /* a taken port must fail (pitfall 5) */
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
        sl_err(err, errlen, -ENOMEM, "cannot create the gRPC server");
        goto fail;
    }
    grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
    free(ca);
    free(cert);
    if (key != NULL) {
        explicit_bzero(key, strlen(key));
        free(key);
    }
    return srv;

fail:
    free(ca);
    free(cert);
    if (key != NULL) {
        explicit_bzero(key, strlen(key));
        free(key);
    }
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
    if (srv->n_methods >= MAX_METHODS) {
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
    /* host NULL: registrations with a host were never matched (B.1). */
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
        int e = pthread_create(&srv->pool_tids[i], NULL, pool_main, srv);
        if (e != 0) {
            r = sl_err(err, errlen, -e, "cannot start handler threads: %s", strerror(e));
            goto fail;
        }
        srv->pool_started++;
    }
    for (unsigned i = 0; i < srv->n_cq; i++) {
        int e = pthread_create(&srv->cq_tids[i], NULL, cq_main, srv);
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

    r = post_request(srv, NULL); /* unknown methods -> UNIMPLEMENTED (pitfall 2) */
    for (unsigned i = 0; i < srv->n_methods && r == 0; i++) {
        r = post_request(srv, &srv->methods[i]);
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

    /* B.10: pending requests come back with success=0, calls in progress may
     * finish within the grace period; then everything left is cancelled. */
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
    free(srv->auth_value);
    free(srv->listen);
    free(srv->queue);
    free(srv->slots);
    free(srv->cq_tids);
    free(srv->pool_tids);
    pthread_cond_destroy(&srv->cv_state);
    pthread_cond_destroy(&srv->cv_pool);
    pthread_mutex_destroy(&srv->mu);
    free(srv);
    grpc_shutdown();
}
