/* status_metrics: /metrics, the Prometheus text (docs/reference/status.md "Status endpoint
 * reference"), as one table of families rendered by the shared writer
 * (common/base/metrics.h) under d->mu (and the history's mutex). Callable
 * from any thread.
 *
 * Each row names its family and how to get a value: a column of the totals
 * (one sample) or a getter over the rows of its scope (open jobs, workers,
 * their units, skip reasons). A getter returns -ENOENT where a row has no
 * sample (a job with no report yet).
 *
 * One series per label set: per-worker series are labelled by address only,
 * and a worker restarted on the same HOST:PORT registers again under a new id
 * while its old entry lingers (lost, left, or still live until its timeout).
 * One entry speaks for each address: a live one before the others, then the
 * latest registered. A unit named twice by a worker counts once (the first). */
#include "dispatcher/status/status_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/metrics.h"
#include "common/rpc/rpc.h"
#include "common/spec/mix.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/core/tenants.h"

/* A bound on the text: ~800k series, far beyond a max_workers cluster's
 * usual size; past it /metrics answers 500 instead of a cut exposition. */
#define DM_MAX_BYTES ((size_t)64 << 20)

typedef enum {
    DM_INFO,       /* sluice_build_info: labels version, protocol */
    DM_ONE,        /* one sample: a column of dm_totals_t */
    DM_SKIP,       /* per skip reason (history) */
    DM_JOB,        /* per open job */
    DM_WORKER,     /* per worker address */
    DM_UNIT,       /* per worker address and pipeline unit */
    DM_TENANT,     /* per configured tenant */
    DM_CLASS,      /* per worker class some job named (status_wanted.h; history) */
    DM_JOB_SOURCE, /* per open mixed job and source (status_mix.c) */
} dm_scope_e;

typedef struct dm_totals_s {
    double uptime, workers, lost, left, jobs, acked, reassigned, bytes, delivered, plan_changes,
        resumed;
} dm_totals_t;

typedef struct dm_ctx_s {
    disp_t *d;
    disp_status_t *st; /* NULL: no history */
    dm_totals_t tot;
    const disp_worker_t **reps; /* one worker per address, by address */
    size_t nreps;
    /* Who reads (status.h disp_view_e): per-job series only of the jobs the
     * reader may see in /status. */
    disp_view_e view;
    const char *tenant;
} dm_ctx_t;

/* A mixed job's source j and the positions of the current epoch it gets. */
typedef struct dm_job_source_s {
    const disp_job_t *job;
    uint32_t j;
    uint64_t epoch_samples;
} dm_job_source_t;

typedef struct dm_unit_s {
    const disp_worker_t *w;
    const disp_stage_stat_t *s;
} dm_unit_t;

/* row: a disp_job_t, disp_worker_t, dm_unit_t or disp_status_skip_t. */
typedef int (*dm_get_fn)(const dm_ctx_t *c, const void *row, double *ret);

typedef struct dm_family_s {
    sl_metric_t m;
    dm_scope_e scope;
    int history;   /* only with the sampler's history */
    size_t column; /* DM_ONE: offsetof(dm_totals_t, ...) */
    dm_get_fn get; /* the other scopes */
} dm_family_t;

/* ------------------------------------------------------------ getters */

static int get_wanted(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)((const disp_wanted_class_t *)row)->published;
    return 0;
}

static int get_skip(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)((const disp_status_skip_t *)row)->count;
    return 0;
}

static int get_progress(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    uint64_t done = 0;
    uint64_t total = job->positions * job->epochs;
    if (disp_status_job_done(job, &done) != 0 || total == 0) {
        return -ENOENT;
    }
    *ret = (double)done / (double)total;
    return 0;
}

static int get_mix_samples(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)((const dm_job_source_t *)row)->epoch_samples;
    return 0;
}

static int get_mix_share(const dm_ctx_t *c, const void *row, double *ret)
{
    const dm_job_source_t *s = row;
    uint64_t n = s->job->spec.mix->samples_per_epoch;
    *ret = n > 0 ? (double)s->epoch_samples / (double)n : 0.0;
    return 0;
}

static int get_epoch(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)disp_status_job_epoch(row);
    return 0;
}

static int get_measured(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    *ret = job->rates.delivered_per_sec;
    return job->rates.have ? 0 : -ENOENT;
}

static int get_stall(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    *ret = job->rates.wait_fraction;
    return job->rates.have ? 0 : -ENOENT;
}

static int get_step_load(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    *ret = job->rates.step_load;
    return job->rates.have && job->rates.step_imbalance > 0 ? 0 : -ENOENT;
}

static int get_pack_fill(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    (void)c;
    *ret = job->rates.pack_fill;
    return job->rates.have && job->rates.pack_fill > 0 ? 0 : -ENOENT;
}

static int get_pack_oversize(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    (void)c;
    *ret = (double)job->rates.pack_oversize;
    return job->rates.have && job->rates.pack_fill > 0 ? 0 : -ENOENT;
}

static int get_step_imbalance(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    *ret = job->rates.step_imbalance;
    return job->rates.have && job->rates.step_imbalance > 0 ? 0 : -ENOENT;
}

static int get_predicted(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_job_t *job = row;
    *ret = job->plan.predicted;
    return job->plan.predicted > 0 ? 0 : -ENOENT;
}

static int get_workers_needed(const dm_ctx_t *c, const void *row, double *ret)
{
    json_t *planner = disp_planner_status_json(row);
    long long need = disp_status_workers_needed(planner);
    json_decref(planner);
    *ret = (double)need;
    return need >= 0 ? 0 : -ENOENT;
}

static int get_plan_version(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = ((const disp_job_t *)row)->plan.version;
    return 0;
}

static int get_stolen(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)((const disp_job_t *)row)->stolen_total;
    return 0;
}

static int get_client_helped(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)((const disp_job_t *)row)->client_helped_total;
    return 0;
}

static int get_plan_split(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = ((const disp_job_t *)row)->plan.split;
    return 0;
}

static int get_plan_share(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = ((const disp_job_t *)row)->plan.local_share;
    return 0;
}

static int get_up(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = ((const disp_worker_t *)row)->state == DISP_WORKER_LIVE;
    return 0;
}

/* A lost or departed worker's last heartbeat no longer describes it: 0. */
static int get_load(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_worker_t *w = row;
    *ret = w->state == DISP_WORKER_LIVE ? w->load : 0;
    return 0;
}

static int get_buffered(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_worker_t *w = row;
    *ret = w->state == DISP_WORKER_LIVE ? (double)w->buffered_bytes : 0;
    return 0;
}

static int get_worker_rate(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_worker_t *w = row;
    *ret = disp_status_worker_rate(disp_status_wrec(c->st, w));
    return 0;
}

static int get_unit_samples(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)((const dm_unit_t *)row)->s->samples;
    return 0;
}

static int get_unit_bytes(const dm_ctx_t *c, const void *row, double *ret)
{
    const disp_stage_stat_t *s = ((const dm_unit_t *)row)->s;
    *ret = s->out_bytes_per_sample * (double)s->samples;
    return 0;
}

static int get_tenant_jobs(const dm_ctx_t *c, const void *row, double *ret)
{
    *ret = (double)disp_tenants_open_jobs(c->d, ((const sl_tenant_t *)row)->name);
    return 0;
}

/* ------------------------------------------------------------ the table */

#define G SL_METRIC_GAUGE
#define C SL_METRIC_COUNTER
#define ONE(name, type, help, prec, col, hist) \
    {{name, type, help, {NULL}, prec}, DM_ONE, hist, offsetof(dm_totals_t, col), NULL}
/* Job series carry the job's tenant ("" for the cluster token's jobs), so
 * a team's dashboards select on it. */
#define JOB(name, help, prec, fn) {{name, G, help, {"job", "tenant"}, prec}, DM_JOB, 0, 0, fn}
#define JOB_COUNTER(name, help, fn)                                                                \
    {                                                                                              \
        {name, C, help, {"job", "tenant"}, 0}, DM_JOB, 0, 0, fn                                    \
    }
#define WORKER(name, help, prec, fn, hist) \
    {{name, G, help, {"worker"}, prec}, DM_WORKER, hist, 0, fn}
#define UNIT(name, help, fn) {{name, C, help, {"worker", "unit"}, 0}, DM_UNIT, 0, 0, fn}

static const dm_family_t DM_FAMILIES[] = {
    {{"sluice_build_info", G, "Dispatcher version (value 1).", {"version", "protocol"}, 0},
     DM_INFO,
     0,
     0,
     NULL},
    ONE("sluice_uptime_seconds", G, "Seconds since the dispatcher started.", 3, uptime, 0),
    ONE("sluice_workers", G, "Live workers.", 0, workers, 0),
    ONE("sluice_workers_lost", G, "Lost workers (silent past the timeout) still listed.", 0, lost,
        0),
    ONE("sluice_workers_left", G, "Workers that left (drained after SIGTERM) still listed.", 0,
        left, 0),
    ONE("sluice_jobs", G, "Open jobs.", 0, jobs, 0),
    ONE("sluice_splits_acked_total", C, "Splits acknowledged by clients.", 0, acked, 0),
    ONE("sluice_splits_reassigned_total", C,
        "Splits taken back from a worker (lost, refused, stream broken) and re-assigned.", 0,
        reassigned, 0),
    ONE("sluice_bytes_sent_total", C,
        "Batch bytes workers sent to clients (from their heartbeats).", 0, bytes, 0),
    ONE("sluice_samples_delivered_total", C,
        "Samples of acknowledged splits delivered to training loops (skips excluded).", 0,
        delivered, 1),
    {{"sluice_samples_skipped_total", C, "Samples skipped, by reason.", {"reason"}, 0},
     DM_SKIP,
     1,
     0,
     get_skip},
    ONE("sluice_samples_resumed_total", C,
        "Positions resumed jobs passed over because their predecessors delivered them (not "
        "skips).",
        0, resumed, 1),
    ONE("sluice_plan_changes_total", C, "Re-plans of running jobs.", 0, plan_changes, 1),
    {{"sluice_tenant_jobs", G, "Open jobs of each configured tenant.", {"tenant"}, 0},
     DM_TENANT,
     0,
     0,
     get_tenant_jobs},
    {{"sluice_workers_wanted",
      G,
      "Workers of the class the cluster should have: the open jobs' wants summed, capped at "
      "max_workers, up at once and down after 60 s below (autoscaler input).",
      {"class"},
      0},
     DM_CLASS,
     1,
     0,
     get_wanted},

    JOB("sluice_job_progress_ratio", "Fraction of the job's samples done.", 6, get_progress),
    JOB("sluice_job_epoch", "Oldest epoch still being delivered.", 0, get_epoch),
    JOB("sluice_job_measured_samples_per_second", "Delivery rate the job's client last reported.",
        3, get_measured),
    JOB("sluice_job_stall_ratio", "Fraction of the training loop's time spent waiting for a batch.",
        4, get_stall),
    JOB("sluice_job_step_load",
        "Balanced batching: the rank's predicted trainer load per step (model units).", 3,
        get_step_load),
    JOB("sluice_job_step_imbalance_ratio",
        "Balanced batching: predicted max / mean rank load per step, mean over the steps.", 4,
        get_step_imbalance),
    JOB("sluice_job_pack_fill_ratio",
        "Packed batching: mean tokens / token budget per pack over the first epoch's full steps.",
        4, get_pack_fill),
    JOB("sluice_job_pack_oversize_samples",
        "Packed batching: samples of an epoch longer than a pack's budgets (a pack each).", 0,
        get_pack_oversize),
    {{"sluice_job_source_epoch_samples",
      G,
      "Mixed jobs: positions of the current epoch the blend gives each source.",
      {"job", "tenant", "source"},
      0},
     DM_JOB_SOURCE,
     0,
     0,
     get_mix_samples},
    {{"sluice_job_source_share_ratio",
      G,
      "Mixed jobs: each source's share of the current epoch's positions.",
      {"job", "tenant", "source"},
      4},
     DM_JOB_SOURCE,
     0,
     0,
     get_mix_share},
    JOB("sluice_job_predicted_samples_per_second",
        "Delivery rate the job's current plan predicts (planned jobs only).", 3, get_predicted),
    JOB("sluice_job_workers_needed",
        "More workers of the measured speed that would lift the binding resource (hint).", 0,
        get_workers_needed),
    JOB("sluice_job_plan_version", "Plan version (1 + re-plans).", 0, get_plan_version),
    JOB_COUNTER("sluice_job_splits_stolen_total",
                "Queued splits moved from a slower worker to a faster one.", get_stolen),
    JOB_COUNTER("sluice_job_splits_client_helped_total",
                "Remote splits the job's idle client ran itself.", get_client_helped),
    JOB("sluice_job_plan_split", "Pipeline units the current plan runs remotely.", 0,
        get_plan_split),
    JOB("sluice_job_plan_local_share", "Fraction of splits the current plan leaves to the client.",
        4, get_plan_share),

    WORKER("sluice_worker_up", "1 for a live worker, 0 for a lost or left one.", 0, get_up, 0),
    WORKER("sluice_worker_load", "Busy threads / threads, last heartbeat.", 4, get_load, 0),
    WORKER("sluice_worker_buffered_bytes", "Finished batches waiting for clients.", 0, get_buffered,
           0),
    UNIT("sluice_worker_unit_samples_total",
         "Samples a worker's pipeline unit processed (since the worker registered).",
         get_unit_samples),
    UNIT("sluice_worker_unit_output_bytes_total",
         "Bytes a worker's pipeline unit produced; the plan's last remote unit's output is what "
         "the worker sends.",
         get_unit_bytes),
    WORKER("sluice_worker_samples_per_second", "Samples per second a worker finishes (smoothed).",
           3, get_worker_rate, 1),
};

#undef G
#undef C
#undef ONE
#undef JOB
#undef JOB_COUNTER
#undef WORKER
#undef UNIT

/* ------------------------------------------------------------ rendering */

/* By address; within one, the entry that speaks for it first. */
static int by_address(const void *a, const void *b)
{
    const disp_worker_t *x = *(const disp_worker_t *const *)a;
    const disp_worker_t *y = *(const disp_worker_t *const *)b;
    int c = strcmp(x->address, y->address);
    int xlive = x->state == DISP_WORKER_LIVE;
    int ylive = y->state == DISP_WORKER_LIVE;
    if (c != 0 || xlive != ylive) {
        return c != 0 ? c : ylive - xlive;
    }
    if (x->registered_ms != y->registered_ms) {
        return x->registered_ms > y->registered_ms ? -1 : 1;
    }
    return x->id > y->id ? -1 : x->id < y->id;
}

static int pick_workers(dm_ctx_t *c)
{
    const disp_registry_t *r = &c->d->reg;
    if (r->n == 0) {
        return 0;
    }
    c->reps = malloc(r->n * sizeof(*c->reps));
    if (c->reps == NULL) {
        return -ENOMEM;
    }
    memcpy(c->reps, r->workers, r->n * sizeof(*c->reps));
    qsort(c->reps, r->n, sizeof(*c->reps), by_address);
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (k == 0 || strcmp(c->reps[k - 1]->address, c->reps[i]->address) != 0) {
            c->reps[k++] = c->reps[i];
        }
    }
    c->nreps = k;
    return 0;
}

static void fill_totals(dm_ctx_t *c, int64_t now_ms)
{
    const disp_t *d = c->d;
    dm_totals_t *t = &c->tot;
    t->uptime = (double)(now_ms - d->start_ms) / 1000.0;
    t->workers = (double)d->reg.nlive;
    t->lost = (double)disp_status_count_workers(&d->reg, DISP_WORKER_LOST);
    t->left = (double)disp_status_count_workers(&d->reg, DISP_WORKER_LEFT);
    t->jobs = (double)d->jobs.nopen;
    t->acked = (double)d->jobs.splits_acked_total;
    t->reassigned = (double)d->jobs.splits_reassigned_total;
    t->bytes = (double)d->reg.bytes_sent_total;
    if (c->st != NULL) {
        t->delivered = (double)c->st->delivered_total;
        t->plan_changes = (double)c->st->plan_changes_total;
        t->resumed = (double)c->st->resumed_total;
    }
}

/* One sample of f for row, when its getter has one. */
static void sample_row(sl_metrics_t *m, const dm_ctx_t *c, const dm_family_t *f, const void *row,
                       const char *const *labels)
{
    double v = 0;
    if (f->get(c, row, &v) == 0) {
        (void)sl_metrics_sample(m, &f->m, labels, v); /* an error sticks in m */
    }
}

static int unit_named_before(const disp_worker_t *w, uint32_t k)
{
    for (uint32_t j = 0; j < k; j++) {
        if (strcmp(w->stages[j].name, w->stages[k].name) == 0) {
            return 1;
        }
    }
    return 0;
}

static void render_units(sl_metrics_t *m, const dm_ctx_t *c, const dm_family_t *f)
{
    for (size_t i = 0; i < c->nreps; i++) {
        const disp_worker_t *w = c->reps[i];
        uint32_t n = w->nstages < DISP_STAGE_STATS_MAX ? w->nstages : DISP_STAGE_STATS_MAX;
        for (uint32_t k = 0; k < n; k++) {
            if (!unit_named_before(w, k)) {
                dm_unit_t u = {w, &w->stages[k]};
                const char *labels[] = {w->address, w->stages[k].name};
                sample_row(m, c, f, &u, labels);
            }
        }
    }
}

static void render_job_sources(sl_metrics_t *m, const dm_ctx_t *c, const dm_family_t *f)
{
    for (size_t i = 0; i < c->d->jobs.n; i++) {
        const disp_job_t *job = c->d->jobs.jobs[i];
        int shown = c->view == DISP_VIEW_ALL ||
                    (c->view == DISP_VIEW_TENANT && strcmp(job->tenant, c->tenant) == 0);
        uint64_t counts[SL_MIX_MAX_SOURCES];
        if (job->state == DISP_JOB_CLOSED || !shown || disp_status_mix_counts(job, counts) < 0) {
            continue;
        }
        char id[32];
        snprintf(id, sizeof(id), "%" PRIu64, job->id);
        for (uint32_t j = 0; j < job->spec.mix->nsources; j++) {
            dm_job_source_t s = {job, j, counts[j]};
            const char *labels[] = {id, job->tenant, job->spec.mix->src[j].name};
            sample_row(m, c, f, &s, labels);
        }
    }
}

static void render_family(sl_metrics_t *m, const dm_ctx_t *c, const dm_family_t *f)
{
    char buf[32];
    const char *labels[2] = {buf, NULL};
    (void)sl_metrics_family(m, &f->m);
    switch (f->scope) {
    case DM_INFO:
        snprintf(buf, sizeof(buf), "%d", SL_PROTOCOL_VERSION);
        labels[0] = SL_VERSION;
        labels[1] = buf;
        (void)sl_metrics_sample(m, &f->m, labels, 1);
        break;
    case DM_ONE:
        (void)sl_metrics_sample(m, &f->m, NULL,
                                *(const double *)((const char *)&c->tot + f->column));
        break;
    case DM_SKIP:
        for (size_t i = 0; i < c->st->nskips; i++) {
            labels[0] = c->st->skips[i].reason;
            sample_row(m, c, f, &c->st->skips[i], labels);
        }
        break;
    case DM_JOB:
        for (size_t i = 0; i < c->d->jobs.n; i++) {
            const disp_job_t *job = c->d->jobs.jobs[i];
            int shown = c->view == DISP_VIEW_ALL ||
                        (c->view == DISP_VIEW_TENANT && strcmp(job->tenant, c->tenant) == 0);
            if (job->state != DISP_JOB_CLOSED && shown) {
                snprintf(buf, sizeof(buf), "%" PRIu64, job->id);
                labels[1] = job->tenant;
                sample_row(m, c, f, job, labels);
            }
        }
        break;
    case DM_TENANT:
        for (size_t i = 0; i < c->d->tenants.n; i++) {
            labels[0] = c->d->tenants.t[i].name;
            sample_row(m, c, f, &c->d->tenants.t[i], labels);
        }
        break;
    case DM_CLASS:
        for (uint32_t i = 0; i < c->st->wanted.n; i++) {
            labels[0] = c->st->wanted.c[i].key;
            sample_row(m, c, f, &c->st->wanted.c[i], labels);
        }
        break;
    case DM_WORKER:
        for (size_t i = 0; i < c->nreps; i++) {
            labels[0] = c->reps[i]->address;
            sample_row(m, c, f, c->reps[i], labels);
        }
        break;
    case DM_UNIT:
        render_units(m, c, f);
        break;
    case DM_JOB_SOURCE:
        render_job_sources(m, c, f);
        break;
    }
}

/* st NULL: no history (rates, monotonic totals): its families are left out. */
static char *build_metrics(disp_t *d, disp_status_t *st, int64_t now_ms, disp_view_e view,
                           const char *tenant, size_t *ret_len)
{
    char *text = NULL;
    dm_ctx_t c = {.d = d, .st = st, .view = view, .tenant = tenant != NULL ? tenant : ""};
    sl_metrics_t *m = sl_metrics_new(DM_MAX_BYTES);
    if (m == NULL) {
        return NULL;
    }
    disp_status_lock(d, st);
    int rc = pick_workers(&c);
    if (rc == 0) {
        fill_totals(&c, now_ms);
        for (size_t i = 0; i < sizeof(DM_FAMILIES) / sizeof(DM_FAMILIES[0]); i++) {
            if (st != NULL || !DM_FAMILIES[i].history) {
                render_family(m, &c, &DM_FAMILIES[i]);
            }
        }
    }
    disp_status_unlock(d, st);
    if (rc == 0) {
        rc = sl_metrics_take(m, &text, ret_len);
    }
    free(c.reps);
    sl_metrics_free(m);
    return rc == 0 ? text : NULL;
}

char *disp_status_metrics(disp_t *d, int64_t now_ms, size_t *ret_len)
{
    return build_metrics(d, NULL, now_ms, DISP_VIEW_ALL, NULL, ret_len);
}

char *disp_status_render_metrics(disp_status_t *st, int64_t now_ms, size_t *ret_len)
{
    return build_metrics(st->d, st, now_ms, DISP_VIEW_ALL, NULL, ret_len);
}

char *disp_status_render_metrics_for(disp_status_t *st, int64_t now_ms, disp_view_e view,
                                     const char *tenant, size_t *ret_len)
{
    return build_metrics(st->d, st, now_ms, view, tenant, ret_len);
}
