/* rpc_server_impl: what the files of the server half share (rpc_server.c:
 * set-up and shutdown; rpc_call.c: the call state machine and the CQ
 * threads; rpc_unary.c: the handler pool; rpc_stream.c: stream threads).
 * Private to common/rpc.
 *
 * Threads and who may touch what:
 *  - CQ threads (opts.cq_threads) block in grpc_completion_queue_next and only
 *    move call state machines forward: they never unpack, run handlers or
 *    wait for anything but a short mutex, because one blocked CQ thread
 *    stalls every call on its queue.
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
 * status batch is posted). gRPC writes into the struct until each batch's tag
 * comes back, so it is freed only when the count reaches 0. Lock order: never
 * hold a call's mutex and the server mutex together. */
#ifndef SL_RPC_SERVER_IMPL_H
#define SL_RPC_SERVER_IMPL_H

#include <pthread.h>

#include "common/base/ring.h"
#include "common/rpc/rpc_impl.h"

#define SL_RPC_DETAILS_MAX 512
#define SL_RPC_STREAM_QUEUE_MAX 16 /* received messages buffered per stream */
#define SL_RPC_MAX_METHODS 32

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

/* A call has up to five batches in flight; each needs its own tag address
 * to tell its completion apart, so the tag is a kind plus the call. */
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
    char details[SL_RPC_DETAILS_MAX];
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
    char tenant[SL_RPC_TENANT_MAX]; /* set at admission: "" = the server's own token */
    size_t queued_bytes;       /* unary: payload bytes counted in srv->q_bytes */

    /* Streams: */
    recv_state_e recv_state;
    grpc_byte_buffer *recv_bb; /* target of the outstanding RECV_MESSAGE */
    sl_ring_t rq;              /* received grpc_byte_buffer *, not yet taken */
    int sent_initial_md;
    int send_in_flight;
    int send_reserved; /* a sender is packing; the next send waits */
    int send_failed;
    grpc_byte_buffer *send_bb; /* destroyed when TAG_SEND returns, not before */
    int bad_code;              /* non-zero: a message was refused; final status */
    char status_details[SL_RPC_DETAILS_MAX];

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
    char *bearer; /* "Bearer TOKEN" every call must carry, or NULL */
    /* Tenants (rpc_tenants.c): named bearers admitted besides `bearer`,
     * replaced whole by sl_rpc_server_set_tenants. tenants_mu is a leaf
     * lock (taken under a call's mutex at admission). */
    pthread_mutex_t tenants_mu;
    struct srv_tenant_s *tenants;
    size_t ntenants;
    unsigned n_cq, n_pool, max_streams;
    size_t q_bytes_max; /* budget of the queued unary requests' payloads */
    method_t methods[SL_RPC_MAX_METHODS];
    unsigned n_methods;

    pthread_mutex_t mu;
    pthread_cond_t cv_pool;  /* pool threads wait for work */
    pthread_cond_t cv_state; /* owner waits for calls, streams and shutdown */
    srv_state_e state;
    unsigned live_calls; /* srv_call_t structs allocated */
    int shutdown_done;   /* TAG_SHUTDOWN returned */
    srv_tag_t tag_shutdown;
    sl_ring_t queue; /* srv_call_t *: unary calls waiting for the pool */
    size_t q_bytes;  /* payload bytes of the calls in queue */
    int pool_stop;
    unsigned active_streams;
    stream_slot_t *slots;

    pthread_t *cq_tids;
    unsigned cq_started;
    int cq_shut; /* grpc_completion_queue_shutdown called */
    pthread_t *pool_tids;
    unsigned pool_started;
};

/* ------------------------------------------------ rpc_call.c (any thread) */

/* Drops one reference; returns 1 when the caller must sl_rpc_srv_call_free
 * after unlocking. Call mutex held. */
static inline int sl_rpc_srv_unref_locked(srv_call_t *c)
{
    return --c->refs == 0;
}

/* After the last reference was dropped (no lock held). */
void sl_rpc_srv_call_free(srv_call_t *c);

/* Starts a batch and takes a reference for its tag. Call mutex held (that
 * is also what serialises start_batch per call). */
grpc_call_error sl_rpc_srv_start_locked(srv_call_t *c, const grpc_op *ops, size_t n,
                                        srv_tag_t *tag);

/* Posts the final batch: initial metadata (unless a send already carried
 * it), the reply message if any (ownership taken), the status. Call mutex
 * held; the owning thread's reference is dropped by the caller. */
void sl_rpc_srv_finish_locked(srv_call_t *c, int code, const char *details,
                              grpc_byte_buffer *bb);

/* sl_rpc_srv_finish_locked, then drops the owner's reference: from a thread
 * that owns the call but does not hold its mutex. */
void sl_rpc_srv_finish_release(srv_call_t *c, int code, const char *details,
                               grpc_byte_buffer *bb);

/* The peer's address for logging; the owning handler thread only. */
const char *sl_rpc_srv_peer(srv_call_t *c);

/* ------------------------------------------------ rpc_tenants.c */

/* Whether md authenticates the call, and as whom (c->tenant): the server's
 * token -> "", a tenant's token -> its name; no token configured and no
 * tenants -> "" (an open server). CQ thread, call mutex held. */
int sl_rpc_srv_admit_tenant(sl_rpc_server_t *srv, srv_call_t *c);
void sl_rpc_srv_tenants_free(sl_rpc_server_t *srv);

/* Posts a request for method m (NULL = generic) unless the server is
 * stopping. Returns 0 or a negative errno. */
int sl_rpc_srv_post_request(sl_rpc_server_t *srv, const method_t *m);

/* A CQ thread's loop, until the queue is shut down. */
void *sl_rpc_srv_cq_main(void *arg);

/* ------------------------------------------------ rpc_unary.c */

/* Hands a unary call to the pool (CQ thread). 0, or -ENOSPC / -ENOBUFS
 * (queue full by count / bytes) with why set. */
int sl_rpc_srv_pool_enqueue(sl_rpc_server_t *srv, srv_call_t *c, char *why, size_t whylen);

/* A pool thread's loop, until pool_stop and the queue is empty. */
void *sl_rpc_srv_pool_main(void *arg);

/* ------------------------------------------------ rpc_stream.c */

/* The receive ring of a stream call; 0 or -ENOMEM. */
int sl_rpc_srv_stream_init(srv_call_t *c);

/* Posts one RECV_MESSAGE. Call mutex held. */
void sl_rpc_srv_post_recv_locked(srv_call_t *c);

/* Starts the call's stream thread (CQ thread). 0, or -ESHUTDOWN / -ENOSPC
 * with why set. */
int sl_rpc_srv_stream_spawn(sl_rpc_server_t *srv, srv_call_t *c, char *why, size_t whylen);

/* A stream's RECV_MESSAGE returned (CQ thread). */
void sl_rpc_srv_on_recv(srv_call_t *c, int success);

#endif
