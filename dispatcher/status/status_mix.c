/* status_mix: a mixed job's sources on /status and /metrics
 * (docs/mixing.md "Watching a mix"): each source's name, its target share
 * and the positions the blend gives it in the job's current epoch (the
 * plan the dispatcher's splits cut, an epoch resumed with other weights
 * counting the draws it carried; the client's --json counts what was
 * delivered). Under d->mu, like the rest of the status pages. */
#include <errno.h>
#include <math.h>

#include "common/order/blend.h"
#include "common/spec/mix.h"
#include "common/spec/resume.h"
#include "dispatcher/status/status_impl.h"

/* Above this many positions an epoch's counts are its shares times its
 * length (the blend keeps them within one sample of it) instead of a
 * walk of the greedy under the status lock. */
#define MIX_COUNT_WALK_MAX (UINT64_C(1) << 22)

/* A carry's draws per source (at most the epoch's length in all); returns
 * their sum. */
static uint64_t carried_counts(const sl_mix_t *m, const sl_resume_carry_t *carry, uint64_t *counts)
{
    uint64_t k = 0;
    for (uint32_t i = 0; carry != NULL && i < carry->nruns; i++) {
        const sl_resume_run_t *u = &carry->runs[i];
        uint64_t n = u->end - u->begin;
        n = n < m->samples_per_epoch - k ? n : m->samples_per_epoch - k;
        if (u->rank < m->nsources) {
            counts[u->rank] += n;
        }
        k += n;
    }
    return k;
}

int disp_status_mix_counts(const disp_job_t *job, uint64_t *counts)
{
    const sl_mix_t *m = job->spec.mix;
    if (m == NULL || !sl_mix_resolved(m)) {
        return -ENOENT;
    }
    uint64_t epoch = disp_status_job_epoch(job);
    epoch = epoch < job->epochs ? epoch : (job->epochs > 0 ? job->epochs - 1 : 0);
    /* An epoch resumed with other weights (docs/mixing.md "Resume"): the
     * draws it carried, then the new weights' blend in the resuming
     * world's steps -- as sl_spec_epoch_order lays it out. */
    const sl_resume_epoch_t *re = sl_resume_find(job->spec.resume, epoch);
    const sl_resume_carry_t *carry = re != NULL ? re->carry : NULL;
    uint32_t world = carry != NULL ? carry->world : job->spec.world_size;
    uint64_t step_len = (uint64_t)job->spec.batch_size * (world > 0 ? world : 1);
    if (m->samples_per_epoch <= MIX_COUNT_WALK_MAX) {
        return sl_blend_counts_carry(m, carry, step_len, epoch, counts);
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        counts[j] = 0;
    }
    uint64_t k = carried_counts(m, carry, counts);
    double w[SL_MIX_MAX_SOURCES], sum = 0.0;
    sl_mix_weights_at(m, sl_blend_step(m, step_len, epoch, k), w);
    for (uint32_t j = 0; j < m->nsources; j++) {
        sum += w[j];
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        counts[j] += (uint64_t)llround(w[j] / sum * (double)(m->samples_per_epoch - k));
    }
    return 0;
}

json_t *disp_status_mix_json(const disp_job_t *job)
{
    uint64_t counts[SL_MIX_MAX_SOURCES];
    if (disp_status_mix_counts(job, counts) < 0) {
        return NULL;
    }
    const sl_mix_t *m = job->spec.mix;
    json_t *a = json_array();
    for (uint32_t j = 0; a != NULL && j < m->nsources; j++) {
        double share = (double)counts[j] / (double)m->samples_per_epoch;
        json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:f}", "name", m->src[j].name,
                                           "source_samples", (json_int_t)m->src[j].count,
                                           "epoch_samples", (json_int_t)counts[j], "share", share));
    }
    return json_pack("{s:o, s:I, s:s}", "sources", a, "samples_per_epoch",
                     (json_int_t)m->samples_per_epoch, "stop", sl_mix_stop_name(m->stop));
}
