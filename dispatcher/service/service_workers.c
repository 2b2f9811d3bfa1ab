/* service_workers: the workers' RPCs -- RegisterWorker and Heartbeat (its
 * progress and sent reports taken in, the reply with new assignments,
 * revocations and the jobs to forget). Every handler takes d->mu for its
 * whole state work and builds the response from arena memory. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "dispatcher/core/locality.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/planner_machines.h"
#include "dispatcher/service/service.h"
#include "dispatcher/service/service_impl.h"

static int contains(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ RegisterWorker */

int disp_svc_register_worker(disp_t *d, const Sluice__RegisterWorkerRequest *req,
                             Sluice__RegisterWorkerResponse *resp, disp_arena_t *a, int64_t now_ms,
                             char *err, size_t errlen)
{
    const char *addr = req->address != NULL ? req->address : "";
    if (a->tenant[0] != '\0') {
        /* A team's token is for its jobs: a worker would see every job. */
        return sl_err(err, errlen, -EACCES, "RegisterWorker needs the cluster token");
    }
    if (!disp_addr_ok(addr)) {
        return sl_err(err, errlen, -EINVAL, "address: required, printable HOST:PORT under %d bytes",
                      DISP_ADDR_MAX);
    }
    pthread_mutex_lock(&d->mu);
    disp_worker_t *w = NULL;
    int is_new = 0;
    int rc = disp_registry_register(&d->reg, addr, req->hostname, req->threads, req->worker_id,
                                    now_ms, &w, &is_new);
    if (rc == 0) {
        resp->worker_id = w->id;
        disp_worker_note_machine(w, req->machine_id, req->cpu_set, req->cpu_budget);
        w->cache_bytes = req->cache_bytes;
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
        return sl_err(err, errlen, rc, "too many workers (max_workers = %lld)", d->cfg.max_workers);
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

static int progress_from(const Sluice__HeartbeatRequest *req, disp_progress_t *p, disp_arena_t *a)
{
    if (refs_from(req->in_progress, req->n_in_progress, &p->in_progress, &p->n_in_progress, a) !=
            0 ||
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

/* Jobs the worker holds that are gone (unknown or closed) into
 * resp->closed_jobs: it drops their buffers and work. */
static int reply_closed(disp_t *d, const Sluice__HeartbeatRequest *req,
                        Sluice__HeartbeatResponse *resp, disp_arena_t *a)
{
    size_t nclosed = 0;
    for (size_t i = 0; i < req->n_known_jobs; i++) {
        disp_job_t *job = disp_jobs_find(&d->jobs, req->known_jobs[i]);
        nclosed += job == NULL || job->state == DISP_JOB_CLOSED;
    }
    if (nclosed == 0) {
        return 0;
    }
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
    return 0;
}

/* The reply's arrays for new job specs, assignments and revocations, sized
 * exactly (count first, then fill); *ret_revoked: the revocations' messages. */
static int reply_arrays(disp_t *d, disp_worker_t *w, const Sluice__HeartbeatRequest *req,
                        Sluice__HeartbeatResponse *resp, disp_arena_t *a,
                        Sluice__SplitAssignment **ret_revoked)
{
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
    *ret_revoked = revoked;
    return 0;
}

/* A job the worker does not know yet, as a message in the arena: its spec,
 * source, tenant's buffer limit and capability hash. NULL on ENOMEM. */
static Sluice__JobSpec *job_spec_msg(disp_t *d, const disp_job_t *job, disp_arena_t *a)
{
    Sluice__JobSpec *js = disp_arena_alloc(a, sizeof(*js));
    if (js == NULL) {
        return NULL;
    }
    sluice__job_spec__init(js);
    js->job_id = job->id;
    js->spec_json = disp_arena_strdup(a, job->spec_json != NULL ? job->spec_json : "");
    js->source_fingerprint = job->fingerprint;
    js->num_samples = job->num_samples;
    js->cache_off = job->plan.cache_off != 0;
    const sl_tenant_t *tn = sl_tenants_find(&d->tenants, job->tenant);
    js->max_buffered_bytes = tn != NULL ? tn->max_buffered_bytes : 0;
    if (job->has_cap) {
        /* The hash, never the secret: the worker can check a
         * client's secret, not produce one. */
        js->secret_sha256.data = disp_arena_alloc(a, SL_JOBCAP_HASH);
        if (js->secret_sha256.data == NULL) {
            return NULL;
        }
        memcpy(js->secret_sha256.data, job->cap_hash, SL_JOBCAP_HASH);
        js->secret_sha256.len = SL_JOBCAP_HASH;
    }
    return js->spec_json != NULL ? js : NULL;
}

/* One job's part of the reply to worker w: its spec when the worker does
 * not know the job, the assignments still to send, the revocations. */
static int reply_job(disp_t *d, disp_worker_t *w, disp_job_t *job, disp_jw_t *jw,
                     const Sluice__HeartbeatRequest *req, Sluice__HeartbeatResponse *resp,
                     disp_arena_t *a, Sluice__SplitAssignment *revoked)
{
    if (jw->n > 0 && !contains(req->known_jobs, req->n_known_jobs, job->id)) {
        Sluice__JobSpec *js = job_spec_msg(d, job, a);
        if (js == NULL) {
            return -ENOMEM;
        }
        resp->jobs[resp->n_jobs++] = js;
    }
    for (uint32_t k = 0; k < jw->n; k++) {
        if (!disp_an_to_send(jw->sent[k])) {
            continue;
        }
        Sluice__SplitAssignment *m = disp_svc_assign_msg(a, job, jw->ids[k], w->id);
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
    return 0;
}

/* Fills the heartbeat reply for w; d->mu held. */
static int heartbeat_reply(disp_t *d, disp_worker_t *w, const Sluice__HeartbeatRequest *req,
                           Sluice__HeartbeatResponse *resp, disp_arena_t *a)
{
    Sluice__SplitAssignment *revoked = NULL;
    if (reply_closed(d, req, resp, a) != 0 || reply_arrays(d, w, req, resp, a, &revoked) != 0) {
        return -ENOMEM;
    }
    /* Build everything before marking anything sent, so that running out of
     * memory half way leaves the state as it was. */
    for (size_t j = 0; j < d->jobs.n; j++) {
        disp_job_t *job = d->jobs.jobs[j];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, w->id);
        if (jw != NULL && reply_job(d, w, job, jw, req, resp, a, revoked) != 0) {
            return -ENOMEM;
        }
    }
    disp_jobs_worker_sent(&d->jobs, w);
    return 0;
}

/* The workers' prefix cache growth per job (docs/cache.md), d->mu held.
 * A job closed meanwhile counts only in the totals. */
static void add_cache(disp_t *d, disp_worker_t *w, const Sluice__HeartbeatRequest *req)
{
    for (size_t i = 0; i < req->n_job_cache; i++) {
        const Sluice__CacheStats *c = req->job_cache[i];
        const uint64_t v[8] = {c->hits,      c->misses,       c->bytes_read, c->bytes_written,
                               c->evictions, c->store_errors, c->corrupt,    c->bytes_evicted};
        for (int k = 0; k < 8; k++) {
            d->reg.cache_total[k] += v[k];
        }
        /* The hits' timings, per worker over its jobs: its read cost. */
        disp_pc_sums_t s = {(double)c->hits, (double)c->bytes_read, (double)c->read_ns,
                            c->read_bytes_sq, c->read_bytes_ns};
        (void)disp_pc_costwin_add(&w->pc_read, &s);
        disp_job_t *job = disp_jobs_find(&d->jobs, c->job_id);
        if (job != NULL) {
            disp_cache_stats_t *j = &job->cache;
            j->hits += v[0];
            j->misses += v[1];
            j->bytes_read += v[2];
            j->bytes_written += v[3];
            j->evictions += v[4];
            j->store_errors += v[5];
            j->corrupt += v[6];
            j->bytes_evicted += v[7];
        }
    }
}

/* The splits the worker ran through its prefix cache (sent, cached): it
 * holds their entries (dispatcher/core/locality.h). d->mu held. */
static void add_held(disp_t *d, const disp_worker_t *w, const Sluice__HeartbeatRequest *req)
{
    for (size_t i = 0; i < req->n_sent; i++) {
        const Sluice__SplitAssignment *s = req->sent[i];
        disp_job_t *job = s != NULL && s->cached ? disp_jobs_find(&d->jobs, s->job_id) : NULL;
        if (job != NULL && job->state != DISP_JOB_CLOSED &&
            disp_loc_note(&d->jobs, job, w->id, s->split_id) != 0) {
            SL_WARN("job %" PRIu64 ": out of memory noting worker %" PRIu64 "'s cached splits",
                    job->id, w->id);
            return;
        }
    }
}

int disp_svc_heartbeat(disp_t *d, const Sluice__HeartbeatRequest *req,
                       Sluice__HeartbeatResponse *resp, disp_arena_t *a, int64_t now_ms, char *err,
                       size_t errlen)
{
    if (a->tenant[0] != '\0') {
        return sl_err(err, errlen, -EACCES, "Heartbeat needs the cluster token");
    }
    if (req->n_known_jobs > DISP_MAX_IDS_PER_CALL || req->n_failed_jobs > DISP_MAX_IDS_PER_CALL ||
        req->n_splits_in_progress > DISP_MAX_IDS_PER_CALL ||
        req->n_in_progress > DISP_MAX_IDS_PER_CALL || req->n_sent > DISP_MAX_IDS_PER_CALL ||
        req->n_job_cache > DISP_MAX_IDS_PER_CALL) {
        return sl_err(err, errlen, -EINVAL,
                      "known_jobs/failed_jobs/splits_in_progress/in_progress/sent/job_cache: more "
                      "than %d ids",
                      DISP_MAX_IDS_PER_CALL);
    }
    /* Copies the split lists outside the mutex (jobs.c sorts them). */
    disp_progress_t prog = {.leaving = req->leaving != 0};
    if (progress_from(req, &prog, a) != 0) {
        return disp_svc_oom(err, errlen);
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
    w->load = disp_svc_finite(req->load);
    w->buffered_bytes = req->buffered_bytes;
    /* A restarted worker's counter starts again from 0. */
    d->reg.bytes_sent_total += req->bytes_sent >= w->bytes_sent ? req->bytes_sent - w->bytes_sent
                                                                : req->bytes_sent;
    w->bytes_sent = req->bytes_sent;
    add_cache(d, w, req);
    add_held(d, w, req);
    w->in_progress = (uint32_t)(req->n_splits_in_progress > UINT32_MAX ? UINT32_MAX
                                                                       : req->n_splits_in_progress);
    if (req->n_stages > 0) {
        disp_svc_copy_stages(w->stages, &w->nstages, req->stages, req->n_stages);
    }
    for (size_t i = 0; i < req->n_failed_jobs; i++) {
        disp_job_t *job = disp_jobs_find(&d->jobs, req->failed_jobs[i]);
        if (job != NULL) {
            (void)disp_jobs_worker_refused(&d->jobs, job, w->id, req->failure, now_ms);
        }
    }
    /* A job it gave back for its data server, reported again and not
     * failed: it reads again (dispatcher/core/worker_back.c). */
    disp_jobs_worker_back_all(&d->jobs, w->id, req->known_jobs, req->n_known_jobs, req->failed_jobs,
                              req->n_failed_jobs, now_ms);
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
        return disp_svc_oom(err, errlen);
    }
    return 0;
}
