/* service: the dispatcher's RPC surface -- the method table and its glue,
 * each call's arena, and the helpers every handler shares (service_impl.h).
 * The handlers: the workers' (RegisterWorker, Heartbeat) in
 * service_workers.c, the clients' job calls in service_jobs.c, multi-rank
 * jobs in service_ranks.c, the planner's in planner_svc.c. Every handler
 * takes d->mu for its whole state work, builds the response from arena
 * memory (copies, never pointers into the job table) and packs after
 * unlocking. */
#include "dispatcher/service/service.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service_impl.h"

/* ------------------------------------------------------------ arena */

void *disp_arena_alloc(disp_arena_t *a, size_t size)
{
    if (a->n == a->cap) {
        size_t ncap = a->cap == 0 ? 16 : a->cap * 2;
        void **np = realloc(a->ptrs, ncap * sizeof(*np));
        if (np == NULL) {
            return NULL;
        }
        a->ptrs = np;
        a->cap = ncap;
    }
    void *p = calloc(1, size > 0 ? size : 1);
    if (p == NULL) {
        return NULL;
    }
    a->ptrs[a->n++] = p;
    return p;
}

char *disp_arena_strdup(disp_arena_t *a, const char *s)
{
    size_t n = strlen(s);
    char *p = disp_arena_alloc(a, n + 1);
    if (p != NULL) {
        memcpy(p, s, n + 1);
    }
    return p;
}

void disp_arena_free(disp_arena_t *a)
{
    for (size_t i = 0; i < a->n; i++) {
        free(a->ptrs[i]);
    }
    free(a->ptrs);
    memset(a, 0, sizeof(*a));
}

/* ------------------------------------------------------------ helpers (service_impl.h) */

void disp_svc_copy_stages(disp_stage_stat_t *dst, uint32_t *ret_n, Sluice__StageStat *const *src,
                          size_t n)
{
    uint32_t k = 0;
    for (size_t i = 0; i < n && k < DISP_STAGE_STATS_MAX; i++) {
        if (src[i] == NULL) {
            continue;
        }
        disp_stage_stat_t *s = &dst[k++];
        disp_text_copy(s->name, sizeof(s->name), src[i]->name);
        s->cpu_sec_per_sample = disp_svc_finite(src[i]->cpu_sec_per_sample);
        s->out_bytes_per_sample = disp_svc_finite(src[i]->out_bytes_per_sample);
        s->samples = src[i]->samples;
    }
    *ret_n = k;
}

int disp_svc_check_cap(const disp_job_t *job, const char *tenant, const char *secret, char *err,
                       size_t errlen)
{
    /* Both checked (no early return), so a refusal takes as long whichever
     * failed. */
    int same_tenant = strcmp(job->tenant, tenant) == 0;
    int cap_ok = !job->has_cap || sl_jobcap_check(job->cap_hash, secret);
    if (same_tenant && cap_ok) {
        return 0;
    }
    return sl_err(err, errlen, -EACCES, "job %" PRIu64 ": wrong or missing job_secret", job->id);
}

/* The open (not closed) job id, when tenant owns it and secret is its
 * capability; else -EACCES, or -ENOENT with err naming why not. The
 * capability is checked before the job's state: a refused caller learns
 * nothing but that the id exists (ids are sequential: that says nothing). */
int disp_svc_find_open_job(disp_t *d, uint64_t id, const char *tenant, const char *secret,
                           disp_job_t **ret, char *err, size_t errlen)
{
    disp_job_t *job = disp_jobs_find(&d->jobs, id);
    if (job == NULL) {
        return sl_err(err, errlen, -ENOENT, "job %" PRIu64 " not found", id);
    }
    int rc = disp_svc_check_cap(job, tenant, secret, err, errlen);
    if (rc != 0) {
        return rc;
    }
    if (job->state == DISP_JOB_CLOSED) {
        return sl_err(err, errlen, -ENOENT, "job %" PRIu64 " is closed: %s", id, job->close_reason);
    }
    *ret = job;
    return 0;
}

Sluice__Plan *disp_svc_plan_msg(disp_arena_t *a, const disp_plan_t *p)
{
    Sluice__Plan *m = disp_arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    sluice__plan__init(m);
    m->split = p->split;
    m->local_share = p->local_share;
    m->mode = disp_arena_strdup(a, p->mode);
    m->version = p->version;
    m->predicted_samples_per_sec = p->predicted;
    m->binding = disp_arena_strdup(a, p->binding);
    m->compress = p->compress != 0;
    m->local_reason = disp_arena_strdup(a, p->local_reason);
    m->cache_off = p->cache_off != 0;
    m->cache_reason = disp_arena_strdup(a, p->cache_reason);
    if (m->mode == NULL || m->binding == NULL || m->local_reason == NULL ||
        m->cache_reason == NULL) {
        return NULL;
    }
    return m;
}

Sluice__SplitAssignment *disp_svc_assign_msg(disp_arena_t *a, disp_job_t *job, uint64_t split_id,
                                             uint64_t owner)
{
    uint64_t epoch = 0;
    uint64_t begin = 0;
    uint64_t end = 0;
    const disp_split_t *s = disp_job_split(job, split_id, &epoch, &begin, &end);
    if (s == NULL) {
        return NULL;
    }
    Sluice__SplitAssignment *m = disp_arena_alloc(a, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    sluice__split_assignment__init(m);
    m->job_id = job->id;
    m->split_id = split_id;
    m->epoch = epoch;
    m->begin = begin;
    m->end = end;
    /* The split point it was handed out with (re-plans change only new ones). */
    m->stage_to = s->planned ? s->stage_to : job->plan.split;
    m->compress = s->planned ? s->compress : job->plan.compress != 0;
    m->worker_id = owner;
    return m;
}

int disp_svc_oom(char *err, size_t errlen)
{
    return sl_err(err, errlen, -ENOMEM, "dispatcher out of memory");
}

/* ------------------------------------------------------------ rpc glue */

void disp_svc_finish(sl_rpc_reply_t *reply, const char *method, int rc,
                     const ProtobufCMessage *resp, const char *err)
{
    if (rc != 0) {
        SL_INFO("%s from %s: %s: %s", method, sl_rpc_reply_peer(reply),
                sl_rpc_code_name(sl_rpc_status_from_errno(rc)), err);
    }
    sl_rpc_reply_finish(reply, rc, resp, err);
}

DISP_HANDLER(RegisterWorker, Sluice__RegisterWorkerRequest, Sluice__RegisterWorkerResponse,
             SLUICE__REGISTER_WORKER_RESPONSE__INIT, disp_svc_register_worker)
DISP_HANDLER(Heartbeat, Sluice__HeartbeatRequest, Sluice__HeartbeatResponse,
             SLUICE__HEARTBEAT_RESPONSE__INIT, disp_svc_heartbeat)
DISP_HANDLER(SubmitJob, Sluice__SubmitJobRequest, Sluice__SubmitJobResponse,
             SLUICE__SUBMIT_JOB_RESPONSE__INIT, disp_svc_submit_job)
DISP_HANDLER(GetAssignment, Sluice__GetAssignmentRequest, Sluice__GetAssignmentResponse,
             SLUICE__GET_ASSIGNMENT_RESPONSE__INIT, disp_svc_get_assignment)
DISP_HANDLER(AckSplits, Sluice__AckSplitsRequest, Sluice__AckSplitsResponse,
             SLUICE__ACK_SPLITS_RESPONSE__INIT, disp_svc_ack_splits)
DISP_HANDLER(ReportRates, Sluice__ReportRatesRequest, Sluice__ReportRatesResponse,
             SLUICE__REPORT_RATES_RESPONSE__INIT, disp_svc_report_rates)
DISP_HANDLER(CloseJob, Sluice__CloseJobRequest, Sluice__CloseJobResponse,
             SLUICE__CLOSE_JOB_RESPONSE__INIT, disp_svc_close_job)

int disp_service_add(disp_t *d, sl_rpc_server_t *srv)
{
    static const struct {
        const char *method;
        const ProtobufCMessageDescriptor *desc;
        sl_rpc_unary_fn fn;
    } METHODS[] = {
        {"/sluice.Dispatcher/RegisterWorker", &sluice__register_worker_request__descriptor,
         h_RegisterWorker},
        {"/sluice.Dispatcher/Heartbeat", &sluice__heartbeat_request__descriptor, h_Heartbeat},
        {"/sluice.Dispatcher/SubmitJob", &sluice__submit_job_request__descriptor, h_SubmitJob},
        {"/sluice.Dispatcher/GetAssignment", &sluice__get_assignment_request__descriptor,
         h_GetAssignment},
        {"/sluice.Dispatcher/AckSplits", &sluice__ack_splits_request__descriptor, h_AckSplits},
        {"/sluice.Dispatcher/ReportRates", &sluice__report_rates_request__descriptor,
         h_ReportRates},
        {"/sluice.Dispatcher/CloseJob", &sluice__close_job_request__descriptor, h_CloseJob},
    };
    for (size_t i = 0; i < sizeof(METHODS) / sizeof(METHODS[0]); i++) {
        int rc = sl_rpc_server_add_unary(srv, METHODS[i].method, METHODS[i].desc, METHODS[i].fn, d);
        if (rc != 0) {
            return rc;
        }
    }
    return disp_planner_service_add(d, srv); /* GetPlanContext, PlanJob */
}
