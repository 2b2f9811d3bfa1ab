/* jobs: see jobs.h for the rules. Invariants this file keeps:
 *  - a split is in its epoch's ring at most once, and only while PENDING
 *    (acked-while-queued entries are skipped when they reach the front);
 *  - an ASSIGNED split's id is in exactly one owner list: job->client_ids
 *    for owner 0, else the owner's disp_jw_t;
 *  - worker->outstanding is the sum of its jw->n over open jobs;
 *  - js->split_slots is 2 * nsplits summed over open jobs. */
#include "dispatcher/jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "common/engine/ranks.h"
#include "dispatcher/planner_job.h"

/* ------------------------------------------------------------ ring */

static int ring_init(disp_ring_t *r, uint32_t cap)
{
    memset(r, 0, sizeof(*r));
    r->buf = calloc(cap > 0 ? cap : 1, sizeof(*r->buf));
    if (r->buf == NULL) {
        return -ENOMEM;
    }
    r->cap = cap;
    return 0;
}

static void ring_free(disp_ring_t *r)
{
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

static int ring_push_back(disp_ring_t *r, uint32_t v)
{
    if (r->len >= r->cap) {
        return -ENOSPC;
    }
    r->buf[(r->head + r->len) % r->cap] = v;
    r->len++;
    return 0;
}

static int ring_push_front(disp_ring_t *r, uint32_t v)
{
    if (r->len >= r->cap) {
        return -ENOSPC;
    }
    r->head = (r->head + r->cap - 1) % r->cap;
    r->buf[r->head] = v;
    r->len++;
    return 0;
}

static void ring_pop(disp_ring_t *r)
{
    if (r->len > 0) {
        r->head = (r->head + 1) % r->cap;
        r->len--;
    }
}

/* Front entry that is still PENDING; drops stale entries on the way. */
static int ring_front_pending(const disp_epoch_t *ep, disp_ring_t *r, uint32_t *ret_idx)
{
    while (r->len > 0) {
        uint32_t idx = r->buf[r->head];
        if (ep->splits[idx].state == DISP_SPLIT_PENDING) {
            *ret_idx = idx;
            return 1;
        }
        ring_pop(r);
    }
    return 0;
}

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

static void epoch_free(disp_epoch_t *ep)
{
    free(ep->splits);
    free(ep->bounds);
    free(ep->cost);
    ring_free(&ep->remote);
    ring_free(&ep->local);
    memset(ep, 0, sizeof(*ep));
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
        free(jw->ids);
        free(jw->sent);
        free(jw->sent_seq);
        free(jw->aid);
    }
    free(job->jw);
    job->jw = NULL;
    job->njw = job->capjw = 0;
    for (uint32_t k = 0; k < job->nep; k++) {
        epoch_free(&job->ep[k]);
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

static disp_jw_t *jw_create(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id)
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
        free(jw->ids);
        free(jw->sent);
        free(jw->sent_seq);
        free(jw->aid);
        return NULL;
    }
    job->njw++;
    return jw;
}

static void jw_remove(disp_job_t *job, disp_jw_t *jw)
{
    size_t i = (size_t)(jw - job->jw);
    free(jw->ids);
    free(jw->sent);
    free(jw->sent_seq);
    free(jw->aid);
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

int disp_an_to_send(uint8_t state) { return state == DISP_AN_NEW; }

void disp_jobs_worker_sent(disp_jobs_t *js, disp_worker_t *w)
{
    for (size_t j = 0; j < js->n; j++) {
        disp_job_t *job = js->jobs[j];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, w->id);
        if (jw == NULL) {
            continue;
        }
        for (uint32_t k = 0; k < jw->n; k++) {
            if (disp_an_to_send(jw->sent[k])) {
                jw->sent[k] = DISP_AN_SENT;
                jw->sent_seq[k] = w->hb_seq;
            }
        }
        jw->nrevoked = 0;
    }
}

/* ------------------------------------------------------------ splits */

static uint64_t split_id(const disp_job_t *job, const disp_epoch_t *ep, uint32_t idx)
{
    return ep->epoch * job->nsplits + idx;
}

static disp_epoch_t *epoch_of(disp_job_t *job, uint64_t id, uint32_t *ret_idx)
{
    if (job->nsplits == 0) {
        return NULL;
    }
    uint64_t e = id / job->nsplits;
    for (uint32_t k = 0; k < job->nep; k++) {
        if (job->ep[k].epoch == e) {
            *ret_idx = (uint32_t)(id % job->nsplits);
            return &job->ep[k];
        }
    }
    return NULL;
}

disp_split_t *disp_job_split(disp_job_t *job, uint64_t id, uint64_t *ret_epoch,
                             uint64_t *ret_begin, uint64_t *ret_end)
{
    uint32_t idx = 0;
    disp_epoch_t *ep = epoch_of(job, id, &idx);
    if (ep == NULL) {
        return NULL;
    }
    uint64_t begin = (uint64_t)idx * job->split_size;
    uint64_t end = begin + job->split_size;
    if (ep->bounds != NULL) {
        begin = ep->bounds[idx];
        end = ep->bounds[idx + 1];
    }
    if (end > job->positions) {
        end = job->positions;
    }
    if (ret_epoch != NULL) {
        *ret_epoch = ep->epoch;
    }
    if (ret_begin != NULL) {
        *ret_begin = begin;
    }
    if (ret_end != NULL) {
        *ret_end = end;
    }
    return &ep->splits[idx];
}

/* Positions of split idx of ep. */
static uint64_t split_len(const disp_job_t *job, const disp_epoch_t *ep, uint32_t idx)
{
    if (ep->bounds != NULL) {
        return ep->bounds[idx + 1] - ep->bounds[idx];
    }
    uint64_t begin = (uint64_t)idx * job->split_size;
    uint64_t end = begin + job->split_size;
    return (end < job->positions ? end : job->positions) - begin;
}

void disp_job_counts(const disp_job_t *job, uint64_t *ret_pending, uint64_t *ret_assigned,
                     uint64_t *ret_acked, uint64_t *ret_received)
{
    uint64_t p = 0;
    uint64_t a = 0;
    uint64_t k = 0;
    uint64_t r = 0;
    for (uint32_t i = 0; i < job->nep; i++) {
        const disp_epoch_t *ep = &job->ep[i];
        p += ep->npending;
        k += ep->nacked;
        r += ep->nreceived;
        a += job->nsplits - ep->npending - ep->nacked - ep->nreceived;
    }
    *ret_pending = p;
    *ret_assigned = a;
    *ret_acked = k;
    if (ret_received != NULL) {
        *ret_received = r;
    }
}

/* ------------------------------------------------------------ split sizes and costs */

uint32_t disp_split_size_auto(uint64_t positions, size_t workers, uint32_t max_per_worker)
{
    /* A job often arrives before its workers register: plan for two. */
    uint64_t w = workers < 2 ? 2 : workers;
    uint64_t want = w * (max_per_worker > 0 ? max_per_worker : 1) * DISP_AUTO_SPLITS_PER_SLOT;
    uint64_t ss = positions / want + (positions % want != 0);
    ss = ss < DISP_AUTO_SPLIT_MIN ? DISP_AUTO_SPLIT_MIN : ss;
    ss = ss > DISP_AUTO_SPLIT_MAX ? DISP_AUTO_SPLIT_MAX : ss;
    uint64_t floor_ss = positions / DISP_MAX_SPLITS_PER_EPOCH +
                        (positions % DISP_MAX_SPLITS_PER_EPOCH != 0);
    return (uint32_t)(ss > floor_ss ? ss : floor_ss);
}

void disp_cut_by_cost(const float *cost, uint64_t n, uint32_t nsplits, uint64_t *bounds)
{
    double total = 0;
    for (uint64_t p = 0; p < n; p++) {
        total += cost[p];
    }
    bounds[0] = 0;
    bounds[nsplits] = n;
    uint64_t p = 0;
    double acc = 0; /* cost of positions [0, p) */
    for (uint32_t i = 1; i < nsplits; i++) {
        uint64_t lo = bounds[i - 1] + 1;  /* split i-1 is not empty */
        uint64_t hi = n - (nsplits - i); /* one position left per later split */
        if (!(total > 0)) {
            uint64_t even = (uint64_t)((double)n * i / nsplits);
            bounds[i] = even < lo ? lo : even > hi ? hi : even;
            continue;
        }
        double target = total * i / nsplits;
        while (p < lo) {
            acc += cost[p++];
        }
        /* Cut where the prefix is closest to the target. */
        while (p < hi && acc + 0.5 * cost[p] < target) {
            acc += cost[p++];
        }
        bounds[i] = p;
    }
}

int disp_costs_check(const float *costs, size_t n, uint64_t num_samples, char *err,
                     size_t errlen)
{
    if (n == 0) {
        return 0;
    }
    if (n != num_samples) {
        return sl_err(err, errlen, -EINVAL,
                      "sample_costs: %zu values for %" PRIu64
                      " samples (one per sample index, or none)",
                      n, num_samples);
    }
    if (n > DISP_MAX_SAMPLE_COSTS) {
        return sl_err(err, errlen, -EINVAL,
                      "sample_costs: %zu values, more than %u (send none for a data set "
                      "this large)",
                      n, DISP_MAX_SAMPLE_COSTS);
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(costs[i]) || costs[i] < 0) {
            return sl_err(err, errlen, -EINVAL,
                          "sample_costs[%zu]: %g is not a finite cost >= 0", i,
                          (double)costs[i]);
        }
    }
    return 0;
}

/* Split boundaries of a new epoch (cost cut) and each split's predicted
 * cost: O(positions) once per epoch. */
static int epoch_cut(disp_job_t *job, disp_epoch_t *ep)
{
    ep->cost = calloc(job->nsplits, sizeof(*ep->cost));
    if (ep->cost == NULL) {
        return -ENOMEM;
    }
    if (job->costs == NULL) {
        for (uint32_t i = 0; i < job->nsplits; i++) {
            uint64_t begin = (uint64_t)i * job->split_size;
            uint64_t end = begin + job->split_size;
            ep->cost[i] = (float)((end < job->positions ? end : job->positions) - begin);
        }
        return 0;
    }
    uint64_t n = job->positions; /* == num_samples: costs are single-consumer only */
    uint64_t *order = malloc(n * sizeof(*order));
    float *pc = malloc(n * sizeof(*pc));
    ep->bounds = malloc(((size_t)job->nsplits + 1) * sizeof(*ep->bounds));
    if (order == NULL || pc == NULL || ep->bounds == NULL) {
        free(order);
        free(pc);
        return -ENOMEM;
    }
    sl_rank_order(&job->spec, ep->epoch, job->num_samples, order, order);
    for (uint64_t p = 0; p < n; p++) {
        pc[p] = job->costs[order[p]];
    }
    disp_cut_by_cost(pc, n, job->nsplits, ep->bounds);
    for (uint32_t i = 0; i < job->nsplits; i++) {
        double c = 0;
        for (uint64_t p = ep->bounds[i]; p < ep->bounds[i + 1]; p++) {
            c += pc[p];
        }
        ep->cost[i] = (float)c;
    }
    free(order);
    free(pc);
    return 0;
}

static int epoch_create(disp_job_t *job)
{
    disp_epoch_t *ep = &job->ep[job->nep];
    memset(ep, 0, sizeof(*ep));
    ep->epoch = job->next_epoch;
    uint32_t nlocal = 0;
    for (uint32_t i = 0; i < job->nsplits; i++) {
        nlocal += (uint32_t)disp_plan_split_is_local(i, job->plan.local_share);
    }
    ep->splits = calloc(job->nsplits, sizeof(*ep->splits));
    if (ep->splits == NULL || ring_init(&ep->local, nlocal) != 0 ||
        ring_init(&ep->remote, job->nsplits - nlocal) != 0 || epoch_cut(job, ep) != 0) {
        epoch_free(ep);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < job->nsplits; i++) {
        disp_split_t *s = &ep->splits[i];
        s->state = DISP_SPLIT_PENDING;
        s->local = (uint8_t)disp_plan_split_is_local(i, job->plan.local_share);
        /* Cannot fail: each ring was sized for exactly its splits. */
        (void)ring_push_back(s->local ? &ep->local : &ep->remote, i);
    }
    ep->npending = job->nsplits;
    job->nep++;
    job->next_epoch++;
    SL_DEBUG("job %" PRIu64 ": epoch %" PRIu64 " created (%u splits, %u local)", job->id,
             ep->epoch, job->nsplits, nlocal);
    return 0;
}

/* Frees fully acknowledged epochs, creates the next one when allowed,
 * marks the job finished after the last. Returns 1 if an epoch was created. */
static int advance(disp_job_t *job, int64_t now_ms)
{
    int created = 0;
    for (;;) {
        if (job->nep > 0 && job->ep[0].nacked == job->nsplits) {
            SL_INFO("job %" PRIu64 ": epoch %" PRIu64 " acknowledged", job->id,
                    job->ep[0].epoch);
            epoch_free(&job->ep[0]);
            job->ep[0] = job->ep[1];
            memset(&job->ep[1], 0, sizeof(job->ep[1]));
            job->nep--;
            continue;
        }
        if (job->nep < 2 && job->next_epoch < disp_job_end_epoch(job) &&
            (job->nep == 0 || job->ep[job->nep - 1].npending == 0)) {
            if (epoch_create(job) != 0) {
                SL_ERR("job %" PRIu64 ": out of memory creating epoch %" PRIu64
                       " (retried on the next tick)",
                       job->id, job->next_epoch);
                break;
            }
            created = 1;
            continue;
        }
        break;
    }
    if (job->state == DISP_JOB_ACTIVE && job->nep == 0 &&
        job->next_epoch >= disp_job_end_epoch(job)) {
        job->state = DISP_JOB_FINISHED;
        job->finished_ms = now_ms;
        SL_NOTICE("job %" PRIu64 ": finished (%u epochs)", job->id, job->epochs);
    }
    return created;
}

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
static double split_cost(disp_job_t *job, uint64_t id)
{
    uint32_t idx = 0;
    disp_epoch_t *ep = epoch_of(job, id, &idx);
    return ep != NULL && ep->cost != NULL ? ep->cost[idx] : 0;
}

/* Cost of jw's active splits. */
static double jw_load(disp_job_t *job, const disp_jw_t *jw)
{
    double c = 0;
    for (uint32_t k = 0; k < jw->n; k++) {
        if (jw->sent[k] != DISP_AN_DELIVERED) {
            c += split_cost(job, jw->ids[k]);
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
        double head = split_cost(job, jw->ids[k]);
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
static void jw_done(disp_jw_t *jw, double c, int64_t now_ms)
{
    jw->done_cost += c;
    jw->head_from_ms = now_ms;
}

/* Busy-time bookkeeping at now: closes the stretch so far, starts a new
 * one if the worker still has active splits. */
static void jw_clock(disp_jw_t *jw, int64_t now_ms)
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

/* Gives a PENDING split to owner (0 = client). */
static int give(disp_jobs_t *js, disp_job_t *job, disp_epoch_t *ep, uint32_t idx, uint64_t owner,
                int64_t now_ms)
{
    disp_split_t *s = &ep->splits[idx];
    uint64_t id = split_id(job, ep, idx);
    if (owner == 0) {
        if (job->nclient >= js->lim.max_client_splits) {
            return -ENOSPC;
        }
        job->client_ids[job->nclient++] = id;
    } else {
        disp_jw_t *jw = jw_create(js, job, owner);
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
    s->state = DISP_SPLIT_ASSIGNED;
    s->owner = owner;
    if (!s->planned) {
        /* Fixed for good: every copy of the split, from any owner, runs the
         * same units, whatever later re-plans say. */
        s->stage_to = (uint8_t)job->plan.split;
        s->planned = 1;
    }
    ep->npending--;
    return 0;
}

/* Takes an ASSIGNED split off its owner's list. */
static void detach(disp_jobs_t *js, disp_job_t *job, disp_split_t *s, uint64_t id)
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
static void take_back(disp_jobs_t *js, disp_job_t *job, disp_epoch_t *ep, uint32_t idx)
{
    disp_split_t *s = &ep->splits[idx];
    detach(js, job, s, split_id(job, ep, idx));
    if (s->owner != 0) {
        s->avoid = s->owner;
    }
    s->owner = 0;
    s->state = DISP_SPLIT_PENDING;
    ep->npending++;
    if (ring_push_front(s->local ? &ep->local : &ep->remote, idx) != 0) {
        /* Would break the ring invariant; never expected. */
        SL_ERR("job %" PRIu64 ": split queue overflow (bug)", job->id);
    }
    job->reassigned_total++;
    js->splits_reassigned_total++;
}

/* Queues a revocation of split id at its worker owner (bounded: beyond
 * DISP_REVOKE_MAX the worker may run it once more; the client drops the
 * duplicates). */
static void revoke_at_owner(disp_job_t *job, const disp_split_t *s, uint64_t id)
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

/* ------------------------------------------------------------ heartbeats */

static int ref_cmp(const void *a, const void *b)
{
    const disp_split_ref_t *x = a;
    const disp_split_ref_t *y = b;
    if (x->job_id != y->job_id) {
        return x->job_id < y->job_id ? -1 : 1;
    }
    if (x->split_id != y->split_id) {
        return x->split_id < y->split_id ? -1 : 1;
    }
    return x->assignment < y->assignment ? -1 : x->assignment > y->assignment;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether sorted refs name hand-out aid of (job, split); a ref without an
 * assignment id (an older worker) names any. */
static int has_ref(const disp_split_ref_t *refs, size_t n, uint64_t job_id, uint64_t split_id,
                   uint64_t aid)
{
    size_t lo = 0, hi = n; /* first entry >= (job, split, 0) */
    disp_split_ref_t key = {.job_id = job_id, .split_id = split_id};
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ref_cmp(&refs[mid], &key) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (size_t i = lo; i < n && refs[i].job_id == job_id && refs[i].split_id == split_id; i++) {
        if (refs[i].assignment == 0 || refs[i].assignment == aid) {
            return 1;
        }
    }
    return 0;
}

/* Whether the worker reports hand-out aid of (job, id) in progress. */
static int in_progress(const disp_progress_t *p, uint64_t job_id, uint64_t id, uint64_t aid)
{
    if (p->n_in_progress > 0 || p->n_legacy == 0) {
        return has_ref(p->in_progress, p->n_in_progress, job_id, id, aid);
    }
    return bsearch(&id, p->legacy_ids, p->n_legacy, sizeof(id), u64_cmp) != NULL;
}

size_t disp_jobs_worker_progress(disp_jobs_t *js, disp_worker_t *w, disp_progress_t *p,
                                 int64_t now_ms)
{
    if (p->n_in_progress > 1) {
        qsort(p->in_progress, p->n_in_progress, sizeof(*p->in_progress), ref_cmp);
    }
    if (p->n_legacy > 1) {
        qsort(p->legacy_ids, p->n_legacy, sizeof(*p->legacy_ids), u64_cmp);
    }
    if (p->n_sent > 1) {
        qsort(p->sent, p->n_sent, sizeof(*p->sent), ref_cmp);
    }
    size_t nback = 0;
    for (size_t j = 0; j < js->n; j++) {
        disp_job_t *job = js->jobs[j];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, w->id);
        if (jw == NULL) {
            continue;
        }
        int returned = 0;
        for (uint32_t k = 0; k < jw->n;) {
            uint64_t id = jw->ids[k];
            int back = 0;
            switch ((disp_announce_e)jw->sent[k]) {
            case DISP_AN_NEW:
                back = p->leaving; /* never told, and it takes nothing new now */
                break;
            case DISP_AN_SENT:
            case DISP_AN_SEEN:
                if (in_progress(p, job->id, id, jw->aid[k])) {
                    jw->sent[k] = DISP_AN_SEEN;
                } else if (has_ref(p->sent, p->n_sent, job->id, id, jw->aid[k])) {
                    jw->sent[k] = DISP_AN_DELIVERED;
                    jw_done(jw, split_cost(job, id), now_ms);
                    returned = 1; /* room for the next split in this reply */
                } else if (jw->sent[k] == DISP_AN_SEEN || p->leaving ||
                           w->hb_seq - jw->sent_seq[k] >= DISP_RESEND_AFTER_HB) {
                    back = 1; /* dropped, refused, or the reply never arrived */
                }
                break;
            case DISP_AN_DELIVERED:
                break;
            }
            if (!back) {
                k++;
                continue;
            }
            uint32_t idx = 0;
            disp_epoch_t *ep = epoch_of(job, id, &idx);
            if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_ASSIGNED) {
                k++; /* cannot happen while the invariants hold */
                continue;
            }
            revoke_at_owner(job, &ep->splits[idx], id);
            take_back(js, job, ep, idx); /* removes entry k: do not advance */
            nback++;
            returned = 1;
        }
        jw_clock(jw, now_ms);
        if (returned) {
            disp_jobs_assign(js, job, now_ms);
        }
    }
    w->hb_seq++;
    return nback;
}

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
           ring_front_pending(ep, &ep->local, &idx)) {
        ring_pop(&ep->local);
        if (give(js, job, ep, idx, 0, now_ms) != 0) {
            (void)ring_push_front(&ep->local, idx);
            break;
        }
    }
    while (ring_front_pending(ep, &ep->remote, &idx)) {
        int any = 0;
        disp_worker_t *w = pick_worker(js, job, ep->splits[idx].avoid,
                                       ep->cost != NULL ? ep->cost[idx] : 1.0, now_ms, &any);
        uint64_t owner = 0;
        if (w != NULL) {
            owner = w->id;
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
        ring_pop(&ep->remote);
        if (give(js, job, ep, idx, owner, now_ms) != 0) {
            (void)ring_push_front(&ep->remote, idx);
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
        if (ring_front_pending(&job->ep[k], &job->ep[k].remote, &idx)) {
            return 0; /* queued work first: stealing is for the tail */
        }
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
    disp_epoch_t *ep = epoch_of(job, id, &idx);
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
        revoke_at_owner(job, &ep->splits[idx], id);
    }
    take_back(js, job, ep, idx); /* front of the queue, avoiding the victim */
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
    (void)advance(job, now_ms);
    /* Each pass may complete an epoch's assignment and so create the next
     * one; at most two epochs are live, so this ends after a few passes. */
    for (int pass = 0; pass < 4 && job->state == DISP_JOB_ACTIVE; pass++) {
        for (uint32_t k = 0; k < job->nep; k++) {
            assign_epoch(js, job, &job->ep[k], now_ms);
        }
        if (!advance(job, now_ms)) {
            break;
        }
    }
    /* Bounded: each steal moves a split that can never move again. */
    for (uint32_t n = 0; js->lim.steal && n < js->lim.max_splits_per_worker &&
                         job->state == DISP_JOB_ACTIVE && steal_one(js, job, now_ms);
         n++) {
    }
}

void disp_jobs_assign_all(disp_jobs_t *js, int64_t now_ms)
{
    for (size_t i = 0; i < js->n; i++) {
        disp_jobs_assign(js, js->jobs[i], now_ms);
    }
}

/* ------------------------------------------------------------ submit */

int disp_jobs_submit(disp_jobs_t *js, const disp_submit_t *req, int64_t now_ms,
                     disp_job_t **ret, char *err, size_t errlen)
{
    if (js->nopen >= js->lim.max_jobs) {
        return sl_err(err, errlen, -ENOSPC, "too many open jobs (max_jobs = %u)",
                      js->lim.max_jobs);
    }
    if (js->lim.max_jobs_per_client > 0) {
        /* client_id is what the client says it is: this keeps one runaway
         * client from taking every slot, max_jobs is the hard bound. */
        char cid[DISP_NAME_MAX];
        disp_text_copy(cid, sizeof(cid), req->client_id);
        uint32_t mine = 0;
        for (size_t i = 0; i < js->n; i++) {
            mine += js->jobs[i]->state != DISP_JOB_CLOSED &&
                    strcmp(js->jobs[i]->client_id, cid) == 0;
        }
        if (mine >= js->lim.max_jobs_per_client) {
            return sl_err(err, errlen, -ENOSPC,
                          "client \"%s\" has %u open jobs (max_jobs_per_client = %u)", cid,
                          mine, js->lim.max_jobs_per_client);
        }
    }
    const char *name = req->spec_name != NULL && req->spec_name[0] != '\0' ? req->spec_name
                                                                          : "<rpc>";
    int rc = 0;
    disp_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    rc = sl_spec_parse(name, req->spec_json != NULL ? req->spec_json : "", req->spec_len,
                       &job->spec, err, errlen);
    if (rc != 0) {
        goto fail; /* the parser's message, verbatim */
    }
    if (req->num_samples == 0) {
        rc = sl_err(err, errlen, -EINVAL,
                    "num_samples: must be > 0 (the client indexes its source first)");
        goto fail;
    }
    if (req->first_epoch > DISP_MAX_EPOCHS - job->spec.epochs) {
        rc = sl_err(err, errlen, -EINVAL,
                    "first_epoch: %" PRIu64 " + %u epochs goes beyond epoch %llu",
                    req->first_epoch, job->spec.epochs, DISP_MAX_EPOCHS);
        goto fail;
    }
    /* Multi-rank: the epoch is this rank's share (common/engine/ranks.h). */
    uint64_t positions = sl_spec_positions(&job->spec, req->num_samples);
    if (positions == 0) {
        rc = sl_err(err, errlen, -EINVAL,
                    "world_size: %u ranks and %" PRIu64 " samples leave rank %u nothing "
                    "(rank_padding \"drop\"; use \"pad\")",
                    job->spec.world_size, req->num_samples, job->spec.rank);
        goto fail;
    }
    rc = disp_costs_check(req->costs, req->costs != NULL ? req->ncosts : 0, req->num_samples,
                          err, errlen);
    if (rc != 0) {
        goto fail;
    }
    uint64_t ss = js->lim.split_size != 0
                      ? js->lim.split_size
                      : disp_split_size_auto(positions, js->reg->nlive,
                                             js->lim.max_splits_per_worker);
    uint64_t nsplits = positions / ss + (positions % ss != 0);
    if (nsplits > DISP_MAX_SPLITS_PER_EPOCH) {
        rc = sl_err(err, errlen, -EINVAL,
                    "num_samples: %" PRIu64 " samples make %" PRIu64
                    " splits of %" PRIu64 ", more than %u per epoch (raise split_size)",
                    req->num_samples, nsplits, ss, DISP_MAX_SPLITS_PER_EPOCH);
        goto fail;
    }
    if (js->split_slots + 2 * nsplits > DISP_SPLIT_BUDGET) {
        rc = sl_err(err, errlen, -ENOSPC,
                    "too many live splits over all jobs (%" PRIu64 " in use, %" PRIu64
                    " asked, budget %llu)",
                    js->split_slots, 2 * nsplits, (unsigned long long)DISP_SPLIT_BUDGET);
        goto fail;
    }
    if (req->plan != NULL) {
        job->plan = *req->plan; /* the planner's (it compiled the same spec) */
    } else {
        rc = disp_plan_compute(&job->spec, &job->plan, err, errlen);
    }
    if (rc != 0) {
        rc = rc == -ENOMEM ? rc : -EINVAL;
        goto fail;
    }
    int use_costs = req->costs != NULL && req->ncosts > 0 && positions == req->num_samples &&
                    job->spec.world_size <= 1;
    if (use_costs && js->cost_slots + req->ncosts > DISP_COST_BUDGET) {
        SL_NOTICE("sample costs of %zu samples over the budget (%" PRIu64 " of %llu held): "
                  "this job's splits are cut by count",
                  req->ncosts, js->cost_slots, (unsigned long long)DISP_COST_BUDGET);
        use_costs = 0;
    }
    if (use_costs) {
        double total = 0;
        for (size_t i = 0; i < req->ncosts; i++) {
            total += req->costs[i];
        }
        use_costs = total > 0; /* all zero says nothing: cut by count */
    }
    if (use_costs) {
        job->costs = malloc(req->ncosts * sizeof(*job->costs));
        if (job->costs == NULL) {
            rc = sl_err(err, errlen, -ENOMEM, "out of memory");
            goto fail;
        }
        memcpy(job->costs, req->costs, req->ncosts * sizeof(*job->costs));
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
    job->positions = positions;
    job->world_size = job->spec.world_size;
    job->rank = job->spec.rank;
    job->client_threads = req->client_threads;
    job->split_size = (uint32_t)ss;
    job->nsplits = (uint32_t)nsplits;
    job->epochs = job->spec.epochs;
    job->first_epoch = req->first_epoch;
    job->next_epoch = req->first_epoch;
    job->created_ms = now_ms;
    job->last_client_ms = now_ms;
    js->jobs[js->n++] = job;
    js->nopen++;
    js->split_slots += 2 * nsplits;
    js->cost_slots += job->costs != NULL ? job->num_samples : 0;
    disp_jobs_assign(js, job, now_ms);
    *ret = job;
    return 0;
fail:
    free(job->spec_json);
    free(job->client_ids);
    free(job->costs);
    free(job);
    return rc;
}

/* ------------------------------------------------------------ acks and returns */

size_t disp_jobs_ack(disp_jobs_t *js, disp_job_t *job, const uint64_t *ids, size_t n,
                     int64_t now_ms)
{
    size_t done = 0;
    if (job->state != DISP_JOB_ACTIVE) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t idx = 0;
        disp_epoch_t *ep = epoch_of(job, ids[i], &idx);
        if (ep == NULL) {
            continue; /* an epoch already done, or not yet created */
        }
        disp_split_t *s = &ep->splits[idx];
        switch ((disp_split_state_e)s->state) {
        case DISP_SPLIT_ACKED:
            continue;
        case DISP_SPLIT_ASSIGNED:
            if (s->owner != 0) {
                /* Acked before the worker reported it sent: it is done. */
                disp_jw_t *jw = disp_job_jw(job, s->owner);
                for (uint32_t k = 0; jw != NULL && k < jw->n; k++) {
                    if (jw->ids[k] == ids[i] && jw->sent[k] != DISP_AN_DELIVERED) {
                        jw_done(jw, ep->cost != NULL ? ep->cost[idx] : 0, now_ms);
                    }
                }
            }
            detach(js, job, s, ids[i]);
            break;
        case DISP_SPLIT_PENDING:
            /* Delivered by an owner we already gave up on; its queue entry
             * is skipped when it reaches the front. */
            ep->npending--;
            break;
        case DISP_SPLIT_RECEIVED:
            ep->nreceived--; /* on nobody's list */
            break;
        }
        s->state = DISP_SPLIT_ACKED;
        s->owner = 0;
        ep->nacked++;
        ep->acked_positions += split_len(job, ep, idx);
        job->acked_total++;
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
        disp_epoch_t *ep = epoch_of(job, ids[i], &idx);
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
        if (s->owner != 0) {
            disp_jw_t *jw = disp_job_jw(job, s->owner);
            for (uint32_t k = 0; jw != NULL && k < jw->n; k++) {
                if (jw->ids[k] != ids[i] || jw->sent[k] == DISP_AN_DELIVERED) {
                    continue;
                }
                /* The client has it all before the worker said so (or from
                 * an earlier owner): nothing more is needed from there. */
                jw_done(jw, ep->cost != NULL ? ep->cost[idx] : 0, now_ms);
                revoke_at_owner(job, s, ids[i]);
            }
        }
        detach(js, job, s, ids[i]);
        s->state = DISP_SPLIT_RECEIVED;
        ep->nreceived++;
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
            s->state = DISP_SPLIT_PENDING;
            s->owner = 0;
            ep->npending++;
            ep->nreceived--;
            if (ring_push_front(s->local ? &ep->local : &ep->remote, i) != 0) {
                SL_ERR("job %" PRIu64 ": split queue overflow (bug)", job->id);
            }
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
        disp_epoch_t *ep = epoch_of(job, ids[i], &idx);
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
        revoke_at_owner(job, s, ids[i]);
        take_back(js, job, ep, idx);
        done++;
    }
    disp_jw_t *jw = worker_id != 0 ? disp_job_jw(job, worker_id) : NULL;
    while (jw != NULL && jw->n > 0) {
        /* Last first, so they keep their order at the front of the queue. */
        uint64_t id = jw->ids[jw->n - 1];
        uint32_t idx = 0;
        disp_epoch_t *ep = epoch_of(job, id, &idx);
        if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_ASSIGNED) {
            jw->n--; /* cannot happen while the invariants hold */
            continue;
        }
        revoke_at_owner(job, &ep->splits[idx], id);
        take_back(js, job, ep, idx);
        done++;
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

/* Returns every split of jw to the queue, last first, so that they keep
 * their order at the front. */
static size_t take_back_all(disp_jobs_t *js, disp_job_t *job, disp_jw_t *jw)
{
    size_t n = 0;
    while (jw->n > 0) {
        uint64_t id = jw->ids[jw->n - 1];
        uint32_t idx = 0;
        disp_epoch_t *ep = epoch_of(job, id, &idx);
        if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_ASSIGNED) {
            jw->n--; /* cannot happen while the invariants hold */
            continue;
        }
        take_back(js, job, ep, idx);
        n++;
    }
    return n;
}

void disp_jobs_worker_lost(disp_jobs_t *js, uint64_t worker_id, int64_t now_ms)
{
    for (size_t i = 0; i < js->n; i++) {
        disp_job_t *job = js->jobs[i];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, worker_id);
        if (jw == NULL) {
            continue;
        }
        size_t n = take_back_all(js, job, jw);
        if (n > 0) {
            SL_NOTICE("job %" PRIu64 ": %zu split(s) of lost worker %" PRIu64 " re-queued",
                      job->id, n, worker_id);
        }
        jw_remove(job, jw);
        disp_jobs_assign(js, job, now_ms);
    }
}

size_t disp_jobs_worker_left(disp_jobs_t *js, uint64_t worker_id, int64_t now_ms)
{
    size_t total = 0;
    for (size_t i = 0; i < js->n; i++) {
        disp_job_t *job = js->jobs[i];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, worker_id);
        if (jw == NULL) {
            continue;
        }
        size_t n = 0;
        for (uint32_t k = jw->n; k-- > 0;) {
            uint32_t idx = 0;
            disp_epoch_t *ep = epoch_of(job, jw->ids[k], &idx);
            if (jw->sent[k] == DISP_AN_DELIVERED || ep == NULL ||
                ep->splits[idx].state != DISP_SPLIT_ASSIGNED) {
                continue;
            }
            take_back(js, job, ep, idx);
            n++;
        }
        if (n > 0) {
            SL_NOTICE("job %" PRIu64 ": %zu split(s) of departed worker %" PRIu64 " re-queued",
                      job->id, n, worker_id);
            disp_jobs_assign(js, job, now_ms);
        }
        total += n;
    }
    return total;
}

int disp_jobs_worker_refused(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id,
                             const char *reason, int64_t now_ms)
{
    if (job->state == DISP_JOB_CLOSED) {
        return 0;
    }
    disp_jw_t *jw = jw_create(js, job, worker_id);
    if (jw == NULL) {
        return -ENOMEM;
    }
    if (!jw->banned) {
        char why[200];
        disp_text_copy(why, sizeof(why),
                       reason != NULL && reason[0] != '\0' ? reason : "(no reason given)");
        SL_WARN("job %" PRIu64 ": worker %" PRIu64 " cannot run it: \"%s\"; its splits go "
                "to other workers or the client",
                job->id, worker_id, why);
        snprintf(job->worker_failure, sizeof(job->worker_failure), "worker %" PRIu64 ": %s",
                 worker_id, why);
    }
    jw->banned = 1;
    jw->nrevoked = 0;
    (void)take_back_all(js, job, jw);
    disp_jobs_assign(js, job, now_ms);
    return 0;
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
                i++; /* not durable: stays open, retried on the next pass */
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

/* ------------------------------------------------------------ planner hook */

void disp_jobs_replan(disp_jobs_t *js, disp_job_t *job, int64_t now_ms)
{
    if (job->state != DISP_JOB_ACTIVE) {
        return;
    }
    for (uint32_t k = 0; k < job->nep; k++) {
        disp_epoch_t *ep = &job->ep[k];
        disp_ring_t local;
        disp_ring_t remote;
        if (ring_init(&local, job->nsplits) != 0 || ring_init(&remote, job->nsplits) != 0) {
            ring_free(&local);
            SL_ERR("job %" PRIu64 ": out of memory re-planning; the old share stays", job->id);
            return;
        }
        /* Returned splits (handed out before, so planned) first, in queue
         * order; then the never-handed-out ones in position order, under
         * the new share. Each PENDING split is in exactly one old ring. */
        disp_ring_t *old[2] = {&ep->remote, &ep->local};
        for (int r = 0; r < 2; r++) {
            for (uint32_t i = 0; i < old[r]->len; i++) {
                uint32_t idx = old[r]->buf[(old[r]->head + i) % old[r]->cap];
                disp_split_t *s = &ep->splits[idx];
                if (s->state == DISP_SPLIT_PENDING && s->planned) {
                    (void)ring_push_back(s->local ? &local : &remote, idx);
                }
            }
        }
        for (uint32_t idx = 0; idx < job->nsplits; idx++) {
            disp_split_t *s = &ep->splits[idx];
            if (s->state == DISP_SPLIT_PENDING && !s->planned) {
                s->local = (uint8_t)disp_plan_split_is_local(idx, job->plan.local_share);
                (void)ring_push_back(s->local ? &local : &remote, idx);
            }
        }
        ring_free(&ep->local);
        ring_free(&ep->remote);
        ep->local = local;
        ep->remote = remote;
    }
    disp_jobs_assign(js, job, now_ms);
}

/* ------------------------------------------------------------ journal restore */

uint64_t disp_job_end_epoch(const disp_job_t *job) { return job->first_epoch + job->epochs; }

int disp_jobs_restore(disp_jobs_t *js, disp_job_t *job, uint64_t live_epoch,
                      const uint64_t *acked, size_t n, int64_t now_ms)
{
    /* Forget whatever submit handed out: nothing is assigned after a
     * restart (workers re-register, the client asks again). */
    for (uint32_t k = 0; k < job->nep; k++) {
        epoch_free(&job->ep[k]);
    }
    memset(job->ep, 0, sizeof(job->ep));
    job->nep = 0;
    job->nclient = 0;
    for (size_t i = 0; i < job->njw; i++) {
        job->jw[i].n = 0;
        job->jw[i].nrevoked = 0;
    }
    uint64_t end = disp_job_end_epoch(job);
    job->next_epoch = live_epoch < job->first_epoch ? job->first_epoch
                      : live_epoch < end           ? live_epoch
                                                   : end;
    /* Both epochs that may have been live before the restart: the client
     * may still hold unsent acks of either, and an ack of an epoch not yet
     * created would be dropped (and its split never completed again, its
     * samples being duplicates by then). */
    uint64_t last = job->next_epoch + 1;
    while (job->next_epoch <= last && job->next_epoch < end && job->nep < 2) {
        if (epoch_create(job) != 0) {
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t idx = 0;
        disp_epoch_t *ep = epoch_of(job, acked[i], &idx);
        if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_PENDING) {
            continue; /* an epoch not live, or a repeated id */
        }
        ep->splits[idx].state = DISP_SPLIT_ACKED;
        ep->npending--;
        ep->nacked++;
        ep->acked_positions += split_len(job, ep, idx);
        job->acked_total++;
    }
    (void)advance(job, now_ms);
    (void)js;
    return 0;
}
