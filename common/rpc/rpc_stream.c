/* rpc_stream: server-side streams. Each open stream has a thread of its own
 * (a slot among max_streams) that runs the stream handler; CQ threads queue
 * what the client sends (a bounded ring: when it is full no receive is
 * posted, so the client's flow control holds back the rest) and complete
 * sends, at most one in flight. The sl_rpc_stream_* functions run on the
 * stream's thread and wait on the call's condvar. */
#include "common/rpc/rpc_server_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/err.h"

int sl_rpc_srv_stream_init(srv_call_t *c)
{
    return sl_ring_init(&c->rq, sizeof(grpc_byte_buffer *), SL_RPC_STREAM_QUEUE_MAX);
}

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

void sl_rpc_srv_post_recv_locked(srv_call_t *c)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv_bb;
    if (sl_rpc_srv_start_locked(c, &op, 1, &c->tag_recv) == GRPC_CALL_OK) {
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

void sl_rpc_srv_on_recv(srv_call_t *c, int success)
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
        /* No message is either a clean half-close or a call that failed
         * (cancelled, server shutting down): only gRPC can tell which. */
        c->recv_state = grpc_call_failed_before_recv_message(c->call) ? RECV_FAILED
                                                                      : RECV_HALF_CLOSED;
    } else {
        /* There is room: a receive is posted only while the ring has some. */
        (void)sl_ring_push_back(&c->rq, &bb);
        if (c->state == CALL_FINISHING) {
            c->recv_state = RECV_IDLE; /* nobody will read it: stop */
        } else if (sl_ring_len(&c->rq) < c->rq.cap) {
            sl_rpc_srv_post_recv_locked(c);
        } else {
            c->recv_state = RECV_PAUSED; /* the handler re-posts after taking one */
        }
    }
    pthread_cond_broadcast(&c->cv);
    int drop = sl_rpc_srv_unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        sl_rpc_srv_call_free(c);
    }
}

/* Waits for the next received message (see sl_rpc_stream_recv): 0 with *ret,
 * or 1, -ETIMEDOUT, -ECANCELED, -EBADMSG with *ret NULL. Stream thread. */
static int take_message(srv_call_t *c, grpc_byte_buffer **ret, int timeout_ms)
{
    double until = timeout_ms > 0 ? sl_mono_sec() + timeout_ms / 1000.0 : -1;
    int r;
    *ret = NULL;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->bad_code != 0) {
            r = -EBADMSG;
            break;
        }
        if (sl_ring_pop(&c->rq, ret) == 0) {
            if (c->recv_state == RECV_PAUSED && c->state != CALL_FINISHING) {
                sl_rpc_srv_post_recv_locked(c); /* room again: lift the back-pressure */
            }
            r = 0;
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
            if (sl_ring_len(&c->rq) == 0) {
                r = -ETIMEDOUT;
                break;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

/* Takes the next received message and unpacks it. Stream thread. */
static int stream_recv(srv_call_t *c, ProtobufCMessage **ret, int timeout_ms)
{
    grpc_byte_buffer *bb = NULL;
    *ret = NULL;
    int r = take_message(c, &bb, timeout_ms);
    if (r != 0) {
        return r;
    }
    char details[SL_RPC_DETAILS_MAX];
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

/* Waits until no send is in flight and reserves the slot. 0, -ECANCELED or
 * -ETIMEDOUT. Stream thread (or any thread sending on the stream). */
static int reserve_send(srv_call_t *c, int timeout_ms)
{
    double until = timeout_ms > 0 ? sl_mono_sec() + timeout_ms / 1000.0 : -1;
    int r = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (stream_dead_locked(c)) {
            r = -ECANCELED;
            break;
        }
        if (!c->send_in_flight && !c->send_reserved) {
            c->send_reserved = 1; /* the slot is ours while we pack without the lock */
            break;
        }
        if (timeout_ms == 0 || cond_wait_until(&c->cv, &c->mu, until) == ETIMEDOUT) {
            if ((c->send_in_flight || c->send_reserved) && !stream_dead_locked(c)) {
                r = -ETIMEDOUT;
                break;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

int sl_rpc_stream_send(sl_rpc_stream_t *st, const ProtobufCMessage *msg, int timeout_ms)
{
    srv_call_t *c = st->call;
    /* Wait for the previous send first, so that a timeout does not cost a
     * pack of what may be a large batch (callers retry on -ETIMEDOUT). */
    int r = reserve_send(c, timeout_ms);
    if (r < 0) {
        return r;
    }
    grpc_byte_buffer *bb = sl_rpc_pb_pack(msg);
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    pthread_mutex_lock(&c->mu);
    c->send_reserved = 0;
    pthread_cond_broadcast(&c->cv);
    if (bb == NULL) {
        r = -ENOMEM;
        goto out;
    }
    if (stream_dead_locked(c)) {
        r = -ECANCELED;
        goto out;
    }
    if (!c->sent_initial_md) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA; /* the first send carries it */
    }
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = bb;
    if (sl_rpc_srv_start_locked(c, ops, n, &c->tag_send) != GRPC_CALL_OK) {
        c->send_failed = 1;
        r = -ECANCELED;
        goto out;
    }
    c->sent_initial_md = 1;
    c->send_in_flight = 1;
    c->send_bb = bb; /* destroyed by the CQ thread when TAG_SEND returns */
    bb = NULL;
out:
    pthread_mutex_unlock(&c->mu);
    if (bb != NULL) {
        grpc_byte_buffer_destroy(bb);
    }
    return r;
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
    char buf[SL_RPC_DETAILS_MAX];
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
    return sl_rpc_srv_peer(st->call);
}

/* ------------------------------------------------------------ threads */

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
    char details[SL_RPC_DETAILS_MAX];
    snprintf(details, sizeof(details), "%s", c->status_details);
    sl_rpc_srv_finish_locked(c, code, details, NULL);
    int drop = sl_rpc_srv_unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        sl_rpc_srv_call_free(c);
    }

    pthread_mutex_lock(&srv->mu);
    slot->state = SLOT_DONE; /* joined by the next spawn in this slot or by shutdown */
    slot->call = NULL;
    srv->active_streams--;
    pthread_cond_broadcast(&srv->cv_state);
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

int sl_rpc_srv_stream_spawn(sl_rpc_server_t *srv, srv_call_t *c, char *why, size_t whylen)
{
    int r;
    /* The server mutex is held across pthread_create so that the new thread
     * cannot mark its slot done before tid is stored. */
    pthread_mutex_lock(&srv->mu);
    if (srv->state != SRV_RUNNING) {
        r = sl_err(why, whylen, -ESHUTDOWN, "server shutting down");
        goto out;
    }
    if (srv->active_streams >= srv->max_streams) {
        r = sl_err(why, whylen, -ENOSPC, "too many open streams (max %u)", srv->max_streams);
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
        r = sl_err(why, whylen, -ENOSPC, "no free stream slot");
        goto out;
    }
    if (slot->state == SLOT_DONE) {
        pthread_join(slot->tid, NULL); /* it has already left its last lock */
        slot->state = SLOT_FREE;
    }
    slot->call = c;
    int e = pthread_create(&slot->tid, NULL, stream_main, slot);
    if (e != 0) {
        /* Out of threads is out of a resource, whatever pthread says. */
        r = sl_err(why, whylen, -ENOSPC, "cannot start a stream thread: %s", strerror(e));
        goto out;
    }
    slot->state = SLOT_RUNNING;
    srv->active_streams++;
    r = 0;
out:
    pthread_mutex_unlock(&srv->mu);
    return r;
}
