/* rpc_creds: transport security and authentication for both ends of the
 * rpc layer, from one sl_rpc_security_t: the PEM files it names (read
 * here, bounded, the key wiped after use), gRPC's server or channel
 * credentials built from them, and the bearer token a channel sends and a
 * server checks ("authorization: Bearer TOKEN"). Private to common/rpc.
 *
 * Threads: the credential builders run on the thread that creates a server
 * or a channel; sl_rpc_creds_bearer_ok on CQ threads (it only reads). */
#ifndef SL_RPC_CREDS_H
#define SL_RPC_CREDS_H

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <stddef.h>

#include "common/rpc/rpc.h"

/* Server credentials for sec (NULL or no tls_* field: insecure).
 * tls_cert + tls_key turn TLS on; tls_ca then requires client
 * certificates it signed (mutual TLS). Returns 0 with *ret (released by the
 * caller) or a negative errno with err set (-EINVAL for a half-given
 * pair, the file's error for an unreadable PEM). */
int sl_rpc_creds_server(const sl_rpc_security_t *sec, grpc_server_credentials **ret, char *err,
                        size_t errlen);

/* Channel credentials for sec (NULL or no tls_* field: insecure). Any
 * tls_* field turns TLS on; tls_ca NULL trusts gRPC's default roots;
 * tls_cert + tls_key (together) present a client certificate. As above. */
int sl_rpc_creds_channel(const sl_rpc_security_t *sec, grpc_channel_credentials **ret, char *err,
                         size_t errlen);

/* The authorization header value for sec's token, "Bearer TOKEN"
 * (malloc'd), or NULL in *ret when there is no token. -EINVAL for an
 * empty or oversized token, or one that cannot travel in a header. Call
 * after grpc_init. */
int sl_rpc_creds_bearer(const sl_rpc_security_t *sec, char **ret, char *err, size_t errlen);

/* Whether md carries "authorization: <bearer>"; always true when bearer is
 * NULL. Compares in constant time, so the time taken does not tell a
 * guesser how much of the token was right. */
int sl_rpc_creds_bearer_ok(const char *bearer, const grpc_metadata_array *md);

#endif
