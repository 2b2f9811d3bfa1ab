/* status_impl: what the status files share and nobody else sees -- the
 * history's records (status_history.c keeps them, status_job_history.c each
 * job's line; status_json.c and status_metrics.c read them) and the per-job
 * arithmetic both documents use.
 *
 * Locking as in status.h: d->mu, then st->mu (disp_status_lock takes both).
 * Every function here wants d->mu held, and st->mu for the records. */
#ifndef DISP_STATUS_IMPL_H
#define DISP_STATUS_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatcher/disp.h"
#include "dispatcher/status/status.h"
#include "dispatcher/status/status_wanted.h"

#define DISP_STATUS_SKIP_REASONS 32 /* distinct skip reasons counted; the rest is "other" */

/* Units are told apart by a hash of their name: a record per registered
 * worker stays ~800 bytes, a small fraction of the registry's own entry. */
typedef struct disp_status_wrec_s {
    uint64_t id;
    int64_t hb_ms; /* last_heartbeat_ms the samples below come from (0: none yet) */
    uint32_t nstages;
    uint64_t names[DISP_STAGE_STATS_MAX]; /* a hash of each unit name (status_history.c) */
    uint64_t samples[DISP_STAGE_STATS_MAX];
    double rate[DISP_STAGE_STATS_MAX]; /* samples per second, smoothed */
    int rated;                         /* rate[] holds a measurement (not a start value) */
    int seen;                          /* sweep mark */
} disp_status_wrec_t;

/* One point of a job's line: the samples taken since the previous point,
 * averaged; t_ms and done as of the last of them. */
typedef struct disp_status_jpoint_s {
    int64_t t_ms;    /* since the dispatcher started, as the totals' history */
    uint64_t done;   /* samples done (delivered or skipped) by t_ms */
    float measured;  /* samples/s; < 0: none yet */
    float predicted; /* samples/s; < 0: none (fixed plans) */
} disp_status_jpoint_t;

/* A job's throughput from its first sample on, in at most
 * DISP_STATUS_JOB_POINTS points: when they fill up, neighbours merge in
 * pairs and each point stands for twice as many samples (stride). */
typedef struct disp_status_jhist_s {
    disp_status_jpoint_t pts[DISP_STATUS_JOB_POINTS]; /* oldest first */
    uint32_t n;
    uint32_t stride; /* samples per point */
    /* The point being built: acc_n samples of stride, sums of those with
     * a value; at its newest t_ms and done. */
    uint32_t acc_n, acc_nm, acc_np;
    double acc_m, acc_p;
    int64_t acc_t_ms;
    uint64_t acc_done;
} disp_status_jhist_t;

typedef struct disp_status_jrec_s {
    uint64_t id;
    uint64_t delivered; /* last value counted into the totals */
    uint32_t plan_version;
    char skip_names[DISP_SKIP_REASONS_MAX][DISP_NAME_MAX];
    uint64_t skip_counts[DISP_SKIP_REASONS_MAX];
    uint32_t nskips;
    double rate; /* delivered samples per second, smoothed */
    int rated;   /* rate holds a measurement */
    int64_t at_ms;
    int seen;
    int closed;                /* the job is closed: its line is over */
    disp_status_jhist_t *hist; /* owned; NULL past DISP_STATUS_JOB_HISTORIES */
} disp_status_jrec_t;

typedef struct disp_status_point_s {
    int64_t t_ms; /* since start */
    double samples_per_sec;
    uint32_t workers;
    uint32_t jobs;
} disp_status_point_t;

typedef struct disp_status_skip_s {
    char reason[DISP_NAME_MAX];
    uint64_t count;
} disp_status_skip_t;

/* Records are sorted by id up to nsorted (re-sorted after every sample);
 * the few added since sit unsorted behind them. Lookups are O(log n), so a
 * sample stays O(n log n) with max_workers in the tens of thousands. */
struct disp_status_s {
    disp_t *d;                   /* not owned */
    pthread_mutex_t mu;          /* guards all below; taken after d->mu, never before */
    disp_status_wrec_t *workers; /* one per worker in the registry at the last sample */
    size_t nw, capw, nsorted_w;
    disp_status_jrec_t *jobs; /* one per job in the table at the last sample */
    size_t nj, capj, nsorted_j;
    /* Monotonic totals: jobs leave the table, these never go down. Skip
     * reasons are unique (one "other" at most). */
    uint64_t delivered_total;
    uint64_t plan_changes_total;
    uint64_t resumed_total; /* positions resumed past (DISP_STATUS_RESUMED): not skips */
    disp_status_skip_t skips[DISP_STATUS_SKIP_REASONS];
    size_t nskips;
    disp_status_point_t hist[DISP_STATUS_HISTORY];
    size_t hhead, hlen; /* ring: oldest at hhead */
    size_t njhist;      /* job records with a hist, <= DISP_STATUS_JOB_HISTORIES */
    disp_wanted_t wanted; /* workers wanted per class (status_wanted.h) */
};

/* d->mu, then st->mu when st is not NULL (no history: unit tests). */
void disp_status_lock(disp_t *d, disp_status_t *st);
void disp_status_unlock(disp_t *d, disp_status_t *st);

/* The history's record of worker w / job id; NULL when it has none yet.
 * A worker that is not live gets a record of zero rates. */
const disp_status_wrec_t *disp_status_wrec(disp_status_t *st, const disp_worker_t *w);
const disp_status_jrec_t *disp_status_jrec(disp_status_t *st, uint64_t id);
/* A unit's rate in rec (0 when unknown). */
double disp_status_unit_rate(const disp_status_wrec_t *rec, const char *unit);
/* The worker's sample rate: every sample passes its first unit, so the
 * fastest unit rate is it. */
double disp_status_worker_rate(const disp_status_wrec_t *rec);

/* Samples of a job done so far (delivered or skipped), O(1). Returns 0 with
 * *ret set, -ENOENT when unknown (a job closed before finishing). */
int disp_status_job_done(const disp_job_t *job, uint64_t *ret);
/* Samples skipped (every reason the client reported but "resumed"). */
uint64_t disp_status_job_skipped(const disp_job_t *job);
/* Positions a resumed job passed over because its predecessor delivered
 * them (docs/protocol.md: not skips). The client reports them as the skip
 * reason DISP_STATUS_RESUMED (common/data/skip.h SL_SKIP_RESUMED); status
 * counts them apart: an alert on skips must not fire after every resume. */
#define DISP_STATUS_RESUMED "resumed"
uint64_t disp_status_job_resumed(const disp_job_t *job);
/* done (from disp_status_job_done) less the skips and the resumed-past. */
uint64_t disp_status_job_delivered(const disp_job_t *job, uint64_t done);
/* status_mix.c: a mixed job's positions per source in its current epoch
 * (counts: SL_MIX_MAX_SOURCES entries); -ENOENT for a job of one source. */
int disp_status_mix_counts(const disp_job_t *job, uint64_t *counts);
/* Its "mix" object on /status: sources (name, source_samples,
 * epoch_samples, share), samples_per_epoch, stop; NULL when not mixed. */
json_t *disp_status_mix_json(const disp_job_t *job);
/* The oldest epoch still being delivered (= epochs once finished). */
uint64_t disp_status_job_epoch(const disp_job_t *job);
/* The planner's hint in its status document (disp_planner_status_json, may
 * be NULL): more workers of the measured speed that would lift the binding
 * resource; -1 without a planner (fixed plans, closed jobs). */
long long disp_status_workers_needed(const json_t *planner);

/* status_job_history.c: one sample into h (measured, predicted < 0: none). */
void disp_status_jhist_add(disp_status_jhist_t *h, int64_t t_ms, uint64_t done, double measured,
                           double predicted);
/* The point being built, if it holds any sample: 1 and *ret set, else 0. */
int disp_status_jhist_pending(const disp_status_jhist_t *h, disp_status_jpoint_t *ret);
/* Seconds the job needs for the rest of total at its recent pace (the last
 * half minute of its line). Returns 0 with *ret set, -ENODATA when unknown
 * (no line, younger than a few seconds, no progress in the window). */
int disp_status_job_eta(const disp_status_jhist_t *h, uint64_t total, double *ret_sec);
/* What the line shows as measured: the client's report while fresh, else
 * the acknowledged rate in rec; -1 when neither is known. */
double disp_status_job_measured(const disp_job_t *job, const disp_status_jrec_t *rec,
                                int64_t now_ms);
/* Seconds the job ran: from submission to its finish or close, else now. */
double disp_status_job_elapsed(const disp_job_t *job, int64_t now_ms);
/* What pages call the job: its spec's "name", else its spec file's
 * basename, else "job ID" (never a path; never the Python binding's
 * temporary file). */
void disp_status_job_name(const disp_job_t *job, char *buf, size_t len);

/* Registered workers in state s (LIVE, LOST or LEFT). */
size_t disp_status_count_workers(const disp_registry_t *r, disp_worker_state_e s);

#endif
