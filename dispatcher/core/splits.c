/* splits: what a split is and where the PENDING ones wait (jobs_impl.h).
 * Its states and the one function that moves them (disp_split_move: an
 * allow table, the per-state counts kept with it). Split ids and position
 * ranges (cut by count or by predicted cost), the auto split size, each
 * epoch's creation and its two queues of PENDING splits (sl_ring_t of split
 * indices, returned splits pushed to the front), re-classification on a
 * re-plan and the epochs rebuilt by journal replay. Caller holds the
 * dispatcher mutex. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "common/order/ranks.h"
#include "dispatcher/core/jobs_impl.h"

/* ------------------------------------------------------------ states */

/* The moves a split's state may make (row: from, column: to). PENDING ->
 * ACKED: an owner we gave up on delivered it (or journal replay); RECEIVED
 * (multi-rank) ends ACKED on the client's ack, or PENDING again when its
 * rank restarts. ACKED is final. */
static const uint8_t split_moves[DISP_SPLIT_NSTATES][DISP_SPLIT_NSTATES] = {
    /*                      PENDING ASSIGNED ACKED RECEIVED */
    [DISP_SPLIT_PENDING] = {0, 1, 1, 0},
    [DISP_SPLIT_ASSIGNED] = {1, 0, 1, 1},
    [DISP_SPLIT_ACKED] = {0, 0, 0, 0},
    [DISP_SPLIT_RECEIVED] = {1, 0, 1, 0},
};

static const char *const split_state_names[DISP_SPLIT_NSTATES] = {
    [DISP_SPLIT_PENDING] = "PENDING",
    [DISP_SPLIT_ASSIGNED] = "ASSIGNED",
    [DISP_SPLIT_ACKED] = "ACKED",
    [DISP_SPLIT_RECEIVED] = "RECEIVED",
};

int disp_split_move_allowed(disp_split_state_e from, disp_split_state_e to)
{
    return (unsigned)from < DISP_SPLIT_NSTATES && (unsigned)to < DISP_SPLIT_NSTATES &&
           split_moves[from][to];
}

/* The epoch's count of splits in state st (ASSIGNED has none: it is what
 * the others leave). */
static uint32_t *state_count(disp_epoch_t *ep, disp_split_state_e st)
{
    switch (st) {
    case DISP_SPLIT_PENDING:
        return &ep->npending;
    case DISP_SPLIT_ACKED:
        return &ep->nacked;
    case DISP_SPLIT_RECEIVED:
        return &ep->nreceived;
    default:
        return NULL;
    }
}

int disp_split_move(disp_jobs_t *js, disp_job_t *job, disp_epoch_t *ep, uint32_t idx,
                    disp_split_state_e to)
{
    disp_split_t *s = &ep->splits[idx];
    disp_split_state_e from = (disp_split_state_e)s->state;
    if (!disp_split_move_allowed(from, to)) {
        js->split_moves_refused++;
        SL_ERR("job %" PRIu64 ": split %" PRIu64 ": refused move %s -> %s", job->id,
               disp_split_id(job, ep, idx),
               (unsigned)from < DISP_SPLIT_NSTATES ? split_state_names[from] : "?",
               (unsigned)to < DISP_SPLIT_NSTATES ? split_state_names[to] : "?");
        return -EINVAL;
    }
    uint32_t *out = state_count(ep, from);
    uint32_t *in = state_count(ep, to);
    if (out != NULL) {
        (*out)--;
    }
    if (in != NULL) {
        (*in)++;
    }
    if (to == DISP_SPLIT_ACKED) {
        ep->acked_positions += disp_split_len(job, ep, idx);
        job->acked_total++;
    }
    s->state = (uint8_t)to;
    return 0;
}

/* ------------------------------------------------------------ ids and ranges */

uint64_t disp_split_id(const disp_job_t *job, const disp_epoch_t *ep, uint32_t idx)
{
    return ep->epoch * job->nsplits + idx;
}

disp_epoch_t *disp_epoch_of(disp_job_t *job, uint64_t id, uint32_t *ret_idx)
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

/* Positions [*ret_begin, *ret_end) of split idx of ep. */
static void split_range(const disp_job_t *job, const disp_epoch_t *ep, uint32_t idx,
                        uint64_t *ret_begin, uint64_t *ret_end)
{
    uint64_t begin = (uint64_t)idx * job->split_size;
    uint64_t end = begin + job->split_size;
    if (ep->bounds != NULL) {
        begin = ep->bounds[idx];
        end = ep->bounds[idx + 1];
    }
    *ret_begin = begin;
    *ret_end = end < job->positions ? end : job->positions;
}

uint64_t disp_split_len(const disp_job_t *job, const disp_epoch_t *ep, uint32_t idx)
{
    uint64_t begin = 0;
    uint64_t end = 0;
    split_range(job, ep, idx, &begin, &end);
    return end - begin;
}

disp_split_t *disp_job_split(disp_job_t *job, uint64_t id, uint64_t *ret_epoch,
                             uint64_t *ret_begin, uint64_t *ret_end)
{
    uint32_t idx = 0;
    disp_epoch_t *ep = disp_epoch_of(job, id, &idx);
    if (ep == NULL) {
        return NULL;
    }
    uint64_t begin = 0;
    uint64_t end = 0;
    split_range(job, ep, idx, &begin, &end);
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
            ep->cost[i] = (float)disp_split_len(job, ep, i);
        }
        return 0;
    }
    uint64_t n = job->positions; /* == num_samples: costs are single-consumer only */
    uint64_t *order = malloc(sl_spec_order_len(&job->spec, job->num_samples) * sizeof(*order));
    float *pc = malloc(n * sizeof(*pc));
    ep->bounds = malloc(((size_t)job->nsplits + 1) * sizeof(*ep->bounds));
    if (order == NULL || pc == NULL || ep->bounds == NULL) {
        free(order);
        free(pc);
        return -ENOMEM;
    }
    int rc = sl_rank_order(&job->spec, ep->epoch, job->num_samples, order, order);
    if (rc < 0) {
        free(order);
        free(pc);
        return rc;
    }
    for (uint64_t p = 0; p < n; p++) {
        pc[p] = order[p] == SL_POS_HOLE ? 0.0f : job->costs[order[p]];
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

/* ------------------------------------------------------------ epochs and queues */

void disp_epoch_free(disp_epoch_t *ep)
{
    free(ep->splits);
    free(ep->bounds);
    free(ep->cost);
    sl_ring_free(&ep->remote);
    sl_ring_free(&ep->local);
    memset(ep, 0, sizeof(*ep));
}

static sl_ring_t *queue_of(disp_epoch_t *ep, const disp_split_t *s)
{
    return s->local ? &ep->local : &ep->remote;
}

int disp_queue_front(const disp_epoch_t *ep, sl_ring_t *q, uint32_t *ret_idx)
{
    const uint32_t *front;
    while ((front = sl_ring_front(q)) != NULL) {
        if (ep->splits[*front].state == DISP_SPLIT_PENDING) {
            *ret_idx = *front;
            return 1;
        }
        (void)sl_ring_pop(q, NULL);
    }
    return 0;
}

void disp_queue_return(const disp_job_t *job, disp_epoch_t *ep, uint32_t idx)
{
    if (sl_ring_push_front(queue_of(ep, &ep->splits[idx]), &idx) != 0) {
        /* Each queue holds every split of its kind: would break the
         * once-per-queue invariant; never expected. */
        SL_ERR("job %" PRIu64 ": split queue overflow (bug)", job->id);
    }
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
    if (ep->splits == NULL || sl_ring_init(&ep->local, sizeof(uint32_t), nlocal) != 0 ||
        sl_ring_init(&ep->remote, sizeof(uint32_t), job->nsplits - nlocal) != 0 ||
        epoch_cut(job, ep) != 0) {
        disp_epoch_free(ep);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < job->nsplits; i++) {
        disp_split_t *s = &ep->splits[i];
        s->state = DISP_SPLIT_PENDING; /* born so: not a move */
        s->local = (uint8_t)disp_plan_split_is_local(i, job->plan.local_share);
        /* Cannot fail: each ring was sized for exactly its splits. */
        (void)sl_ring_push_back(queue_of(ep, s), &i);
    }
    ep->npending = job->nsplits;
    job->nep++;
    job->next_epoch++;
    SL_DEBUG("job %" PRIu64 ": epoch %" PRIu64 " created (%u splits, %u local)", job->id,
             ep->epoch, job->nsplits, nlocal);
    return 0;
}

int disp_epoch_advance(disp_job_t *job, int64_t now_ms)
{
    int created = 0;
    for (;;) {
        if (job->nep > 0 && job->ep[0].nacked == job->nsplits) {
            SL_INFO("job %" PRIu64 ": epoch %" PRIu64 " acknowledged", job->id,
                    job->ep[0].epoch);
            disp_epoch_free(&job->ep[0]);
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

/* ------------------------------------------------------------ planner hook */

/* Rebuilds ep's queues under the job's plan: returned splits (handed out
 * before, so planned) first, in queue order; then the never-handed-out
 * ones in position order, under the new share. Each PENDING split is in
 * exactly one old queue. */
static int requeue_epoch(const disp_job_t *job, disp_epoch_t *ep)
{
    sl_ring_t q[2]; /* [0] remote, [1] local, as s->local indexes them */
    if (sl_ring_init(&q[0], sizeof(uint32_t), job->nsplits) != 0 ||
        sl_ring_init(&q[1], sizeof(uint32_t), job->nsplits) != 0) {
        sl_ring_free(&q[0]);
        return -ENOMEM;
    }
    sl_ring_t *old[2] = {&ep->remote, &ep->local};
    uint32_t idx = 0;
    for (int r = 0; r < 2; r++) {
        while (sl_ring_pop(old[r], &idx) == 0) {
            const disp_split_t *s = &ep->splits[idx];
            if (s->state == DISP_SPLIT_PENDING && s->planned) {
                (void)sl_ring_push_back(&q[s->local], &idx);
            }
        }
    }
    for (idx = 0; idx < job->nsplits; idx++) {
        disp_split_t *s = &ep->splits[idx];
        if (s->state == DISP_SPLIT_PENDING && !s->planned) {
            s->local = (uint8_t)disp_plan_split_is_local(idx, job->plan.local_share);
            (void)sl_ring_push_back(&q[s->local], &idx);
        }
    }
    sl_ring_free(&ep->remote);
    sl_ring_free(&ep->local);
    ep->remote = q[0];
    ep->local = q[1];
    return 0;
}

void disp_jobs_replan(disp_jobs_t *js, disp_job_t *job, int64_t now_ms)
{
    if (job->state != DISP_JOB_ACTIVE) {
        return;
    }
    for (uint32_t k = 0; k < job->nep; k++) {
        if (requeue_epoch(job, &job->ep[k]) != 0) {
            SL_ERR("job %" PRIu64 ": out of memory re-planning; the old share stays", job->id);
            return;
        }
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
        disp_epoch_free(&job->ep[k]);
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
        disp_epoch_t *ep = disp_epoch_of(job, acked[i], &idx);
        if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_PENDING) {
            continue; /* an epoch not live, or a repeated id */
        }
        if (disp_split_move(js, job, ep, idx, DISP_SPLIT_ACKED) != 0) {
            continue; /* not reached: PENDING may always be acked */
        }
    }
    (void)disp_epoch_advance(job, now_ms);
    return 0;
}
