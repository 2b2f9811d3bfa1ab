/* assign: who gets a split (the rules are jobs.h's). A job's per-worker
 * records (disp_jw_t) and the speeds measured on them, giving a PENDING
 * split to an owner, taking one back to the front of its queue, revoking
 * it at a worker, the pick of the worker predicted to finish first, and
 * stealing at the tail of an epoch. Caller holds the dispatcher mutex. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "dispatcher/core/jobs_impl.h"
#include "dispatcher/core/locality.h"

/* ------------------------------------------------------------ per-worker records */

disp_jw_t *disp_job_jw(disp_job_t *job, uint64_t worker_id)
{
    for (size_t i = 0; i < job->njw; i++) {
        if (job->jw[i].worker_id == worker_id) {
            return &job->jw[i];
        }
    }
    return NULL;
}

disp_jw_t *disp_jw_create(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id)
{
    disp_jw_t *jw = disp_job_jw(job, worker_id);
    if (jw != NULL) {
        return jw;
    }
    if (job->njw == job->capjw) {
        size_t ncap = job->capjw == 0 ? 4 : job->capjw * 2;
        disp_jw_t *n = realloc(job->jw, ncap * sizeof(*n));
        if (n == NULL) {
            return NULL;
        }
        job->jw = n;
        job->capjw = ncap;
    }
    jw = &job->jw[job->njw];
    memset(jw, 0, sizeof(*jw));
    jw->worker_id = worker_id;
    /* max_splits_per_worker active ones plus as many delivered ones
     * waiting for the client's ack (see give). */
    size_t cap = 2 * (size_t)js->lim.max_splits_per_worker;
    jw->ids = calloc(cap, sizeof(*jw->ids));
    jw->sent = calloc(cap, sizeof(*jw->sent));
    jw->sent_seq = calloc(cap, sizeof(*jw->sent_seq));
    jw->aid = calloc(cap, sizeof(*jw->aid));
    if (jw->ids == NULL || jw->sent == NULL || jw->sent_seq == NULL || jw->aid == NULL) {
        disp_jw_free(jw);
        return NULL;
    }
    job->njw++;
    return jw;
}

void disp_jw_free(disp_jw_t *jw)
{
    free(jw->ids);
    free(jw->sent);
    free(jw->sent_seq);
    free(jw->aid);
    free(jw->held);
}

void disp_jw_remove(disp_job_t *job, disp_jw_t *jw)
{
    size_t i = (size_t)(jw - job->jw);
    disp_jw_free(jw);
    memmove(&job->jw[i], &job->jw[i + 1], (job->njw - i - 1) * sizeof(*job->jw));
    job->njw--;
}

/* Removes id from the client's list keeping assignment order; 0 if it was there. */
static int list_remove(uint64_t *ids, uint32_t *n, uint64_t id)
{
    for (uint32_t i = 0; i < *n; i++) {
        if (ids[i] == id) {
            memmove(&ids[i], &ids[i + 1], (*n - i - 1) * sizeof(*ids));
            (*n)--;
            return 0;
        }
    }
    return -ENOENT;
}

/* The same for a worker's list and its parallel arrays. */
static int jw_list_remove(disp_jw_t *jw, uint64_t id)
{
    for (uint32_t i = 0; i < jw->n; i++) {
        if (jw->ids[i] == id) {
            size_t rest = jw->n - i - 1;
            memmove(&jw->ids[i], &jw->ids[i + 1], rest * sizeof(*jw->ids));
            memmove(&jw->sent[i], &jw->sent[i + 1], rest * sizeof(*jw->sent));
            memmove(&jw->sent_seq[i], &jw->sent_seq[i + 1], rest * sizeof(*jw->sent_seq));
            memmove(&jw->aid[i], &jw->aid[i + 1], rest * sizeof(*jw->aid));
            jw->n--;
            return 0;
        }
    }
    return -ENOENT;
}

/* ------------------------------------------------------------ speeds */

/* Splits of jw the worker still has to run: not yet reported sent. */
static uint32_t jw_active(const disp_jw_t *jw)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < jw->n; k++) {
        n += jw->sent[k] != DISP_AN_DELIVERED;
    }
    return n;
}

/* Predicted cost of a live split (0 when its epoch is gone). */
double disp_split_cost(disp_job_t *job, uint64_t id)
{
    uint32_t idx = 0;
    disp_epoch_t *ep = disp_epoch_of(job, id, &idx);
    return ep != NULL && ep->cost != NULL ? ep->cost[idx] : 0;
}

/* Cost of jw's active splits. */
static double jw_load(disp_job_t *job, const disp_jw_t *jw)
{
    double c = 0;
    for (uint32_t k = 0; k < jw->n; k++) {
        if (jw->sent[k] != DISP_AN_DELIVERED) {
            c += disp_split_cost(job, jw->ids[k]);
        }
    }
    return c;
}

/* Measured cost per second, 0 = not known yet (nothing delivered). */
static double jw_speed(const disp_jw_t *jw)
{
    return jw->busy_ms >= DISP_SPEED_MIN_BUSY_MS && jw->done_cost > 0
               ? jw->done_cost * 1000.0 / jw->busy_ms
               : 0;
}

/* Speed used for jw: measured, else the mean measured one of the job's
 * other workers, else 1 (every worker alike: the pick is by cost alone). */
static double jw_speed_or_guess(const disp_job_t *job, const disp_jw_t *jw)
{
    double v = jw != NULL ? jw_speed(jw) : 0;
    if (v > 0) {
        return v;
    }
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < job->njw; i++) {
        double x = jw_speed(&job->jw[i]);
        if (x > 0) {
            sum += x;
            n++;
        }
    }
    return n > 0 ? sum / n : 1.0;
}

/* Predicted cost jw has left at now: its active load less the progress on
 * the split it runs. Without this a worker about to finish looks a whole
 * split busier than one that just started, and stealing moves splits
 * toward workers that end later. */
static double jw_left(disp_job_t *job, const disp_jw_t *jw, int64_t now_ms)
{
    if (jw == NULL) {
        return 0;
    }
    double load = jw_load(job, jw);
    for (uint32_t k = 0; k < jw->n; k++) {
        if (jw->sent[k] == DISP_AN_DELIVERED) {
            continue;
        }
        double head = disp_split_cost(job, jw->ids[k]);
        double secs = jw->head_from_ms > 0 && now_ms > jw->head_from_ms
                          ? (double)(now_ms - jw->head_from_ms) / 1000.0
                          : 0;
        double done = jw_speed_or_guess(job, jw) * secs;
        return load - (done < head ? done : head);
    }
    return load;
}

/* jw finished a split of predicted cost c at now (reported sent, or the
 * client has all of it): it counts toward jw's speed, and the next split
 * starts now as far as jw_left can tell. */
void disp_jw_done(disp_jw_t *jw, double c, int64_t now_ms)
{
    jw->done_cost += c;
    jw->head_from_ms = now_ms;
}

/* Busy-time bookkeeping at now: closes the stretch so far, starts a new
 * one if the worker still has active splits. */
void disp_jw_clock(disp_jw_t *jw, int64_t now_ms)
{
    if (jw->busy_from_ms != 0 && now_ms > jw->busy_from_ms) {
        jw->busy_ms += (double)(now_ms - jw->busy_from_ms);
    }
    jw->busy_from_ms = jw_active(jw) > 0 ? now_ms : 0;
    if (jw->busy_ms > 30000) { /* forget the old half: speeds change */
        jw->busy_ms *= 0.5;
        jw->done_cost *= 0.5;
    }
}

/* ------------------------------------------------------------ give and take back */

/* Gives a PENDING split to owner (0 = client). */
static int give(disp_jobs_t *js, disp_job_t *job, disp_epoch_t *ep, uint32_t idx, uint64_t owner,
                int64_t now_ms)
{
    disp_split_t *s = &ep->splits[idx];
    uint64_t id = disp_split_id(job, ep, idx);
    if (!disp_split_move_allowed((disp_split_state_e)s->state, DISP_SPLIT_ASSIGNED)) {
        /* Refused before any owner list changes: disp_split_move counts
         * and logs it, and the split stays where it is. */
        return disp_split_move(js, job, ep, idx, DISP_SPLIT_ASSIGNED);
    }
    if (owner == 0) {
        if (job->nclient >= js->lim.max_client_splits) {
            return -ENOSPC;
        }
        job->client_ids[job->nclient++] = id;
    } else {
        disp_jw_t *jw = disp_jw_create(js, job, owner);
        if (jw == NULL) {
            return -ENOMEM;
        }
        /* Delivered splits wait only for the client's ack and hold nothing
         * at the worker: they do not count against its active limit, so
         * its next split goes out in the reply to the heartbeat reporting
         * the last one sent, not a heartbeat after the ack. */
        if (jw->n >= 2 * js->lim.max_splits_per_worker ||
            jw_active(jw) >= js->lim.max_splits_per_worker) {
            return -ENOSPC;
        }
        if (jw->busy_from_ms == 0) {
            jw->busy_from_ms = now_ms;
        }
        if (jw_active(jw) == 0) {
            jw->head_from_ms = now_ms;
        }
        jw->ids[jw->n] = id;
        jw->sent[jw->n] = DISP_AN_NEW;
        jw->sent_seq[jw->n] = 0;
        jw->aid[jw->n] = ++js->next_aid;
        jw->n++;
        disp_worker_t *w = disp_registry_find(js->reg, owner);
        if (w != NULL) {
            w->outstanding++;
        }
    }
    if (disp_split_move(js, job, ep, idx, DISP_SPLIT_ASSIGNED) != 0) {
        return -EINVAL; /* not reached: allowed above */
    }
    s->owner = owner;
    if (!s->planned) {
        /* Fixed for good: every copy of the split, from any owner, runs the
         * same units, whatever later re-plans say. */
        /* A worker without one of the job's plugins runs only the units
         * before it; the client finishes the sample. */
        s->stage_to = owner == 0 ? (uint8_t)job->plan.split
                                 : (uint8_t)disp_plugin_reach(job->plugins,
                                                              disp_registry_find(js->reg, owner),
                                                              job->plan.split);
        s->compress = job->plan.compress != 0;
        s->planned = 1;
    }
    if (owner != 0) {
        disp_loc_given(js, job, disp_registry_find(js->reg, owner), id, s->stage_to);
    }
    /* Every split's way (given, delivered, acknowledged) at debug level:
     * enough to find where an epoch waited. */
    SL_DEBUG("job %" PRIu64 ": split %" PRIu64 " given to %s %" PRIu64, job->id, id,
             owner == 0 ? "the client" : "worker", owner);
    return 0;
}

/* Takes an ASSIGNED split off its owner's list. */
void disp_detach(disp_jobs_t *js, disp_job_t *job, disp_split_t *s, uint64_t id)
{
    if (s->owner == 0) {
        (void)list_remove(job->client_ids, &job->nclient, id);
        return;
    }
    disp_jw_t *jw = disp_job_jw(job, s->owner);
    if (jw != NULL && jw_list_remove(jw, id) == 0) {
        disp_worker_t *w = disp_registry_find(js->reg, s->owner);
        if (w != NULL && w->outstanding > 0) {
            w->outstanding--;
        }
    }
}

/* An ASSIGNED split returns to the front of its queue. */
int disp_take_back(disp_jobs_t *js, disp_job_t *job, disp_epoch_t *ep, uint32_t idx)
{
    disp_split_t *s = &ep->splits[idx];
    int rc = disp_split_move(js, job, ep, idx, DISP_SPLIT_PENDING);
    if (rc != 0) {
        return rc; /* nothing changed: it stays on its owner's list */
    }
    disp_detach(js, job, s, disp_split_id(job, ep, idx));
    if (s->owner != 0) {
        s->avoid = s->owner;
    }
    s->owner = 0;
    disp_queue_return(job, ep, idx);
    job->reassigned_total++;
    js->splits_reassigned_total++;
    return 0;
}

/* Queues a revocation of split id at its worker owner (bounded: beyond
 * DISP_REVOKE_MAX the worker may run it once more; the client drops the
 * duplicates). */
void disp_revoke_at_owner(disp_job_t *job, const disp_split_t *s, uint64_t id)
{
    disp_jw_t *jw = s->owner != 0 ? disp_job_jw(job, s->owner) : NULL;
    if (jw == NULL) {
        return;
    }
    for (uint32_t i = 0; i < jw->nrevoked; i++) {
        if (jw->revoked[i] == id) {
            return;
        }
    }
    if (jw->nrevoked < DISP_REVOKE_MAX) {
        jw->revoked[jw->nrevoked++] = id;
    }
}

/* ------------------------------------------------------------ pick and steal */

/* The live, non-banned worker with room for this job predicted to finish
 * a split of cost c first. NULL also when that worker is busy and a full
 * one would still finish the split sooner (after its queue): the split
 * waits for it rather than straggle on a slow worker. *ret_any says
 * whether any live worker may run the job at all. */
static disp_worker_t *pick_worker(disp_jobs_t *js, disp_job_t *job, uint64_t avoid, double c,
                                  int64_t now_ms, int *ret_any)
{
    disp_worker_t *best = NULL;
    double best_t = 0;
    uint32_t best_n = 0;
    int best_avoid = 0;
    double full_t = -1; /* soonest finish of a full worker (avoid excluded) */
    *ret_any = 0;
    for (size_t i = 0; i < js->reg->n; i++) {
        disp_worker_t *w = js->reg->workers[i];
        if (w->state != DISP_WORKER_LIVE || w->leaving) {
            continue;
        }
        const disp_jw_t *jw = disp_job_jw(job, w->id);
        if (jw != NULL && jw->banned) {
            continue;
        }
        *ret_any = 1;
        uint32_t n = jw != NULL ? jw_active(jw) : 0;
        double t = (jw_left(job, jw, now_ms) + c) / jw_speed_or_guess(job, jw);
        int is_avoid = avoid != 0 && w->id == avoid;
        if (n >= js->lim.max_splits_per_worker ||
            (jw != NULL && jw->n >= 2 * js->lim.max_splits_per_worker)) {
            if (!is_avoid && (full_t < 0 || t < full_t)) {
                full_t = t;
            }
            continue;
        }
        int better = best == NULL;
        /* Relative tolerance: float costs must not break count ties. */
        double tol = 1e-6 * (t > best_t ? t : best_t);
        if (!better && is_avoid != best_avoid) {
            better = !is_avoid;
        } else if (!better && fabs(t - best_t) > tol) {
            better = t < best_t;
        } else if (!better && w->outstanding != best->outstanding) {
            better = w->outstanding < best->outstanding;
        } else if (!better) {
            better = w->id < best->id;
        }
        if (better) {
            best = w;
            best_t = t;
            best_n = n;
            best_avoid = is_avoid;
        }
    }
    /* An idle worker always gets work (capacity otherwise lost; stealing
     * fixes the tail); a busy one only if nobody full would beat it. */
    if (best != NULL && best_n > 0 && !best_avoid && full_t >= 0 &&
        full_t < best_t * (1 - 1e-6)) {
        return NULL;
    }
    return best;
}

/* Why remote splits go to the client (told to it in GetAssignment). */
static void note_fallback(const disp_jobs_t *js, disp_job_t *job)
{
    if (js->reg->nlive == 0) {
        snprintf(job->fallback, sizeof(job->fallback), "no live worker for %" PRId64 " ms",
                 js->lim.worker_timeout_ms);
    } else if (job->worker_failure[0] != '\0') {
        snprintf(job->fallback, sizeof(job->fallback),
                 "every live worker refused the job (%.200s)", job->worker_failure);
    } else {
        snprintf(job->fallback, sizeof(job->fallback), "every live worker is leaving");
    }
}

static void assign_epoch(disp_jobs_t *js, disp_job_t *job, disp_epoch_t *ep, int64_t now_ms)
{
    uint32_t idx = 0;
    while (job->nclient < js->lim.max_client_splits &&
           disp_queue_front(ep, &ep->local, &idx)) {
        (void)sl_ring_pop(&ep->local, NULL);
        if (give(js, job, ep, idx, 0, now_ms) != 0) {
            (void)sl_ring_push_front(&ep->local, &idx);
            break;
        }
    }
    while (disp_queue_front(ep, &ep->remote, &idx)) {
        int any = 0;
        disp_worker_t *w = pick_worker(js, job, ep->splits[idx].avoid,
                                       ep->cost != NULL ? ep->cost[idx] : 1.0, now_ms, &any);
        uint64_t owner = 0;
        if (w != NULL) {
            owner = w->id;
            /* The speed pick chose who; a split whose prefix cache entries
             * it holds goes first (locality.h). */
            idx = disp_loc_prefer(job, ep, owner, idx);
        } else if (!any && (js->reg->nlive > 0 ||
                            disp_registry_no_workers(js->reg, now_ms,
                                                     js->lim.worker_timeout_ms))) {
            /* Nobody can run it (no live worker for a whole timeout, or all
             * refused the job): the client does, so the job finishes. */
            if (job->nclient >= js->lim.max_client_splits) {
                break;
            }
            note_fallback(js, job);
            owner = 0;
        } else {
            break; /* workers exist but are full: wait for acks */
        }
        (void)sl_ring_pop(&ep->remote, NULL);
        if (give(js, job, ep, idx, owner, now_ms) != 0) {
            (void)sl_ring_push_front(&ep->remote, &idx);
            break;
        }
    }
}

/* Predicted seconds until worker w has run its active splits of job. */
static double finish_time(disp_job_t *job, const disp_jw_t *jw, int64_t now_ms)
{
    return jw != NULL ? jw_left(job, jw, now_ms) / jw_speed_or_guess(job, jw) : 0;
}

/* One steal (jobs.h): returns 1 if a split moved. */
static int steal_one(disp_jobs_t *js, disp_job_t *job, int64_t now_ms)
{
    for (uint32_t k = 0; k < job->nep; k++) {
        uint32_t idx = 0;
        if (disp_queue_front(&job->ep[k], &job->ep[k].remote, &idx)) {
            return 0; /* queued work first: stealing is for the tail */
        }
    }
    /* A victim is a job worker with 2+ active splits: without one there is
     * nothing to steal, so skip the walk over every registered worker
     * (O(workers) per ack under the main lock, twice per AckSplits). */
    int any_victim = 0;
    for (size_t i = 0; i < job->njw && !any_victim; i++) {
        any_victim = jw_active(&job->jw[i]) >= 2;
    }
    if (!any_victim) {
        return 0;
    }
    disp_worker_t *thief = NULL;
    double thief_t = 0;
    disp_jw_t *victim = NULL;
    double victim_t = 0;
    for (size_t i = 0; i < js->reg->n; i++) {
        disp_worker_t *w = js->reg->workers[i];
        if (w->state != DISP_WORKER_LIVE) {
            continue;
        }
        disp_jw_t *jw = disp_job_jw(job, w->id);
        uint32_t active = jw != NULL ? jw_active(jw) : 0;
        double t = finish_time(job, jw, now_ms);
        if (jw != NULL && active >= 2 && (victim == NULL || t > victim_t)) {
            victim = jw;
            victim_t = t;
        }
        if (w->leaving || (jw != NULL && jw->banned) ||
            active >= js->lim.max_splits_per_worker ||
            (jw != NULL && jw->n >= 2 * js->lim.max_splits_per_worker)) {
            continue;
        }
        if (thief == NULL || t < thief_t) {
            thief = w;
            thief_t = t;
        }
    }
    if (thief == NULL || victim == NULL || victim->worker_id == thief->id) {
        return 0;
    }
    /* The victim's last active split: the one it would start last. */
    uint32_t k = victim->n;
    while (k > 0 && victim->sent[k - 1] == DISP_AN_DELIVERED) {
        k--;
    }
    if (k == 0) {
        return 0;
    }
    uint64_t id = victim->ids[k - 1];
    uint32_t idx = 0;
    disp_epoch_t *ep = disp_epoch_of(job, id, &idx);
    if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_ASSIGNED || ep->splits[idx].stolen ||
        ep->splits[idx].local) {
        return 0;
    }
    double c = ep->cost != NULL ? ep->cost[idx] : 1.0;
    const disp_jw_t *tjw = disp_job_jw(job, thief->id);
    double thief_after = thief_t + c / jw_speed_or_guess(job, tjw);
    /* Only a clear gain: speeds are estimates and a running split's
     * progress is unknown, so a move that gains less than half the split's
     * time at the victim is as likely to end the job later. */
    if (!(thief_after < victim_t - DISP_STEAL_MARGIN * c / jw_speed_or_guess(job, victim))) {
        return 0;
    }
    uint64_t from = victim->worker_id;
    int told = victim->sent[k - 1] != DISP_AN_NEW;
    if (told) {
        disp_revoke_at_owner(job, &ep->splits[idx], id);
    }
    /* Front of the queue, avoiding the victim. */
    if (disp_take_back(js, job, ep, idx) != 0) {
        return 0; /* refused (logged): the victim keeps it */
    }
    ep->splits[idx].stolen = 1;
    job->stolen_total++;
    assign_epoch(js, job, ep, now_ms);
    SL_INFO("job %" PRIu64 ": split %" PRIu64 " stolen from worker %" PRIu64
            " (predicted %.2f s left) for worker %" PRIu64 " (%.2f s)",
            job->id, id, from, victim_t, thief->id, thief_t);
    return 1;
}

void disp_jobs_assign(disp_jobs_t *js, disp_job_t *job, int64_t now_ms)
{
    if (job->state != DISP_JOB_ACTIVE) {
        return;
    }
    (void)disp_epoch_advance(job, now_ms);
    /* Each pass may complete an epoch's assignment and so create the next
     * one; at most two epochs are live, so this ends after a few passes. */
    for (int pass = 0; pass < 4 && job->state == DISP_JOB_ACTIVE; pass++) {
        for (uint32_t k = 0; k < job->nep; k++) {
            assign_epoch(js, job, &job->ep[k], now_ms);
        }
        if (!disp_epoch_advance(job, now_ms)) {
            break;
        }
    }
    /* Bounded: each steal moves a split that can never move again. */
    for (uint32_t n = 0; js->lim.steal && n < js->lim.max_splits_per_worker &&
                         job->state == DISP_JOB_ACTIVE && steal_one(js, job, now_ms);
         n++) {
    }
}

int disp_jobs_client_idle(disp_jobs_t *js, disp_job_t *job, int64_t now_ms)
{
    /* A user's own "nothing local" (offload all, or a fixed K:0) stands;
     * a plan the planner chose, or a fixed share above 0, lets it help. */
    int nothing_local = job->spec.offload == SL_OFFLOAD_ALL ||
                        (job->spec.offload == SL_OFFLOAD_FIXED && !(job->spec.local_share > 0.0));
    if (job->state != DISP_JOB_ACTIVE || nothing_local) {
        return 0;
    }
    /* Workers first: whatever one of them has room for is theirs. */
    disp_jobs_assign(js, job, now_ms);
    if (job->state != DISP_JOB_ACTIVE || job->nclient >= js->lim.max_client_splits) {
        return 0;
    }
    for (uint32_t k = 0; k < job->nep; k++) {
        disp_epoch_t *ep = &job->ep[k];
        uint32_t idx = 0;
        if (!disp_queue_front(ep, &ep->remote, &idx)) {
            continue;
        }
        (void)sl_ring_pop(&ep->remote, NULL);
        if (give(js, job, ep, idx, 0, now_ms) != 0) {
            (void)sl_ring_push_front(&ep->remote, &idx);
            return 0;
        }
        job->client_helped_total++;
        SL_DEBUG("job %" PRIu64 ": idle client takes remote split %" PRIu64, job->id,
                 disp_split_id(job, ep, idx));
        /* It may have been the epoch's last PENDING split: the next epoch
         * opens and workers get its splits. */
        disp_jobs_assign(js, job, now_ms);
        return 1;
    }
    return 0;
}

void disp_jobs_assign_all(disp_jobs_t *js, int64_t now_ms)
{
    for (size_t i = 0; i < js->n; i++) {
        disp_jobs_assign(js, js->jobs[i], now_ms);
    }
}

size_t disp_take_back_all(disp_jobs_t *js, disp_job_t *job, disp_jw_t *jw, int revoke)
{
    size_t n = 0;
    while (jw->n > 0) {
        uint64_t id = jw->ids[jw->n - 1];
        uint32_t idx = 0;
        disp_epoch_t *ep = disp_epoch_of(job, id, &idx);
        if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_ASSIGNED) {
            jw->n--; /* cannot happen while the invariants hold */
            continue;
        }
        if (revoke) {
            disp_revoke_at_owner(job, &ep->splits[idx], id);
        }
        if (disp_take_back(js, job, ep, idx) != 0) {
            jw->n--; /* refused (logged): drop it from the list all the same */
            continue;
        }
        n++;
    }
    return n;
}
