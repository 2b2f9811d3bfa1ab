/* The control thread: in rounds (every 100 ms while they bring news, up to
 * 500 ms apart while nothing changes, pace.h) it acknowledges completed
 * splits, tells the dispatcher about each worker whose stream broke
 * (AckSplits with retry_worker_id, until one succeeds), fetches the
 * assignment, and keeps one fetcher per worker that holds splits of this
 * job, restarting a failed one after a per-worker backoff (200 ms doubling
 * to 2 s while it delivers nothing). Acks and GetAssignment run in that
 * order on this one thread, so an assignment never shows a split this
 * client already acknowledged as new. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/pace.h"
#include "client/lib/profile.h"
#include "common/base/clock.h"
#include "common/base/err.h"
#include "common/pcache/pcache.h"

/* The job is gone from the dispatcher. Its most common cause is a dispatcher
 * restarted without a journal, so the message names the flag that keeps jobs. */
#define CL_JOB_UNKNOWN_MSG                                                                         \
    "the dispatcher no longer knows this job (timed out, or was it restarted without "             \
    "a journal? see sluice-dispatcher --journal)"

/* Waits ms before the next round. While the dispatcher answers (may_wake),
 * a consumer that became idle (job->control.kick) cuts the wait short, so
 * its request for work goes out at once, and a due round (cl_control_due)
 * comes CL_PACE_MIN_MS after the last at the latest. */
static void wait_next(sluice_job_t *job, int ms, int may_wake)
{
    int64_t start = sl_mono_ms();
    int64_t until = start + ms;
    int64_t due_at = start + (ms < CL_PACE_MIN_MS ? ms : CL_PACE_MIN_MS);
    pthread_mutex_lock(&job->mu);
    for (;;) {
        int64_t left = (may_wake && job->control.due ? due_at : until) - sl_mono_ms();
        if (job->closing || left <= 0 || (may_wake && job->control.kick)) {
            break;
        }
        (void)sl_cond_wait_ms(&job->control.cv, &job->mu, left);
    }
    job->control.kick = 0;
    job->control.due = 0;
    pthread_mutex_unlock(&job->mu);
}

void cl_control_due(sluice_job_t *job)
{
    if (!job->control.due) {
        job->control.due = 1;
        pthread_cond_signal(&job->control.cv);
    }
}

int cl_backoff_next(int cur)
{
    if (cur <= 0) {
        return CL_BACKOFF_MIN_MS;
    }
    return cur >= CL_BACKOFF_MAX_MS / 2 ? CL_BACKOFF_MAX_MS : cur * 2;
}

/* The worker's backoff slot, created on demand (the oldest-allowed slot is
 * reused when full: it is the one least likely to matter). */
static cl_backoff_t *backoff_of(sluice_job_t *job, uint64_t worker_id)
{
    cl_backoff_t *free_slot = NULL;
    cl_backoff_t *oldest = &job->control.backoff[0];
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        cl_backoff_t *b = &job->control.backoff[i];
        if (b->worker_id == worker_id) {
            return b;
        }
        if (b->worker_id == 0 && free_slot == NULL) {
            free_slot = b;
        }
        if (b->not_before < oldest->not_before) {
            oldest = b;
        }
    }
    cl_backoff_t *b = free_slot != NULL ? free_slot : oldest;
    *b = (cl_backoff_t){.worker_id = worker_id};
    return b;
}

static void fail_job(sluice_job_t *job, const char *why)
{
    pthread_mutex_lock(&job->mu);
    if (job->failure[0] == '\0') {
        snprintf(job->failure, sizeof(job->failure), "%s", why);
    }
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

/* A copy of q's ids (job->mu held), NULL when empty or out of memory. */
static uint64_t *copy_ids(const cl_ids_t *q)
{
    uint64_t *v = q->n ? malloc(q->n * sizeof(*v)) : NULL;
    if (v != NULL) {
        memcpy(v, q->v, q->n * sizeof(*v));
    }
    return v;
}

/* Sends queued acks, and retries for retry_worker (0 = none); on success
 * removes acked splits. Returns 1 sent, 0 nothing to send, < 0 failed. */
static int send_acks(sluice_job_t *job, uint64_t *retry, size_t nretry, uint64_t retry_worker)
{
    pthread_mutex_lock(&job->mu);
    size_t n = job->acks.n;
    size_t nrecv = job->recvd.n;
    uint64_t *ids = copy_ids(&job->acks);
    uint64_t *recv = copy_ids(&job->recvd);
    if ((n && ids == NULL) || (nrecv && recv == NULL)) {
        pthread_mutex_unlock(&job->mu);
        free(ids);
        free(recv);
        return -ENOMEM;
    }
    uint64_t delta[SL_SKIP__COUNT];
    Sluice__SkipCount counts[SL_SKIP__COUNT];
    Sluice__SkipCount *countp[SL_SKIP__COUNT];
    size_t nskip = 0;
    for (int r = 0; r < SL_SKIP__COUNT; r++) {
        delta[r] = job->skips_counted[r] - job->skips_reported[r];
        if (delta[r] > 0) {
            sluice__skip_count__init(&counts[nskip]);
            counts[nskip].reason = (char *)sl_skip_name((sl_skip_e)r);
            counts[nskip].count = delta[r];
            countp[nskip] = &counts[nskip];
            nskip++;
        }
    }
    pthread_mutex_unlock(&job->mu);
    if (n == 0 && nrecv == 0 && nretry == 0 && retry_worker == 0 && nskip == 0) {
        return 0;
    }
    int rc = 1;
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->job_id;
    req.job_secret = job->job_secret;
    req.rank = job->spec.rank;
    req.n_split_ids = n;
    req.split_ids = ids;
    req.n_retry_split_ids = nretry;
    req.retry_split_ids = retry;
    req.retry_worker_id = retry_worker;
    req.n_received_split_ids = nrecv;
    req.received_split_ids = recv;
    req.n_skipped = nskip;
    req.skipped = countp;
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int urc = sl_rpc_unary(job->disp, "/sluice.Dispatcher/AckSplits", &req.base,
                           &sluice__ack_splits_response__descriptor, job->timeout_ms, 0, &resp,
                           &st);
    if (urc == 0) {
        protobuf_c_message_free_unpacked(resp, NULL);
        pthread_mutex_lock(&job->mu);
        for (int r = 0; r < SL_SKIP__COUNT; r++) {
            job->skips_reported[r] += delta[r];
        }
        /* Ids queued meanwhile stay; the first n (nrecv) were sent. */
        cl_ids_drop(&job->acks, n);
        for (size_t i = 0; i < n; i++) {
            cl_split_t *s = cl_split_find(job, ids[i]);
            if (s != NULL) {
                cl_split_remove(job, s);
            }
        }
        cl_ids_drop(&job->recvd, nrecv);
        for (size_t i = 0; i < nrecv; i++) {
            cl_split_t *s = cl_split_find(job, recv[i]);
            if (s != NULL) {
                cl_split_on(job, s, CL_SPLIT_EV_REPORTED);
            }
        }
        if (job->acks.n > 0 || job->recvd.n > 0) {
            cl_control_due(job); /* queued during the call: not made due by an empty queue */
        }
        pthread_mutex_unlock(&job->mu);
    } else {
        rc = urc;
        if (rc == -ECOMM && st.code == SL_RPC_NOT_FOUND) {
            fail_job(job, CL_JOB_UNKNOWN_MSG);
        }
    }
    free(ids);
    free(recv);
    return rc;
}

static cl_fetcher_t *fetcher_for(sluice_job_t *job, uint64_t worker_id)
{
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        if (job->fetch.fetchers[i].started && job->fetch.fetchers[i].worker_id == worker_id) {
            return &job->fetch.fetchers[i];
        }
    }
    return NULL;
}

/* Starts a fetcher for the worker unless one runs or its backoff lasts;
 * returns the ms the backoff has left (0: none), for the next round. */
static int ensure_fetcher(sluice_job_t *job, uint64_t worker_id, const char *address)
{
    double now = sl_mono_sec();
    pthread_mutex_lock(&job->mu);
    cl_fetcher_t *f = fetcher_for(job, worker_id);
    double not_before = backoff_of(job, worker_id)->not_before;
    if (f != NULL || job->closing || now < not_before) {
        pthread_mutex_unlock(&job->mu);
        return f == NULL && now < not_before ? (int)((not_before - now) * 1000.0) + 1 : 0;
    }
    for (int i = 0; i < CL_MAX_FETCHERS && f == NULL; i++) {
        if (!job->fetch.fetchers[i].started) {
            f = &job->fetch.fetchers[i];
        }
    }
    if (f == NULL) {
        pthread_mutex_unlock(&job->mu);
        return 0; /* more workers than streams: the others wait for a slot */
    }
    memset(f, 0, sizeof(*f));
    f->job = job;
    f->worker_id = worker_id;
    snprintf(f->address, sizeof(f->address), "%s", address);
    f->state = CL_FETCH_RUNNING;
    f->started = 1;
    if (pthread_create(&f->thread, NULL, cl_fetch_main, f) != 0) {
        f->started = 0;
    }
    pthread_mutex_unlock(&job->mu);
    return 0;
}

static void retry_worker_add(sluice_job_t *job, uint64_t worker_id)
{
    for (size_t i = 0; i < job->control.nretry_workers; i++) {
        if (job->control.retry_workers[i] == worker_id) {
            return;
        }
    }
    if (job->control.nretry_workers < CL_MAX_FETCHERS) {
        job->control.retry_workers[job->control.nretry_workers++] = worker_id;
    }
}

/* Joins fetchers whose stream ended. A broken one's worker goes on the retry
 * list and backs off (from the minimum again if its stream had delivered). */
static void reap_fetchers(sluice_job_t *job)
{
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        cl_fetcher_t *f = &job->fetch.fetchers[i];
        pthread_mutex_lock(&job->mu);
        int done = f->started && f->state != CL_FETCH_RUNNING;
        pthread_mutex_unlock(&job->mu);
        if (!done) {
            continue;
        }
        pthread_join(f->thread, NULL);
        pthread_mutex_lock(&job->mu);
        cl_backoff_t *b = backoff_of(job, f->worker_id);
        if (f->delivered) {
            b->delay_ms = 0;
        }
        if (f->state == CL_FETCH_BROKEN) {
            b->delay_ms = cl_backoff_next(b->delay_ms);
            b->not_before = sl_mono_sec() + b->delay_ms / 1000.0;
            retry_worker_add(job, f->worker_id);
        }
        f->started = 0;
        pthread_mutex_unlock(&job->mu);
    }
}

/* Asks the dispatcher to re-assign the splits of each worker whose stream
 * broke: the unacknowledged ones this client knows it owns are listed, and
 * retry_worker_id makes the dispatcher take back every other split it still
 * has there (ones this client has not heard of yet). A worker stays on the
 * list until its request succeeds. */
static void send_retries(sluice_job_t *job)
{
    while (job->control.nretry_workers > 0) {
        uint64_t wid = job->control.retry_workers[0];
        cl_ids_t ids = {0};
        pthread_mutex_lock(&job->mu);
        for (size_t k = 0; k < CL_MAX_SPLITS; k++) {
            cl_split_t *s = &job->splits[k];
            if (s->state == CL_SPLIT_FREE || s->state == CL_SPLIT_ACKED || s->owner != wid) {
                continue;
            }
            if (cl_ids_push(&ids, s->id) < 0) {
                break; /* the dispatcher takes back the rest by worker id */
            }
        }
        pthread_mutex_unlock(&job->mu);
        int rc = send_acks(job, ids.v, ids.n, wid);
        if (rc >= 0) {
            pthread_mutex_lock(&job->mu);
            for (size_t i = 0; i < ids.n; i++) {
                cl_split_t *s = cl_split_find(job, ids.v[i]);
                if (s != NULL && s->owner == wid) {
                    s->owner = UINT64_MAX; /* unknown until the next assignment */
                }
            }
            pthread_mutex_unlock(&job->mu);
        }
        cl_ids_free(&ids);
        if (rc < 0) {
            return; /* next round */
        }
        memmove(&job->control.retry_workers[0], &job->control.retry_workers[1],
                (job->control.nretry_workers - 1) * sizeof(job->control.retry_workers[0]));
        job->control.nretry_workers--;
    }
}

static void apply_assignment(sluice_job_t *job, const Sluice__GetAssignmentResponse *r)
{
    pthread_mutex_lock(&job->mu);
    if (r->plan != NULL) {
        job->split_units = r->plan->split;
        job->local_share = r->plan->local_share;
        job->plan_compress = r->plan->compress;
    }
    for (size_t i = 0; i < r->n_splits; i++) {
        const Sluice__SplitAssignment *a = r->splits[i];
        if (a->epoch < job->first_epoch || a->epoch >= job->end_epoch || a->begin > a->end ||
            a->end > job->positions || a->stage_to > job->nunits) {
            continue; /* not a split of this job: ignore rather than trust */
        }
        cl_split_t *s = cl_split_add(job, a->split_id);
        if (s == NULL) {
            break; /* the table is full: the job failed */
        }
        if (s->state == CL_SPLIT_HEARD) {
            s->epoch = a->epoch;
            s->begin = a->begin;
            s->end = a->end;
            s->next = a->begin;
        }
        cl_split_on(job, s, CL_SPLIT_EV_LISTED); /* its samples may all be here already */
        if (s->state == CL_SPLIT_ACKED) {
            continue;
        }
        if (a->worker_id == 0 && s->owner != 0) {
            s->next = s->begin; /* now ours: run every position not yet delivered */
            if (sl_ring_push_back(&job->local_pending, &s->id) < 0) {
                snprintf(job->failure, sizeof(job->failure),
                         "more than %d local splits waiting: raise split_size", CL_MAX_SPLITS);
                break;
            }
            job->idle = 0; /* work to start: do not ask again before the consumer looks */
        }
        s->owner = a->worker_id;
    }
    if (r->failure != NULL && r->failure[0] != '\0' && job->failure[0] == '\0') {
        snprintf(job->failure, sizeof(job->failure), "job failed: %s", r->failure);
    }
    if (r->cache != NULL) {
        const Sluice__CacheStats *c = r->cache;
        const uint64_t v[8] = {c->hits,      c->misses,       c->bytes_read, c->bytes_written,
                               c->evictions, c->store_errors, c->corrupt,    c->bytes_evicted};
        memcpy(job->workers_cache, v, sizeof(v));
    }
    if (r->fallback != NULL && r->fallback[0] != '\0') {
        snprintf(job->fallback, sizeof(job->fallback), "%s", r->fallback);
        sl_err_scrub(job->fallback); /* a peer's text: one printable line */
    }
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

/* While the dispatcher does not answer (a restart), the control thread
 * waits double as long after each failure up to this cap, so a dispatcher
 * coming back is not met by every client at once. */
#define CL_DISP_BACKOFF_MAX_MS 2000

/* The control thread's own state across rounds. */
typedef struct cl_rounds_s {
    cl_pace_t pace;
    int failures; /* GetAssignment calls failed in a row */
    int polled;   /* a GetAssignment succeeded */
    int wait_ms;  /* the next wait */
    int64_t last_ok;
} cl_rounds_t;

/* The client's own prefix cache so far, into own: the planner prices its
 * local samples at its hit rate and read cost (docs/cache.md). job->pc is
 * set before this thread starts and freed after it. */
static Sluice__CacheStats *own_cache(sluice_job_t *job, Sluice__CacheStats *own)
{
    if (job->pc == NULL) {
        return NULL;
    }
    sl_pcache_stats_t c;
    sl_pcache_stats(job->pc, &c);
    own->hits = c.hits;
    own->misses = c.misses;
    own->bytes_read = c.bytes_read;
    own->bytes_written = c.bytes_written;
    own->evictions = c.evictions;
    own->store_errors = c.store_errors;
    own->corrupt = c.corrupt;
    own->bytes_evicted = c.bytes_evicted;
    own->read_ns = c.read_ns;
    own->read_bytes_sq = c.read_bytes_sq;
    own->read_bytes_ns = c.read_bytes_ns;
    return own;
}

/* Applies an answered assignment and starts its workers' fetchers; returns
 * the wait before the next round: the pace's, shortened to a worker's
 * backoff end so its fetcher restarts on time. */
static int took_assignment(sluice_job_t *job, cl_rounds_t *r,
                           const Sluice__GetAssignmentResponse *resp)
{
    apply_assignment(job, resp);
    int ms = cl_pace_after(&r->pace, cl_pace_sig(resp));
    for (size_t i = 0; i < resp->n_workers; i++) {
        if (resp->workers[i]->worker_id != 0 && resp->workers[i]->address != NULL) {
            int left = ensure_fetcher(job, resp->workers[i]->worker_id, resp->workers[i]->address);
            ms = left > 0 && left < ms ? left : ms;
        }
    }
    return ms;
}

/* One GetAssignment; prior is send_acks' result this round (a failed one
 * other than -ECOMM skips the call). Updates r, fails the job when the
 * dispatcher forgot it or stayed silent for dispatcher_timeout_ms. */
static void poll_assignment(sluice_job_t *job, cl_rounds_t *r, int prior)
{
    Sluice__GetAssignmentRequest req = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->job_id;
    req.job_secret = job->job_secret;
    req.rank = job->spec.rank;
    /* Not on the first call: the client has not seen its own splits
     * yet, so it is not idle but waiting for its assignment. */
    pthread_mutex_lock(&job->mu);
    req.idle = job->idle != 0 && r->polled;
    pthread_mutex_unlock(&job->mu);
    Sluice__CacheStats own = SLUICE__CACHE_STATS__INIT;
    req.cache = own_cache(job, &own);
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int rc = prior;
    if (prior >= 0 || prior == -ECOMM) {
        rc = sl_rpc_unary(job->disp, "/sluice.Dispatcher/GetAssignment", &req.base,
                          &sluice__get_assignment_response__descriptor, job->timeout_ms, 0, &resp,
                          &st);
    }
    if (rc == 0) {
        r->failures = 0;
        r->polled = 1;
        r->last_ok = sl_mono_ms();
        r->wait_ms = took_assignment(job, r, (Sluice__GetAssignmentResponse *)resp);
        protobuf_c_message_free_unpacked(resp, NULL);
    } else if (rc == -ECOMM && st.code == SL_RPC_NOT_FOUND) {
        fail_job(job, CL_JOB_UNKNOWN_MSG);
    } else {
        int base = r->failures++ == 0 ? CL_PACE_MIN_MS : r->wait_ms; /* not a quiet wait */
        r->wait_ms = base >= CL_DISP_BACKOFF_MAX_MS / 2 ? CL_DISP_BACKOFF_MAX_MS : base * 2;
        if (sl_mono_ms() - r->last_ok > job->dispatcher_timeout_ms) {
            char why[160];
            snprintf(why, sizeof(why),
                     "the dispatcher has not answered for %d ms (%d failed calls; "
                     "dispatcher_timeout_ms)",
                     job->dispatcher_timeout_ms, r->failures);
            fail_job(job, why);
        }
    }
}

static int closing_now(sluice_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int closing = job->closing;
    pthread_mutex_unlock(&job->mu);
    return closing;
}

static void *control_main(void *arg)
{
    sluice_job_t *job = arg;
    /* Named for top -H, perf and scripts/bench-client-cpu's per-thread split;
     * a name that cannot be set changes nothing else. */
    (void)pthread_setname_np(pthread_self(), "sl-control");
    cl_rounds_t r = {.wait_ms = CL_PACE_MIN_MS, .last_ok = sl_mono_ms()};
    cl_pace_init(&r.pace);
    while (!closing_now(job)) {
        reap_fetchers(job);
        int rc = send_acks(job, NULL, 0, 0);
        if (rc >= 0) {
            send_retries(job);
        }
        poll_assignment(job, &r, rc);
        cl_planner_tick(job); /* planner: ReportRates once a second */
        int ms = r.wait_ms;
        if (r.failures == 0) {
            int report = cl_planner_due_ms(job);
            ms = report < ms ? (report < 1 ? 1 : report) : ms;
            /* A retry that failed goes again at the old pace. */
            ms = job->control.nretry_workers > 0 && ms > CL_PACE_MIN_MS ? CL_PACE_MIN_MS : ms;
        }
        wait_next(job, ms, r.failures == 0);
    }
    return NULL;
}

int cl_control_start(sluice_job_t *job)
{
    if (pthread_create(&job->control.thread, NULL, control_main, job) != 0) {
        return -EAGAIN;
    }
    job->control.started = 1;
    return 0;
}

void cl_control_stop(sluice_job_t *job)
{
    pthread_join(job->control.thread, NULL);
    pthread_mutex_lock(&job->mu);
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        cl_fetch_stop(&job->fetch.fetchers[i]);
    }
    pthread_mutex_unlock(&job->mu);
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        if (job->fetch.fetchers[i].started) {
            pthread_join(job->fetch.fetchers[i].thread, NULL);
            job->fetch.fetchers[i].started = 0;
        }
    }
    /* Flush final acks, then free the job on the dispatcher. */
    (void)send_acks(job, NULL, 0, 0);
    Sluice__CloseJobRequest req = SLUICE__CLOSE_JOB_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->job_id;
    req.job_secret = job->job_secret;
    req.rank = job->spec.rank;
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    if (sl_rpc_unary(job->disp, "/sluice.Dispatcher/CloseJob", &req.base,
                     &sluice__close_job_response__descriptor, 2000, 0, &resp, &st) == 0) {
        protobuf_c_message_free_unpacked(resp, NULL);
    }
}
