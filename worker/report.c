/* report: what the worker tells about its jobs -- the heartbeat's report
 * (control thread), the splits sent since the last one that got through
 * (added on stream threads) and the news that calls for an early heartbeat,
 * /status rows and worker-wide totals (HTTP thread). Read-only over the job
 * table. */
#include "worker/tasks_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int wk_sent_init(wk_tasks_t *t)
{
    pthread_mutex_init(&t->sent_mu, NULL);
    return sl_ring_init(&t->sent, sizeof(wk_sent_t), WK_MAX_SENT);
}

void wk_sent_free(wk_tasks_t *t)
{
    sl_ring_free(&t->sent);
    pthread_mutex_destroy(&t->sent_mu);
}

void wk_sent_add(wk_tasks_t *t, uint64_t job_id, uint64_t split_id, uint64_t assignment, int cached)
{
    wk_sent_t e = {.ref = {.job_id = job_id,
                           .split_id = split_id,
                           .assignment = assignment,
                           .cached = cached}};
    pthread_mutex_lock(&t->sent_mu);
    if (sl_ring_len(&t->sent) == WK_MAX_SENT) {
        /* Heartbeats have failed for a long time: forget the oldest. The
         * dispatcher may then re-assign it; the client drops duplicates. */
        (void)sl_ring_pop(&t->sent, NULL);
    }
    e.seq = ++t->next_sent_seq;
    (void)sl_ring_push_back(&t->sent, &e); /* room made above */
    if (t->news_fn != NULL) {
        t->news_fn(t->news_arg);
    }
    pthread_mutex_unlock(&t->sent_mu);
}

void wk_news(wk_tasks_t *t)
{
    pthread_mutex_lock(&t->sent_mu);
    if (t->news_fn != NULL) {
        t->news_fn(t->news_arg);
    }
    pthread_mutex_unlock(&t->sent_mu);
}

void wk_tasks_on_news(wk_tasks_t *t, wk_tasks_news_fn fn, void *arg)
{
    pthread_mutex_lock(&t->sent_mu);
    t->news_fn = fn;
    t->news_arg = arg;
    pthread_mutex_unlock(&t->sent_mu);
}

/* A report's array (n elements of elem bytes, *cap allocated) with room
 * for one more: arr itself, or a doubled copy. NULL when out of memory (arr
 * is left as it was). */
static void *room_for_one(void *arr, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap) {
        return arr;
    }
    size_t nc = *cap ? *cap * 2 : 16;
    void *na = realloc(arr, nc * elem);
    if (na != NULL) {
        *cap = nc;
    }
    return na;
}

/* Appends v to a growing array unless it is there already. */
static int u64_push(uint64_t **arr, size_t *n, size_t *cap, uint64_t v)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*arr)[i] == v) {
            return 0;
        }
    }
    uint64_t *na = room_for_one(*arr, *n, cap, sizeof(**arr));
    if (na == NULL) {
        return -ENOMEM;
    }
    *arr = na;
    (*arr)[(*n)++] = v;
    return 0;
}

static int unit_add(wk_tasks_report_t *r, size_t *cap, const char *name, const sl_unit_stat_t *u)
{
    for (size_t i = 0; i < r->n_units; i++) {
        if (strcmp(r->units[i].name, name) == 0) {
            r->units[i].cpu_sec += u->cpu_sec;
            r->units[i].out_bytes += u->out_bytes;
            r->units[i].samples += u->samples;
            return 0;
        }
    }
    wk_unit_report_t *na = room_for_one(r->units, r->n_units, cap, sizeof(*r->units));
    if (na == NULL) {
        return -ENOMEM;
    }
    r->units = na;
    wk_unit_report_t *w = &r->units[r->n_units++];
    snprintf(w->name, sizeof(w->name), "%s", name);
    w->cpu_sec = u->cpu_sec;
    w->out_bytes = u->out_bytes;
    w->samples = u->samples;
    return 0;
}

/* Appends (job, split, assignment) unless already listed for this job:
 * entries of one job are contiguous from `from`. */
static int ref_push(wk_split_ref_t **arr, size_t *n, size_t *cap, size_t from, uint64_t job_id,
                    uint64_t split_id, uint64_t assignment)
{
    for (size_t i = from; i < *n; i++) {
        if ((*arr)[i].split_id == split_id && (*arr)[i].assignment == assignment) {
            return 0;
        }
    }
    wk_split_ref_t *na = room_for_one(*arr, *n, cap, sizeof(**arr));
    if (na == NULL) {
        return -ENOMEM;
    }
    *arr = na;
    (*arr)[(*n)++] =
        (wk_split_ref_t){.job_id = job_id, .split_id = split_id, .assignment = assignment};
    return 0;
}

static int ref_held(const wk_tasks_report_t *r, uint64_t job_id, uint64_t split_id)
{
    for (size_t i = 0; i < r->n_splits; i++) {
        if (r->splits[i].job_id == job_id && r->splits[i].split_id == split_id) {
            return 1;
        }
    }
    return 0;
}

/* Growth of the report's arrays while the jobs are added. */
typedef struct report_caps_s {
    size_t known, splits, failed, units, failure_len, cache;
} report_caps_t;

/* "job N: why" appended to the report's failure text, as long as it fits. */
static void failure_add(wk_tasks_report_t *r, report_caps_t *caps, const wk_job_t *job)
{
    size_t *flen = &caps->failure_len;
    if (*flen >= sizeof(r->failure) - 1) {
        return;
    }
    int w = snprintf(r->failure + *flen, sizeof(r->failure) - *flen, "%sjob %" PRIu64 ": %.300s",
                     *flen > 0 ? "; " : "", job->id, job->reason);
    *flen += w > 0 ? (size_t)w : 0;
    if (*flen >= sizeof(r->failure)) {
        *flen = sizeof(r->failure) - 1;
    }
}

/* d = a - b, field by field; whether anything grew. */
static int cache_delta(const sl_pcache_stats_t *a, const sl_pcache_stats_t *b, sl_pcache_stats_t *d)
{
    *d = (sl_pcache_stats_t){.hits = a->hits - b->hits,
                             .misses = a->misses - b->misses,
                             .bytes_read = a->bytes_read - b->bytes_read,
                             .bytes_written = a->bytes_written - b->bytes_written,
                             .evictions = a->evictions - b->evictions,
                             .store_errors = a->store_errors - b->store_errors,
                             .corrupt = a->corrupt - b->corrupt,
                             .bytes_evicted = a->bytes_evicted - b->bytes_evicted,
                             .read_ns = a->read_ns - b->read_ns,
                             .read_bytes_sq = a->read_bytes_sq - b->read_bytes_sq,
                             .read_bytes_ns = a->read_bytes_ns - b->read_bytes_ns};
    return d->hits + d->misses + d->bytes_written + d->evictions + d->store_errors + d->corrupt > 0;
}

/* The job's prefix cache growth (job->mu held); one entry per job, so as
 * many as known_jobs. */
static int cache_add(wk_tasks_report_t *r, size_t *cap, const wk_job_t *job)
{
    sl_pcache_stats_t d;
    if (!cache_delta(&job->pcs, &job->pcs_reported, &d)) {
        return 0;
    }
    size_t c = *cap;
    sl_pcache_stats_t *a = room_for_one(r->cache, r->n_cache, &c, sizeof(*r->cache));
    if (a == NULL) {
        return -ENOMEM;
    }
    r->cache = a;
    uint64_t *ids = room_for_one(r->cache_jobs, r->n_cache, cap, sizeof(*r->cache_jobs));
    if (ids == NULL) {
        return -ENOMEM;
    }
    r->cache_jobs = ids;
    r->cache[r->n_cache] = d;
    r->cache_jobs[r->n_cache++] = job->id;
    return 0;
}

/* One job's part of the report (job->mu held). */
static int report_job_locked(wk_tasks_report_t *r, report_caps_t *caps, const wk_job_t *job)
{
    int rc = u64_push(&r->known_jobs, &r->n_known, &caps->known, job->id);
    if (rc == 0 && job->state == WK_JOB_FAILED) {
        rc = u64_push(&r->failed_jobs, &r->n_failed, &caps->failed, job->id);
        failure_add(r, caps, job);
    }
    size_t from = r->n_splits;
    for (const wk_split_t *sp = job->splits; sp != NULL && rc == 0; sp = sp->next_split) {
        rc = ref_push(&r->splits, &r->n_splits, &caps->splits, from, job->id, sp->id,
                      sp->assignment);
    }
    for (const wk_msg_t *m = job->out.head; m != NULL && rc == 0; m = m->next) {
        rc = ref_push(&r->splits, &r->n_splits, &caps->splits, from, job->id, m->batch.split_id,
                      m->assignment);
    }
    if (rc == 0 && job->sending) {
        rc = ref_push(&r->splits, &r->n_splits, &caps->splits, from, job->id,
                      job->sending_split, job->sending_assignment);
    }
    r->buffered_bytes += job->out.bytes + job->partial_bytes;
    for (uint32_t u = 0; u < job->nunits && rc == 0; u++) {
        if (job->units[u].samples > 0) {
            rc = unit_add(r, &caps->units, sl_pipeline_unit_name(job->pipe, u), &job->units[u]);
        }
    }
    if (rc == 0) {
        rc = cache_add(r, &caps->cache, job);
    }
    return rc;
}

/* The sent splits not listed in progress (t->sent_mu held). Visits the
 * ring in order: each entry popped is pushed straight back. */
static int report_sent_locked(wk_tasks_t *t, wk_tasks_report_t *r)
{
    size_t n = sl_ring_len(&t->sent);
    if (n == 0) {
        return 0;
    }
    r->sent = malloc(n * sizeof(*r->sent));
    r->sent_seq = malloc(n * sizeof(*r->sent_seq));
    if (r->sent == NULL || r->sent_seq == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        wk_sent_t e;
        (void)sl_ring_pop(&t->sent, &e);
        (void)sl_ring_push_back(&t->sent, &e);
        if (!ref_held(r, e.ref.job_id, e.ref.split_id)) {
            r->sent[r->n_sent] = e.ref;
            r->sent_seq[r->n_sent] = e.seq;
            r->n_sent++;
        }
    }
    return 0;
}

int wk_tasks_report(wk_tasks_t *t, wk_tasks_report_t *r)
{
    memset(r, 0, sizeof(*r));
    r->bytes_sent = atomic_load(&t->n_bytes_sent);
    report_caps_t caps = {0};
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL && rc == 0; job = job->next_job) {
        pthread_mutex_lock(&job->mu);
        rc = report_job_locked(r, &caps, job);
        pthread_mutex_unlock(&job->mu);
    }
    pthread_mutex_unlock(&t->mu);
    /* Sent splits after the jobs: one whose last message went out meanwhile
     * is then listed in progress and sent; a split listed in progress is
     * left out of sent (a re-assigned split may be held again) and kept for
     * the next report. */
    if (rc == 0) {
        pthread_mutex_lock(&t->sent_mu);
        rc = report_sent_locked(t, r);
        pthread_mutex_unlock(&t->sent_mu);
    }
    if (rc < 0) {
        wk_tasks_report_free(r);
    }
    return rc;
}

void wk_tasks_report_done(wk_tasks_t *t, const wk_tasks_report_t *r)
{
    pthread_mutex_lock(&t->sent_mu);
    /* Both lists are in increasing seq order: one merge pass, keeping (in
     * order) what the report did not carry. */
    size_t n = sl_ring_len(&t->sent);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        wk_sent_t e;
        (void)sl_ring_pop(&t->sent, &e);
        while (j < r->n_sent && r->sent_seq[j] < e.seq) {
            j++;
        }
        if (j < r->n_sent && r->sent_seq[j] == e.seq) {
            continue; /* reported */
        }
        (void)sl_ring_push_back(&t->sent, &e);
    }
    pthread_mutex_unlock(&t->sent_mu);
    /* The cache growth it carried is the dispatcher's now. */
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL && r->n_cache > 0; job = job->next_job) {
        for (size_t i = 0; i < r->n_cache; i++) {
            if (r->cache_jobs[i] == job->id) {
                pthread_mutex_lock(&job->mu);
                sl_pcache_stats_add(&job->pcs_reported, &r->cache[i]);
                pthread_mutex_unlock(&job->mu);
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
}

void wk_tasks_report_free(wk_tasks_report_t *r)
{
    free(r->known_jobs);
    free(r->splits);
    free(r->sent);
    free(r->sent_seq);
    free(r->failed_jobs);
    free(r->units);
    free(r->cache);
    free(r->cache_jobs);
    memset(r, 0, sizeof(*r));
}

void wk_tasks_totals(wk_tasks_t *t, wk_totals_t *ret)
{
    ret->jobs = atomic_load(&t->n_jobs);
    ret->samples_done = atomic_load(&t->n_samples);
    ret->samples_skipped = atomic_load(&t->n_skipped);
    ret->splits_done = atomic_load(&t->n_splits);
    ret->msgs_sent = atomic_load(&t->n_msgs);
    ret->bytes_sent = atomic_load(&t->n_bytes_sent);
    ret->streams_broken = atomic_load(&t->n_broken);
    ret->early_fetches = atomic_load(&t->n_early_fetches);
    ret->sent_unprocessed = atomic_load(&t->n_unprocessed);
    uint64_t v[8];
    for (int i = 0; i < 8; i++) {
        v[i] = atomic_load(&t->pc_tot[i]);
    }
    ret->cache = (sl_pcache_stats_t){.hits = v[0],
                                     .misses = v[1],
                                     .bytes_read = v[2],
                                     .bytes_written = v[3],
                                     .evictions = v[4],
                                     .store_errors = v[5],
                                     .corrupt = v[6],
                                     .bytes_evicted = v[7]};
    ret->cache.waited = atomic_load(&t->pc_waited);
    ret->cache.claim_timeouts = atomic_load(&t->pc_claim_timeouts);
}

/* One /status row (job->mu held). */
static void job_info_locked(const wk_job_t *job, wk_job_info_t *r)
{
    memset(r, 0, sizeof(*r));
    r->job_id = job->id;
    r->state = job->state;
    snprintf(r->reason, sizeof(r->reason), "%s", job->reason);
    snprintf(r->source, sizeof(r->source), "%.127s", job->spec.source_path);
    r->num_samples = job->num_samples;
    r->nunits = job->nunits;
    for (const wk_split_t *sp = job->splits; sp != NULL; sp = sp->next_split) {
        if (sp->state == WK_SPLIT_QUEUED) {
            r->splits_queued++;
        } else {
            r->splits_running++;
        }
    }
    r->buffered_bytes = job->out.bytes + job->partial_bytes;
    r->buffered_msgs = job->out.count + (job->sending ? 1 : 0);
    r->inflight = job->inflight;
    r->samples_done = job->samples_done;
    r->samples_skipped = job->samples_skipped;
    r->splits_done = job->splits_done;
    r->msgs_sent = job->msgs_sent;
    r->streams = job->streams;
    r->streams_broken = job->streams_broken;
    r->stream_attached = job->stream_attached;
    r->cache_prefix = job->pc_prefix;
    r->cache = job->pcs;
}

size_t wk_tasks_snapshot(wk_tasks_t *t, wk_job_info_t *rows, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job, n++) {
        if (n < max) {
            pthread_mutex_lock(&job->mu);
            job_info_locked(job, &rows[n]);
            pthread_mutex_unlock(&job->mu);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}
