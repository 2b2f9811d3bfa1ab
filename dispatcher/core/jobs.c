/* jobs: the job table (jobs.h has the rules; jobs_impl.h says which file
 * keeps which part): submission, the client's acks, receipts and retries,
 * skip counts, close and expiry. Caller holds the dispatcher mutex. */
#include "dispatcher/core/jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "common/order/ranks.h"
#include "common/spec/mix.h"
#include "dispatcher/core/jobs_impl.h"
#include "dispatcher/planner/planner_job.h"

/* ------------------------------------------------------------ names */

const char *disp_job_state_name(disp_job_state_e s)
{
    switch (s) {
    case DISP_JOB_ACTIVE:
        return "active";
    case DISP_JOB_FINISHED:
        return "finished";
    case DISP_JOB_CLOSED:
        return "closed";
    }
    return "?";
}

/* ------------------------------------------------------------ table */

int disp_jobs_init(disp_jobs_t *js, disp_registry_t *reg, const disp_limits_t *lim,
                   uint64_t first_id)
{
    memset(js, 0, sizeof(*js));
    if (lim->max_splits_per_worker == 0 || lim->max_client_splits == 0 ||
        lim->max_jobs == 0) {
        return -EINVAL;
    }
    js->lim = *lim;
    js->reg = reg;
    js->cap = (size_t)lim->max_jobs + DISP_CLOSED_KEEP;
    js->jobs = calloc(js->cap, sizeof(*js->jobs));
    if (js->jobs == NULL) {
        return -ENOMEM;
    }
    js->next_id = first_id != 0 ? first_id : 1;
    return 0;
}

/* Frees everything that makes a job open: epochs, owner lists. */
static void job_release(disp_jobs_t *js, disp_job_t *job)
{
    for (size_t i = 0; i < job->njw; i++) {
        disp_jw_t *jw = &job->jw[i];
        disp_worker_t *w = disp_registry_find(js->reg, jw->worker_id);
        if (w != NULL) {
            w->outstanding = w->outstanding >= jw->n ? w->outstanding - jw->n : 0;
        }
        disp_jw_free(jw);
    }
    free(job->jw);
    job->jw = NULL;
    job->njw = job->capjw = 0;
    for (uint32_t k = 0; k < job->nep; k++) {
        disp_epoch_free(&job->ep[k]);
    }
    job->nep = 0;
    free(job->client_ids);
    job->client_ids = NULL;
    job->nclient = 0;
    free(job->spec_json);
    job->spec_json = NULL;
    free(job->costs); /* only live epochs' boundaries need them */
    job->costs = NULL;
}

static void job_free(disp_jobs_t *js, disp_job_t *job)
{
    if (job == NULL) {
        return;
    }
    job_release(js, job);
    disp_pjob_free(job->planner);
    free(job->plugins);
    sl_spec_clear(&job->spec);
    free(job);
}

void disp_jobs_destroy(disp_jobs_t *js)
{
    for (size_t i = 0; i < js->n; i++) {
        job_free(js, js->jobs[i]);
    }
    free(js->jobs);
    memset(js, 0, sizeof(*js));
}

disp_job_t *disp_jobs_find(disp_jobs_t *js, uint64_t id)
{
    for (size_t i = 0; i < js->n; i++) {
        if (js->jobs[i]->id == id) {
            return js->jobs[i];
        }
    }
    return NULL;
}

static void remove_job_at(disp_jobs_t *js, size_t i)
{
    job_free(js, js->jobs[i]);
    memmove(&js->jobs[i], &js->jobs[i + 1], (js->n - i - 1) * sizeof(*js->jobs));
    js->n--;
}

/* Drops the oldest closed job other than keep; 0 if one was dropped. */
static int drop_oldest_closed(disp_jobs_t *js, const disp_job_t *keep)
{
    size_t oldest = js->n;
    for (size_t i = 0; i < js->n; i++) {
        if (js->jobs[i]->state == DISP_JOB_CLOSED && js->jobs[i] != keep &&
            (oldest == js->n || js->jobs[i]->closed_ms < js->jobs[oldest]->closed_ms)) {
            oldest = i;
        }
    }
    if (oldest == js->n) {
        return -ENOENT;
    }
    remove_job_at(js, oldest);
    return 0;
}

/* ------------------------------------------------------------ submit */

/* Room for one more open job, and for one more of this client's. */
static int check_room(const disp_jobs_t *js, const char *client_id, char *err, size_t errlen)
{
    if (js->nopen >= js->lim.max_jobs) {
        return sl_err(err, errlen, -ENOSPC, "too many open jobs (max_jobs = %u)",
                      js->lim.max_jobs);
    }
    if (js->lim.max_jobs_per_client == 0) {
        return 0;
    }
    /* client_id is what the client says it is: this keeps one runaway
     * client from taking every slot, max_jobs is the hard bound. */
    char cid[DISP_NAME_MAX];
    disp_text_copy(cid, sizeof(cid), client_id);
    uint32_t mine = 0;
    for (size_t i = 0; i < js->n; i++) {
        mine += js->jobs[i]->state != DISP_JOB_CLOSED && strcmp(js->jobs[i]->client_id, cid) == 0;
    }
    if (mine >= js->lim.max_jobs_per_client) {
        return sl_err(err, errlen, -ENOSPC,
                      "client \"%s\" has %u open jobs (max_jobs_per_client = %u)", cid, mine,
                      js->lim.max_jobs_per_client);
    }
    return 0;
}

/* Parses the spec into job->spec and checks what the request says about the
 * data: sample count, this rank's positions (job->positions), sample costs. */
static int parse_job(disp_job_t *job, const disp_submit_t *req, const char *name, char *err,
                     size_t errlen)
{
    int rc = sl_spec_parse(name, req->spec_json != NULL ? req->spec_json : "", req->spec_len,
                           &job->spec, err, errlen);
    if (rc != 0) {
        return rc; /* the parser's message, verbatim */
    }
    if (req->num_samples == 0) {
        return sl_err(err, errlen, -EINVAL,
                      "num_samples: must be > 0 (the client indexes its source first)");
    }
    if (req->first_epoch > DISP_MAX_EPOCHS - job->spec.epochs) {
        return sl_err(err, errlen, -EINVAL,
                      "first_epoch: %" PRIu64 " + %u epochs goes beyond epoch %llu",
                      req->first_epoch, job->spec.epochs, DISP_MAX_EPOCHS);
    }
    rc = sl_resume_check(&job->spec, req->num_samples, err, errlen);
    if (rc == 0) { /* a mix: its blend needs the sizes the client found */
        rc = sl_spec_mix_check(&job->spec, req->num_samples, err, errlen);
    }
    if (rc < 0) {
        return rc;
    }
    if (disp_job_plugins_new(&job->spec, &job->plugins) < 0) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    /* Multi-rank: the epoch is this rank's share (common/order/ranks.h). */
    job->positions = sl_spec_positions(&job->spec, req->num_samples);
    if (job->positions == 0) {
        return sl_err(err, errlen, -EINVAL,
                      "world_size: %u ranks and %" PRIu64 " samples leave rank %u nothing "
                      "(rank_padding \"drop\"; use \"pad\")",
                      job->spec.world_size, req->num_samples, job->spec.rank);
    }
    return disp_costs_check(req->costs, req->costs != NULL ? req->ncosts : 0, req->num_samples,
                            err, errlen);
}

/* job->split_size and nsplits for job->positions, within the per-epoch
 * bound and the split budget over all jobs. */
static int size_splits(const disp_jobs_t *js, disp_job_t *job, uint64_t num_samples, char *err,
                       size_t errlen)
{
    uint64_t positions = job->positions;
    uint64_t ss = js->lim.split_size != 0
                      ? js->lim.split_size
                      : disp_split_size_auto(positions, js->reg->nlive,
                                             js->lim.max_splits_per_worker);
    uint64_t nsplits = positions / ss + (positions % ss != 0);
    if (nsplits > DISP_MAX_SPLITS_PER_EPOCH) {
        return sl_err(err, errlen, -EINVAL,
                      "num_samples: %" PRIu64 " samples make %" PRIu64 " splits of %" PRIu64
                      ", more than %u per epoch (raise split_size)",
                      num_samples, nsplits, ss, DISP_MAX_SPLITS_PER_EPOCH);
    }
    if (js->split_slots + 2 * nsplits > DISP_SPLIT_BUDGET) {
        return sl_err(err, errlen, -ENOSPC,
                      "too many live splits over all jobs (%" PRIu64 " in use, %" PRIu64
                      " asked, budget %llu)",
                      js->split_slots, 2 * nsplits, (unsigned long long)DISP_SPLIT_BUDGET);
    }
    job->split_size = (uint32_t)ss;
    job->nsplits = (uint32_t)nsplits;
    return 0;
}

/* Keeps a copy of the submitted sample costs in job->costs when they are to
 * cut the splits: a single consumer, within DISP_COST_BUDGET, not all zero
 * (that says nothing: cut by count). */
static int keep_costs(const disp_jobs_t *js, disp_job_t *job, const disp_submit_t *req,
                      char *err, size_t errlen)
{
    if (req->costs == NULL || req->ncosts == 0 || job->positions != req->num_samples ||
        job->spec.world_size > 1) {
        return 0;
    }
    if (js->cost_slots + req->ncosts > DISP_COST_BUDGET) {
        SL_NOTICE("sample costs of %zu samples over the budget (%" PRIu64 " of %llu held): "
                  "this job's splits are cut by count",
                  req->ncosts, js->cost_slots, (unsigned long long)DISP_COST_BUDGET);
        return 0;
    }
    double total = 0;
    for (size_t i = 0; i < req->ncosts; i++) {
        total += req->costs[i];
    }
    if (!(total > 0)) {
        return 0;
    }
    job->costs = malloc(req->ncosts * sizeof(*job->costs));
    if (job->costs == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    memcpy(job->costs, req->costs, req->ncosts * sizeof(*job->costs));
    return 0;
}

int disp_jobs_submit(disp_jobs_t *js, const disp_submit_t *req, int64_t now_ms,
                     disp_job_t **ret, char *err, size_t errlen)
{
    int rc = check_room(js, req->client_id, err, errlen);
    if (rc != 0) {
        return rc;
    }
    const char *name = req->spec_name != NULL && req->spec_name[0] != '\0' ? req->spec_name
                                                                          : "<rpc>";
    disp_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    rc = parse_job(job, req, name, err, errlen);
    if (rc == 0) {
        rc = size_splits(js, job, req->num_samples, err, errlen);
    }
    if (rc == 0 && req->plan != NULL) {
        job->plan = *req->plan; /* the planner's (it compiled the same spec) */
    } else if (rc == 0) {
        rc = disp_plan_compute(&job->spec, &job->plan, err, errlen);
        rc = rc == 0 || rc == -ENOMEM ? rc : -EINVAL;
    }
    if (rc == 0) {
        rc = keep_costs(js, job, req, err, errlen);
    }
    if (rc != 0) {
        goto fail;
    }
    job->spec_json = sl_spec_to_json(&job->spec);
    job->client_ids = calloc(js->lim.max_client_splits, sizeof(*job->client_ids));
    if (job->spec_json == NULL || job->client_ids == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory");
        goto fail;
    }
    if (js->n == js->cap && drop_oldest_closed(js, NULL) != 0) {
        rc = sl_err(err, errlen, -ENOSPC, "job table full");
        goto fail;
    }
    disp_text_copy(job->spec_name, sizeof(job->spec_name), name);
    disp_text_copy(job->client_id, sizeof(job->client_id), req->client_id);
    job->id = js->next_id++;
    job->state = DISP_JOB_ACTIVE;
    job->fingerprint = req->fingerprint;
    job->num_samples = req->num_samples;
    job->world_size = job->spec.world_size;
    job->rank = job->spec.rank;
    job->client_threads = req->client_threads;
    job->epochs = job->spec.epochs;
    job->first_epoch = req->first_epoch;
    job->next_epoch = req->first_epoch;
    job->created_ms = now_ms;
    job->last_client_ms = now_ms;
    js->jobs[js->n++] = job;
    js->nopen++;
    js->split_slots += 2 * (uint64_t)job->nsplits;
    js->cost_slots += job->costs != NULL ? job->num_samples : 0;
    disp_jobs_assign(js, job, now_ms);
    *ret = job;
    return 0;
fail:
    free(job->spec_json);
    free(job->client_ids);
    free(job->costs);
    free(job->plugins);
    sl_spec_clear(&job->spec);
    free(job);
    return rc;
}

/* ------------------------------------------------------------ acks and returns */

/* The client has every sample of ASSIGNED split id (acked or received)
 * before its worker owner reported it sent, or from an earlier owner: for
 * that worker it is done (its speed counts it) and, if revoke, nothing more
 * is needed from there. Then the split leaves its owner's list. */
static void client_has(disp_jobs_t *js, disp_job_t *job, disp_epoch_t *ep, uint32_t idx,
                       uint64_t id, int revoke, int64_t now_ms)
{
    disp_split_t *s = &ep->splits[idx];
    disp_jw_t *jw = s->owner != 0 ? disp_job_jw(job, s->owner) : NULL;
    for (uint32_t k = 0; jw != NULL && k < jw->n; k++) {
        if (jw->ids[k] == id && jw->sent[k] != DISP_AN_DELIVERED) {
            disp_jw_done(jw, ep->cost != NULL ? ep->cost[idx] : 0, now_ms);
            if (revoke) {
                disp_revoke_at_owner(job, s, id);
            }
        }
    }
    disp_detach(js, job, s, id);
}

size_t disp_jobs_ack(disp_jobs_t *js, disp_job_t *job, const uint64_t *ids, size_t n,
                     int64_t now_ms)
{
    size_t done = 0;
    if (job->state != DISP_JOB_ACTIVE) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t idx = 0;
        disp_epoch_t *ep = disp_epoch_of(job, ids[i], &idx);
        if (ep == NULL) {
            continue; /* an epoch already done, or not yet created */
        }
        disp_split_t *s = &ep->splits[idx];
        /* A PENDING one was delivered by an owner we already gave up on:
         * its queue entry is skipped when it reaches the front. A RECEIVED
         * one is on nobody's list. */
        if (s->state == DISP_SPLIT_ACKED) {
            continue;
        }
        disp_split_state_e from = (disp_split_state_e)s->state;
        if (disp_split_move(js, job, ep, idx, DISP_SPLIT_ACKED) != 0) {
            continue; /* refused (logged) */
        }
        if (from == DISP_SPLIT_ASSIGNED) {
            client_has(js, job, ep, idx, ids[i], 0, now_ms);
        }
        SL_DEBUG("job %" PRIu64 ": split %" PRIu64 " acknowledged", job->id, ids[i]);
        s->owner = 0;
        js->splits_acked_total++;
        done++;
    }
    disp_jobs_assign(js, job, now_ms);
    return done;
}

size_t disp_jobs_received(disp_jobs_t *js, disp_job_t *job, const uint64_t *ids, size_t n,
                          int64_t now_ms)
{
    size_t done = 0;
    if (job->state != DISP_JOB_ACTIVE) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t idx = 0;
        disp_epoch_t *ep = disp_epoch_of(job, ids[i], &idx);
        if (ep == NULL) {
            continue;
        }
        disp_split_t *s = &ep->splits[idx];
        /* A PENDING split holds no slot (and its queue entry must stay the
         * only one: the rings hold each split once); the client reports it
         * again if it is handed out. */
        if (s->state != DISP_SPLIT_ASSIGNED) {
            continue;
        }
        if (disp_split_move(js, job, ep, idx, DISP_SPLIT_RECEIVED) != 0) {
            continue; /* refused (logged): it stays ASSIGNED */
        }
        client_has(js, job, ep, idx, ids[i], 1, now_ms);
        s->owner = 0;
        done++;
    }
    if (done > 0) {
        disp_jobs_assign(js, job, now_ms);
    }
    return done;
}

size_t disp_jobs_requeue_received(disp_jobs_t *js, disp_job_t *job, int64_t now_ms)
{
    size_t n = 0;
    if (job->state != DISP_JOB_ACTIVE) {
        return 0;
    }
    for (uint32_t k = 0; k < job->nep; k++) {
        disp_epoch_t *ep = &job->ep[k];
        /* Last first, so they keep their order at the front of the queue. */
        for (uint32_t i = job->nsplits; ep->splits != NULL && i-- > 0;) {
            disp_split_t *s = &ep->splits[i];
            if (s->state != DISP_SPLIT_RECEIVED) {
                continue;
            }
            if (disp_split_move(js, job, ep, i, DISP_SPLIT_PENDING) != 0) {
                continue; /* refused (logged) */
            }
            s->owner = 0;
            disp_queue_return(job, ep, i);
            job->reassigned_total++;
            js->splits_reassigned_total++;
            n++;
        }
    }
    if (n > 0) {
        disp_jobs_assign(js, job, now_ms);
    }
    return n;
}

size_t disp_jobs_retry(disp_jobs_t *js, disp_job_t *job, const uint64_t *ids, size_t n,
                       uint64_t worker_id, int64_t now_ms)
{
    size_t done = 0;
    if (job->state != DISP_JOB_ACTIVE) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t idx = 0;
        disp_epoch_t *ep = disp_epoch_of(job, ids[i], &idx);
        if (ep == NULL) {
            continue;
        }
        disp_split_t *s = &ep->splits[idx];
        /* Only a worker's split can break; the client's own are its business,
         * and one that has moved to another worker is that worker's now. */
        if (s->state != DISP_SPLIT_ASSIGNED || s->owner == 0 ||
            (worker_id != 0 && s->owner != worker_id)) {
            continue;
        }
        disp_revoke_at_owner(job, s, ids[i]);
        if (disp_take_back(js, job, ep, idx) != 0) {
            continue; /* refused (logged) */
        }
        done++;
    }
    disp_jw_t *jw = worker_id != 0 ? disp_job_jw(job, worker_id) : NULL;
    if (jw != NULL) {
        done += disp_take_back_all(js, job, jw, 1);
    }
    disp_jobs_assign(js, job, now_ms);
    return done;
}

void disp_jobs_add_skips(disp_job_t *job, const char *reason, uint64_t count)
{
    if (reason == NULL || reason[0] == '\0') {
        reason = "unknown";
    }
    char clean[DISP_NAME_MAX];
    disp_text_copy(clean, sizeof(clean), reason);
    reason = clean;
    for (uint32_t i = 0; i < job->nskips; i++) {
        if (strcmp(job->skips[i].reason, reason) == 0) {
            job->skips[i].count += count;
            return;
        }
    }
    if (job->nskips < DISP_SKIP_REASONS_MAX - 1) {
        disp_skip_t *k = &job->skips[job->nskips++];
        disp_text_copy(k->reason, sizeof(k->reason), reason);
        k->count = count;
        return;
    }
    /* The last slot collects every further reason: a peer cannot grow this. */
    disp_skip_t *k = &job->skips[DISP_SKIP_REASONS_MAX - 1];
    if (job->nskips < DISP_SKIP_REASONS_MAX) {
        job->nskips = DISP_SKIP_REASONS_MAX;
        snprintf(k->reason, sizeof(k->reason), "other");
        k->count = 0;
    }
    k->count += count;
}
/* ------------------------------------------------------------ close and expiry */

void disp_jobs_close(disp_jobs_t *js, disp_job_t *job, const char *reason, int64_t now_ms)
{
    if (job->state == DISP_JOB_CLOSED) {
        return;
    }
    SL_NOTICE("job %" PRIu64 ": closed (%s)", job->id, reason);
    uint64_t ncosts = job->costs != NULL ? job->num_samples : 0;
    job_release(js, job);
    js->cost_slots -= ncosts;
    job->state = DISP_JOB_CLOSED;
    job->closed_ms = now_ms;
    snprintf(job->close_reason, sizeof(job->close_reason), "%s", reason);
    js->nopen--;
    js->split_slots -= 2 * (uint64_t)job->nsplits;
    size_t nclosed = 0;
    for (size_t i = 0; i < js->n; i++) {
        nclosed += js->jobs[i]->state == DISP_JOB_CLOSED;
    }
    if (nclosed > DISP_CLOSED_KEEP) {
        (void)drop_oldest_closed(js, job); /* the caller may still hold job */
    }
}

size_t disp_jobs_expire(disp_jobs_t *js, int64_t now_ms)
{
    size_t nclosed = 0;
    for (size_t i = 0; i < js->n;) {
        disp_job_t *job = js->jobs[i];
        if (job->state == DISP_JOB_CLOSED) {
            if (now_ms - job->closed_ms >= DISP_CLOSED_LINGER_MS) {
                remove_job_at(js, i);
                continue;
            }
        } else if (now_ms - job->last_client_ms >= js->lim.client_timeout_ms) {
            char why[96];
            snprintf(why, sizeof(why), "client silent for %" PRId64 " ms",
                     now_ms - job->last_client_ms);
            if (js->expire_hook != NULL && js->expire_hook(js->expire_hook_ctx, job, why) != 0) {
                i++; /* not journaled: stays open, retried on the next pass */
                continue;
            }
            disp_jobs_close(js, job, why, now_ms);
            nclosed++;
            /* close may have dropped an older closed job before index i:
             * restart the scan rather than track shifted indices. */
            i = 0;
            continue;
        }
        i++;
    }
    return nclosed;
}

