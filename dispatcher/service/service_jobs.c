/* service_jobs: the clients' RPCs on a job -- SubmitJob, GetAssignment,
 * AckSplits, ReportRates, CloseJob (multi-rank submission is
 * service_ranks.c's). Every handler takes d->mu for its whole state work,
 * builds the response from arena memory and waits for the journal after
 * unlocking. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "dispatcher/core/tenants.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "dispatcher/service/service_impl.h"
#include "dispatcher/service/service_ranks.h"

/* ------------------------------------------------------------ SubmitJob */

int disp_svc_submit_job(disp_t *d, const Sluice__SubmitJobRequest *req,
                        Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms, char *err,
                        size_t errlen)
{
    if (req->world_size > 1) {
        /* Multi-rank jobs: one part per rank (dispatcher/service/service_ranks.c). */
        return disp_svc_submit_rank(d, req, resp, a, now_ms, err, errlen);
    }
    disp_submit_t sub = {
        .spec_json = req->spec_json,
        .spec_len = req->spec_json != NULL ? strlen(req->spec_json) : 0,
        .spec_name = req->spec_name,
        .num_samples = req->num_samples,
        .fingerprint = req->source_fingerprint,
        .client_threads = req->client_threads,
        .client_id = req->client_id,
        .first_epoch = req->first_epoch,
    };
    /* Checked even when not used, so a client's bug shows either way. */
    if (disp_costs_check(req->sample_costs, req->n_sample_costs, req->num_samples, err, errlen) !=
        0) {
        return -EINVAL;
    }
    if (d->cfg.cost_splits && req->n_sample_costs > 0) {
        sub.costs = req->sample_costs;
        sub.ncosts = req->n_sample_costs;
    }
    /* The job's capability: the client's (ranks share one) or a fresh one.
     * Answered once in this reply; the job keeps only its hash. */
    char secret[SL_JOBCAP_MAX + 1];
    const char *given = req->job_secret != NULL ? req->job_secret : "";
    if (given[0] != '\0') {
        if (!sl_jobcap_valid(given)) {
            return sl_err(err, errlen, -EINVAL, "job_secret: %d..%d printable non-space bytes",
                          SL_JOBCAP_MIN, SL_JOBCAP_MAX);
        }
        snprintf(secret, sizeof(secret), "%s", given);
    } else if (sl_jobcap_new(secret) != 0) {
        return sl_err(err, errlen, -EAGAIN, "no random bytes for the job secret");
    }
    disp_job_t *job = NULL;
    pthread_mutex_lock(&d->mu);
    /* auto/fastflow with the client's profiles: planned before the job
     * exists (dispatcher/service/planner_svc.c); otherwise plain disp_jobs_submit. */
    Sluice__PlanExplain *explain = NULL;
    int rc = disp_tenants_admit_job(d, a->tenant, err, errlen);
    if (rc == 0) {
        rc = disp_planner_submit(d, req, &sub, now_ms, &job, &explain, a, err, errlen);
    }
    disp_plan_t plan;
    uint64_t id = 0;
    if (rc == 0) {
        sl_jobcap_hash(secret, job->cap_hash);
        job->has_cap = 1;
        snprintf(job->tenant, sizeof(job->tenant), "%s", a->tenant);
    }
    if (rc == 0 && disp_jstate_submitted(d, job) != 0) {
        /* Not durable, so not answered: the job must not exist either. */
        disp_jobs_close(&d->jobs, job, "journal write failed", now_ms);
        rc = sl_err(err, errlen, -EIO, "journal write failed: job not accepted");
    }
    if (rc == 0) {
        plan = job->plan;
        id = job->id;
        SL_NOTICE("job %" PRIu64 " submitted: spec \"%s\", %" PRIu64 " samples, %u epochs, "
                  "%u splits/epoch, plan %s split %u/%u share %.3f, client \"%s\"",
                  id, job->spec_name, job->num_samples, job->epochs, job->nsplits, job->plan.mode,
                  job->plan.split, job->plan.nunits, job->plan.local_share, job->client_id);
    }
    uint64_t seq = disp_jstate_seq(d);
    pthread_mutex_unlock(&d->mu);
    if (rc == 0 && disp_jstate_wait(d, seq) != 0) {
        disp_drop_job(d, id, "journal write failed", now_ms);
        rc = sl_err(err, errlen, -EIO, "journal write failed: job not accepted");
    }
    if (rc == -ENOMEM) {
        return disp_svc_oom(err, errlen);
    }
    if (rc != 0) {
        return rc; /* err: the parser's or the limit's message, verbatim */
    }
    resp->version = SL_PROTOCOL_VERSION;
    resp->job_id = id;
    resp->first_epoch = req->first_epoch; /* the job's, once accepted */
    resp->plan = disp_svc_plan_msg(a, &plan);
    resp->explain = explain;
    resp->job_secret = disp_arena_strdup(a, secret);
    if (resp->plan == NULL || resp->job_secret == NULL) {
        return disp_svc_oom(err, errlen);
    }
    return 0;
}

/* ------------------------------------------------------------ GetAssignment */

/* The job's workers' prefix cache counters (docs/cache.md); NULL without
 * memory (the reply goes without them). */
static Sluice__CacheStats *cache_msg(disp_arena_t *a, const disp_cache_stats_t *c)
{
    Sluice__CacheStats *m = disp_arena_alloc(a, sizeof(*m));
    if (m != NULL) {
        sluice__cache_stats__init(m);
        m->hits = c->hits;
        m->misses = c->misses;
        m->bytes_read = c->bytes_read;
        m->bytes_written = c->bytes_written;
        m->evictions = c->evictions;
        m->store_errors = c->store_errors;
        m->corrupt = c->corrupt;
        m->bytes_evicted = c->bytes_evicted;
    }
    return m;
}

/* The client's own prefix cache counters to the planner (d->mu held).
 * Rank 0's only: the ranks of a multi-consumer job each send their own
 * totals, which do not add up as one counter (the planner prices one
 * client, rank 0's profile). */
static void note_client_cache(disp_job_t *job, const Sluice__GetAssignmentRequest *req)
{
    if (req->cache != NULL && job->planner != NULL && req->rank == 0) {
        disp_pjob_note_client_cache(job->planner, req->cache);
    }
}

int disp_svc_get_assignment(disp_t *d, const Sluice__GetAssignmentRequest *req,
                            Sluice__GetAssignmentResponse *resp, disp_arena_t *a, int64_t now_ms,
                            char *err, size_t errlen)
{
    disp_job_t *job = NULL;
    pthread_mutex_lock(&d->mu);
    int rc = disp_svc_find_open_job(d, req->job_id, a->tenant, req->job_secret, &job, err, errlen);
    if (rc != 0) {
        goto out;
    }
    job->last_client_ms = now_ms;
    note_client_cache(job, req);
    if (req->idle) {
        (void)disp_jobs_client_idle(&d->jobs, job, now_ms); /* assigns too */
    } else {
        disp_jobs_assign(&d->jobs, job, now_ms);
    }
    resp->version = SL_PROTOCOL_VERSION;
    resp->plan = disp_svc_plan_msg(a, &job->plan);
    resp->failure = disp_arena_strdup(a, "");
    resp->fallback = disp_arena_strdup(a, job->fallback);
    resp->finished = job->state == DISP_JOB_FINISHED;
    resp->cache = cache_msg(a, &job->cache);
    /* Every ASSIGNED split is listed as soon as it is assigned, usually
     * before its worker hears of it at its next heartbeat: the client then
     * knows a split (and its stage_to) before the first batch of it can
     * arrive, and a worker's Fetch waits for a job it does not know yet. */
    size_t nsplits = job->nclient;
    size_t nworkers = 0;
    for (size_t i = 0; i < job->njw; i++) {
        nsplits += job->jw[i].n;
        nworkers += job->jw[i].n > 0;
    }
    /* Endpoints only of LIVE workers: a departed one still owns the splits it
     * delivered before leaving (the client acknowledges them), but there is
     * nothing left to fetch from it. */
    if (resp->plan == NULL || resp->failure == NULL || resp->fallback == NULL) {
        rc = disp_svc_oom(err, errlen);
        goto out;
    }
    if (nsplits > 0) {
        resp->splits = disp_arena_alloc(a, nsplits * sizeof(*resp->splits));
        if (resp->splits == NULL) {
            rc = disp_svc_oom(err, errlen);
            goto out;
        }
    }
    if (nworkers > 0) {
        resp->workers = disp_arena_alloc(a, nworkers * sizeof(*resp->workers));
        if (resp->workers == NULL) {
            rc = disp_svc_oom(err, errlen);
            goto out;
        }
    }
    for (uint32_t k = 0; k < job->nclient; k++) {
        Sluice__SplitAssignment *m = disp_svc_assign_msg(a, job, job->client_ids[k], 0);
        if (m == NULL) {
            rc = disp_svc_oom(err, errlen);
            goto out;
        }
        resp->splits[resp->n_splits++] = m;
    }
    for (size_t i = 0; i < job->njw; i++) {
        const disp_jw_t *jw = &job->jw[i];
        int listed = 0;
        for (uint32_t k = 0; k < jw->n; k++) {
            Sluice__SplitAssignment *m = disp_svc_assign_msg(a, job, jw->ids[k], jw->worker_id);
            if (m == NULL) {
                rc = disp_svc_oom(err, errlen);
                goto out;
            }
            resp->splits[resp->n_splits++] = m;
            listed = 1;
        }
        disp_worker_t *w = disp_registry_live(&d->reg, jw->worker_id);
        if (!listed || w == NULL) {
            continue;
        }
        Sluice__WorkerEndpoint *e = disp_arena_alloc(a, sizeof(*e));
        if (e == NULL) {
            rc = disp_svc_oom(err, errlen);
            goto out;
        }
        sluice__worker_endpoint__init(e);
        e->worker_id = jw->worker_id;
        e->address = disp_arena_strdup(a, w->address);
        if (e->address == NULL) {
            rc = disp_svc_oom(err, errlen);
            goto out;
        }
        resp->workers[resp->n_workers++] = e;
    }
out:
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* ------------------------------------------------------------ AckSplits */

int disp_svc_ack_splits(disp_t *d, const Sluice__AckSplitsRequest *req,
                        Sluice__AckSplitsResponse *resp, disp_arena_t *a, int64_t now_ms, char *err,
                        size_t errlen)
{
    if (req->n_split_ids > DISP_MAX_IDS_PER_CALL ||
        req->n_retry_split_ids > DISP_MAX_IDS_PER_CALL ||
        req->n_received_split_ids > DISP_MAX_IDS_PER_CALL ||
        req->n_skipped > DISP_MAX_IDS_PER_CALL) {
        return sl_err(err, errlen, -EINVAL,
                      "split_ids/retry_split_ids/received_split_ids/skipped: more than %d "
                      "entries",
                      DISP_MAX_IDS_PER_CALL);
    }
    disp_job_t *job = NULL;
    uint64_t seq = 0;
    pthread_mutex_lock(&d->mu);
    int rc = disp_svc_find_open_job(d, req->job_id, a->tenant, req->job_secret, &job, err, errlen);
    if (rc == 0) {
        job->last_client_ms = now_ms;
        for (size_t i = 0; i < req->n_skipped; i++) {
            if (req->skipped[i] != NULL && req->skipped[i]->count > 0) {
                disp_jobs_add_skips(job, req->skipped[i]->reason, req->skipped[i]->count);
            }
        }
        /* Durable before applied and answered; the client retries the
         * whole call (acks are idempotent). */
        if (disp_jstate_acked(d, job, req->split_ids, req->n_split_ids) != 0) {
            rc = sl_err(err, errlen, -EIO, "journal write failed");
            goto out;
        }
        /* Acks first: a split both acked and retried is done. */
        (void)disp_jobs_ack(&d->jobs, job, req->split_ids, req->n_split_ids, now_ms);
        /* Then received (not journaled: after a restart such a split is
         * PENDING, runs again and the client drops the copies), before the
         * retry, so a received split is not taken back with its worker. */
        (void)disp_jobs_received(&d->jobs, job, req->received_split_ids, req->n_received_split_ids,
                                 now_ms);
        size_t nretry = disp_jobs_retry(&d->jobs, job, req->retry_split_ids, req->n_retry_split_ids,
                                        req->retry_worker_id, now_ms);
        if (req->retry_worker_id != 0) {
            SL_INFO("job %" PRIu64 ": client's stream to worker %" PRIu64 " broke: %zu split(s) "
                    "re-queued",
                    job->id, req->retry_worker_id, nretry);
        } else if (nretry > 0) {
            SL_INFO("job %" PRIu64 ": client asked to retry %zu split(s)", job->id, nretry);
        }
        resp->version = SL_PROTOCOL_VERSION;
        resp->finished = job->state == DISP_JOB_FINISHED;
    }
out:
    seq = disp_jstate_seq(d);
    pthread_mutex_unlock(&d->mu);
    if (rc == 0 && disp_jstate_wait(d, seq) != 0) {
        rc = sl_err(err, errlen, -EIO, "journal write failed");
    }
    return rc;
}

/* ------------------------------------------------------------ ReportRates */

int disp_svc_report_rates(disp_t *d, const Sluice__ReportRatesRequest *req,
                          Sluice__ReportRatesResponse *resp, disp_arena_t *a, int64_t now_ms,
                          char *err, size_t errlen)
{
    disp_job_t *job = NULL;
    pthread_mutex_lock(&d->mu);
    int rc = disp_svc_find_open_job(d, req->job_id, a->tenant, req->job_secret, &job, err, errlen);
    if (rc == 0) {
        disp_rates_t *r = &job->rates;
        job->last_client_ms = now_ms;
        r->have = 1;
        r->at_ms = now_ms;
        r->delivered_per_sec = disp_svc_finite(req->delivered_per_sec);
        r->wait_fraction = disp_svc_finite(req->wait_fraction);
        r->cpu_fraction = disp_svc_finite(req->cpu_fraction);
        r->cpu_budget = disp_svc_finite(req->cpu_budget);
        r->recv_cpu_sec_per_byte = disp_svc_finite(req->recv_cpu_sec_per_byte);
        r->step_load = disp_svc_finite(req->step_load);
        r->step_imbalance = disp_svc_finite(req->step_imbalance);
        r->step_imbalance_max = disp_svc_finite(req->step_imbalance_max);
        r->pack_fill = disp_svc_finite(req->pack_fill);
        r->pack_oversize = req->pack_oversize;
        if (req->n_stages > 0) {
            disp_svc_copy_stages(r->stages, &r->nstages, req->stages, req->n_stages);
        }
        disp_planner_on_rates(d, job, req, now_ms);
        resp->version = SL_PROTOCOL_VERSION;
        resp->plan = disp_svc_plan_msg(a, &job->plan); /* a re-plan reaches the client here too */
        if (resp->plan == NULL) {
            rc = disp_svc_oom(err, errlen);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* ------------------------------------------------------------ CloseJob */

int disp_svc_close_job(disp_t *d, const Sluice__CloseJobRequest *req,
                       Sluice__CloseJobResponse *resp, disp_arena_t *a, int64_t now_ms, char *err,
                       size_t errlen)
{
    int rc = 0;
    pthread_mutex_lock(&d->mu);
    disp_job_t *job = disp_jobs_find(&d->jobs, req->job_id);
    if (job == NULL) {
        rc = sl_err(err, errlen, -ENOENT, "job %" PRIu64 " not found", req->job_id);
    } else if ((rc = disp_svc_check_cap(job, a->tenant, req->job_secret, err, errlen)) != 0) {
        /* A stranger closes nothing. */
    } else {
        /* Closing a closed job is fine: a client may retry CloseJob. */
        if (disp_jstate_closed(d, job, "closed by client") != 0) {
            rc = sl_err(err, errlen, -EIO, "journal write failed");
        } else {
            disp_jobs_close(&d->jobs, job, "closed by client", now_ms);
            resp->version = SL_PROTOCOL_VERSION;
        }
    }
    uint64_t seq = disp_jstate_seq(d);
    pthread_mutex_unlock(&d->mu);
    if (rc == 0 && disp_jstate_wait(d, seq) != 0) {
        rc = sl_err(err, errlen, -EIO, "journal write failed");
    }
    return rc;
}
