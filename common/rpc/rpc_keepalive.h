/* rpc_keepalive: the HTTP/2 keepalive both ends of every Sluice channel
 * agree on (rpc_client.c sends pings, rpc_server.c accepts them and pings
 * back). A peer gone without a FIN -- host down, cable pulled, a NAT that
 * forgot the flow -- is noticed within TIME + TIMEOUT (30 s) even on an
 * idle stream, instead of never (a Fetch stream has no deadline) or only
 * by the next call's deadline. docs/limits.md. */
#ifndef SL_RPC_KEEPALIVE_H
#define SL_RPC_KEEPALIVE_H

/* A ping after this long without one; cheap (one 17-byte frame each way)
 * next to the batches a busy channel carries. */
#define SL_RPC_KEEPALIVE_TIME_MS 20000
/* The connection is closed when the ping's ack is this late. */
#define SL_RPC_KEEPALIVE_TIMEOUT_MS 10000
/* Servers refuse (strike, then GOAWAY) pings closer together than this;
 * below the clients' interval so our own clients are never struck. */
#define SL_RPC_MIN_RECV_PING_INTERVAL_MS 10000
/* Pings closer than the above a server bears before GOAWAY (gRPC's default). */
#define SL_RPC_MAX_PING_STRIKES 2

#endif
