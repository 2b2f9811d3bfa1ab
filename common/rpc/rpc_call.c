/* rpc_call: a server call's life -- requested, admitted (token, method,
 * room) and handed to the pool or a stream thread, finished -- and the CQ
 * threads that move every call along (rpc_server_impl.h says who may touch
 * what). */
#include "common/rpc/rpc_server_impl.h"

#include <errno.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/rpc/rpc_creds.h"

static srv_call_t *call_new(sl_rpc_server_t *srv, const method_t *m)
{
    int have_mu = 0, have_cv = 0;
    srv_call_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        goto fail;
    }
    have_mu = 1;
    if (sl_cond_init_mono(&c->cv) < 0) {
        goto fail;
    }
    have_cv = 1;
    if (m != NULL && m->kind == METHOD_STREAM && sl_rpc_srv_stream_init(c) < 0) {
        goto fail;
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

fail:
    if (have_cv) {
        pthread_cond_destroy(&c->cv);
    }
    if (have_mu) {
        pthread_mutex_destroy(&c->mu);
    }
    free(c);
    return NULL;
}

void sl_rpc_srv_call_free(srv_call_t *c)
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
    grpc_byte_buffer *bb;
    while (sl_ring_pop(&c->rq, &bb) == 0) {
        grpc_byte_buffer_destroy(bb);
    }
    sl_ring_free(&c->rq);
    gpr_free(c->peer);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);

    pthread_mutex_lock(&srv->mu);
    srv->live_calls--;
    pthread_cond_broadcast(&srv->cv_state);
    pthread_mutex_unlock(&srv->mu);
}

grpc_call_error sl_rpc_srv_start_locked(srv_call_t *c, const grpc_op *ops, size_t n,
                                        srv_tag_t *tag)
{
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, tag, NULL);
    if (e == GRPC_CALL_OK) {
        c->refs++;
    }
    return e;
}

void sl_rpc_srv_finish_locked(srv_call_t *c, int code, const char *details,
                              grpc_byte_buffer *bb)
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
    grpc_call_error e = sl_rpc_srv_start_locked(c, ops, n, &c->tag_status);
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

void sl_rpc_srv_finish_release(srv_call_t *c, int code, const char *details,
                               grpc_byte_buffer *bb)
{
    pthread_mutex_lock(&c->mu);
    sl_rpc_srv_finish_locked(c, code, details, bb);
    int drop = sl_rpc_srv_unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        sl_rpc_srv_call_free(c);
    }
}

const char *sl_rpc_srv_peer(srv_call_t *c)
{
    /* Only the owning handler thread calls this, so no lock is needed. */
    if (c->peer == NULL && c->call != NULL) {
        c->peer = grpc_call_get_peer(c->call);
    }
    return c->peer != NULL ? c->peer : "unknown";
}

/* ------------------------------------------------------------ requests */

int sl_rpc_srv_post_request(sl_rpc_server_t *srv, const method_t *m)
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
        /* A unary request's message arrives with the call (the method was
         * registered with GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER). */
        e = grpc_server_request_registered_call(
            srv->server, m->handle, &c->call, &c->deadline, &c->md,
            m->kind == METHOD_UNARY ? &c->payload : NULL, srv->cq, srv->cq, &c->tag_request);
    }
    if (e != GRPC_CALL_OK) {
        sl_rpc_srv_call_free(c);
        return -EIO;
    }
    return 0;
}

/* Decides what becomes of a call that just arrived: handed to the pool or a
 * stream thread (SL_RPC_OK: that thread owns it now, and the call mutex is
 * released), or the status to end it with (why set; the mutex still held).
 * Call mutex held on entry; CQ thread. */
static int admit_locked(sl_rpc_server_t *srv, srv_call_t *c, char *why, size_t whylen)
{
    /* Before anything else, unknown methods included. */
    if (!sl_rpc_srv_admit_tenant(srv, c)) {
        snprintf(why, whylen, "missing or wrong authorization token");
        return SL_RPC_UNAUTHENTICATED;
    }
    if (c->method == NULL) {
        char *m = grpc_slice_to_c_string(c->details.method);
        snprintf(why, whylen, "unknown method %s", m);
        gpr_free(m); /* gRPC's allocator, not free() */
        return SL_RPC_UNIMPLEMENTED;
    }
    int rc;
    if (c->method->kind == METHOD_UNARY) {
        c->state = CALL_QUEUED;
        pthread_mutex_unlock(&c->mu);
        rc = sl_rpc_srv_pool_enqueue(srv, c, why, whylen);
    } else {
        /* The stream thread takes the first message off the receive queue
         * like any other. */
        sl_rpc_srv_post_recv_locked(c);
        pthread_mutex_unlock(&c->mu);
        rc = sl_rpc_srv_stream_spawn(srv, c, why, whylen);
    }
    if (rc == 0) {
        return SL_RPC_OK;
    }
    pthread_mutex_lock(&c->mu);
    return sl_rpc_status_from_errno(rc);
}

/* A request completed: a new call is ours. CQ thread. */
static void on_request(sl_rpc_server_t *srv, srv_call_t *c, int success)
{
    if (!success) {
        /* The server is shutting down: this request will never be matched. */
        pthread_mutex_lock(&c->mu);
        int drop = sl_rpc_srv_unref_locked(c);
        pthread_mutex_unlock(&c->mu);
        if (drop) {
            sl_rpc_srv_call_free(c);
        }
        return;
    }
    /* Re-arm first: until a new request is posted, this method's next call
     * waits, so re-arming after the handler would serve one at a time. It
     * fails only while stopping (wanted) or when out of memory, where
     * gRPC's own allocations abort first; nothing better to do than go on. */
    (void)sl_rpc_srv_post_request(srv, c->method);

    char why[SL_RPC_DETAILS_MAX] = "";
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;

    pthread_mutex_lock(&c->mu);
    /* The request's reference now belongs to this thread (the owner). */
    c->state = CALL_HANDLING;
    int code;
    if (sl_rpc_srv_start_locked(c, &op, 1, &c->tag_close) != GRPC_CALL_OK) {
        c->closed = 1; /* cannot watch for cancellation; finish right away */
        code = SL_RPC_INTERNAL;
        snprintf(why, sizeof(why), "cannot start call");
    } else {
        code = admit_locked(srv, c, why, sizeof(why));
    }
    if (code == SL_RPC_OK) {
        return; /* a pool or stream thread owns it now; admit_locked unlocked */
    }
    sl_rpc_srv_finish_locked(c, code, why, NULL);
    int drop = sl_rpc_srv_unref_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (drop) {
        sl_rpc_srv_call_free(c);
    }
}

/* ------------------------------------------------------------ CQ threads */

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
        sl_rpc_srv_on_recv(c, success);
        return;
    case TAG_CLOSE:
        pthread_mutex_lock(&c->mu);
        c->closed = 1;
        pthread_cond_broadcast(&c->cv); /* c->cancelled may have changed */
        drop = sl_rpc_srv_unref_locked(c);
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
        drop = sl_rpc_srv_unref_locked(c);
        pthread_mutex_unlock(&c->mu);
        break;
    case TAG_STATUS:
        pthread_mutex_lock(&c->mu);
        if (c->final_bb != NULL) {
            grpc_byte_buffer_destroy(c->final_bb);
            c->final_bb = NULL;
        }
        drop = sl_rpc_srv_unref_locked(c);
        pthread_mutex_unlock(&c->mu);
        break;
    }
    if (drop) {
        sl_rpc_srv_call_free(c);
    }
}

void *sl_rpc_srv_cq_main(void *arg)
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
