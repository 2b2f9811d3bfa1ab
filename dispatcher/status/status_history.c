/* status_history: the memory /status and /metrics need across polls --
 * per-worker unit rates, per-job delivery rates, the monotonic totals, the
 * throughput history -- fed once a second by the main loop
 * (disp_status_sample), whatever anyone polls. Callable from any thread:
 * d->mu, then st->mu. */
#include "dispatcher/status/status_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Smoothing of rates sampled once a second: half the weight on the newest
 * interval reacts within a few seconds yet hides heartbeat jitter. */
#define ST_ALPHA 0.5

/* Samples of a job done so far (delivered or skipped), O(1): done epochs
 * plus the live epochs' acknowledged positions. Returns 0 with *ret set,
 * -ENOENT when unknown (a job closed before finishing: its splits are gone,
 * the last sampled value stands). */
int disp_status_job_done(const disp_job_t *job, uint64_t *ret)
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
    uint64_t done = (disp_status_job_epoch(job) - job->first_epoch) * per_epoch;
    for (uint32_t k = 0; k < job->nep; k++) {
        done += job->ep[k].acked_positions; /* kept by jobs.c: cost-cut splits vary */
    }
    *ret = done;
    return 0;
}

static int is_resumed(const disp_skip_t *s) { return strcmp(s->reason, DISP_STATUS_RESUMED) == 0; }

uint64_t disp_status_job_skipped(const disp_job_t *job)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < job->nskips; i++) {
        n += is_resumed(&job->skips[i]) ? 0 : job->skips[i].count;
    }
    return n;
}

uint64_t disp_status_job_resumed(const disp_job_t *job)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < job->nskips; i++) {
        n += is_resumed(&job->skips[i]) ? job->skips[i].count : 0;
    }
    return n;
}

uint64_t disp_status_job_delivered(const disp_job_t *job, uint64_t done)
{
    uint64_t sk = disp_status_job_skipped(job) + disp_status_job_resumed(job);
    return done > sk ? done - sk : 0;
}

uint64_t disp_status_job_epoch(const disp_job_t *job)
{
    return job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
}

size_t disp_status_count_workers(const disp_registry_t *r, disp_worker_state_e s)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        n += r->workers[i]->state == s;
    }
    return n;
}

void disp_status_lock(disp_t *d, disp_status_t *st)
{
    pthread_mutex_lock(&d->mu);
    if (st != NULL) {
        pthread_mutex_lock(&st->mu);
    }
}

void disp_status_unlock(disp_t *d, disp_status_t *st)
{
    if (st != NULL) {
        pthread_mutex_unlock(&st->mu);
    }
    pthread_mutex_unlock(&d->mu);
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

static disp_status_wrec_t *st_worker(disp_status_t *st, uint64_t id, int create)
{
    disp_status_wrec_t *r = find_rec(st->workers, st->nsorted_w, st->nw, sizeof(*r), id);
    if (r == NULL && create) {
        r = add_rec((void **)&st->workers, &st->nw, &st->capw, sizeof(*r), id);
    }
    return r;
}

static disp_status_jrec_t *st_job(disp_status_t *st, uint64_t id, int create)
{
    disp_status_jrec_t *r = find_rec(st->jobs, st->nsorted_j, st->nj, sizeof(*r), id);
    if (r == NULL && create) {
        r = add_rec((void **)&st->jobs, &st->nj, &st->capj, sizeof(*r), id);
    }
    return r;
}

const disp_status_wrec_t *disp_status_wrec(disp_status_t *st, const disp_worker_t *w)
{
    /* A worker that is not live does nothing now, whatever it last did: its
     * rates read 0 from the moment it is lost, not from the next sample. */
    static const disp_status_wrec_t idle;
    const disp_status_wrec_t *r = st_worker(st, w->id, 0);
    return r != NULL && w->state != DISP_WORKER_LIVE ? &idle : r;
}

const disp_status_jrec_t *disp_status_jrec(disp_status_t *st, uint64_t id)
{
    return st_job(st, id, 0);
}

double disp_status_unit_rate(const disp_status_wrec_t *rec, const char *unit)
{
    uint64_t h = name_hash(unit);
    for (uint32_t j = 0; rec != NULL && j < rec->nstages; j++) {
        if (rec->names[j] == h) {
            return rec->rate[j];
        }
    }
    return 0;
}

double disp_status_worker_rate(const disp_status_wrec_t *rec)
{
    double best = 0;
    for (uint32_t j = 0; rec != NULL && j < rec->nstages; j++) {
        best = rec->rate[j] > best ? rec->rate[j] : best;
    }
    return best;
}

static size_t skip_slot(const disp_status_t *st, const char *reason)
{
    size_t i = 0;
    while (i < st->nskips && strcmp(st->skips[i].reason, reason) != 0) {
        i++;
    }
    return i;
}

static void st_add_skip(disp_status_t *st, const char *reason, uint64_t n)
{
    if (strcmp(reason, DISP_STATUS_RESUMED) == 0) {
        st->resumed_total += n; /* not a skip */
        return;
    }
    size_t i = skip_slot(st, reason);
    if (i == st->nskips && st->nskips == DISP_STATUS_SKIP_REASONS) {
        /* A bounded label set: reasons come from clients. The rest share
         * one "other" (a client's own "other" too: a label value twice is a
         * scrape Prometheus refuses), made of the last slot if need be. */
        i = skip_slot(st, "other");
        if (i == st->nskips) {
            i = DISP_STATUS_SKIP_REASONS - 1;
            snprintf(st->skips[i].reason, sizeof(st->skips[i].reason), "other");
        }
    } else if (i == st->nskips) {
        snprintf(st->skips[i].reason, sizeof(st->skips[i].reason), "%s", reason);
        st->nskips++;
    }
    st->skips[i].count += n;
}

static double smooth(double old, double inst, int first)
{
    return first ? inst : ST_ALPHA * inst + (1.0 - ST_ALPHA) * old;
}

/* Unit rates from cumulative samples between two heartbeats (their own
 * timestamps, not ours: the sampler and heartbeats are not in phase). */
static void sample_worker(disp_status_wrec_t *r, const disp_worker_t *w)
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

static void sample_job(disp_status_t *st, disp_status_jrec_t *r, const disp_job_t *job,
                       int64_t now_ms, int fresh)
{
    r->seen = 1;
    r->closed = job->state == DISP_JOB_CLOSED;
    uint64_t done = 0;
    if (disp_status_job_done(job, &done) == 0) {
        uint64_t del = disp_status_job_delivered(job, done);
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
    /* The line runs while the job does (lines are handed out below). */
    if (r->hist != NULL && job->state == DISP_JOB_ACTIVE) {
        double pred = job->plan.predicted > 0 ? job->plan.predicted : -1;
        disp_status_jhist_add(r->hist, now_ms - st->d->start_ms, done,
                              disp_status_job_measured(job, r, now_ms), pred);
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

/* Every open job without a line gets one while fewer than
 * DISP_STATUS_JOB_HISTORIES exist, else a closed job's (its line is over);
 * the rest go without. One pass: the cursor never revisits a closed job. */
static void hand_out_lines(disp_status_t *st)
{
    size_t from = 0;
    for (size_t i = 0; i < st->nj; i++) {
        disp_status_jrec_t *r = &st->jobs[i];
        if (r->closed || r->hist != NULL) {
            continue;
        }
        if (st->njhist < DISP_STATUS_JOB_HISTORIES) {
            r->hist = calloc(1, sizeof(*r->hist));
            st->njhist += r->hist != NULL;
            continue;
        }
        while (from < st->nj && !(st->jobs[from].closed && st->jobs[from].hist != NULL)) {
            from++;
        }
        if (from == st->nj) {
            return;
        }
        r->hist = st->jobs[from].hist;
        st->jobs[from].hist = NULL;
        memset(r->hist, 0, sizeof(*r->hist));
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
        disp_status_wrec_t *r = st_worker(st, w->id, 1);
        if (r != NULL) {
            sample_worker(r, w);
        }
    }
    double total = 0;
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        int fresh = st_job(st, job->id, 0) == NULL;
        disp_status_jrec_t *r = st_job(st, job->id, 1);
        if (r != NULL) {
            sample_job(st, r, job, now_ms, fresh);
            total += r->rate;
        }
    }
    disp_status_point_t p = {
        .t_ms = now_ms - d->start_ms,
        .samples_per_sec = total,
        .workers = (uint32_t)d->reg.nlive,
        .jobs = (uint32_t)d->jobs.nopen,
    };
    disp_wanted_sample(&st->wanted, d, now_ms);
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
        } else if (st->jobs[i].hist != NULL) {
            free(st->jobs[i].hist);
            st->njhist--;
        }
    }
    st->nj = k;
    hand_out_lines(st);
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
    for (size_t i = 0; i < st->nj; i++) {
        free(st->jobs[i].hist);
    }
    free(st->jobs);
    pthread_mutex_destroy(&st->mu);
    free(st);
}
