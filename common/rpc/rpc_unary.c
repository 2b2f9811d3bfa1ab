/* rpc_unary: the handler pool -- a bounded queue of unary calls (by count
 * and by request bytes) that CQ threads fill and pool threads drain, each
 * call unpacked, version-checked, handled and answered on its pool thread --
 * and the sl_rpc_reply_* answers a handler gives. */
#include "common/rpc/rpc_server_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int sl_rpc_srv_pool_enqueue(sl_rpc_server_t *srv, srv_call_t *c, char *why, size_t whylen)
{
    size_t bytes = c->payload != NULL ? grpc_byte_buffer_length(c->payload) : 0;
    int rc = 0;
    pthread_mutex_lock(&srv->mu);
    /* A call alone always fits (it passed the transport's max_recv_bytes):
     * the budget bounds what many peers together make the server hold, not
     * one request. */
    if (srv->pool_stop) {
        rc = -ESHUTDOWN;
        snprintf(why, whylen, "server shutting down");
    } else if (sl_ring_len(&srv->queue) >= srv->queue.cap) {
        rc = -ENOSPC;
        snprintf(why, whylen, "server busy: %zu requests queued", srv->queue.cap);
    } else if (sl_ring_len(&srv->queue) > 0 && srv->q_bytes + bytes > srv->q_bytes_max) {
        rc = -ENOBUFS;
        snprintf(why, whylen, "server busy: requests of more than %zu bytes queued",
                 srv->q_bytes_max);
    } else {
        (void)sl_ring_push_back(&srv->queue, &c); /* room checked above */
        srv->q_bytes += bytes;
        c->queued_bytes = bytes;
        pthread_cond_signal(&srv->cv_pool);
    }
    pthread_mutex_unlock(&srv->mu);
    return rc;
}

/* Unpacks, checks and handles one call, then sends its final batch. Pool
 * thread. */
static void run_unary(srv_call_t *c)
{
    const method_t *m = c->method;
    char details[SL_RPC_DETAILS_MAX] = "";
    int code;
    grpc_byte_buffer *bb = NULL;

    pthread_mutex_lock(&c->mu);
    c->state = CALL_HANDLING;
    int cancelled = c->cancelled;
    grpc_byte_buffer *payload = c->payload;
    c->payload = NULL;
    pthread_mutex_unlock(&c->mu);

    ProtobufCMessage *req = NULL;
    if (cancelled) {
        /* Deadline passed or the client left while queued: skip the work. */
        code = SL_RPC_CANCELLED;
        snprintf(details, sizeof(details), "cancelled before the handler ran");
    } else if ((req = sl_rpc_pb_unpack(m->req_desc, payload)) == NULL) {
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
    if (payload != NULL) {
        grpc_byte_buffer_destroy(payload);
    }
    sl_rpc_srv_finish_release(c, code, details, bb);
}

void *sl_rpc_srv_pool_main(void *arg)
{
    sl_rpc_server_t *srv = arg;
    for (;;) {
        srv_call_t *c = NULL;
        pthread_mutex_lock(&srv->mu);
        while (sl_ring_len(&srv->queue) == 0 && !srv->pool_stop) {
            pthread_cond_wait(&srv->cv_pool, &srv->mu);
        }
        if (sl_ring_pop(&srv->queue, &c) == 0) {
            srv->q_bytes -= c->queued_bytes;
        }
        pthread_mutex_unlock(&srv->mu);
        if (c == NULL) {
            break; /* stopping, and nothing left */
        }
        run_unary(c);
    }
    return NULL;
}

/* ------------------------------------------------------------ answers */

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
    return sl_rpc_srv_peer(reply->call);
}
