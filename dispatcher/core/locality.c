/* locality: which worker holds which splits' prefix cache entries, and the
 * hand-out's preference for them (locality.h). */
#include "dispatcher/core/locality.h"

#include <errno.h>
#include <stdlib.h>

#include "common/spec/spec_layout.h"
#include "common/spec/spec_prefix.h"

#include "dispatcher/core/jobs_impl.h"

int disp_loc_applies(const disp_job_t *job)
{
    return !job->spec.shuffle && job->spec.mix == NULL && !job->plan.cache_off &&
           job->spec.cache != SL_CACHE_OFF && job->nsplits > 0 &&
           job->nsplits <= DISP_LOC_MAX_SPLITS;
}

int disp_loc_note(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id, uint64_t split_id)
{
    if (!disp_loc_applies(job)) {
        return 0;
    }
    disp_jw_t *jw = disp_job_jw(job, worker_id);
    if (jw == NULL) {
        /* It ran a split of the job, so it had a record; gone since (it
         * was lost and came back): a new one keeps what it holds. */
        jw = disp_jw_create(js, job, worker_id);
        if (jw == NULL) {
            return -ENOMEM;
        }
    }
    if (jw->held == NULL) {
        jw->held = calloc((job->nsplits + 7) / 8, 1);
        if (jw->held == NULL) {
            return -ENOMEM;
        }
        jw->held_bits = job->nsplits;
    }
    uint32_t idx = (uint32_t)(split_id % job->nsplits);
    jw->held[idx / 8] |= (uint8_t)(1u << (idx % 8));
    return 0;
}

/* The units the job's prefix cache keeps, as a worker's pcache computes
 * them (the layout with fusion, sl_spec_cache_prefix). */
static uint32_t prefix_of(disp_job_t *job)
{
    if (job->loc_prefix1 == 0) {
        sl_layout_t l;
        job->loc_prefix1 = 1 + (sl_spec_layout(&job->spec, 0, &l) == 0
                                    ? sl_spec_cache_prefix(&job->spec, &l)
                                    : 0);
    }
    return job->loc_prefix1 - 1;
}

void disp_loc_given(disp_jobs_t *js, disp_job_t *job, const disp_worker_t *w, uint64_t split_id,
                    uint32_t stage_to)
{
    uint32_t pre = disp_loc_applies(job) ? prefix_of(job) : 0;
    if (w != NULL && w->cache_bytes > 0 && pre > 0 && stage_to >= pre) {
        (void)disp_loc_note(js, job, w->id, split_id); /* ENOMEM: only a lost hint */
    }
}

int disp_loc_holds(const disp_jw_t *jw, uint32_t idx)
{
    return jw != NULL && jw->held != NULL && idx < jw->held_bits &&
           (jw->held[idx / 8] >> (idx % 8)) & 1u;
}

/* Another worker of the job holds idx. */
static int held_elsewhere(const disp_job_t *job, uint64_t worker_id, uint32_t idx)
{
    for (size_t i = 0; i < job->njw; i++) {
        if (job->jw[i].worker_id != worker_id && disp_loc_holds(&job->jw[i], idx)) {
            return 1;
        }
    }
    return 0;
}

/* Moves the entry at position pos of q to its front, the entries before it
 * keeping their order behind it. pos < DISP_LOC_LOOKAHEAD + 1. */
static void to_front(sl_ring_t *q, size_t pos)
{
    uint32_t before[DISP_LOC_LOOKAHEAD + 1];
    uint32_t target = 0;
    for (size_t i = 0; i < pos; i++) {
        (void)sl_ring_pop(q, &before[i]);
    }
    (void)sl_ring_pop(q, &target);
    /* Put back in reverse: room is what was just taken out. */
    for (size_t i = pos; i > 0; i--) {
        (void)sl_ring_push_front(q, &before[i - 1]);
    }
    (void)sl_ring_push_front(q, &target);
}

uint32_t disp_loc_prefer(disp_job_t *job, disp_epoch_t *ep, uint64_t worker_id, uint32_t idx)
{
    if (!disp_loc_applies(job)) {
        return idx;
    }
    const disp_jw_t *jw = disp_job_jw(job, worker_id);
    if (disp_loc_holds(jw, idx)) {
        job->loc_held++;
        return idx;
    }
    size_t n = sl_ring_len(&ep->remote);
    for (size_t pos = 1; jw != NULL && pos < n && pos <= DISP_LOC_LOOKAHEAD; pos++) {
        const uint32_t *at = sl_ring_at(&ep->remote, pos);
        if (at != NULL && ep->splits[*at].state == DISP_SPLIT_PENDING && disp_loc_holds(jw, *at)) {
            uint32_t found = *at;
            to_front(&ep->remote, pos);
            job->loc_held++;
            return found;
        }
    }
    if (held_elsewhere(job, worker_id, idx)) {
        job->loc_elsewhere++;
    }
    return idx;
}
