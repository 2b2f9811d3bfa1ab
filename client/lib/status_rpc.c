/* status_rpc: see status_rpc.h. */
#include "client/lib/status_rpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/sluice.pb-c.h"

int cl_status_fetch(const char *addr, const sl_rpc_security_t *sec, size_t max_bytes,
                    int timeout_ms, char **ret, char *err, size_t errlen)
{
    sl_rpc_channel_t *ch = sl_rpc_channel_new(addr, max_bytes, sec, 0, err, errlen);
    if (ch == NULL) {
        return -EINVAL;
    }
    Sluice__GetStatusRequest req = SLUICE__GET_STATUS_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    ProtobufCMessage *m = NULL;
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(ch, "/sluice.Dispatcher/GetStatus", &req.base,
                          &sluice__get_status_response__descriptor, timeout_ms, 0, &m, &st);
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s: %s", addr, sl_rpc_code_name(st.code), st.details);
    } else {
        const Sluice__GetStatusResponse *r = (const Sluice__GetStatusResponse *)m;
        *ret = strdup(r->status_json != NULL ? r->status_json : "");
        rc = *ret != NULL ? 0 : -ENOMEM;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    sl_rpc_channel_free(ch);
    return rc;
}
