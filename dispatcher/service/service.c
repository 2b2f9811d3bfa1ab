/* service: RPC handlers. Every handler takes d->mu for its whole state work,
 * builds the response from arena memory (copies, never pointers into the
 * job table) and packs after unlocking. */
#include "dispatcher/service/service.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/planner_machines.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service_ranks.h"
#include "dispatcher/core/tenants.h"

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

/* ------------------------------------------------------------ helpers */

/* Peers send doubles; /status must stay valid JSON (no NaN/Inf). */
static double finite_or_zero(double v) { return isfinite(v) ? v : 0.0; }

static void copy_stages(disp_stage_stat_t *dst, uint32_t *ret_n, Sluice__StageStat *const *src,
                        size_t n)
{
    uint32_t k = 0;
    for (size_t i = 0; i < n && k < DISP_STAGE_STATS_MAX; i++) {
        if (src[i] == NULL) {
            continue;
        }
        disp_stage_stat_t *s = &dst[k++];
        disp_text_copy(s->name, sizeof(s->name), src[i]->name);
        s->cpu_sec_per_sample = finite_or_zero(src[i]->cpu_sec_per_sample);
        s->out_bytes_per_sample = finite_or_zero(src[i]->out_bytes_per_sample);
        s->samples = src[i]->samples;
    }
    *ret_n = k;
}

static int contains(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
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
static int find_open_job(disp_t *d, uint64_t id, const char *tenant, const char *secret,
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
        return sl_err(err, errlen, -ENOENT, "job %" PRIu64 " is closed: %s", id,
                      job->close_reason);
    }
    *ret = job;
    return 0;
}

static Sluice__Plan *plan_msg(disp_arena_t *a, const disp_plan_t *p)
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
    if (m->mode == NULL || m->binding == NULL) {
        return NULL;
    }
    return m;
}

static Sluice__SplitAssignment *assign_msg(disp_arena_t *a, disp_job_t *job, uint64_t split_id,
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

static int oom(char *err, size_t errlen)
{
    return sl_err(err, errlen, -ENOMEM, "dispatcher out of memory");
}

/* ------------------------------------------------------------ RegisterWorker */

int disp_svc_register_worker(disp_t *d, const Sluice__RegisterWorkerRequest *req,
                             Sluice__RegisterWorkerResponse *resp, disp_arena_t *a,
                             int64_t now_ms, char *err, size_t errlen)
{
    const char *addr = req->address != NULL ? req->address : "";
    if (a->tenant[0] != '\0') {
        /* A team's token is for its jobs: a worker would see every job. */
        return sl_err(err, errlen, -EACCES, "RegisterWorker needs the cluster token");
    }
    if (!disp_addr_ok(addr)) {
        return sl_err(err, errlen, -EINVAL,
                      "address: required, printable HOST:PORT under %d bytes", DISP_ADDR_MAX);
    }
    pthread_mutex_lock(&d->mu);
    disp_worker_t *w = NULL;
    int is_new = 0;
    int rc = disp_registry_register(&d->reg, addr, req->hostname, req->threads, req->worker_id,
                                    now_ms, &w, &is_new);
    if (rc == 0) {
        resp->worker_id = w->id;
        disp_worker_note_machine(w, req->machine_id, req->cpu_set, req->cpu_budget);
        size_t bad = disp_worker_note_plugins(w, req->plugins, req->n_plugins);
        if (bad > 0) {
            SL_WARN("worker %" PRIu64 ": %zu of its %zu plugins ignored (malformed, or more than "
                    "%d)",
                    w->id, bad, req->n_plugins, DISP_WORKER_PLUGINS_MAX);
        }
        if (is_new) {
            SL_NOTICE("worker %" PRIu64 " registered: address \"%s\", %u threads, host \"%s\"",
                      w->id, w->address, w->threads, w->hostname);
        }
        /* New capacity: hand out what is waiting right away. */
        disp_jobs_assign_all(&d->jobs, now_ms);
    }
    pthread_mutex_unlock(&d->mu);
    if (rc == -ENOSPC) {
        return sl_err(err, errlen, rc, "too many workers (max_workers = %lld)",
                      d->cfg.max_workers);
    }
    if (rc != 0) {
        return sl_err(err, errlen, rc, "register failed: %s", strerror(-rc));
    }
    resp->version = SL_PROTOCOL_VERSION;
    resp->heartbeat_ms = (uint32_t)d->cfg.heartbeat_ms;
    return 0;
}

/* ------------------------------------------------------------ Heartbeat */

/* Job-qualified split lists of a heartbeat, copied into the arena. */
static int refs_from(Sluice__SplitAssignment *const *src, size_t n, disp_split_ref_t **ret,
                     size_t *ret_n, disp_arena_t *a)
{
    *ret = NULL;
    *ret_n = 0;
    if (n == 0) {
        return 0;
    }
    disp_split_ref_t *refs = disp_arena_alloc(a, n * sizeof(*refs));
    if (refs == NULL) {
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] != NULL) {
            refs[k].job_id = src[i]->job_id;
            refs[k].split_id = src[i]->split_id;
            refs[k].assignment = src[i]->assignment;
            k++;
        }
    }
    *ret = refs;
    *ret_n = k;
    return 0;
}

static int progress_from(const Sluice__HeartbeatRequest *req, disp_progress_t *p,
                         disp_arena_t *a)
{
    if (refs_from(req->in_progress, req->n_in_progress, &p->in_progress, &p->n_in_progress,
                  a) != 0 ||
        refs_from(req->sent, req->n_sent, &p->sent, &p->n_sent, a) != 0) {
        return -ENOMEM;
    }
    if (req->n_splits_in_progress > 0) {
        p->legacy_ids = disp_arena_alloc(a, req->n_splits_in_progress * sizeof(uint64_t));
        if (p->legacy_ids == NULL) {
            return -ENOMEM;
        }
        memcpy(p->legacy_ids, req->splits_in_progress,
               req->n_splits_in_progress * sizeof(uint64_t));
        p->n_legacy = req->n_splits_in_progress;
    }
    return 0;
}

/* Fills the heartbeat reply for w; d->mu held. */
static int heartbeat_reply(disp_t *d, disp_worker_t *w, const Sluice__HeartbeatRequest *req,
                           Sluice__HeartbeatResponse *resp, disp_arena_t *a)
{
    /* Jobs the worker holds that are gone: drop their buffers and work. */
    size_t nclosed = 0;
    for (size_t i = 0; i < req->n_known_jobs; i++) {
        disp_job_t *job = disp_jobs_find(&d->jobs, req->known_jobs[i]);
        nclosed += job == NULL || job->state == DISP_JOB_CLOSED;
    }
    /* Count first, then fill: arrays are sized exactly. */
    size_t nspecs = 0;
    size_t nassign = 0;
    size_t nrevoked = 0;
    for (size_t j = 0; j < d->jobs.n; j++) {
        disp_job_t *job = d->jobs.jobs[j];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, w->id);
        if (jw == NULL) {
            continue;
        }
        for (uint32_t k = 0; k < jw->n; k++) {
            nassign += disp_an_to_send(jw->sent[k]);
        }
        nspecs += jw->n > 0 && !contains(req->known_jobs, req->n_known_jobs, job->id);
        nrevoked += jw->nrevoked;
    }
    if (nclosed > 0) {
        resp->closed_jobs = disp_arena_alloc(a, nclosed * sizeof(*resp->closed_jobs));
        if (resp->closed_jobs == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < req->n_known_jobs; i++) {
            disp_job_t *job = disp_jobs_find(&d->jobs, req->known_jobs[i]);
            if (job == NULL || job->state == DISP_JOB_CLOSED) {
                resp->closed_jobs[resp->n_closed_jobs++] = req->known_jobs[i];
            }
        }
    }
    if (nspecs > 0) {
        resp->jobs = disp_arena_alloc(a, nspecs * sizeof(*resp->jobs));
    }
    if (nassign > 0) {
        resp->assign = disp_arena_alloc(a, nassign * sizeof(*resp->assign));
    }
    Sluice__SplitAssignment *revoked = NULL;
    if (nrevoked > 0) {
        resp->revoked = disp_arena_alloc(a, nrevoked * sizeof(*resp->revoked));
        revoked = disp_arena_alloc(a, nrevoked * sizeof(*revoked));
    }
    if ((nspecs > 0 && resp->jobs == NULL) || (nassign > 0 && resp->assign == NULL) ||
        (nrevoked > 0 && (resp->revoked == NULL || revoked == NULL))) {
        return -ENOMEM;
    }
    /* Build everything before marking anything sent, so that running out of
     * memory half way leaves the state as it was. */
    for (size_t j = 0; j < d->jobs.n; j++) {
        disp_job_t *job = d->jobs.jobs[j];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, w->id);
        if (jw == NULL) {
            continue;
        }
        if (jw->n > 0 && !contains(req->known_jobs, req->n_known_jobs, job->id)) {
            Sluice__JobSpec *js = disp_arena_alloc(a, sizeof(*js));
            if (js == NULL) {
                return -ENOMEM;
            }
            sluice__job_spec__init(js);
            js->job_id = job->id;
            js->spec_json = disp_arena_strdup(a, job->spec_json != NULL ? job->spec_json : "");
            js->source_fingerprint = job->fingerprint;
            js->num_samples = job->num_samples;
            const sl_tenant_t *tn = sl_tenants_find(&d->tenants, job->tenant);
            js->max_buffered_bytes = tn != NULL ? tn->max_buffered_bytes : 0;
            if (job->has_cap) {
                /* The hash, never the secret: the worker can check a
                 * client's secret, not produce one. */
                js->secret_sha256.data = disp_arena_alloc(a, SL_JOBCAP_HASH);
                if (js->secret_sha256.data == NULL) {
                    return -ENOMEM;
                }
                memcpy(js->secret_sha256.data, job->cap_hash, SL_JOBCAP_HASH);
                js->secret_sha256.len = SL_JOBCAP_HASH;
            }
            if (js->spec_json == NULL) {
                return -ENOMEM;
            }
            resp->jobs[resp->n_jobs++] = js;
        }
        for (uint32_t k = 0; k < jw->n; k++) {
            if (!disp_an_to_send(jw->sent[k])) {
                continue;
            }
            Sluice__SplitAssignment *m = assign_msg(a, job, jw->ids[k], w->id);
            if (m == NULL) {
                return -ENOMEM;
            }
            m->assignment = jw->aid[k];
            resp->assign[resp->n_assign++] = m;
        }
        /* Job-qualified: split ids repeat across jobs (revoked_splits, which
         * could not say which job, is no longer sent). */
        for (uint32_t k = 0; k < jw->nrevoked; k++) {
            Sluice__SplitAssignment *m = &revoked[resp->n_revoked];
            sluice__split_assignment__init(m);
            m->job_id = job->id;
            m->split_id = jw->revoked[k];
            m->worker_id = w->id;
            resp->revoked[resp->n_revoked++] = m;
        }
    }
    disp_jobs_worker_sent(&d->jobs, w);
    return 0;
}

int disp_svc_heartbeat(disp_t *d, const Sluice__HeartbeatRequest *req,
                       Sluice__HeartbeatResponse *resp, disp_arena_t *a, int64_t now_ms,
                       char *err, size_t errlen)
{
    if (a->tenant[0] != '\0') {
        return sl_err(err, errlen, -EACCES, "Heartbeat needs the cluster token");
    }
    if (req->n_known_jobs > DISP_MAX_IDS_PER_CALL || req->n_failed_jobs > DISP_MAX_IDS_PER_CALL ||
        req->n_splits_in_progress > DISP_MAX_IDS_PER_CALL ||
        req->n_in_progress > DISP_MAX_IDS_PER_CALL || req->n_sent > DISP_MAX_IDS_PER_CALL) {
        return sl_err(err, errlen, -EINVAL,
                      "known_jobs/failed_jobs/splits_in_progress/in_progress/sent: more than %d "
                      "ids",
                      DISP_MAX_IDS_PER_CALL);
    }
    /* Copies the split lists outside the mutex (jobs.c sorts them). */
    disp_progress_t prog = {.leaving = req->leaving != 0};
    if (progress_from(req, &prog, a) != 0) {
        return oom(err, errlen);
    }
    resp->version = SL_PROTOCOL_VERSION;
    pthread_mutex_lock(&d->mu);
    disp_worker_t *w = disp_registry_live(&d->reg, req->worker_id);
    if (w == NULL) {
        pthread_mutex_unlock(&d->mu);
        resp->known = 0; /* lost or never registered: register again */
        SL_INFO("heartbeat from unknown worker %" PRIu64 ": told to register", req->worker_id);
        return 0;
    }
    resp->known = 1;
    w->last_heartbeat_ms = now_ms;
    if (req->leaving && !w->leaving) {
        w->leaving = 1;
        SL_NOTICE("worker %" PRIu64 " (%s) is leaving: no new splits; its unstarted ones are "
                  "re-queued",
                  w->id, w->address);
    }
    w->load = finite_or_zero(req->load);
    w->buffered_bytes = req->buffered_bytes;
    /* A restarted worker's counter starts again from 0. */
    d->reg.bytes_sent_total += req->bytes_sent >= w->bytes_sent ? req->bytes_sent - w->bytes_sent
                                                                  : req->bytes_sent;
    w->bytes_sent = req->bytes_sent;
    w->in_progress = (uint32_t)(req->n_splits_in_progress > UINT32_MAX
                                    ? UINT32_MAX
                                    : req->n_splits_in_progress);
    if (req->n_stages > 0) {
        copy_stages(w->stages, &w->nstages, req->stages, req->n_stages);
    }
    for (size_t i = 0; i < req->n_failed_jobs; i++) {
        disp_job_t *job = disp_jobs_find(&d->jobs, req->failed_jobs[i]);
        if (job != NULL) {
            (void)disp_jobs_worker_refused(&d->jobs, job, w->id, req->failure, now_ms);
        }
    }
    size_t nback = disp_jobs_worker_progress(&d->jobs, w, &prog, now_ms);
    if (nback > 0) {
        SL_INFO("worker %" PRIu64 ": %zu split(s) it no longer holds (dropped, refused or never "
                "received) re-queued",
                w->id, nback);
    }
    if (w->leaving && prog.n_in_progress == 0 && prog.n_legacy == 0) {
        /* Drained: what it sent is the client's to acknowledge; the rest
         * (nothing, normally) goes back at once, not after worker_timeout. */
        (void)disp_jobs_worker_left(&d->jobs, w->id, now_ms);
        disp_registry_leave(&d->reg, w, now_ms);
        SL_NOTICE("worker %" PRIu64 " (%s) left", w->id, w->address);
    }
    int rc = heartbeat_reply(d, w, req, resp, a);
    pthread_mutex_unlock(&d->mu);
    if (rc != 0) {
        return oom(err, errlen);
    }
    return 0;
}

/* ------------------------------------------------------------ SubmitJob */

int disp_svc_submit_job(disp_t *d, const Sluice__SubmitJobRequest *req,
                        Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                        char *err, size_t errlen)
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
    if (disp_costs_check(req->sample_costs, req->n_sample_costs, req->num_samples, err,
                         errlen) != 0) {
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
            return sl_err(err, errlen, -EINVAL,
                          "job_secret: %d..%d printable non-space bytes", SL_JOBCAP_MIN,
                          SL_JOBCAP_MAX);
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
                  id, job->spec_name, job->num_samples, job->epochs, job->nsplits,
                  job->plan.mode, job->plan.split, job->plan.nunits, job->plan.local_share,
                  job->client_id);
    }
    uint64_t seq = disp_jstate_seq(d);
    pthread_mutex_unlock(&d->mu);
    if (rc == 0 && disp_jstate_wait(d, seq) != 0) {
        disp_drop_job(d, id, "journal write failed", now_ms);
        rc = sl_err(err, errlen, -EIO, "journal write failed: job not accepted");
    }
    if (rc == -ENOMEM) {
        return oom(err, errlen);
    }
    if (rc != 0) {
        return rc; /* err: the parser's or the limit's message, verbatim */
    }
    resp->version = SL_PROTOCOL_VERSION;
    resp->job_id = id;
    resp->first_epoch = req->first_epoch; /* the job's, once accepted */
    resp->plan = plan_msg(a, &plan);
    resp->explain = explain;
    resp->job_secret = disp_arena_strdup(a, secret);
    if (resp->plan == NULL || resp->job_secret == NULL) {
        return oom(err, errlen);
    }
    return 0;
}

/* ------------------------------------------------------------ GetAssignment */

int disp_svc_get_assignment(disp_t *d, const Sluice__GetAssignmentRequest *req,
                            Sluice__GetAssignmentResponse *resp, disp_arena_t *a,
                            int64_t now_ms, char *err, size_t errlen)
{
    disp_job_t *job = NULL;
    pthread_mutex_lock(&d->mu);
    int rc = find_open_job(d, req->job_id, a->tenant, req->job_secret, &job, err, errlen);
    if (rc != 0) {
        goto out;
    }
    job->last_client_ms = now_ms;
    if (req->idle) {
        (void)disp_jobs_client_idle(&d->jobs, job, now_ms); /* assigns too */
    } else {
        disp_jobs_assign(&d->jobs, job, now_ms);
    }
    resp->version = SL_PROTOCOL_VERSION;
    resp->plan = plan_msg(a, &job->plan);
    resp->failure = disp_arena_strdup(a, "");
    resp->fallback = disp_arena_strdup(a, job->fallback);
    resp->finished = job->state == DISP_JOB_FINISHED;
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
        rc = oom(err, errlen);
        goto out;
    }
    if (nsplits > 0) {
        resp->splits = disp_arena_alloc(a, nsplits * sizeof(*resp->splits));
        if (resp->splits == NULL) {
            rc = oom(err, errlen);
            goto out;
        }
    }
    if (nworkers > 0) {
        resp->workers = disp_arena_alloc(a, nworkers * sizeof(*resp->workers));
        if (resp->workers == NULL) {
            rc = oom(err, errlen);
            goto out;
        }
    }
    for (uint32_t k = 0; k < job->nclient; k++) {
        Sluice__SplitAssignment *m = assign_msg(a, job, job->client_ids[k], 0);
        if (m == NULL) {
            rc = oom(err, errlen);
            goto out;
        }
        resp->splits[resp->n_splits++] = m;
    }
    for (size_t i = 0; i < job->njw; i++) {
        const disp_jw_t *jw = &job->jw[i];
        int listed = 0;
        for (uint32_t k = 0; k < jw->n; k++) {
            Sluice__SplitAssignment *m = assign_msg(a, job, jw->ids[k], jw->worker_id);
            if (m == NULL) {
                rc = oom(err, errlen);
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
            rc = oom(err, errlen);
            goto out;
        }
        sluice__worker_endpoint__init(e);
        e->worker_id = jw->worker_id;
        e->address = disp_arena_strdup(a, w->address);
        if (e->address == NULL) {
            rc = oom(err, errlen);
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
                        Sluice__AckSplitsResponse *resp, disp_arena_t *a, int64_t now_ms,
                        char *err, size_t errlen)
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
    int rc = find_open_job(d, req->job_id, a->tenant, req->job_secret, &job, err, errlen);
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
        (void)disp_jobs_received(&d->jobs, job, req->received_split_ids,
                                 req->n_received_split_ids, now_ms);
        size_t nretry = disp_jobs_retry(&d->jobs, job, req->retry_split_ids,
                                        req->n_retry_split_ids, req->retry_worker_id, now_ms);
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
    int rc = find_open_job(d, req->job_id, a->tenant, req->job_secret, &job, err, errlen);
    if (rc == 0) {
        disp_rates_t *r = &job->rates;
        job->last_client_ms = now_ms;
        r->have = 1;
        r->at_ms = now_ms;
        r->delivered_per_sec = finite_or_zero(req->delivered_per_sec);
        r->wait_fraction = finite_or_zero(req->wait_fraction);
        r->cpu_fraction = finite_or_zero(req->cpu_fraction);
        r->cpu_budget = finite_or_zero(req->cpu_budget);
        r->recv_cpu_sec_per_byte = finite_or_zero(req->recv_cpu_sec_per_byte);
        r->step_load = finite_or_zero(req->step_load);
        r->step_imbalance = finite_or_zero(req->step_imbalance);
        r->step_imbalance_max = finite_or_zero(req->step_imbalance_max);
        if (req->n_stages > 0) {
            copy_stages(r->stages, &r->nstages, req->stages, req->n_stages);
        }
        disp_planner_on_rates(d, job, req, now_ms);
        resp->version = SL_PROTOCOL_VERSION;
        resp->plan = plan_msg(a, &job->plan); /* a re-plan reaches the client here too */
        if (resp->plan == NULL) {
            rc = oom(err, errlen);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* ------------------------------------------------------------ CloseJob */

int disp_svc_close_job(disp_t *d, const Sluice__CloseJobRequest *req,
                       Sluice__CloseJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                       char *err, size_t errlen)
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
        int rc = sl_rpc_server_add_unary(srv, METHODS[i].method, METHODS[i].desc, METHODS[i].fn,
                                         d);
        if (rc != 0) {
            return rc;
        }
    }
    return disp_planner_service_add(d, srv); /* GetPlanContext, PlanJob */
}

Sluice__Plan *disp_svc_plan_msg(disp_arena_t *a, const disp_plan_t *p) { return plan_msg(a, p); }
