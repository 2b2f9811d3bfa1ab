/* status_rpc: the dispatcher's status document over gRPC (GetStatus), for
 * `sluice status --dispatcher`: the CLI asks through this and opens no
 * protobuf of its own. Library code: never logs. Any thread (between the
 * caller's sl_rpc_init and sl_rpc_shutdown). */
#ifndef SL_CLIENT_STATUS_RPC_H
#define SL_CLIENT_STATUS_RPC_H

#include <stddef.h>

#include "common/rpc/rpc.h"

/* The status JSON of the dispatcher at addr (reached over sec; a reply
 * larger than max_bytes is refused) into *ret (free it). Returns 0, -EINVAL
 * when no channel to addr can be made, -ENOMEM, or another negative code
 * when the call failed ("ADDR: CODE: details" in err). */
int cl_status_fetch(const char *addr, const sl_rpc_security_t *sec, size_t max_bytes,
                    int timeout_ms, char **ret, char *err, size_t errlen);

#endif
