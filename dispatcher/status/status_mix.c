/* status_mix: a mixed job's sources on /status and /metrics
 * (docs/mixing.md "Watching a mix"): each source's name, its target share
 * and the positions the blend gives it in the job's current epoch (the
 * plan the dispatcher's splits cut; the client's --json counts what was
 * delivered). Under d->mu, like the rest of the status pages. */
#include <errno.h>
#include <math.h>

#include "common/order/blend.h"
#include "common/spec/mix.h"
#include "dispatcher/status/status_impl.h"

/* Above this many positions an epoch's counts are its shares times its
 * length (the blend keeps them within one sample of it) instead of a
 * walk of the greedy under the status lock. */
#define MIX_COUNT_WALK_MAX (UINT64_C(1) << 22)

int disp_status_mix_counts(const disp_job_t *job, uint64_t *counts)
{
    const sl_mix_t *m = job->spec.mix;
    if (m == NULL || !sl_mix_resolved(m)) {
        return -ENOENT;
    }
    uint64_t epoch = disp_status_job_epoch(job);
    epoch = epoch < job->epochs ? epoch : (job->epochs > 0 ? job->epochs - 1 : 0);
    uint64_t step_len = (uint64_t)job->spec.batch_size *
                        (job->spec.world_size > 0 ? job->spec.world_size : 1);
    if (m->samples_per_epoch <= MIX_COUNT_WALK_MAX) {
        return sl_blend_counts(m, step_len, epoch, counts);
    }
    double w[SL_MIX_MAX_SOURCES], sum = 0.0;
    sl_mix_weights_at(m, sl_blend_step(m, step_len, epoch, 0), w);
    for (uint32_t j = 0; j < m->nsources; j++) {
        sum += w[j];
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        counts[j] = (uint64_t)llround(w[j] / sum * (double)m->samples_per_epoch);
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
