/* rpc_impl: what both halves of the rpc layer share (message packing, the
 * version check, deadlines, statuses). Private to the rpc module (and its
 * unit test / probe tool): nothing outside common/rpc and tests should
 * include it. */
#ifndef SL_RPC_IMPL_H
#define SL_RPC_IMPL_H

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "common/rpc/rpc.h"

/* Packs m into a new byte buffer made of one slice (packed in place, no
 * copy). Returns NULL when packing fails. The caller owns the buffer. */
grpc_byte_buffer *sl_rpc_pb_pack(const ProtobufCMessage *m);

/* A byte buffer holding a copy of n raw bytes (one slice); NULL on failure. */
grpc_byte_buffer *sl_rpc_pb_raw(const void *bytes, size_t n);

/* Unpacks bb with desc (protobuf-c's default allocator). Reads a single
 * uncompressed slice in place; otherwise flattens it once. NULL when bb is
 * NULL or the bytes do not unpack. bb stays owned by the caller. */
ProtobufCMessage *sl_rpc_pb_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb);

/* Whether desc has field 1 `uint32 version` (every request message must). */
int sl_rpc_pb_has_version(const ProtobufCMessageDescriptor *desc);

/* 0 when m's field 1 equals SL_PROTOCOL_VERSION; otherwise -EPROTO with
 * "protocol version X, this server speaks Y" in details. m's descriptor must
 * pass sl_rpc_pb_has_version. */
int sl_rpc_pb_check_version(const ProtobufCMessage *m, char *details, size_t len);

/* Absolute monotonic deadline ms from now; ms <= 0 means none (infinite). */
gpr_timespec sl_rpc_deadline(int ms);

/* A wait bound for pluck/condvar loops: ms < 0 waits forever, 0 polls,
 * > 0 waits that long (monotonic). */
gpr_timespec sl_rpc_deadline_or_poll(int ms);

/* Copies a status slice (and, when the slice is empty, gRPC's debug error
 * string) into st. */
void sl_rpc_status_fill(sl_rpc_status_t *st, int code, grpc_slice details, const char *error_str);

/* Formats a local status (no peer involved). */
void sl_rpc_status_set(sl_rpc_status_t *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Unary call with raw bytes, for tests and the probe tool (garbage requests).
 * On status OK and a reply, *ret_reply receives a malloc'd copy of the reply
 * bytes and *ret_len its length (ret_reply may be NULL to discard it).
 * Returns 0 when the call got status OK, -ECOMM with st filled otherwise,
 * -ENOMEM. */
int sl_rpc_unary_bytes(sl_rpc_channel_t *ch, const char *method, const void *req, size_t len,
                       int timeout_ms, int wait_for_ready, void **ret_reply, size_t *ret_len,
                       sl_rpc_status_t *st);

#endif
