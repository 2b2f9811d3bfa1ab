/* service_ranks: see service_ranks.h. */
#include "dispatcher/service/service_ranks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/core/ranks.h"

/* The re-attach reply: the part's id and plan, and what is acknowledged.
 * Called with d->mu held. */
static int reattach_reply(disp_job_t *job, Sluice__SubmitJobResponse *resp, disp_arena_t *a,
                          char *err, size_t errlen)
{
    disp_range_t *r = malloc(DISP_RANKS_ACKED_MAX * sizeof(*r));
    if (r == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int n = disp_ranks_acked(job, r, DISP_RANKS_ACKED_MAX);
    int rc = 0;
    if (n < 0) {
        rc = sl_err(err, errlen, -ENOBUFS,
                    "job %" PRIu64 ": more than %d acknowledged ranges to resume from", job->id,
                    DISP_RANKS_ACKED_MAX);
        goto out;
    }
    resp->version = SL_PROTOCOL_VERSION;
    resp->job_id = job->id;
    resp->first_epoch = job->first_epoch;
    resp->plan = disp_svc_plan_msg(a, &job->plan);
    resp->resumed = 1;
    resp->resume_epoch = disp_ranks_resume_epoch(job);
    resp->n_acked = (size_t)n;
    resp->acked = n > 0 ? disp_arena_alloc(a, (size_t)n * sizeof(*resp->acked)) : NULL;
    Sluice__SplitAssignment *m = n > 0 ? disp_arena_alloc(a, (size_t)n * sizeof(*m)) : NULL;
    if (resp->plan == NULL || (n > 0 && (resp->acked == NULL || m == NULL))) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        sluice__split_assignment__init(&m[i]);
        m[i].job_id = job->id;
        m[i].epoch = r[i].epoch;
        m[i].begin = r[i].begin;
        m[i].end = r[i].end;
        resp->acked[i] = &m[i];
    }
out:
    free(r);
    return rc;
}

/* Joining a job by name needs its capability (docs/protocol.md "Job
 * capabilities"): every open part of the group must have been submitted
 * with this secret. Checked before anything about the group (its spec, its
 * progress) is compared or answered. Called with d->mu held. */
static int group_cap_check(disp_t *d, const char *tenant, const char *name, const char *secret,
                           char *err, size_t errlen)
{
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state == DISP_JOB_CLOSED || job->world_size <= 1 ||
            strcmp(job->group, name) != 0) {
            continue;
        }
        if (disp_svc_check_cap(job, tenant, secret, err, errlen) != 0) {
            return sl_err(err, errlen, -EACCES,
                          "job \"%s\": wrong or missing job_secret to join it", name);
        }
    }
    return 0;
}

/* The request's own checks: a job name, a rank inside its world, a secret
 * the ranks share. */
static int rank_request_check(const Sluice__SubmitJobRequest *req, const char *name, char *err,
                              size_t errlen)
{
    if (name[0] == '\0' || strlen(name) >= DISP_NAME_MAX) {
        return sl_err(err, errlen, -EINVAL,
                      "job_name: required with world_size > 1, at most %d bytes",
                      DISP_NAME_MAX - 1);
    }
    if (req->world_size > SL_SPEC_WORLD_MAX || req->rank >= req->world_size) {
        return sl_err(err, errlen, -EINVAL,
                      "rank %u of world_size %u: need rank < world_size <= %d", req->rank,
                      req->world_size, SL_SPEC_WORLD_MAX);
    }
    if (!sl_jobcap_valid(req->job_secret)) {
        /* The ranks find each other by name: without a secret they share,
         * anyone who knows (or guesses) the name could join. */
        return sl_err(err, errlen, -EACCES,
                      "job_secret: required with world_size > 1 (%d..%d printable bytes, the "
                      "same on every rank)",
                      SL_JOBCAP_MIN, SL_JOBCAP_MAX);
    }
    return 0;
}

/* The rank's spec, parsed (without d->mu) and agreeing with the request's
 * rank and world size; the caller clears and frees *ret. */
static int rank_spec_parse(const Sluice__SubmitJobRequest *req, sl_spec_t **ret, char *err,
                           size_t errlen)
{
    sl_spec_t *spec = malloc(sizeof(*spec));
    if (spec == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    const char *json = req->spec_json != NULL ? req->spec_json : "";
    int rc = sl_spec_parse(req->spec_name != NULL && req->spec_name[0] != '\0' ? req->spec_name
                                                                               : "<rpc>",
                           json, strlen(json), spec, err, errlen);
    if (rc == 0 && (spec->world_size != req->world_size || spec->rank != req->rank)) {
        rc = sl_err(err, errlen, -EINVAL,
                    "world_size: the spec says rank %u of %u, the request rank %u of %u",
                    spec->rank, spec->world_size, req->rank, req->world_size);
    }
    if (rc < 0) {
        sl_spec_clear(spec);
        free(spec);
        return rc; /* the parser's -EINVAL, -E2BIG or -ENOMEM */
    }
    *ret = spec;
    return 0;
}

/* d->mu held. May the rank join job `name` (its capability, then the
 * group's agreement on spec and source), and is its part already open
 * (*ret_job; NULL: a new part)? */
static int rank_part_find(disp_t *d, const char *tenant, const Sluice__SubmitJobRequest *req,
                          const char *name, const sl_spec_t *spec, disp_job_t **ret_job, char *err,
                          size_t errlen)
{
    int rc = group_cap_check(d, tenant, name, req->job_secret, err, errlen);
    if (rc != 0) {
        return rc;
    }
    rc = disp_ranks_check(&d->jobs, name, spec, req->num_samples, req->source_fingerprint, err,
                          errlen);
    disp_job_t *job = rc == 0 ? disp_ranks_find(&d->jobs, name, req->world_size, req->rank) : NULL;
    if (rc < 0) {
        /* A well-formed request the job's other ranks contradict: a failed
         * precondition, not a bad argument. */
        return rc == -ENOMEM ? rc : -ESTALE;
    }
    if (job != NULL && job->first_epoch != req->first_epoch) {
        /* Another epoch's part of this rank (an outer per-epoch loop whose
         * previous job is still open): not the same work to resume. */
        return sl_err(err, errlen, -ESTALE,
                      "first_epoch: rank %u of \"%s\" is open from epoch %" PRIu64 ", not %" PRIu64
                      " (close it first, or use another job name)",
                      req->rank, name, job->first_epoch, req->first_epoch);
    }
    *ret_job = job;
    return 0;
}

/* d->mu held: the rank's open part re-attached -- what its old process held
 * or received but never took goes back to the queue -- and the reply. */
static int rank_reattach(disp_t *d, disp_job_t *job, const Sluice__SubmitJobRequest *req,
                         Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                         char *err, size_t errlen)
{
    size_t back = disp_ranks_reattach(&d->jobs, job, now_ms);
    /* What the old process received but its loop never took. */
    back += disp_jobs_requeue_received(&d->jobs, job, now_ms);
    int rc = reattach_reply(job, resp, a, err, errlen);
    if (rc == 0) {
        /* The caller's own secret: checked equal to the part's above. */
        resp->job_secret = disp_arena_strdup(a, req->job_secret);
        rc = resp->job_secret == NULL ? sl_err(err, errlen, -ENOMEM, "out of memory") : 0;
    }
    SL_NOTICE("job %" PRIu64 ": rank %u of \"%s\" re-attached (resumes at epoch %" PRIu64
              ", %zu split(s) re-queued)",
              job->id, job->rank, job->group, resp->resume_epoch, back);
    return rc;
}

/* A new part: the single-consumer path on the rank's spec (which carries
 * rank and world_size), then tagged and made durable before it is
 * answered. Two processes submitting the same rank at once could both
 * create a part; ranks are unique processes. Takes d->mu. */
static int rank_new_part(disp_t *d, const Sluice__SubmitJobRequest *req, const char *name,
                         Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                         char *err, size_t errlen)
{
    Sluice__SubmitJobRequest one = *req;
    one.world_size = 1;
    int rc = disp_svc_submit_job(d, &one, resp, a, now_ms, err, errlen);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&d->mu);
    disp_job_t *job = disp_jobs_find(&d->jobs, resp->job_id);
    if (job != NULL) {
        disp_ranks_tag(job, name);
        /* Durable before answered, or a restarted dispatcher would not
         * know the part when the rank re-attaches. Not durable: the
         * part goes (a crash now leaves an untagged part that times
         * out; the rank's retry makes a new one). */
        if (disp_jstate_rank(d, job) != 0) {
            (void)disp_jstate_closed(d, job, "journal write failed");
            disp_jobs_close(&d->jobs, job, "journal write failed", now_ms);
            rc = sl_err(err, errlen, -EIO, "journal write failed: job not accepted");
        }
    }
    uint64_t seq = disp_jstate_seq(d);
    pthread_mutex_unlock(&d->mu);
    if (rc == 0 && disp_jstate_wait(d, seq) != 0) {
        disp_drop_job(d, resp->job_id, "journal write failed", now_ms);
        rc = sl_err(err, errlen, -EIO, "journal write failed: job not accepted");
    }
    if (rc != 0) {
        return rc;
    }
    SL_NOTICE("job %" PRIu64 " is rank %u of %u of \"%s\"", resp->job_id, req->rank,
              req->world_size, name);
    char open_secret[65];
    sl_jobcap_derive("", name, open_secret);
    if (strcmp(open_secret, req->job_secret) == 0) {
        /* Its ranks share no key: the capability is only as secret as the
         * name (docs/protocol.md "Job capabilities"). /status: "secret". */
        SL_WARN("job %" PRIu64 ": \"%s\" has no secret: anyone who knows its name can join it "
                "and take its samples (give the cluster a token, or the ranks SLUICE_JOB_SECRET)",
                resp->job_id, name);
    }
    return 0;
}

int disp_svc_submit_rank(disp_t *d, const Sluice__SubmitJobRequest *req,
                         Sluice__SubmitJobResponse *resp, disp_arena_t *a, int64_t now_ms,
                         char *err, size_t errlen)
{
    const char *name = req->job_name != NULL ? req->job_name : "";
    int rc = rank_request_check(req, name, err, errlen);
    if (rc != 0) {
        return rc;
    }
    sl_spec_t *spec = NULL;
    rc = rank_spec_parse(req, &spec, err, errlen);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&d->mu);
    disp_job_t *job = NULL;
    rc = rank_part_find(d, a->tenant, req, name, spec, &job, err, errlen);
    sl_spec_clear(spec);
    free(spec);
    if (rc == 0 && job != NULL) {
        rc = rank_reattach(d, job, req, resp, a, now_ms, err, errlen);
    }
    pthread_mutex_unlock(&d->mu);
    if (rc != 0 || job != NULL) {
        return rc;
    }
    return rank_new_part(d, req, name, resp, a, now_ms, err, errlen);
}
