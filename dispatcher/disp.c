#include "dispatcher/disp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/clock.h"
#include "common/base/log.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/link_cache.h"
#include "dispatcher/planner/mix_cost_cache.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"

int64_t disp_now_ms(void) { return sl_mono_ms(); }

uint64_t disp_id_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec << 20) + 1;
}

int disp_init(disp_t *d, const disp_config_t *cfg, uint64_t first_id, int64_t now_ms)
{
    memset(d, 0, sizeof(*d));
    d->cfg = *cfg;
    d->start_ms = now_ms;
    int rc = pthread_mutex_init(&d->mu, NULL);
    if (rc != 0) {
        return -rc;
    }
    rc = disp_registry_init(&d->reg, (size_t)cfg->max_workers, first_id, now_ms);
    if (rc != 0) {
        pthread_mutex_destroy(&d->mu);
        return rc;
    }
    disp_limits_t lim = {
        .split_size = (uint32_t)cfg->split_size,
        .cost_splits = (int)cfg->cost_splits,
        .steal = (int)cfg->steal,
        .max_splits_per_worker = (uint32_t)cfg->max_splits_per_worker,
        .max_client_splits = (uint32_t)cfg->max_client_splits,
        .max_jobs = (uint32_t)cfg->max_jobs,
        .max_jobs_per_client = (uint32_t)cfg->max_jobs_per_client,
        .worker_timeout_ms = cfg->worker_timeout_ms,
        .client_timeout_ms = cfg->client_timeout_ms,
    };
    rc = disp_jobs_init(&d->jobs, &d->reg, &lim, first_id);
    if (rc == 0) {
        d->pcache = disp_pcache_new();
        d->lcache = calloc(1, sizeof(*d->lcache));
        d->mcache = disp_mcache_new();
        rc = d->pcache != NULL && d->lcache != NULL && d->mcache != NULL ? 0 : -ENOMEM;
        if (rc != 0) {
            disp_pcache_free(d->pcache);
            disp_mcache_free(d->mcache);
            free(d->lcache);
            disp_jobs_destroy(&d->jobs);
        }
    }
    if (rc != 0) {
        disp_registry_destroy(&d->reg);
        pthread_mutex_destroy(&d->mu);
        return rc;
    }
    return 0;
}

void disp_destroy(disp_t *d)
{
    disp_jstate_close(d);
    disp_jobs_destroy(&d->jobs);
    disp_pcache_free(d->pcache);
    disp_mcache_free(d->mcache);
    free(d->lcache);
    disp_registry_destroy(&d->reg);
    pthread_mutex_destroy(&d->mu);
}

void disp_tick(disp_t *d, int64_t now_ms)
{
    uint64_t lost[DISP_LOST_PER_TICK];
    pthread_mutex_lock(&d->mu);
    uint64_t before = disp_jstate_seq(d);
    size_t nlost = disp_registry_expire(&d->reg, now_ms, d->cfg.worker_timeout_ms, lost,
                                        DISP_LOST_PER_TICK);
    for (size_t i = 0; i < nlost; i++) {
        disp_worker_t *w = disp_registry_find(&d->reg, lost[i]);
        SL_WARN("worker %" PRIu64 " (%s) lost: silent for %lld ms", lost[i],
                w != NULL ? w->address : "?", d->cfg.worker_timeout_ms);
        disp_jobs_worker_lost(&d->jobs, lost[i], now_ms);
    }
    (void)disp_jobs_expire(&d->jobs, now_ms);
    disp_jobs_assign_all(&d->jobs, now_ms);
    disp_planner_tick(d, now_ms); /* re-plans: workers changed, or rates drifted */
    disp_jstate_maybe_compact(d, now_ms);
    uint64_t seq = disp_jstate_seq(d);
    pthread_mutex_unlock(&d->mu);
    /* Timeout closes and plans appended above: nobody waits for them, and
     * a crash before the sync only repeats them, but they should not sit
     * in the page cache until some RPC's sync. */
    if (seq > before && disp_jstate_wait(d, seq) != 0) {
        SL_WARN("journal: a sync failed; the next tick writes a snapshot of the state");
    }
}

void disp_drop_job(disp_t *d, uint64_t job_id, const char *reason, int64_t now_ms)
{
    pthread_mutex_lock(&d->mu);
    disp_job_t *job = disp_jobs_find(&d->jobs, job_id);
    if (job != NULL) {
        (void)disp_jstate_closed(d, job, reason);
        disp_jobs_close(&d->jobs, job, reason, now_ms);
    }
    pthread_mutex_unlock(&d->mu);
}
