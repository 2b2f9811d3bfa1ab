/* rpc_client: channels, blocking unary calls and client-side bidi streams.
 *
 * Every call gets its own pluck completion queue (a unary call is one batch
 * of six ops plucked by its tag), so calls never share a CQ thread and a
 * caller blocks only on its own call. Nothing here starts threads. */
#include "common/rpc/rpc_impl.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_creds.h"
#include "common/rpc/rpc_keepalive.h"

/* Unary calls always carry a deadline; this one applies when the caller
 * passes timeout_ms <= 0. */
#define UNARY_DEFAULT_TIMEOUT_MS 30000
/* gRPC waits 1 s after a failed connection attempt, then 1.6x longer each
 * time up to 120 s: after a 26 s dispatcher outage workers re-registered
 * 13-18 s after it was back, although they called every 500 ms (calls fail
 * at once while the channel waits). Capped here, a peer that is back is
 * reached within this (+-20 % gRPC jitter); an attempt at a closed port
 * costs one RST. Every channel, so clients ride out a restart as fast. */
#define RECONNECT_MAX_MS 1000

struct sl_rpc_channel_s {
    grpc_channel *ch;
    /* "authorization: Bearer TOKEN" sent on every call when has_token. Read
     * only after sl_rpc_channel_new, so calls on any thread may point at it. */
    int has_token;
    grpc_metadata auth_md;
};

/* States of a client stream. Only the thread that receives moves it from
 * OPEN to ENDED (after plucking the final status). */
typedef enum {
    CSTREAM_OPEN,
    CSTREAM_ENDED,
} cstream_state_e;

struct sl_rpc_cstream_s {
    grpc_completion_queue *cq; /* pluck CQ owned by this stream */
    grpc_call *call;
    const ProtobufCMessageDescriptor *resp_desc;
    pthread_mutex_t mu; /* serialises grpc_call_start_batch and guards state */
    cstream_state_e state;
    int final_rc;        /* once ENDED: 1 (status OK) or -ECOMM */
    sl_rpc_status_t final_st;

    /* Distinct tag addresses, one per kind of outstanding batch. */
    char tag_send, tag_recv, tag_status;
    /* Owned by the sending thread: */
    int send_pending;            /* a send batch is outstanding */
    int send_failed;             /* a send completed with success=0 */
    grpc_byte_buffer *send_bb;   /* in flight; destroyed when tag_send returns */
    /* Owned by the receiving thread: */
    int recv_pending;            /* RECV_MESSAGE posted, its tag not yet plucked */
    int asked_initial_md;
    grpc_byte_buffer *recv_bb;
    grpc_metadata_array imd;
    /* RECV_STATUS_ON_CLIENT, posted at open (see sl_rpc_cstream_open): */
    int status_pending;
    grpc_metadata_array tmd;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string; /* gpr_malloc'd by gRPC */
};

/* ------------------------------------------------------------ channel */

/* The arguments of every Sluice channel: message size limits both ways and
 * keepalive, and with own_connection a private subchannel pool (channels
 * with equal arguments otherwise share one TCP connection). args has room
 * for CHANNEL_ARGS_MAX; returns how many were set. */
#define CHANNEL_ARGS_MAX 8
static size_t channel_args(size_t max_msg_bytes, int own_connection, grpc_arg *args)
{
    int max_msg = max_msg_bytes > INT_MAX ? INT_MAX : (int)max_msg_bytes;
    /* Keepalive (docs/limits.md): a peer that vanishes without a FIN (host
     * down, cable pulled) is noticed within time + timeout instead of only
     * by a deadline -- an idle Fetch stream has none. Also while idle and
     * without a pings-per-data cap (default 2), since a stream waiting for
     * credits or batches sends no data. rpc_server.c accepts this rate. */
    const struct {
        const char *key;
        int value;
    } ints[] = {
        {GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, max_msg},
        {GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, max_msg},
        {GRPC_ARG_KEEPALIVE_TIME_MS, SL_RPC_KEEPALIVE_TIME_MS},
        {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, SL_RPC_KEEPALIVE_TIMEOUT_MS},
        {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
        {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0},
        {GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, RECONNECT_MAX_MS},
        {GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1}, /* last: only with own_connection */
    };
    _Static_assert(sizeof(ints) / sizeof(ints[0]) == CHANNEL_ARGS_MAX,
                   "CHANNEL_ARGS_MAX is the number of rows above (callers size args by it)");
    size_t n = own_connection ? CHANNEL_ARGS_MAX : CHANNEL_ARGS_MAX - 1;
    for (size_t i = 0; i < n; i++) {
        args[i].type = GRPC_ARG_INTEGER;
        args[i].key = (char *)ints[i].key;
        args[i].value.integer = ints[i].value;
    }
    return n;
}

sl_rpc_channel_t *sl_rpc_channel_new(const char *target, size_t max_msg_bytes,
                                     const sl_rpc_security_t *security, int own_connection,
                                     char *err, size_t errlen)
{
    grpc_channel_credentials *creds = NULL;
    char *bearer = NULL;
    if (target == NULL || target[0] == '\0') {
        sl_err(err, errlen, -EINVAL, "empty rpc target");
        return NULL;
    }
    sl_rpc_channel_t *ch = calloc(1, sizeof(*ch));
    if (ch == NULL) {
        sl_err(err, errlen, -ENOMEM, "out of memory");
        return NULL;
    }
    grpc_init(); /* the channel holds one library ref until sl_rpc_channel_free */
    if (sl_rpc_creds_channel(security, &creds, err, errlen) < 0 ||
        sl_rpc_creds_bearer(security, &bearer, err, errlen) < 0) {
        goto fail;
    }
    if (bearer != NULL) {
        ch->auth_md.key = grpc_slice_from_static_string("authorization");
        ch->auth_md.value = grpc_slice_from_copied_string(bearer);
        ch->has_token = 1;
        free(bearer);
    }
    grpc_arg args[CHANNEL_ARGS_MAX];
    grpc_channel_args cargs = {
        .num_args = channel_args(max_msg_bytes == 0 ? SL_RPC_DEFAULT_MAX_MSG : max_msg_bytes,
                                 own_connection, args),
        .args = args,
    };
    ch->ch = grpc_channel_create(target, creds, &cargs);
    if (ch->ch == NULL) {
        sl_err(err, errlen, -EINVAL, "cannot create a channel to %s", target);
        goto fail;
    }
    grpc_channel_credentials_release(creds); /* the channel keeps its own ref */
    return ch;

fail:
    if (creds != NULL) {
        grpc_channel_credentials_release(creds);
    }
    if (ch->has_token) {
        grpc_slice_unref(ch->auth_md.value);
    }
    free(ch);
    grpc_shutdown();
    return NULL;
}

void sl_rpc_channel_free(sl_rpc_channel_t *ch)
{
    if (ch == NULL) {
        return;
    }
    grpc_channel_destroy(ch->ch);
    if (ch->has_token) {
        grpc_slice_unref(ch->auth_md.value);
    }
    free(ch);
    grpc_shutdown();
}

static grpc_call *create_call(sl_rpc_channel_t *ch, grpc_completion_queue *cq, const char *method,
                              gpr_timespec deadline)
{
    /* The method slice only has to live through create_call (grpc.h). */
    grpc_slice m = grpc_slice_from_copied_string(method);
    grpc_call *call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
                                               deadline, NULL);
    grpc_slice_unref(m);
    return call;
}

/* Drops a pluck CQ whose tags have all been plucked. */
static void cq_free(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    grpc_event ev = grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    (void)ev; /* GRPC_QUEUE_SHUTDOWN: nothing was left */
    grpc_completion_queue_destroy(cq);
}

/* ------------------------------------------------------------ unary */

/* One unary call with an already packed request (req stays owned by the
 * caller). On status OK *ret_reply gets the reply buffer (may be NULL if the
 * server sent none). Returns 0 / -ECOMM (st filled) / -ENOMEM / -EIO. */
static int unary_bb(sl_rpc_channel_t *ch, const char *method, grpc_byte_buffer *req,
                    int timeout_ms, int wait_for_ready, grpc_byte_buffer **ret_reply,
                    sl_rpc_status_t *st)
{
    int r;
    char tag;
    grpc_metadata_array imd, tmd;
    grpc_byte_buffer *reply = NULL;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    const char *error_string = NULL;

    *ret_reply = NULL;
    if (timeout_ms <= 0) {
        timeout_ms = UNARY_DEFAULT_TIMEOUT_MS;
    }
    gpr_timespec deadline = sl_rpc_deadline(timeout_ms);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_call *call = create_call(ch, cq, method, deadline);
    if (call == NULL) {
        cq_free(cq);
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "cannot create a call to %s", method);
        return -EIO;
    }
    grpc_metadata_array_init(&imd);
    grpc_metadata_array_init(&tmd);

    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = ch->has_token ? 1 : 0;
    ops[0].data.send_initial_metadata.metadata = ch->has_token ? &ch->auth_md : NULL;
    if (wait_for_ready) {
        ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY |
                       GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
    }
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = req;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &imd;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &reply;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &tmd;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    ops[5].data.recv_status_on_client.error_string = &error_string;
    grpc_call_error e = grpc_call_start_batch(call, ops, 6, &tag, NULL);
    if (e != GRPC_CALL_OK) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "start_batch: %s", grpc_call_error_to_string(e));
        r = -EIO;
        goto out;
    }
    /* The call's deadline ends the batch; pluck waits for it unconditionally
     * because every op above points into this stack frame, and gRPC writes
     * through those pointers until the tag comes back. */
    grpc_event ev = grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    (void)ev; /* RECV_STATUS_ON_CLIENT always succeeds: the outcome is in status */
    sl_rpc_status_fill(st, (int)status, details, error_string);
    if (status != GRPC_STATUS_OK) {
        r = -ECOMM;
        goto out;
    }
    *ret_reply = reply;
    reply = NULL;
    r = 0;
out:
    if (reply != NULL) {
        grpc_byte_buffer_destroy(reply);
    }
    grpc_slice_unref(details);
    gpr_free((void *)error_string);
    grpc_metadata_array_destroy(&imd);
    grpc_metadata_array_destroy(&tmd);
    grpc_call_unref(call);
    cq_free(cq);
    return r;
}

int sl_rpc_unary(sl_rpc_channel_t *ch, const char *method, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *resp_desc, int timeout_ms, int wait_for_ready,
                 ProtobufCMessage **ret_resp, sl_rpc_status_t *st)
{
    *ret_resp = NULL;
    grpc_byte_buffer *bb = sl_rpc_pb_pack(req);
    if (bb == NULL) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "cannot pack %s", req->descriptor->name);
        return -ENOMEM;
    }
    grpc_byte_buffer *reply = NULL;
    int r = unary_bb(ch, method, bb, timeout_ms, wait_for_ready, &reply, st);
    grpc_byte_buffer_destroy(bb);
    if (r < 0) {
        return r;
    }
    ProtobufCMessage *m = sl_rpc_pb_unpack(resp_desc, reply);
    if (reply != NULL) {
        grpc_byte_buffer_destroy(reply);
    }
    if (m == NULL) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "reply to %s did not unpack as %s", method,
                          resp_desc->name);
        return -EBADMSG;
    }
    *ret_resp = m;
    return 0;
}

int sl_rpc_unary_bytes(sl_rpc_channel_t *ch, const char *method, const void *req, size_t len,
                       int timeout_ms, int wait_for_ready, void **ret_reply, size_t *ret_len,
                       sl_rpc_status_t *st)
{
    if (ret_reply != NULL) {
        *ret_reply = NULL;
    }
    if (ret_len != NULL) {
        *ret_len = 0;
    }
    grpc_byte_buffer *bb = sl_rpc_pb_raw(req, len);
    if (bb == NULL) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "out of memory");
        return -ENOMEM;
    }
    grpc_byte_buffer *reply = NULL;
    int r = unary_bb(ch, method, bb, timeout_ms, wait_for_ready, &reply, st);
    grpc_byte_buffer_destroy(bb);
    if (r < 0 || reply == NULL) {
        return r;
    }
    size_t n = grpc_byte_buffer_length(reply);
    if (ret_len != NULL) {
        *ret_len = n;
    }
    if (ret_reply != NULL) {
        grpc_byte_buffer_reader rd;
        char *copy = malloc(n + 1);
        if (copy == NULL || !grpc_byte_buffer_reader_init(&rd, reply)) {
            free(copy);
            grpc_byte_buffer_destroy(reply);
            return -ENOMEM;
        }
        grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        memcpy(copy, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
        grpc_slice_unref(s);
        *ret_reply = copy;
    }
    grpc_byte_buffer_destroy(reply);
    return 0;
}

/* ------------------------------------------------------------ streams */

/* Posts one batch under the stream mutex (start_batch must be serialised
 * per call). */
static grpc_call_error cstream_start(sl_rpc_cstream_t *cs, const grpc_op *ops, size_t n, void *tag)
{
    pthread_mutex_lock(&cs->mu);
    grpc_call_error e = grpc_call_start_batch(cs->call, ops, n, tag, NULL);
    pthread_mutex_unlock(&cs->mu);
    return e;
}

/* Plucks the final status (the call is over) and records it. Receiving
 * thread only. Returns 1 for status OK, -ECOMM otherwise. */
static int cstream_finish(sl_rpc_cstream_t *cs, sl_rpc_status_t *st)
{
    if (cs->status_pending) {
        grpc_completion_queue_pluck(cs->cq, &cs->tag_status, gpr_inf_future(GPR_CLOCK_REALTIME),
                                    NULL);
        cs->status_pending = 0;
    }
    pthread_mutex_lock(&cs->mu);
    sl_rpc_status_fill(&cs->final_st, (int)cs->status, cs->details, cs->error_string);
    cs->final_rc = cs->status == GRPC_STATUS_OK ? 1 : -ECOMM;
    cs->state = CSTREAM_ENDED;
    pthread_mutex_unlock(&cs->mu);
    if (st != NULL) {
        *st = cs->final_st;
    }
    return cs->final_rc;
}

int sl_rpc_cstream_open(sl_rpc_channel_t *ch, const char *method, const ProtobufCMessage *first_req,
                        const ProtobufCMessageDescriptor *resp_desc, int deadline_ms,
                        sl_rpc_cstream_t **ret, sl_rpc_status_t *st)
{
    *ret = NULL;
    sl_rpc_cstream_t *cs = calloc(1, sizeof(*cs));
    if (cs == NULL) {
        sl_rpc_status_set(st, SL_RPC_RESOURCE_EXHAUSTED, "out of memory");
        return -ENOMEM;
    }
    if (pthread_mutex_init(&cs->mu, NULL) != 0) {
        free(cs);
        sl_rpc_status_set(st, SL_RPC_RESOURCE_EXHAUSTED, "cannot create a mutex");
        return -ENOMEM;
    }
    cs->resp_desc = resp_desc;
    cs->state = CSTREAM_OPEN;
    cs->details = grpc_empty_slice();
    grpc_metadata_array_init(&cs->imd);
    grpc_metadata_array_init(&cs->tmd);
    cs->cq = grpc_completion_queue_create_for_pluck(NULL);
    cs->call = create_call(ch, cs->cq, method, sl_rpc_deadline(deadline_ms));
    if (cs->call == NULL) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "cannot create a call to %s", method);
        sl_rpc_cstream_free(cs);
        return -EIO;
    }
    cs->send_bb = sl_rpc_pb_pack(first_req);
    if (cs->send_bb == NULL) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "cannot pack %s", first_req->descriptor->name);
        sl_rpc_cstream_free(cs);
        return -ENOMEM;
    }

    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = ch->has_token ? 1 : 0;
    ops[0].data.send_initial_metadata.metadata = ch->has_token ? &ch->auth_md : NULL;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = cs->send_bb;
    grpc_call_error e = cstream_start(cs, ops, 2, &cs->tag_send);
    if (e != GRPC_CALL_OK) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "start_batch: %s", grpc_call_error_to_string(e));
        sl_rpc_cstream_free(cs);
        return -EIO;
    }
    cs->send_pending = 1;

    /* Posted up front, so whatever ends the call -- before, between or
     * after the messages -- is reported; it may complete before the last
     * read, or before the first. */
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &cs->tmd;
    ops[0].data.recv_status_on_client.status = &cs->status;
    ops[0].data.recv_status_on_client.status_details = &cs->details;
    ops[0].data.recv_status_on_client.error_string = &cs->error_string;
    e = cstream_start(cs, ops, 1, &cs->tag_status);
    if (e != GRPC_CALL_OK) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "start_batch: %s", grpc_call_error_to_string(e));
        sl_rpc_cstream_free(cs);
        return -EIO;
    }
    cs->status_pending = 1;

    /* Wait for the first message to reach the transport, so an unreachable
     * peer is reported here (fail fast) rather than by the first recv. */
    grpc_event ev = grpc_completion_queue_pluck(cs->cq, &cs->tag_send,
                                                gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    cs->send_pending = 0;
    grpc_byte_buffer_destroy(cs->send_bb);
    cs->send_bb = NULL;
    if (!ev.success) {
        int r = cstream_finish(cs, st);
        if (r > 0) { /* status OK but the send failed: should not happen */
            sl_rpc_status_set(st, SL_RPC_UNKNOWN, "stream to %s ended at open", method);
        }
        sl_rpc_cstream_free(cs);
        return -ECOMM;
    }
    if (st != NULL) {
        sl_rpc_status_set(st, SL_RPC_OK, "%s", "");
    }
    *ret = cs;
    return 0;
}

int sl_rpc_cstream_send(sl_rpc_cstream_t *cs, const ProtobufCMessage *msg, int timeout_ms)
{
    pthread_mutex_lock(&cs->mu);
    int ended = cs->state == CSTREAM_ENDED;
    pthread_mutex_unlock(&cs->mu);
    if (ended) {
        return -EPIPE;
    }
    if (cs->send_pending) {
        grpc_event ev = grpc_completion_queue_pluck(cs->cq, &cs->tag_send,
                                                    sl_rpc_deadline_or_poll(timeout_ms), NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT) {
            return -ETIMEDOUT; /* still pending: the next send continues */
        }
        cs->send_pending = 0;
        grpc_byte_buffer_destroy(cs->send_bb);
        cs->send_bb = NULL;
        if (!ev.success) {
            cs->send_failed = 1;
        }
    }
    if (cs->send_failed) {
        return -ECOMM; /* the call is over; recv reports its status */
    }
    grpc_byte_buffer *bb = sl_rpc_pb_pack(msg);
    if (bb == NULL) {
        return -ENOMEM;
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = bb;
    grpc_call_error e = cstream_start(cs, &op, 1, &cs->tag_send);
    if (e != GRPC_CALL_OK) {
        grpc_byte_buffer_destroy(bb);
        return -EIO;
    }
    cs->send_bb = bb;
    cs->send_pending = 1;
    return 0;
}

/* Waits for the next message: 0 with *ret (the caller destroys it), or what
 * sl_rpc_cstream_recv returns at the end, on failure or timeout. */
static int cstream_recv_bb(sl_rpc_cstream_t *cs, grpc_byte_buffer **ret, int timeout_ms,
                           sl_rpc_status_t *st)
{
    *ret = NULL;
    pthread_mutex_lock(&cs->mu);
    int ended = cs->state == CSTREAM_ENDED;
    pthread_mutex_unlock(&cs->mu);
    if (ended) {
        if (st != NULL) {
            *st = cs->final_st;
        }
        return cs->final_rc;
    }
    if (!cs->recv_pending) {
        grpc_op ops[2];
        size_t n = 0;
        memset(ops, 0, sizeof(ops));
        if (!cs->asked_initial_md) {
            ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
            ops[n++].data.recv_initial_metadata.recv_initial_metadata = &cs->imd;
        }
        ops[n].op = GRPC_OP_RECV_MESSAGE;
        ops[n++].data.recv_message.recv_message = &cs->recv_bb;
        grpc_call_error e = cstream_start(cs, ops, n, &cs->tag_recv);
        if (e != GRPC_CALL_OK) {
            sl_rpc_status_set(st, SL_RPC_INTERNAL, "start_batch: %s",
                              grpc_call_error_to_string(e));
            return -ECOMM;
        }
        cs->asked_initial_md = 1;
        cs->recv_pending = 1;
    }
    grpc_event ev = grpc_completion_queue_pluck(cs->cq, &cs->tag_recv,
                                                sl_rpc_deadline_or_poll(timeout_ms), NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) {
        return -ETIMEDOUT; /* the read stays posted; the next call plucks it */
    }
    cs->recv_pending = 0;
    if (cs->recv_bb == NULL) {
        return cstream_finish(cs, st); /* end of stream or failure */
    }
    *ret = cs->recv_bb;
    cs->recv_bb = NULL;
    return 0;
}

int sl_rpc_cstream_recv(sl_rpc_cstream_t *cs, ProtobufCMessage **ret, int timeout_ms,
                        sl_rpc_status_t *st)
{
    *ret = NULL;
    grpc_byte_buffer *bb;
    int rc = cstream_recv_bb(cs, &bb, timeout_ms, st);
    if (rc != 0) {
        return rc;
    }
    ProtobufCMessage *m = sl_rpc_pb_unpack(cs->resp_desc, bb);
    grpc_byte_buffer_destroy(bb);
    if (m == NULL) {
        sl_rpc_status_set(st, SL_RPC_INTERNAL, "stream message did not unpack as %s",
                          cs->resp_desc->name);
        return -EBADMSG;
    }
    *ret = m;
    return 0;
}

struct sl_rpc_raw_s {
    grpc_byte_buffer *bb; /* holds the received slices */
    grpc_slice flat;      /* an inflated compressed message, else empty */
    size_t nsegs;
    sl_pbw_seg_t segs[];
};

int sl_rpc_cstream_recv_raw(sl_rpc_cstream_t *cs, sl_rpc_raw_t **ret, int timeout_ms,
                            sl_rpc_status_t *st)
{
    *ret = NULL;
    grpc_byte_buffer *bb;
    int rc = cstream_recv_bb(cs, &bb, timeout_ms, st);
    if (rc != 0) {
        return rc;
    }
    int plain = bb->type == GRPC_BB_RAW && bb->data.raw.compression == GRPC_COMPRESS_NONE;
    size_t n = plain ? bb->data.raw.slice_buffer.count : 1;
    sl_rpc_raw_t *m = calloc(1, sizeof(*m) + n * sizeof(m->segs[0]));
    if (m == NULL) {
        grpc_byte_buffer_destroy(bb);
        sl_rpc_status_set(st, SL_RPC_RESOURCE_EXHAUSTED, "out of memory receiving a message");
        return -ENOMEM;
    }
    m->flat = grpc_empty_slice();
    m->nsegs = n;
    if (plain) {
        /* The slices stay referenced by bb until sl_rpc_raw_free. Pointers
         * into bb's own slice structs: a small slice is inlined in them. */
        for (size_t i = 0; i < n; i++) {
            const grpc_slice *s = &bb->data.raw.slice_buffer.slices[i];
            m->segs[i] = (sl_pbw_seg_t){GRPC_SLICE_START_PTR(*s), GRPC_SLICE_LENGTH(*s)};
        }
        m->bb = bb;
    } else {
        grpc_byte_buffer_reader r;
        if (!grpc_byte_buffer_reader_init(&r, bb)) {
            grpc_byte_buffer_destroy(bb);
            free(m);
            sl_rpc_status_set(st, SL_RPC_INTERNAL, "a stream message did not decompress");
            return -EBADMSG;
        }
        m->flat = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        grpc_byte_buffer_destroy(bb);
        m->segs[0] = (sl_pbw_seg_t){GRPC_SLICE_START_PTR(m->flat), GRPC_SLICE_LENGTH(m->flat)};
    }
    *ret = m;
    return 0;
}

const sl_pbw_seg_t *sl_rpc_raw_segs(const sl_rpc_raw_t *m, size_t *n)
{
    *n = m->nsegs;
    return m->segs;
}

void sl_rpc_raw_free(sl_rpc_raw_t *m)
{
    if (m == NULL) {
        return;
    }
    if (m->bb != NULL) {
        grpc_byte_buffer_destroy(m->bb);
    }
    grpc_slice_unref(m->flat);
    free(m);
}

void sl_rpc_cstream_cancel(sl_rpc_cstream_t *cs)
{
    if (cs != NULL && cs->call != NULL) {
        grpc_call_cancel(cs->call, NULL); /* thread-safe until grpc_call_unref */
    }
}

void sl_rpc_cstream_free(sl_rpc_cstream_t *cs)
{
    if (cs == NULL) {
        return;
    }
    gpr_timespec inf = gpr_inf_future(GPR_CLOCK_REALTIME);
    if (cs->call != NULL) {
        if (cs->state != CSTREAM_ENDED) {
            grpc_call_cancel(cs->call, NULL);
        }
        /* Cancelling fails every outstanding batch, so these plucks return. */
        if (cs->send_pending) {
            grpc_completion_queue_pluck(cs->cq, &cs->tag_send, inf, NULL);
        }
        if (cs->recv_pending) {
            grpc_completion_queue_pluck(cs->cq, &cs->tag_recv, inf, NULL);
        }
        if (cs->status_pending) {
            grpc_completion_queue_pluck(cs->cq, &cs->tag_status, inf, NULL);
        }
    }
    if (cs->send_bb != NULL) {
        grpc_byte_buffer_destroy(cs->send_bb);
    }
    if (cs->recv_bb != NULL) {
        grpc_byte_buffer_destroy(cs->recv_bb);
    }
    grpc_slice_unref(cs->details);
    gpr_free((void *)cs->error_string);
    grpc_metadata_array_destroy(&cs->imd);
    grpc_metadata_array_destroy(&cs->tmd);
    if (cs->call != NULL) {
        grpc_call_unref(cs->call);
    }
    if (cs->cq != NULL) {
        cq_free(cs->cq);
    }
    pthread_mutex_destroy(&cs->mu);
    free(cs);
}
