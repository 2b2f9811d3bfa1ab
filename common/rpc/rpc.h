/* rpc: a small layer over gRPC's C core API (not C++) carrying protobuf-c
 * messages. It exists to contain the core API's pitfalls: a method nobody
 * registered hangs its caller until the deadline, SO_REUSEPORT lets a second
 * server share a taken port, the default 4 MiB message limit, one batch per
 * op type in flight, buffers that must outlive their tags, forking after
 * grpc_init hangs the child.
 *
 * Server: registered methods only; one generic request outstanding answers
 * unknown methods with UNIMPLEMENTED; SO_REUSEPORT off; max message size set;
 * CQ threads only move state machines forward and never run handlers:
 * unary handlers run on a bounded handler pool, each stream handler on its own
 * thread (bounded by max_streams; beyond it RESOURCE_EXHAUSTED). Every request
 * message must have `uint32 version = 1`: a different value is answered with
 * FAILED_PRECONDITION before the handler runs; a message that does not unpack
 * gets INVALID_ARGUMENT.
 *
 * Client: blocking calls, each on its own completion queue (pluck), every call
 * with a deadline, max message size set on the channel.
 *
 * Nothing here logs; errors come back as codes and text. */
#ifndef SL_RPC_H
#define SL_RPC_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#define SL_PROTOCOL_VERSION 1
#define SL_RPC_DEFAULT_MAX_MSG (64 << 20)

/* gRPC status codes we use (values of grpc_status_code). */
enum {
    SL_RPC_OK = 0,
    SL_RPC_CANCELLED = 1,
    SL_RPC_UNKNOWN = 2,
    SL_RPC_INVALID_ARGUMENT = 3,
    SL_RPC_DEADLINE_EXCEEDED = 4,
    SL_RPC_NOT_FOUND = 5,
    SL_RPC_ALREADY_EXISTS = 6,
    SL_RPC_PERMISSION_DENIED = 7,
    SL_RPC_RESOURCE_EXHAUSTED = 8,
    SL_RPC_FAILED_PRECONDITION = 9,
    SL_RPC_ABORTED = 10,
    SL_RPC_UNIMPLEMENTED = 12,
    SL_RPC_INTERNAL = 13,
    SL_RPC_UNAVAILABLE = 14,
    SL_RPC_UNAUTHENTICATED = 16,
};

typedef struct sl_rpc_status_s {
    int code;          /* SL_RPC_* */
    char details[512]; /* the peer's status message, or a local description */
} sl_rpc_status_t;

/* Optional transport security and authentication (issue: reliability). All
 * NULL = insecure, no token. Paths to PEM files, read when the server or
 * channel is created. Server: tls_cert + tls_key turn TLS on; tls_ca then
 * also requires and verifies client certificates (mutual TLS). Client: any
 * tls_* field turns TLS on; tls_ca NULL trusts gRPC's default roots;
 * tls_cert + tls_key (together) present a client certificate. token: the
 * server answers UNAUTHENTICATED to every call (unknown methods included)
 * without the right one, before any handler runs. */
typedef struct sl_rpc_security_s {
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;   /* client: roots to trust; server: require client certs signed by it */
    const char *token;    /* shared secret sent/checked as "authorization: Bearer TOKEN" */
} sl_rpc_security_t;

/* ------------------------------------------------------------ server */

typedef struct sl_rpc_server_s sl_rpc_server_t;
typedef struct sl_rpc_reply_s sl_rpc_reply_t;   /* a unary call's answer slot */
typedef struct sl_rpc_stream_s sl_rpc_stream_t; /* a server-side bidi stream */

typedef struct sl_rpc_server_opts_s {
    const char *listen;        /* "HOST:PORT"; port 0 picks a free one */
    size_t max_msg_bytes;      /* 0 = SL_RPC_DEFAULT_MAX_MSG */
    unsigned cq_threads;       /* 0 = 1 */
    unsigned handler_threads;  /* unary handler pool; 0 = 4; queue 16 per thread (>= 64) */
    unsigned max_streams;      /* concurrent stream handlers; 0 = 64 */
    const sl_rpc_security_t *security; /* NULL = insecure */
    /* Memory a peer can make the server hold (docs/limits.md). Largest
     * request accepted (larger: RESOURCE_EXHAUSTED from the transport);
     * 0 = max_msg_bytes, which then bounds only what the server sends. */
    size_t max_recv_bytes;
    /* Bytes of unary requests waiting for the pool; one more that would
     * pass it gets RESOURCE_EXHAUSTED (one alone always fits). 0 = 4 x the
     * largest request. */
    size_t max_queued_bytes;
} sl_rpc_server_opts_t;

/* Unary handler: runs on a pool thread. Must answer exactly once before
 * returning, normally with sl_rpc_reply_finish (if it answers not at all,
 * the layer answers INTERNAL; a second answer is ignored). req is freed by
 * the layer after return. When the pool's bounded queue is full new calls get
 * RESOURCE_EXHAUSTED; a call whose client left while queued is not run. */
typedef void (*sl_rpc_unary_fn)(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply);
/* The one way a handler ends: rc 0 sends resp; a negative errno sends the
 * status sl_rpc_status_from_errno(rc) with details (NULL or "": the code's
 * name). resp may be NULL when rc < 0. */
void sl_rpc_reply_finish(sl_rpc_reply_t *reply, int rc, const ProtobufCMessage *resp,
                         const char *details);
/* Packs resp immediately: the handler may free resp's storage right after. */
void sl_rpc_reply_ok(sl_rpc_reply_t *reply, const ProtobufCMessage *resp);
/* code must be a non-OK SL_RPC_* (anything else is sent as UNKNOWN). */
void sl_rpc_reply_error(sl_rpc_reply_t *reply, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Peer address ("ipv4:127.0.0.1:5555") for logging, never NULL. */
const char *sl_rpc_reply_peer(const sl_rpc_reply_t *reply);

/* Stream handler: runs on its own thread with the client's first message
 * (already unpacked and version-checked). Returns the final status code
 * (outside 0..16: UNKNOWN); details via sl_rpc_stream_set_details. The layer
 * frees first_req after return and ends the call (after the last send
 * completed). Beyond max_streams open streams, new ones get
 * RESOURCE_EXHAUSTED. The sl_rpc_stream_* functions are meant for the
 * handler's thread; sends from several threads are serialised. Timeouts:
 * < 0 waits without limit, 0 polls, > 0 milliseconds. */
typedef int (*sl_rpc_stream_fn)(void *ctx, sl_rpc_stream_t *st, const ProtobufCMessage *first_req);
/* Sends one message. At most one send is in flight: this blocks until the
 * previous one completed (that is the transport's flow control reaching us).
 * Returns 0, -ECANCELED (peer gone / deadline / server shutting down),
 * -ETIMEDOUT (timeout_ms elapsed waiting for the previous send), -ENOMEM. */
int sl_rpc_stream_send(sl_rpc_stream_t *st, const ProtobufCMessage *msg, int timeout_ms);
/* Next message from the client (unpacked with the method's request
 * descriptor; free with protobuf_c_message_free_unpacked(m, NULL)).
 * Returns 0 with *ret set, 1 when the client half-closed (no more messages),
 * -ETIMEDOUT (timeout_ms, 0 = poll), -ECANCELED, -EBADMSG (did not unpack or
 * wrong version: the layer ends the call). */
int sl_rpc_stream_recv(sl_rpc_stream_t *st, ProtobufCMessage **ret, int timeout_ms);
int sl_rpc_stream_cancelled(const sl_rpc_stream_t *st);
void sl_rpc_stream_set_details(sl_rpc_stream_t *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *sl_rpc_stream_peer(const sl_rpc_stream_t *st);

/* Tenants (docs/protocol.md "Tenants"): named tokens the server admits
 * besides security->token. A call carrying one is admitted as that tenant
 * (sl_rpc_reply_tenant); with tenants set, a call with no or another token
 * is UNAUTHENTICATED even when the server has no token of its own.
 * Replaces the whole set (n = 0: none); any thread, any time (SIGHUP):
 * calls already admitted keep their tenant, the next ones see the new set
 * (a revoked token is refused from then on). -EINVAL (nothing changed) for
 * a bad name, a token that cannot travel in a header, or n too large. */
#define SL_RPC_TENANT_MAX 64 /* bytes of a tenant name, NUL included */
#define SL_RPC_TENANTS_MAX 64
typedef struct sl_rpc_tenant_s {
    const char *name;
    const char *token;
} sl_rpc_tenant_t;
int sl_rpc_server_set_tenants(sl_rpc_server_t *srv, const sl_rpc_tenant_t *t, size_t n,
                              char *err, size_t errlen);
/* sl_rpc_server_set_tenants from a tenants file (common/base/tenants.h;
 * path "" = none): what a daemon does at start and on SIGHUP. On failure
 * the running set stays. *ret_n: tenants now admitted. */
int sl_rpc_server_load_tenants(sl_rpc_server_t *srv, const char *path, size_t *ret_n, char *err,
                               size_t errlen);
/* The tenant the call was admitted as: "" for the server's own token (or
 * an open server). Valid while the handler runs. */
const char *sl_rpc_reply_tenant(const sl_rpc_reply_t *reply);
const char *sl_rpc_stream_tenant(const sl_rpc_stream_t *st);

/* method is the full path, "/sluice.Dispatcher/Heartbeat". req_desc unpacks
 * requests. All registration happens before sl_rpc_server_start. */
sl_rpc_server_t *sl_rpc_server_new(const sl_rpc_server_opts_t *opts, char *err, size_t errlen);
int sl_rpc_server_add_unary(sl_rpc_server_t *srv, const char *method,
                            const ProtobufCMessageDescriptor *req_desc, sl_rpc_unary_fn fn,
                            void *ctx);
int sl_rpc_server_add_stream(sl_rpc_server_t *srv, const char *method,
                             const ProtobufCMessageDescriptor *req_desc, sl_rpc_stream_fn fn,
                             void *ctx);
/* Binds and starts; writes the bound "HOST:PORT" (port resolved) to ret_addr.
 * Returns -EADDRINUSE when the port is taken (no SO_REUSEPORT sharing),
 * -EINVAL for an address that does not resolve. A server that failed to
 * start can only be freed. add_* return -EINVAL when req_desc lacks
 * `uint32 version = 1`, -EEXIST for a duplicate, -ENOSPC beyond 32 methods,
 * -EBUSY after start. */
int sl_rpc_server_start(sl_rpc_server_t *srv, char *ret_addr, size_t addrlen, char *err,
                        size_t errlen);
/* Stops accepting, waits up to grace_ms for in-flight calls and stream
 * handlers, then cancels the rest (their send/recv return -ECANCELED) and
 * waits for every handler to return. Idempotent. Owner thread only: never
 * from a handler. */
void sl_rpc_server_shutdown(sl_rpc_server_t *srv, int grace_ms);
void sl_rpc_server_free(sl_rpc_server_t *srv); /* shuts down first if needed; NULL ok */

/* ------------------------------------------------------------ client */

typedef struct sl_rpc_channel_s sl_rpc_channel_t;
typedef struct sl_rpc_cstream_s sl_rpc_cstream_t;

/* One channel per peer. own_connection = 1 gives it a private TCP connection
 * (local subchannel pool), as the client wants one per worker stream.
 * Thread-safe: any number of threads may make calls on one channel. Free it
 * after its calls and streams. */
sl_rpc_channel_t *sl_rpc_channel_new(const char *target, size_t max_msg_bytes,
                                     const sl_rpc_security_t *security, int own_connection,
                                     char *err, size_t errlen);
void sl_rpc_channel_free(sl_rpc_channel_t *ch);

/* Unary call. Returns 0 with *ret_resp (free with protobuf_c_message_free_unpacked),
 * or -ECOMM with st filled (st->code != OK), or -EBADMSG when the reply does
 * not unpack. wait_for_ready = 1 waits for the peer up to the deadline
 * instead of failing fast when it is down. timeout_ms <= 0 means 30 s: every
 * call has a deadline. */
int sl_rpc_unary(sl_rpc_channel_t *ch, const char *method, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *resp_desc, int timeout_ms, int wait_for_ready,
                 ProtobufCMessage **ret_resp, sl_rpc_status_t *st);

/* Bidi stream: sends first_req at open and waits until it is handed to the
 * transport, so an unreachable peer gives -ECOMM (st filled) here.
 * deadline_ms bounds the whole stream (0 = none; the call is then ended by
 * cancel or the server). One thread may recv while another sends; free must
 * not race either. Timeouts below: < 0 waits without limit, 0 polls. */
int sl_rpc_cstream_open(sl_rpc_channel_t *ch, const char *method, const ProtobufCMessage *first_req,
                        const ProtobufCMessageDescriptor *resp_desc, int deadline_ms,
                        sl_rpc_cstream_t **ret, sl_rpc_status_t *st);
/* Sends another message (e.g. credits); waits for the previous send.
 * Returns 0 (queued), -ETIMEDOUT (the previous send is still pending; nothing
 * was sent), -ECOMM (the call failed: recv reports its status), -EPIPE (the
 * stream has ended), -ENOMEM, -EIO. */
int sl_rpc_cstream_send(sl_rpc_cstream_t *cs, const ProtobufCMessage *msg, int timeout_ms);
/* Returns 0 with *ret (free with protobuf_c_message_free_unpacked), 1 at the
 * end of the stream with status OK (st filled), -ECOMM when it ended with
 * another status (st filled: CANCELLED after sl_rpc_cstream_cancel,
 * UNAVAILABLE, the handler's code...), -ETIMEDOUT (the read stays pending and
 * the next call continues it), -EBADMSG (a message did not unpack). Once
 * ended, every further call returns the same result. */
int sl_rpc_cstream_recv(sl_rpc_cstream_t *cs, ProtobufCMessage **ret, int timeout_ms,
                        sl_rpc_status_t *st);
/* Thread-safe: makes a blocked recv return. */
void sl_rpc_cstream_cancel(sl_rpc_cstream_t *cs);
void sl_rpc_cstream_free(sl_rpc_cstream_t *cs); /* cancels if still open; NULL ok */

/* grpc_init()/grpc_shutdown() wrappers, reference counted by gRPC itself.
 * Call after any fork: a child forked after grpc_init hangs in gRPC. */
void sl_rpc_init(void);
void sl_rpc_shutdown(void);
const char *sl_rpc_code_name(int code);

/* The status a peer sees for a handler's result: 0 -> OK, a negative errno
 * -> its code (-EINVAL, -E2BIG, -EBADMSG -> INVALID_ARGUMENT; -ENOENT ->
 * NOT_FOUND; -ENOMEM, -ENOBUFS, -ENOSPC -> RESOURCE_EXHAUSTED; -EEXIST ->
 * ALREADY_EXISTS; -ESTALE, -EPROTO -> FAILED_PRECONDITION; -EIO, -EAGAIN,
 * -ESHUTDOWN -> UNAVAILABLE; ... rpc_status.c has the table), anything else
 * -> INTERNAL. The only place an errno becomes an RPC status. */
int sl_rpc_status_from_errno(int rc);

#endif
