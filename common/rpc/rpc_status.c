/* rpc_status: gRPC status codes -- their names, the status a call ended
 * with, and the one table that turns a negative errno into the status a
 * peer sees. Everything below the handler boundary returns errno values;
 * only here do they become RPC codes. All functions are thread-safe. */
#include "common/rpc/rpc_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Several errno values may mean one status; the first match wins. */
static const struct {
    int err;
    int code;
} ERRNO_STATUS[] = {
    {EINVAL, SL_RPC_INVALID_ARGUMENT},
    {E2BIG, SL_RPC_INVALID_ARGUMENT},   /* a list or text over its bound */
    {EFBIG, SL_RPC_INVALID_ARGUMENT},   /* an input over its size bound */
    {EBADMSG, SL_RPC_INVALID_ARGUMENT}, /* a message that does not unpack */
    {ETIMEDOUT, SL_RPC_DEADLINE_EXCEEDED},
    {ENOENT, SL_RPC_NOT_FOUND},
    {EEXIST, SL_RPC_ALREADY_EXISTS},
    {EACCES, SL_RPC_PERMISSION_DENIED},
    {EPERM, SL_RPC_PERMISSION_DENIED},
    {ENOMEM, SL_RPC_RESOURCE_EXHAUSTED},
    {ENOBUFS, SL_RPC_RESOURCE_EXHAUSTED}, /* a byte budget is spent */
    {ENOSPC, SL_RPC_RESOURCE_EXHAUSTED},  /* a count limit is reached */
    /* What the request presumes no longer holds (the data differs, the job
     * failed, its parts disagree), or the peer speaks another version. */
    {ESTALE, SL_RPC_FAILED_PRECONDITION},
    {EPROTO, SL_RPC_FAILED_PRECONDITION},
    {ECANCELED, SL_RPC_CANCELLED},
    {ENOSYS, SL_RPC_UNIMPLEMENTED},
    /* Worth retrying later: a write that did not reach the disk, a server
     * that is stopping or busy for a moment. */
    {EIO, SL_RPC_UNAVAILABLE},
    {EAGAIN, SL_RPC_UNAVAILABLE},
    {ESHUTDOWN, SL_RPC_UNAVAILABLE},
    {EKEYREJECTED, SL_RPC_UNAUTHENTICATED},
};

int sl_rpc_status_from_errno(int rc)
{
    if (rc == 0) {
        return SL_RPC_OK;
    }
    for (size_t i = 0; i < sizeof(ERRNO_STATUS) / sizeof(ERRNO_STATUS[0]); i++) {
        if (rc == -ERRNO_STATUS[i].err) {
            return ERRNO_STATUS[i].code;
        }
    }
    return SL_RPC_INTERNAL; /* positive values too: not an errno, a caller's bug */
}

const char *sl_rpc_code_name(int code)
{
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0])) {
        return "UNKNOWN_CODE";
    }
    return names[code];
}

void sl_rpc_status_fill(sl_rpc_status_t *st, int code, grpc_slice details, const char *error_str)
{
    if (st == NULL) {
        return;
    }
    st->code = code;
    size_t n = GRPC_SLICE_LENGTH(details);
    if (n >= sizeof(st->details)) {
        n = sizeof(st->details) - 1;
    }
    memcpy(st->details, GRPC_SLICE_START_PTR(details), n);
    st->details[n] = '\0';
    if (n == 0 && error_str != NULL && code != SL_RPC_OK) {
        snprintf(st->details, sizeof(st->details), "%s", error_str);
    }
}

void sl_rpc_status_set(sl_rpc_status_t *st, int code, const char *fmt, ...)
{
    if (st == NULL) {
        return;
    }
    st->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->details, sizeof(st->details), fmt, ap);
    va_end(ap);
}
