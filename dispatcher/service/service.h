/* service: the Dispatcher RPCs (proto/sluice.proto, docs/protocol.md).
 *
 * Each RPC is a pure function from request to response over disp_t (taking
 * its mutex), so unit tests call them without sockets; disp_service_add
 * wires them into an sl_rpc server. Response memory (repeated fields,
 * strings) comes from a per-call arena freed after the reply is packed, so
 * the mutex is not held while packing. They run on the rpc layer's handler
 * pool threads.
 *
 * Errors are negative errno values; disp_svc_finish turns one into the
 * status the client sees (sl_rpc_status_from_errno): unknown or closed job
 * -ENOENT (NOT_FOUND); bad spec, num_samples 0, oversized id lists -EINVAL
 * or -E2BIG (INVALID_ARGUMENT); too many jobs/workers -ENOSPC and no memory
 * -ENOMEM (RESOURCE_EXHAUSTED); a multi-rank part that disagrees with the
 * job's other ranks -ESTALE (FAILED_PRECONDITION); a journal write that
 * failed -EIO (UNAVAILABLE: the client retries). world_size > 1 submits one
 * part of a multi-rank job (service_ranks.h). */
#ifndef DISP_SERVICE_H
#define DISP_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "common/rpc/rpc.h"
#include "dispatcher/disp.h"
#include "proto/sluice.pb-c.h"

/* Ids one request may carry (known_jobs, failed_jobs, split_ids, ...):
 * bounds the time a peer can make us hold the mutex. */
#define DISP_MAX_IDS_PER_CALL 65536

/* One call's context: its response memory, and who made it. */
typedef struct disp_arena_s {
    void **ptrs;
    size_t n, cap;
    /* The caller's tenant (sl_rpc_reply_tenant; docs/protocol.md "Tenants"):
     * "" = the cluster token (workers, operators) or a cluster without
     * tokens. Set by DISP_HANDLER; tests zero it. */
    char tenant[SL_RPC_TENANT_MAX];
} disp_arena_t;

/* Zeroed memory freed with the arena; NULL on ENOMEM. */
void *disp_arena_alloc(disp_arena_t *a, size_t size);
char *disp_arena_strdup(disp_arena_t *a, const char *s);
void disp_arena_free(disp_arena_t *a);

/* Each returns 0 or a negative errno; on error err holds the status
 * details. The response is filled only on success. */
int disp_svc_register_worker(disp_t *d, const Sluice__RegisterWorkerRequest *req,
                             Sluice__RegisterWorkerResponse *resp, disp_arena_t *a,
                             int64_t now_ms, char *err, size_t errlen);
int disp_svc_heartbeat(disp_t *d, const Sluice__HeartbeatRequest *req,
                       Sluice__HeartbeatResponse *resp, disp_arena_t *a, int64_t now_ms,
                       char *err, size_t errlen);
int disp_svc_submit_job(disp_t *d, const Sluice__SubmitJobRequest *req,
                        Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                        char *err, size_t errlen);
int disp_svc_get_assignment(disp_t *d, const Sluice__GetAssignmentRequest *req,
                            Sluice__GetAssignmentResponse *resp, disp_arena_t *a,
                            int64_t now_ms, char *err, size_t errlen);
int disp_svc_ack_splits(disp_t *d, const Sluice__AckSplitsRequest *req,
                        Sluice__AckSplitsResponse *resp, disp_arena_t *a, int64_t now_ms,
                        char *err, size_t errlen);
int disp_svc_report_rates(disp_t *d, const Sluice__ReportRatesRequest *req,
                          Sluice__ReportRatesResponse *resp, disp_arena_t *a, int64_t now_ms,
                          char *err, size_t errlen);
int disp_svc_close_job(disp_t *d, const Sluice__CloseJobRequest *req,
                       Sluice__CloseJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                       char *err, size_t errlen);

/* Registers every "/sluice.Dispatcher/<Name>" method on srv (before start). */
int disp_service_add(disp_t *d, sl_rpc_server_t *srv);

/* How every Dispatcher handler ends: logs a failed call of method (with
 * the peer and err), then sends resp (rc 0) or rc's status with err as the
 * details. Pool thread. */
void disp_svc_finish(sl_rpc_reply_t *reply, const char *method, int rc,
                     const ProtobufCMessage *resp, const char *err);

/* The rpc layer's handler for one RPC: typed request in, typed response out
 * of fn (one of the disp_svc_* above), arena freed after the reply is
 * packed. */
#define DISP_HANDLER(name, Req, Resp, INIT, fn)                                             \
    static void h_##name(void *ctx, const ProtobufCMessage *m, sl_rpc_reply_t *reply)      \
    {                                                                                       \
        Resp resp = INIT;                                                                   \
        disp_arena_t arena = {0};                                                           \
        char err[1024] = "";                                                                \
        snprintf(arena.tenant, sizeof(arena.tenant), "%s", sl_rpc_reply_tenant(reply));    \
        int rc = fn((disp_t *)ctx, (const Req *)m, &resp, &arena, disp_now_ms(), err,       \
                    sizeof(err));                                                           \
        disp_svc_finish(reply, #name, rc, &resp.base, err);                                 \
        disp_arena_free(&arena);                                                            \
    }

/* A plan as a message in the arena; NULL on ENOMEM. */
Sluice__Plan *disp_svc_plan_msg(disp_arena_t *a, const disp_plan_t *p);
/* 0 when the caller's tenant owns job and secret (NULL = none) is its
 * capability (or the job has none: restored from an older journal), else
 * -EACCES with err saying so and nothing about the job. Called with d->mu
 * held. */
int disp_svc_check_cap(const disp_job_t *job, const char *tenant, const char *secret, char *err,
                       size_t errlen);

#endif
