/* stats: see stats.h. */
#include "client/lib/stats.h"

#include <stdio.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/profile.h"
#include "common/base/clock.h"

void sluice_get_stats(const sluice_job_t *job, sluice_stats_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    sl_batcher_stats_t bs;
    cl_line_stats(job->consumer.line, &bs);
    ret->delivered = bs.delivered;
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
    sl_batcher_stats_t bs;
    cl_line_stats(job->consumer.line, &bs);
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
    return n > 0 ? (int)cl_line_recent_skips(job->consumer.line, out, (size_t)n) : 0;
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
}
