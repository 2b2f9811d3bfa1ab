/* rpc_client.h: receiving stream messages without unpacking them (the
 * rest of the client API is in common/rpc/rpc.h). A large message arrives as
 * many slices; sl_rpc_cstream_recv would flatten them and protobuf-c would
 * copy its bytes fields again. Here the caller gets the slices themselves,
 * as read-only segments, and parses what it needs (client/lib/batch_wire.h),
 * copying payloads once to where they belong. */
#ifndef SL_RPC_CLIENT_H
#define SL_RPC_CLIENT_H

#include <stddef.h>

#include "common/rpc/pb_wire.h"
#include "common/rpc/rpc.h"

/* A received message: holds its slices alive until sl_rpc_raw_free. */
typedef struct sl_rpc_raw_s sl_rpc_raw_t;

/* As sl_rpc_cstream_recv, but returns the message's bytes as received
 * (a compressed message is inflated first: one copy, gRPC's). *ret is freed
 * with sl_rpc_raw_free; the stream's resp_desc is not used. */
int sl_rpc_cstream_recv_raw(sl_rpc_cstream_t *cs, sl_rpc_raw_t **ret, int timeout_ms,
                            sl_rpc_status_t *st);
/* The message's segments (*n of them, total length = the message). Valid
 * until sl_rpc_raw_free. */
const sl_pbw_seg_t *sl_rpc_raw_segs(const sl_rpc_raw_t *m, size_t *n);
void sl_rpc_raw_free(sl_rpc_raw_t *m); /* NULL ok */

#endif
