/* stats: see stats.h. */
#include "client/lib/stats.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/profile.h"
#include "client/lib/url_pins.h"
#include "common/base/clock.h"
#include "common/data/source.h"
#include "common/order/blend.h"
#include "common/order/ranks.h"
#include "common/pcache/pcache.h"
#include "common/spec/resume.h"

void sluice_get_stats(const sluice_job_t *job, sluice_stats_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    sl_batcher_stats_t bs = {0};
    if (job->consumer.line != NULL) { /* NULL: a job opened by sluice_describe */
        cl_line_stats(job->consumer.line, &bs);
        /* What the caller got from sluice_next_batch, so the count matches
         * its batches (and --digests) also when the job fails with batches
         * queued or drop_last discards a remainder. */
        ret->delivered = cl_line_popped(job->consumer.line);
    }
    for (int i = 0; i < SL_SKIP__COUNT; i++) {
        ret->skipped += i != SL_SKIP_RESUMED ? bs.skipped[i] : 0; /* holes, not errors */
    }
    ret->duplicates_dropped = bs.duplicates;
    ret->from_local = job->consumer.from_local;
    ret->from_remote = job->consumer.from_remote;
    ret->seconds = sl_mono_sec() - job->consumer.t_start;
    ret->wait_seconds = job->consumer.wait_sec;
    snprintf(ret->plan_mode, sizeof(ret->plan_mode), "%s", job->plan_mode);
    ret->job_id = job->job_id;
    /* planner (client/lib/profile.h): the prediction of the current plan */
    cl_plan_info_t pi;
    cl_planner_get(job->planner, &pi);
    ret->plan_predicted = pi.predicted;
    snprintf(ret->plan_binding, sizeof(ret->plan_binding), "%s", pi.binding);
    ret->plan_version = pi.version;
    ret->profile_seconds = job->planner != NULL ? cl_planner_profile_seconds(job->planner) : 0;
    snprintf(ret->sample_costs, sizeof(ret->sample_costs), "%s", job->sample_costs);
    ret->first_epoch = job->first_epoch;
    ret->epochs = job->spec.epochs;
    ret->trainer_steps = job->consumer.steps.n;
    ret->trainer_fitted = job->consumer.steps.fitted;
    memcpy(ret->trainer_coef, job->consumer.steps.coef, sizeof(ret->trainer_coef));
    ret->trainer_error = job->consumer.steps.sum_y > 0
                             ? job->consumer.steps.abs_err / job->consumer.steps.sum_y
                             : 0;
    ret->step_load = job->bstats.step_load;
    ret->step_imbalance = job->bstats.imbalance;
    ret->step_imbalance_max = job->bstats.imbalance_max;
    ret->pack_fill = job->pstats.fill;
    ret->pack_oversize = job->pstats.oversize;
    snprintf(ret->guard_choice, sizeof(ret->guard_choice), "%s", job->guard.choice);
    snprintf(ret->guard_reason, sizeof(ret->guard_reason), "%s", job->guard.reason);
    ret->guard_rate_off = job->guard.rate_off;
    ret->guard_rate_all = job->guard.rate_all;
    ret->guard_rate_both = job->guard.rate_both;
    ret->guard_profile_sec = job->guard.profile_sec;
    ret->guard_gain_sec = job->guard.gain_sec;
    ret->guard_seconds = job->guard.seconds;
    pthread_mutex_lock((pthread_mutex_t *)&job->mu); /* the control thread writes these */
    snprintf(ret->fallback, sizeof(ret->fallback), "%s", job->fallback);
    ret->plan_split = job->split_units;
    ret->plan_local_share = job->local_share;
    ret->plan_compress = job->disp != NULL &&
                         (job->plan_compress || job->spec.compress == SL_COMPRESS_ZSTD);
    pthread_mutex_unlock((pthread_mutex_t *)&job->mu);
}

int sluice_local_reason(const sluice_job_t *job, char *buf, size_t len)
{
    cl_plan_info_t pi;
    cl_planner_get(job->planner, &pi);
    if (buf != NULL && len > 0) {
        snprintf(buf, len, "%s", pi.local_reason);
    }
    return (int)strlen(pi.local_reason);
}

int sluice_skip_counts(const sluice_job_t *job, const char **names, uint64_t *counts, int n)
{
    if (names == NULL || counts == NULL) {
        return SL_SKIP__COUNT;
    }
    sl_batcher_stats_t bs = {0};
    if (job->consumer.line != NULL) {
        cl_line_stats(job->consumer.line, &bs);
    }
    int k = 0;
    for (int i = 0; i < SL_SKIP__COUNT && k < n; i++) {
        names[k] = sl_skip_name((sl_skip_e)i);
        counts[k] = bs.skipped[i];
        k++;
    }
    return k;
}

int sluice_recent_skips(const sluice_job_t *job, sluice_skip_t *out, int n)
{
    if (job->consumer.line == NULL) {
        return 0;
    }
    return n > 0 ? (int)cl_line_recent_skips(job->consumer.line, out, (size_t)n) : 0;
}

void sluice_url_pins(const sluice_job_t *job, uint64_t *ret_pinned, uint64_t *ret_unpinned)
{
    *ret_pinned = job->pins != NULL ? cl_upins_count(job->pins) : 0;
    *ret_unpinned = job->pins != NULL ? cl_upins_unpinned(job->pins) : 0;
}

/* This rank's positions of epoch (a resumed epoch: what is left of it) and
 * the batches the batcher makes of them: never across epochs, the last
 * short one unless drop_last (then its samples are not delivered). */
static void epoch_counts(const sluice_job_t *job, uint64_t epoch, uint64_t *samples,
                         uint64_t *batches)
{
    uint64_t n = epoch == SLUICE_EPOCH_FULL
                     ? sl_rank_count(sl_spec_epoch_len(&job->spec, job->num_samples),
                                     job->spec.world_size, job->spec.rank_padding)
                     : sl_spec_live_positions(&job->spec, job->num_samples, epoch);
    uint64_t bs = job->spec.batch_size > 0 ? job->spec.batch_size : 1;
    *batches = job->spec.drop_last ? n / bs : n / bs + (n % bs != 0);
    *samples = job->spec.drop_last ? *batches * bs : n; /* drop_last's remainder is not delivered */
}

int sluice_epoch_counts(const sluice_job_t *job, uint64_t epoch, uint64_t *ret_samples,
                        uint64_t *ret_batches)
{
    if (job == NULL || ret_samples == NULL || ret_batches == NULL) {
        return -EINVAL;
    }
    epoch_counts(job, epoch, ret_samples, ret_batches);
    return 0;
}

int sluice_job_counts(const sluice_job_t *job, uint64_t *ret_samples, uint64_t *ret_batches)
{
    if (job == NULL || ret_samples == NULL || ret_batches == NULL) {
        return -EINVAL;
    }
    uint64_t samples = 0, batches = 0, full_s, full_b;
    epoch_counts(job, SLUICE_EPOCH_FULL, &full_s, &full_b);
    /* Only the epochs a resume continues differ from a full one. */
    for (uint64_t e = job->first_epoch; e < job->end_epoch; e++) {
        uint64_t s = full_s, b = full_b;
        if (sl_resume_find(job->spec.resume, e) != NULL) {
            epoch_counts(job, e, &s, &b);
        }
        samples += s;
        batches += b;
    }
    *ret_samples = samples;
    *ret_batches = batches;
    return 0;
}

uint32_t sluice_num_classes(const sluice_job_t *job)
{
    return job != NULL ? sl_source_num_classes(job->src) : 0;
}

const char *sluice_class_name(const sluice_job_t *job, uint32_t label)
{
    return job != NULL ? sl_source_class_name(job->src, label) : NULL;
}

void cl_job_info(const sluice_job_t *job, cl_job_info_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->epochs = job->spec.epochs;
    snprintf(ret->first_skip, sizeof(ret->first_skip), "%s",
             cl_line_first_skip(job->consumer.line));
    snprintf(ret->failed_on, sizeof(ret->failed_on), "%s", cl_line_failed_on(job->consumer.line));
    ret->nunits = job->nunits;
    for (uint32_t u = 0; u < job->nunits && u < SL_PIPE_MAX_UNITS; u++) {
        ret->unit_names[u] = sl_pipeline_unit_name(job->pipe, u);
    }
    cl_line_unit_stats(job->consumer.line, ret->units);
    pthread_mutex_lock((pthread_mutex_t *)&job->mu); /* the control thread writes it */
    memcpy(ret->workers_cache, job->workers_cache, sizeof(ret->workers_cache));
    pthread_mutex_unlock((pthread_mutex_t *)&job->mu);
    if (job->pc != NULL) {
        sl_pcache_stats_t c;
        sl_pcache_stats(job->pc, &c);
        ret->cache_prefix = sl_pcache_prefix(job->pc);
        ret->cache_hits = c.hits;
        ret->cache_misses = c.misses;
        ret->cache_bytes_read = c.bytes_read;
        ret->cache_bytes_written = c.bytes_written;
        ret->cache_evictions = c.evictions;
        ret->cache_bytes_evicted = c.bytes_evicted;
        ret->cache_store_errors = c.store_errors;
        ret->cache_corrupt = c.corrupt;
        ret->cache_waited = c.waited;
        ret->cache_claim_timeouts = c.claim_timeouts;
    }
}
