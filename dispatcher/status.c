/* status: JSON with jansson, Prometheus text with a growable buffer, and
 * the history (rates, monotonic totals) that both need across polls.
 * json_object_set_new steals its value even on failure, so the helpers
 * below only need to notice a NULL and remember. */
#include "dispatcher/status.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/planner_svc.h"
#include "proto/sluice.pb-c.h"

/* Smoothing of rates sampled once a second: half the weight on the newest
 * interval reacts within a few seconds yet hides heartbeat jitter. */
#define ST_ALPHA 0.5
#define ST_SKIP_REASONS 32 /* distinct skip reasons counted; the rest is "other" */

/* ------------------------------------------------------------ history */

/* Units are told apart by a hash of their name: a record per registered
 * worker stays ~800 bytes, a small fraction of the registry's own entry. */
typedef struct st_worker_s {
    uint64_t id;
    int64_t hb_ms; /* last_heartbeat_ms the samples below come from (0: none yet) */
    uint32_t nstages;
    uint64_t names[DISP_STAGE_STATS_MAX]; /* name_hash() of each unit */
    uint64_t samples[DISP_STAGE_STATS_MAX];
    double rate[DISP_STAGE_STATS_MAX]; /* samples per second, smoothed */
    int rated;                         /* rate[] holds a measurement (not a start value) */
    int seen;                          /* sweep mark */
} st_worker_t;

typedef struct st_job_s {
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
} st_job_t;

typedef struct st_point_s {
    int64_t t_ms; /* since start */
    double samples_per_sec;
    uint32_t workers;
    uint32_t jobs;
} st_point_t;

typedef struct st_skip_s {
    char reason[DISP_NAME_MAX];
    uint64_t count;
} st_skip_t;

/* Records are sorted by id up to nsorted (re-sorted after every sample);
 * the few added since sit unsorted behind them. Lookups are O(log n), so a
 * sample stays O(n log n) with max_workers in the tens of thousands. */
struct disp_status_s {
    disp_t *d;            /* not owned */
    pthread_mutex_t mu;   /* guards all below; taken after d->mu, never before */
    st_worker_t *workers; /* one per worker in the registry at the last sample */
    size_t nw, capw, nsorted_w;
    st_job_t *jobs; /* one per job in the table at the last sample */
    size_t nj, capj, nsorted_j;
    /* Monotonic totals: jobs leave the table, these never go down. */
    uint64_t delivered_total;
    uint64_t plan_changes_total;
    st_skip_t skips[ST_SKIP_REASONS];
    size_t nskips;
    st_point_t hist[DISP_STATUS_HISTORY];
    size_t hhead, hlen; /* ring: oldest at hhead */
};

/* Samples of a job done so far (delivered or skipped), O(1): done epochs
 * plus the live epochs' acknowledged positions. Returns 0 with *ret set,
 * -ENOENT when unknown (a job closed before finishing: its splits are gone,
 * the last sampled value stands). */
static int job_done_samples(const disp_job_t *job, uint64_t *ret)
{
    uint64_t per_epoch = job->positions; /* multi-rank: the rank's share */
    if (job->state == DISP_JOB_FINISHED ||
        (job->state == DISP_JOB_CLOSED && job->finished_ms != 0)) {
        *ret = per_epoch * job->epochs;
        return 0;
    }
    if (job->state == DISP_JOB_CLOSED) {
        return -ENOENT;
    }
    uint64_t full = job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
    uint64_t done = full * per_epoch;
    for (uint32_t k = 0; k < job->nep; k++) {
        done += job->ep[k].acked_positions; /* kept by jobs.c: cost-cut splits vary */
    }
    *ret = done;
    return 0;
}

static uint64_t job_skipped(const disp_job_t *job)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < job->nskips; i++) {
        n += job->skips[i].count;
    }
    return n;
}

static uint64_t job_delivered(const disp_job_t *job, uint64_t done)
{
    uint64_t sk = job_skipped(job);
    return done > sk ? done - sk : 0;
}

/* FNV-1a: stable across runs, good enough to tell a dozen unit names apart. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s != '\0'; s++) {
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    }
    return h;
}

/* Both record types start with the uint64_t id. */
static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void *find_rec(void *base, size_t nsorted, size_t n, size_t size, uint64_t id)
{
    void *r = nsorted > 0 ? bsearch(&id, base, nsorted, size, by_id) : NULL; /* base may be NULL */
    for (size_t i = nsorted; r == NULL && i < n; i++) {
        char *p = (char *)base + i * size;
        if (*(const uint64_t *)p == id) {
            r = p;
        }
    }
    return r;
}

/* Grows *base (n used of *cap records of size bytes) by one zeroed record. */
static void *add_rec(void **base, size_t *n, size_t *cap, size_t size, uint64_t id)
{
    if (*n == *cap) {
        size_t ncap = *cap > 0 ? *cap * 2 : 16;
        void *nb = realloc(*base, ncap * size);
        if (nb == NULL) {
            return NULL;
        }
        *base = nb;
        *cap = ncap;
    }
    char *r = (char *)*base + (*n)++ * size;
    memset(r, 0, size);
    memcpy(r, &id, sizeof(id));
    return r;
}

static st_worker_t *st_worker(disp_status_t *st, uint64_t id, int create)
{
    st_worker_t *r = find_rec(st->workers, st->nsorted_w, st->nw, sizeof(*r), id);
    if (r == NULL && create) {
        r = add_rec((void **)&st->workers, &st->nw, &st->capw, sizeof(*r), id);
    }
    return r;
}

static st_job_t *st_job(disp_status_t *st, uint64_t id, int create)
{
    st_job_t *r = find_rec(st->jobs, st->nsorted_j, st->nj, sizeof(*r), id);
    if (r == NULL && create) {
        r = add_rec((void **)&st->jobs, &st->nj, &st->capj, sizeof(*r), id);
    }
    return r;
}

static void st_add_skip(disp_status_t *st, const char *reason, uint64_t n)
{
    size_t i = 0;
    while (i < st->nskips && strcmp(st->skips[i].reason, reason) != 0) {
        i++;
    }
    if (i == st->nskips) {
        if (st->nskips == ST_SKIP_REASONS) {
            /* A bounded label set: reasons come from clients. */
            i = ST_SKIP_REASONS - 1;
            snprintf(st->skips[i].reason, sizeof(st->skips[i].reason), "other");
        } else {
            snprintf(st->skips[i].reason, sizeof(st->skips[i].reason), "%s", reason);
            st->nskips++;
        }
    }
    st->skips[i].count += n;
}

static double smooth(double old, double inst, int first)
{
    return first ? inst : ST_ALPHA * inst + (1.0 - ST_ALPHA) * old;
}

/* Unit rates from cumulative samples between two heartbeats (their own
 * timestamps, not ours: the sampler and heartbeats are not in phase). */
static void sample_worker(st_worker_t *r, const disp_worker_t *w)
{
    r->seen = 1;
    int have_prev = r->hb_ms > 0;
    if (w->state != DISP_WORKER_LIVE) {
        for (uint32_t i = 0; i < r->nstages; i++) {
            r->rate[i] = 0;
        }
        return;
    }
    if (have_prev && w->last_heartbeat_ms <= r->hb_ms) {
        return; /* no news since the last sample */
    }
    double dt = have_prev ? (double)(w->last_heartbeat_ms - r->hb_ms) / 1000.0 : 0;
    uint64_t names[DISP_STAGE_STATS_MAX];
    uint64_t samples[DISP_STAGE_STATS_MAX];
    double rate[DISP_STAGE_STATS_MAX];
    uint32_t n = w->nstages < DISP_STAGE_STATS_MAX ? w->nstages : DISP_STAGE_STATS_MAX;
    for (uint32_t i = 0; i < n; i++) {
        names[i] = name_hash(w->stages[i].name);
        samples[i] = w->stages[i].samples;
        rate[i] = 0;
        for (uint32_t j = 0; j < r->nstages; j++) {
            if (r->names[j] == names[i]) {
                /* A restarted counter (fewer samples) counts as a fresh start. */
                if (dt > 0 && samples[i] >= r->samples[j]) {
                    double inst = (double)(samples[i] - r->samples[j]) / dt;
                    rate[i] = smooth(r->rate[j], inst, !r->rated);
                }
                break;
            }
        }
    }
    memcpy(r->names, names, sizeof(names[0]) * n);
    memcpy(r->samples, samples, sizeof(samples[0]) * n);
    memcpy(r->rate, rate, sizeof(rate[0]) * n);
    r->rated = have_prev && dt > 0;
    r->nstages = n;
    r->hb_ms = w->last_heartbeat_ms;
}

static void sample_job(disp_status_t *st, st_job_t *r, const disp_job_t *job, int64_t now_ms,
                       int fresh)
{
    r->seen = 1;
    uint64_t done = 0;
    if (job_done_samples(job, &done) == 0) {
        uint64_t del = job_delivered(job, done);
        if (del > r->delivered) {
            st->delivered_total += del - r->delivered;
        }
        double dt = (double)(now_ms - r->at_ms) / 1000.0;
        if (!fresh && dt > 0) {
            double inst = del > r->delivered ? (double)(del - r->delivered) / dt : 0;
            r->rate = smooth(r->rate, inst, !r->rated);
            r->rated = 1;
        }
        if (del > r->delivered) {
            r->delivered = del;
        }
    } else {
        r->rate = 0;
    }
    r->at_ms = now_ms;
    if (job->plan.version > r->plan_version) {
        if (!fresh) {
            st->plan_changes_total += job->plan.version - r->plan_version;
        }
        r->plan_version = job->plan.version;
    }
    for (uint32_t i = 0; i < job->nskips; i++) {
        const disp_skip_t *s = &job->skips[i];
        uint32_t j = 0;
        while (j < r->nskips && strcmp(r->skip_names[j], s->reason) != 0) {
            j++;
        }
        if (j == r->nskips) {
            if (r->nskips == DISP_SKIP_REASONS_MAX) {
                continue;
            }
            snprintf(r->skip_names[j], sizeof(r->skip_names[j]), "%s", s->reason);
            r->skip_counts[j] = 0;
            r->nskips++;
        }
        if (s->count > r->skip_counts[j]) {
            st_add_skip(st, s->reason, s->count - r->skip_counts[j]);
            r->skip_counts[j] = s->count;
        }
    }
}

void disp_status_sample(disp_status_t *st, int64_t now_ms)
{
    disp_t *d = st->d;
    pthread_mutex_lock(&d->mu);
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->nw; i++) {
        st->workers[i].seen = 0;
    }
    for (size_t i = 0; i < st->nj; i++) {
        st->jobs[i].seen = 0;
    }
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        st_worker_t *r = st_worker(st, w->id, 1);
        if (r != NULL) {
            sample_worker(r, w);
        }
    }
    double total = 0;
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        int fresh = st_job(st, job->id, 0) == NULL;
        st_job_t *r = st_job(st, job->id, 1);
        if (r != NULL) {
            sample_job(st, r, job, now_ms, fresh);
            total += r->rate;
        }
    }
    st_point_t p = {
        .t_ms = now_ms - d->start_ms,
        .samples_per_sec = total,
        .workers = (uint32_t)d->reg.nlive,
        .jobs = (uint32_t)d->jobs.nopen,
    };
    pthread_mutex_unlock(&d->mu);
    /* Sweep records of workers and jobs that left the tables. */
    size_t k = 0;
    for (size_t i = 0; i < st->nw; i++) {
        if (st->workers[i].seen) {
            st->workers[k++] = st->workers[i];
        }
    }
    st->nw = k;
    k = 0;
    for (size_t i = 0; i < st->nj; i++) {
        if (st->jobs[i].seen) {
            st->jobs[k++] = st->jobs[i];
        }
    }
    st->nj = k;
    /* The arrays are NULL until a first worker/job: qsort(NULL, 0) is UB. */
    if (st->nw > 1) {
        qsort(st->workers, st->nw, sizeof(st->workers[0]), by_id);
    }
    if (st->nj > 1) {
        qsort(st->jobs, st->nj, sizeof(st->jobs[0]), by_id);
    }
    st->nsorted_w = st->nw;
    st->nsorted_j = st->nj;
    if (st->hlen < DISP_STATUS_HISTORY) {
        st->hist[(st->hhead + st->hlen) % DISP_STATUS_HISTORY] = p;
        st->hlen++;
    } else {
        st->hist[st->hhead] = p;
        st->hhead = (st->hhead + 1) % DISP_STATUS_HISTORY;
    }
    pthread_mutex_unlock(&st->mu);
}

disp_status_t *disp_status_new(disp_t *d, int64_t now_ms)
{
    disp_status_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return NULL;
    }
    (void)now_ms;
    st->d = d;
    if (pthread_mutex_init(&st->mu, NULL) != 0) {
        free(st);
        return NULL;
    }
    return st;
}

void disp_status_free(disp_status_t *st)
{
    if (st == NULL) {
        return;
    }
    free(st->workers);
    free(st->jobs);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* ------------------------------------------------------------ JSON */

typedef struct jb_s {
    int failed; /* any allocation failed: the whole document is dropped */
} jb_t;

static void jset(jb_t *b, json_t *o, const char *key, json_t *v)
{
    if (o == NULL || v == NULL || json_object_set_new(o, key, v) != 0) {
        b->failed = 1;
    }
}

static void jpush(jb_t *b, json_t *a, json_t *v)
{
    if (a == NULL || v == NULL || json_array_append_new(a, v) != 0) {
        b->failed = 1;
    }
}

/* Ids and counters are below 2^63 (ids are seeded below 2^53). */
static json_t *jint(uint64_t v)
{
    return json_integer((json_int_t)(v > INT64_MAX ? INT64_MAX : v));
}

/* json_real refuses NaN and infinities, and one refusal drops the whole
 * page: a peer's finite but extreme number (a 1e-310 s/sample profile, a
 * 1e308 wait fraction) can still overflow in the arithmetic here. */
static json_t *jreal(double v) { return json_real(isfinite(v) ? v : 0.0); }

static json_t *text_or_placeholder(const char *s)
{
    json_t *v = json_string(s);
    return v != NULL ? v : json_string("(not utf-8)");
}

/* Multi-rank jobs: which rank of which job this is, and its share per
 * epoch (progress below is the rank's own: per-rank progress). */
static void status_rank_fields(jb_t *b, json_t *o, const disp_job_t *job)
{
    if (job->world_size <= 1) {
        return;
    }
    json_t *r = json_object();
    jset(b, r, "job_name", text_or_placeholder(job->group));
    jset(b, r, "rank", json_integer(job->rank));
    jset(b, r, "world_size", json_integer(job->world_size));
    jset(b, r, "positions_per_epoch", jint(job->positions));
    jset(b, r, "padding", json_string(job->spec.rank_padding == SL_RANK_PAD ? "pad" : "drop"));
    jset(b, o, "rank", r);
}

static const char *source_type_name(sl_source_type_e t)
{
    switch (t) {
    case SL_SRC_IMAGEFOLDER:
        return "imagefolder";
    case SL_SRC_TAR:
        return "tar";
    case SL_SRC_FILELIST:
        return "filelist";
    }
    return "?";
}

/* rec: the worker's history (NULL: no rates). A unit's capacity is what the
 * worker's threads would do if they ran nothing else. */
static json_t *stages_json(jb_t *b, const disp_stage_stat_t *stages, uint32_t n, uint32_t threads,
                           const st_worker_t *rec)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++) {
        const disp_stage_stat_t *s = &stages[i];
        json_t *o = json_object();
        jset(b, o, "name", text_or_placeholder(s->name));
        jset(b, o, "cpu_sec_per_sample", jreal(s->cpu_sec_per_sample));
        jset(b, o, "out_bytes_per_sample", jreal(s->out_bytes_per_sample));
        jset(b, o, "samples", jint(s->samples));
        if (threads > 0) {
            double cap = s->cpu_sec_per_sample > 0 ? threads / s->cpu_sec_per_sample : 0;
            jset(b, o, "capacity_per_sec", jreal(cap));
        }
        if (rec != NULL) {
            double rate = 0;
            uint64_t h = name_hash(s->name);
            for (uint32_t j = 0; j < rec->nstages; j++) {
                if (rec->names[j] == h) {
                    rate = rec->rate[j];
                    break;
                }
            }
            jset(b, o, "samples_per_sec", jreal(rate));
        }
        jpush(b, a, o);
    }
    return a;
}

static json_t *worker_json(jb_t *b, const disp_worker_t *w, int64_t now_ms,
                           const st_worker_t *rec)
{
    json_t *o = json_object();
    jset(b, o, "id", jint(w->id));
    /* Peer-supplied text: json_string refuses invalid UTF-8, so fall back. */
    jset(b, o, "address", text_or_placeholder(w->address));
    jset(b, o, "hostname", text_or_placeholder(w->hostname));
    jset(b, o, "state", json_string(disp_worker_state_name(w->state)));
    /* Draining after SIGTERM: takes no new splits, leaves when done. */
    jset(b, o, "leaving", json_boolean(w->leaving));
    jset(b, o, "last_heartbeat_ms_ago", json_integer(now_ms - w->last_heartbeat_ms));
    jset(b, o, "registered_sec_ago", jreal((double)(now_ms - w->registered_ms) / 1000.0));
    jset(b, o, "threads", json_integer(w->threads));
    jset(b, o, "load", jreal(w->load));
    jset(b, o, "buffered_bytes", jint(w->buffered_bytes));
    jset(b, o, "outstanding_splits", json_integer(w->outstanding));
    jset(b, o, "splits_in_progress", json_integer(w->in_progress));
    if (rec != NULL) {
        /* Every sample a worker runs passes its first unit, so the fastest
         * unit rate is the worker's sample rate. */
        double best = 0;
        for (uint32_t j = 0; j < rec->nstages; j++) {
            best = rec->rate[j] > best ? rec->rate[j] : best;
        }
        jset(b, o, "samples_per_sec", jreal(best));
    }
    jset(b, o, "stages", stages_json(b, w->stages, w->nstages, w->threads, rec));
    return o;
}

/* The planner's hint: how many more workers of the measured speed would lift
 * the binding resource; -1 when the job has no planner (fixed plans). */
static json_int_t workers_needed(const json_t *planner)
{
    const json_t *v = json_object_get(planner, "workers_needed");
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* planner: disp_planner_status_json(job), may be NULL; borrowed. */
static json_t *plan_json(jb_t *b, const disp_job_t *job, json_t *planner)
{
    const disp_plan_t *p = &job->plan;
    json_t *plan = json_object();
    jset(b, plan, "split", json_integer(p->split));
    jset(b, plan, "units", json_integer(p->nunits));
    jset(b, plan, "local_share", jreal(p->local_share));
    jset(b, plan, "mode", text_or_placeholder(p->mode));
    jset(b, plan, "version", json_integer(p->version));
    jset(b, plan, "changes", json_integer(p->version > 0 ? p->version - 1 : 0));
    /* Predicted by the planner (auto/fastflow; null for fixed plans) against
     * measured by the client (ReportRates; null until its first report). */
    jset(b, plan, "predicted_samples_per_sec",
         p->predicted > 0 ? jreal(p->predicted) : json_null());
    jset(b, plan, "measured_samples_per_sec",
         job->rates.have ? jreal(job->rates.delivered_per_sec) : json_null());
    jset(b, plan, "binding", p->binding[0] != '\0' ? text_or_placeholder(p->binding) : json_null());
    json_int_t need = workers_needed(planner);
    jset(b, plan, "workers_needed", need >= 0 ? json_integer(need) : json_null());
    return plan;
}

static json_t *job_json(jb_t *b, disp_job_t *job, int64_t now_ms, const st_job_t *rec)
{
    json_t *o = json_object();
    jset(b, o, "id", jint(job->id));
    jset(b, o, "state", json_string(disp_job_state_name(job->state)));
    jset(b, o, "spec_name", text_or_placeholder(job->spec_name));
    jset(b, o, "client_id", text_or_placeholder(job->client_id));
    jset(b, o, "age_sec", jreal((double)(now_ms - job->created_ms) / 1000.0));
    jset(b, o, "client_silent_ms", json_integer(now_ms - job->last_client_ms));

    json_t *spec = json_object();
    json_t *src = json_object();
    jset(b, src, "type", json_string(source_type_name(job->spec.source_type)));
    jset(b, src, "path", text_or_placeholder(job->spec.source_path));
    jset(b, src, "shuffle", json_boolean(job->spec.shuffle));
    jset(b, spec, "source", src);
    json_t *stages = json_array();
    for (uint32_t i = 0; i < job->spec.nstages; i++) {
        jpush(b, stages, json_string(sl_op_name(job->spec.stages[i].op)));
    }
    jset(b, spec, "stages", stages);
    jset(b, spec, "batch_size", json_integer(job->spec.batch_size));
    jset(b, spec, "epochs", json_integer(job->spec.epochs));
    jset(b, spec, "offload", json_string(sl_offload_name(job->spec.offload)));
    jset(b, o, "spec", spec);
    jset(b, o, "num_samples", jint(job->num_samples));
    jset(b, o, "source_fingerprint", jint(job->fingerprint));
    status_rank_fields(b, o, job);

    /* The oldest epoch still being delivered (= epochs once finished). */
    uint64_t epoch = job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
    jset(b, o, "epoch", jint(epoch));

    json_t *prog = json_object();
    uint64_t total = job->positions * job->epochs;
    uint64_t done = 0;
    int known = job_done_samples(job, &done) == 0;
    if (!known && rec != NULL) {
        done = rec->delivered + job_skipped(job);
    }
    if (known || rec != NULL) {
        jset(b, prog, "samples_done", jint(done));
        jset(b, prog, "samples_delivered", jint(job_delivered(job, done)));
        jset(b, prog, "fraction", jreal(total > 0 ? (double)done / (double)total : 0));
    }
    jset(b, prog, "samples_total", jint(total));
    jset(b, prog, "epochs_done", jint(epoch));
    jset(b, prog, "epochs", json_integer(job->epochs));
    if (rec != NULL) {
        jset(b, prog, "samples_per_sec", jreal(rec->rate));
    }
    jset(b, o, "progress", prog);

    uint64_t pending = 0;
    uint64_t assigned = 0;
    uint64_t acked = 0;
    uint64_t received = 0;
    disp_job_counts(job, &pending, &assigned, &acked, &received);
    json_t *splits = json_object();
    jset(b, splits, "per_epoch", json_integer(job->nsplits));
    jset(b, splits, "split_size", json_integer(job->split_size));
    jset(b, splits, "total", jint((uint64_t)job->nsplits * job->epochs));
    jset(b, splits, "live_epochs", json_integer(job->nep));
    jset(b, splits, "pending", jint(pending));
    jset(b, splits, "assigned", jint(assigned));
    /* multi-rank: every sample at the client, not yet taken by its loop */
    jset(b, splits, "received", jint(received));
    jset(b, splits, "acked_in_live_epochs", jint(acked));
    jset(b, splits, "acked", jint(job->acked_total));
    jset(b, splits, "reassigned", jint(job->reassigned_total));
    jset(b, splits, "client_outstanding", json_integer(job->nclient));
    json_t *per_worker = json_array();
    for (size_t i = 0; i < job->njw; i++) {
        json_t *w = json_object();
        jset(b, w, "worker_id", jint(job->jw[i].worker_id));
        jset(b, w, "outstanding", json_integer(job->jw[i].n));
        jset(b, w, "refused", json_boolean(job->jw[i].banned));
        jpush(b, per_worker, w);
    }
    jset(b, splits, "workers", per_worker);
    jset(b, o, "splits", splits);

    json_t *planner = job->state != DISP_JOB_CLOSED ? disp_planner_status_json(job) : NULL;
    jset(b, o, "plan", plan_json(b, job, planner));
    /* The planner's inputs, candidates and choice (docs/planner.md). */
    if (planner != NULL) {
        jset(b, o, "planner", planner);
    }

    if (job->rates.have) {
        const disp_rates_t *r = &job->rates;
        json_t *rates = json_object();
        jset(b, rates, "age_ms", json_integer(now_ms - r->at_ms));
        jset(b, rates, "delivered_per_sec", jreal(r->delivered_per_sec));
        jset(b, rates, "wait_fraction", jreal(r->wait_fraction));
        jset(b, rates, "cpu_fraction", jreal(r->cpu_fraction));
        jset(b, rates, "cpu_budget", jreal(r->cpu_budget));
        jset(b, rates, "recv_cpu_sec_per_byte", jreal(r->recv_cpu_sec_per_byte));
        jset(b, rates, "stages", stages_json(b, r->stages, r->nstages, 0, NULL));
        jset(b, o, "rates", rates);
        /* The share of the training loop's time spent waiting for data. */
        jset(b, o, "stall_percent", jreal(100.0 * r->wait_fraction));
    } else {
        jset(b, o, "rates", json_null());
        jset(b, o, "stall_percent", json_null());
    }
    json_t *skips = json_object();
    for (uint32_t i = 0; i < job->nskips; i++) {
        json_t *v = jint(job->skips[i].count);
        /* Reasons come from clients: one that is not valid UTF-8 is left
         * out (set_new fails and frees v) rather than failing the page. */
        if (v != NULL) {
            (void)json_object_set_new(skips, job->skips[i].reason, v);
        }
    }
    jset(b, o, "skipped", skips);
    jset(b, o, "skipped_total", jint(job_skipped(job)));
    if (job->worker_failure[0] != '\0') {
        jset(b, o, "worker_failure", text_or_placeholder(job->worker_failure));
    }
    if (job->state == DISP_JOB_CLOSED) {
        jset(b, o, "close_reason", text_or_placeholder(job->close_reason));
    }
    return o;
}

/* st NULL: no history (rates, monotonic totals, throughput history). */
static char *build_json(disp_t *d, disp_status_t *st, int64_t now_ms, size_t *ret_len)
{
    jb_t b = {0};
    json_t *root = json_object();
    pthread_mutex_lock(&d->mu);
    if (st != NULL) {
        pthread_mutex_lock(&st->mu);
    }
    jset(&b, root, "component", json_string("dispatcher"));
    jset(&b, root, "version", json_string(SL_VERSION));
    jset(&b, root, "protocol", json_integer(SL_PROTOCOL_VERSION));
    jset(&b, root, "uptime_sec", jreal((double)(now_ms - d->start_ms) / 1000.0));
    json_t *workers = json_array();
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        const st_worker_t *rec = st != NULL ? st_worker(st, w->id, 0) : NULL;
        jpush(&b, workers, worker_json(&b, w, now_ms, rec));
    }
    jset(&b, root, "workers", workers);
    /* Open jobs only under "jobs"; recently closed ones (kept for a minute)
     * apart, so that counting "jobs" counts what the dispatcher works on. */
    json_t *jobs = json_array();
    json_t *closed = json_array();
    for (size_t i = 0; i < d->jobs.n; i++) {
        disp_job_t *job = d->jobs.jobs[i];
        const st_job_t *rec = st != NULL ? st_job(st, job->id, 0) : NULL;
        jpush(&b, job->state == DISP_JOB_CLOSED ? closed : jobs, job_json(&b, job, now_ms, rec));
    }
    jset(&b, root, "jobs", jobs);
    jset(&b, root, "closed_jobs", closed);
    json_t *tot = json_object();
    jset(&b, tot, "workers_live", json_integer((json_int_t)d->reg.nlive));
    jset(&b, tot, "workers_lost", json_integer((json_int_t)(d->reg.n - d->reg.nlive)));
    jset(&b, tot, "jobs_open", json_integer((json_int_t)d->jobs.nopen));
    jset(&b, tot, "splits_acked_total", jint(d->jobs.splits_acked_total));
    jset(&b, tot, "splits_reassigned_total", jint(d->jobs.splits_reassigned_total));
    jset(&b, tot, "bytes_sent_total", jint(d->reg.bytes_sent_total));
    if (st != NULL) {
        jset(&b, tot, "samples_delivered_total", jint(st->delivered_total));
        uint64_t sk = 0;
        json_t *reasons = json_object();
        for (size_t i = 0; i < st->nskips; i++) {
            sk += st->skips[i].count;
            json_t *v = jint(st->skips[i].count);
            if (v != NULL) {
                (void)json_object_set_new(reasons, st->skips[i].reason, v);
            }
        }
        jset(&b, tot, "samples_skipped_total", jint(sk));
        jset(&b, tot, "skipped_by_reason", reasons);
        jset(&b, tot, "plan_changes_total", jint(st->plan_changes_total));
        double rate = 0;
        for (size_t i = 0; i < st->nj; i++) {
            rate += st->jobs[i].rate;
        }
        jset(&b, tot, "samples_per_sec", jreal(rate));
        /* Oldest first: [seconds since start, samples/s, live workers, open jobs]. */
        json_t *hist = json_array();
        for (size_t i = 0; i < st->hlen; i++) {
            const st_point_t *p = &st->hist[(st->hhead + i) % DISP_STATUS_HISTORY];
            json_t *pt = json_array();
            jpush(&b, pt, jreal((double)p->t_ms / 1000.0));
            jpush(&b, pt, jreal(p->samples_per_sec));
            jpush(&b, pt, json_integer(p->workers));
            jpush(&b, pt, json_integer(p->jobs));
            jpush(&b, hist, pt);
        }
        jset(&b, root, "history", hist);
    }
    jset(&b, root, "totals", tot);
    if (st != NULL) {
        pthread_mutex_unlock(&st->mu);
    }
    pthread_mutex_unlock(&d->mu);
    char *s = NULL;
    if (!b.failed) {
        s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    }
    json_decref(root);
    if (s != NULL && ret_len != NULL) {
        *ret_len = strlen(s);
    }
    return s;
}

char *disp_status_json(disp_t *d, int64_t now_ms, size_t *ret_len)
{
    return build_json(d, NULL, now_ms, ret_len);
}

char *disp_status_render_json(disp_status_t *st, int64_t now_ms, size_t *ret_len)
{
    return build_json(st->d, st, now_ms, ret_len);
}

/* ------------------------------------------------------------ metrics */

typedef struct sb_s {
    char *buf;
    size_t len, cap;
    int failed;
} sb_t;

static void sb_printf(sb_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sb_t *s, const char *fmt, ...)
{
    if (s->failed) {
        return;
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->buf != NULL ? s->buf + s->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap > 0 ? s->cap : 4096;
        while (cap - s->len <= (size_t)n) {
            cap *= 2;
        }
        char *nb = realloc(s->buf, cap);
        if (nb == NULL) {
            s->failed = 1;
            return;
        }
        s->buf = nb;
        s->cap = cap;
    }
}

/* A label value in the exposition format: backslash, quote and newline
 * escaped. Peer text is printable ASCII already (disp_text_copy); this keeps
 * the output well-formed whatever it is. */
static const char *lv(char *dst, size_t len, const char *src)
{
    size_t o = 0;
    for (const char *p = src; *p != '\0' && o + 3 < len; p++) {
        if (*p == '\\' || *p == '"') {
            dst[o++] = '\\';
            dst[o++] = *p;
        } else if (*p == '\n') {
            dst[o++] = '\\';
            dst[o++] = 'n';
        } else {
            dst[o++] = *p;
        }
    }
    dst[o] = '\0';
    return dst;
}

static void head(sb_t *s, const char *name, const char *type, const char *help)
{
    sb_printf(s, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static char *build_metrics(disp_t *d, disp_status_t *st, int64_t now_ms, size_t *ret_len)
{
    sb_t s = {0};
    char a[2 * DISP_ADDR_MAX + 8];
    char u[2 * DISP_NAME_MAX + 8];
    pthread_mutex_lock(&d->mu);
    if (st != NULL) {
        pthread_mutex_lock(&st->mu);
    }
    head(&s, "sluice_build_info", "gauge", "Dispatcher version (value 1).");
    sb_printf(&s, "sluice_build_info{version=\"%s\",protocol=\"%d\"} 1\n", SL_VERSION,
              SL_PROTOCOL_VERSION);
    head(&s, "sluice_uptime_seconds", "gauge", "Seconds since the dispatcher started.");
    sb_printf(&s, "sluice_uptime_seconds %.3f\n", (double)(now_ms - d->start_ms) / 1000.0);
    head(&s, "sluice_workers", "gauge", "Live workers.");
    sb_printf(&s, "sluice_workers %zu\n", d->reg.nlive);
    head(&s, "sluice_workers_lost", "gauge", "Lost workers still listed in /status.");
    sb_printf(&s, "sluice_workers_lost %zu\n", d->reg.n - d->reg.nlive);
    head(&s, "sluice_jobs", "gauge", "Open jobs.");
    sb_printf(&s, "sluice_jobs %zu\n", d->jobs.nopen);
    head(&s, "sluice_splits_acked_total", "counter", "Splits acknowledged by clients.");
    sb_printf(&s, "sluice_splits_acked_total %" PRIu64 "\n", d->jobs.splits_acked_total);
    head(&s, "sluice_splits_reassigned_total", "counter",
         "Splits taken back from a worker (lost, refused, stream broken) and re-assigned.");
    sb_printf(&s, "sluice_splits_reassigned_total %" PRIu64 "\n",
              d->jobs.splits_reassigned_total);
    head(&s, "sluice_bytes_sent_total", "counter",
         "Batch bytes workers sent to clients (from their heartbeats).");
    sb_printf(&s, "sluice_bytes_sent_total %" PRIu64 "\n", d->reg.bytes_sent_total);
    if (st != NULL) {
        head(&s, "sluice_samples_delivered_total", "counter",
             "Samples of acknowledged splits delivered to training loops (skips excluded).");
        sb_printf(&s, "sluice_samples_delivered_total %" PRIu64 "\n", st->delivered_total);
        head(&s, "sluice_samples_skipped_total", "counter", "Samples skipped, by reason.");
        for (size_t i = 0; i < st->nskips; i++) {
            sb_printf(&s, "sluice_samples_skipped_total{reason=\"%s\"} %" PRIu64 "\n",
                      lv(u, sizeof(u), st->skips[i].reason), st->skips[i].count);
        }
        head(&s, "sluice_plan_changes_total", "counter", "Re-plans of running jobs.");
        sb_printf(&s, "sluice_plan_changes_total %" PRIu64 "\n", st->plan_changes_total);
    }

    /* Per job (open ones). */
    head(&s, "sluice_job_progress_ratio", "gauge", "Fraction of the job's samples done.");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        uint64_t done = 0;
        uint64_t total = job->positions * job->epochs;
        if (job->state != DISP_JOB_CLOSED && job_done_samples(job, &done) == 0 && total > 0) {
            sb_printf(&s, "sluice_job_progress_ratio{job=\"%" PRIu64 "\"} %.6f\n", job->id,
                      (double)done / (double)total);
        }
    }
    head(&s, "sluice_job_epoch", "gauge", "Oldest epoch still being delivered.");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED) {
            uint64_t epoch = job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
            sb_printf(&s, "sluice_job_epoch{job=\"%" PRIu64 "\"} %" PRIu64 "\n", job->id, epoch);
        }
    }
    head(&s, "sluice_job_measured_samples_per_second", "gauge",
         "Delivery rate the job's client last reported.");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED && job->rates.have) {
            sb_printf(&s, "sluice_job_measured_samples_per_second{job=\"%" PRIu64 "\"} %.3f\n",
                      job->id, job->rates.delivered_per_sec);
        }
    }
    head(&s, "sluice_job_stall_ratio", "gauge",
         "Fraction of the training loop's time spent waiting for a batch.");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED && job->rates.have) {
            sb_printf(&s, "sluice_job_stall_ratio{job=\"%" PRIu64 "\"} %.4f\n", job->id,
                      job->rates.wait_fraction);
        }
    }
    head(&s, "sluice_job_predicted_samples_per_second", "gauge",
         "Delivery rate the job's current plan predicts (planned jobs only).");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED && job->plan.predicted > 0) {
            sb_printf(&s, "sluice_job_predicted_samples_per_second{job=\"%" PRIu64 "\"} %.3f\n",
                      job->id, job->plan.predicted);
        }
    }
    head(&s, "sluice_job_workers_needed", "gauge",
         "More workers of the measured speed that would lift the binding resource (hint).");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        json_t *planner = job->state != DISP_JOB_CLOSED ? disp_planner_status_json(job) : NULL;
        json_int_t need = workers_needed(planner);
        json_decref(planner);
        if (need >= 0) {
            sb_printf(&s, "sluice_job_workers_needed{job=\"%" PRIu64 "\"} %lld\n", job->id,
                      (long long)need);
        }
    }
    head(&s, "sluice_job_plan_version", "gauge", "Plan version (1 + re-plans).");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED) {
            sb_printf(&s, "sluice_job_plan_version{job=\"%" PRIu64 "\"} %u\n", job->id,
                      job->plan.version);
        }
    }
    head(&s, "sluice_job_plan_split", "gauge", "Pipeline units the current plan runs remotely.");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED) {
            sb_printf(&s, "sluice_job_plan_split{job=\"%" PRIu64 "\"} %u\n", job->id,
                      job->plan.split);
        }
    }
    head(&s, "sluice_job_plan_local_share", "gauge",
         "Fraction of splits the current plan leaves to the client.");
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED) {
            sb_printf(&s, "sluice_job_plan_local_share{job=\"%" PRIu64 "\"} %.4f\n", job->id,
                      job->plan.local_share);
        }
    }

    /* Per worker. */
    head(&s, "sluice_worker_up", "gauge", "1 for a live worker, 0 for a lost one.");
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        sb_printf(&s, "sluice_worker_up{worker=\"%s\"} %d\n", lv(a, sizeof(a), w->address),
                  w->state == DISP_WORKER_LIVE);
    }
    head(&s, "sluice_worker_load", "gauge", "Busy threads / threads, last heartbeat.");
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        sb_printf(&s, "sluice_worker_load{worker=\"%s\"} %.4f\n", lv(a, sizeof(a), w->address),
                  w->load);
    }
    head(&s, "sluice_worker_buffered_bytes", "gauge", "Finished batches waiting for clients.");
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        sb_printf(&s, "sluice_worker_buffered_bytes{worker=\"%s\"} %" PRIu64 "\n",
                  lv(a, sizeof(a), w->address), w->buffered_bytes);
    }
    head(&s, "sluice_worker_unit_samples_total", "counter",
         "Samples a worker's pipeline unit processed (since the worker registered).");
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        lv(a, sizeof(a), w->address);
        for (uint32_t k = 0; k < w->nstages; k++) {
            sb_printf(&s, "sluice_worker_unit_samples_total{worker=\"%s\",unit=\"%s\"} %" PRIu64
                          "\n",
                      a, lv(u, sizeof(u), w->stages[k].name), w->stages[k].samples);
        }
    }
    head(&s, "sluice_worker_unit_output_bytes_total", "counter",
         "Bytes a worker's pipeline unit produced; the plan's last remote unit's output is "
         "what the worker sends.");
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        lv(a, sizeof(a), w->address);
        for (uint32_t k = 0; k < w->nstages; k++) {
            const disp_stage_stat_t *x = &w->stages[k];
            sb_printf(&s, "sluice_worker_unit_output_bytes_total{worker=\"%s\",unit=\"%s\"} %.0f\n",
                      a, lv(u, sizeof(u), x->name), x->out_bytes_per_sample * (double)x->samples);
        }
    }
    if (st != NULL) {
        head(&s, "sluice_worker_samples_per_second", "gauge",
             "Samples per second a worker finishes (smoothed).");
        for (size_t i = 0; i < d->reg.n; i++) {
            const disp_worker_t *w = d->reg.workers[i];
            const st_worker_t *rec = st_worker(st, w->id, 0);
            double best = 0;
            for (uint32_t j = 0; rec != NULL && j < rec->nstages; j++) {
                best = rec->rate[j] > best ? rec->rate[j] : best;
            }
            sb_printf(&s, "sluice_worker_samples_per_second{worker=\"%s\"} %.3f\n",
                      lv(a, sizeof(a), w->address), best);
        }
    }
    if (st != NULL) {
        pthread_mutex_unlock(&st->mu);
    }
    pthread_mutex_unlock(&d->mu);
    if (s.failed) {
        free(s.buf);
        return NULL;
    }
    if (ret_len != NULL) {
        *ret_len = s.len;
    }
    return s.buf;
}

char *disp_status_metrics(disp_t *d, int64_t now_ms, size_t *ret_len)
{
    return build_metrics(d, NULL, now_ms, ret_len);
}

char *disp_status_render_metrics(disp_status_t *st, int64_t now_ms, size_t *ret_len)
{
    return build_metrics(st->d, st, now_ms, ret_len);
}

/* ------------------------------------------------------------ routes */

static void route_status(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = disp_status_render_json(ctx, disp_now_ms(), &resp->len);
    resp->content_type = "application/json";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static void route_metrics(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = disp_status_render_metrics(ctx, disp_now_ms(), &resp->len);
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static void route_healthz(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = strdup("ok\n");
    resp->len = resp->body != NULL ? 3 : 0;
}

static void route_index(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = strdup(disp_dashboard_html);
    resp->len = resp->body != NULL ? strlen(resp->body) : 0;
    resp->content_type = "text/html; charset=utf-8";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

int disp_status_add_routes(disp_status_t *st, sl_httpd_t *h)
{
    int rc = sl_httpd_route(h, "/status", route_status, st);
    if (rc == 0) {
        rc = sl_httpd_route(h, "/metrics", route_metrics, st);
    }
    if (rc == 0) {
        rc = sl_httpd_route(h, "/healthz", route_healthz, st);
    }
    if (rc == 0) {
        rc = sl_httpd_route(h, "/", route_index, st);
    }
    return rc;
}

/* ------------------------------------------------------------ GetStatus */

static void rpc_get_status(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    (void)req;
    char *json = disp_status_render_json(ctx, disp_now_ms(), NULL);
    if (json == NULL) {
        sl_rpc_reply_error(reply, SL_RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    Sluice__GetStatusResponse resp = SLUICE__GET_STATUS_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    resp.status_json = json;
    sl_rpc_reply_ok(reply, &resp.base);
    free(json);
}

int disp_status_add_rpc(disp_status_t *st, sl_rpc_server_t *srv)
{
    return sl_rpc_server_add_unary(srv, "/sluice.Dispatcher/GetStatus",
                                   &sluice__get_status_request__descriptor, rpc_get_status, st);
}

/* ------------------------------------------------------------ summary */

void disp_status_summary(disp_t *d, char *buf, size_t len)
{
    pthread_mutex_lock(&d->mu);
    size_t nlive = d->reg.nlive;
    size_t nopen = d->jobs.nopen;
    double rate = 0;
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED && job->rates.have) {
            rate += job->rates.delivered_per_sec;
        }
    }
    pthread_mutex_unlock(&d->mu);
    /* Rounded so that the line (and the datagram) changes only on real moves. */
    snprintf(buf, len, "%zu worker%s, %zu job%s open, %.0f samples/s delivered", nlive,
             nlive == 1 ? "" : "s", nopen, nopen == 1 ? "" : "s", rate);
}
