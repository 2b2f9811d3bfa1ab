/* job: one job the worker holds -- its lifetime (references), its state
 * machine (the one place job->state changes) and the dropping of its work.
 * Any thread; the locking rules are in tasks_impl.h. */
#include "worker/tasks_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/log.h"
#include "common/order/ranks.h"

/* First guess of a finished sample's bytes, before any has finished. */
#define WK_EST_INITIAL ((size_t)1 << 20)

const char *wk_job_state_name(wk_job_state_e s)
{
    switch (s) {
    case WK_JOB_LOADING:
        return "loading";
    case WK_JOB_READY:
        return "ready";
    case WK_JOB_FAILED:
        return "failed";
    case WK_JOB_CLOSED:
        return "closed";
    }
    return "?";
}

uint64_t wk_job_id(const wk_job_t *job) { return job->id; }

/* Parses and compiles the spec here (cheap), so assignments can be checked
 * against the unit count at once; the slow source indexing is the runner's. */
static int job_compile(wk_job_t *job, const Sluice__JobSpec *js, char *err, size_t errlen)
{
    const char *json = js->spec_json != NULL ? js->spec_json : "";
    int rc = sl_spec_parse("<rpc>", json, strlen(json), &job->spec, err, errlen);
    if (rc == 0) {
        rc = sl_pipeline_new(&job->spec, 0, &job->pipe, err, errlen);
    }
    if (rc == 0 && job->num_samples > SL_SOURCE_MAX_SAMPLES) {
        snprintf(err, errlen, "num_samples %" PRIu64 " is above the limit %u", job->num_samples,
                 SL_SOURCE_MAX_SAMPLES);
        rc = -E2BIG;
    }
    if (rc == 0) {
        rc = sl_resume_check(&job->spec, job->num_samples, err, errlen);
    }
    if (rc == 0 && sl_spec_has_plugins(&job->spec)) {
        /* A stage this worker lacks (or has another build of): the
         * dispatcher knows (RegisterWorker) and gives it only the units
         * before it; a split that reaches it anyway fails the job here. */
        rc = sl_pipeline_bind_plugins(job->pipe, job->tasks->plugins, err, errlen);
        if (rc == -ENOENT) {
            SL_INFO("job %" PRIu64 ": runs only the units before %s", job->id, err);
            rc = 0;
        }
    }
    if (rc == 0) {
        job->nunits = sl_pipeline_nunits(job->pipe);
    }
    return rc;
}

wk_job_t *wk_job_new(wk_tasks_t *t, const Sluice__JobSpec *js)
{
    wk_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return NULL;
    }
    if (sl_cond_init_mono(&job->cv) != 0) {
        free(job);
        return NULL;
    }
    pthread_mutex_init(&job->mu, NULL);
    job->tasks = t;
    job->id = js->job_id;
    job->fingerprint = js->source_fingerprint;
    job->num_samples = js->num_samples;
    job->cache_off = js->cache_off != 0;
    if (js->secret_sha256.len == SL_JOBCAP_HASH) {
        memcpy(job->cap_hash, js->secret_sha256.data, SL_JOBCAP_HASH);
        job->has_cap = 1;
    } else if (js->secret_sha256.len != 0) {
        /* A hash we cannot check must not leave the job open to anyone. */
        memset(job->cap_hash, 0xff, SL_JOBCAP_HASH);
        job->has_cap = 1;
    }
    job->buffer_bytes = t->buffer_bytes;
    if (js->max_buffered_bytes > 0 && js->max_buffered_bytes < job->buffer_bytes) {
        job->buffer_bytes = (size_t)js->max_buffered_bytes; /* the tenant's share */
    }
    job->refs = 1;
    job->est_bytes = WK_EST_INITIAL;
    job->state = WK_JOB_LOADING; /* the initial state, not a move */
    wk_msglist_init(&job->out);
    char err[512];
    if (job_compile(job, js, err, sizeof(err)) < 0) {
        wk_job_fail(job, "invalid job spec: %s", err);
    }
    return job;
}

void wk_job_ref(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    job->refs++;
    pthread_mutex_unlock(&job->mu);
}

void wk_split_free(wk_split_t *sp)
{
    if (sp != NULL) {
        wk_packer_reset(&sp->pk);
        free(sp);
    }
}

static void split_list_free(wk_split_t *sp)
{
    for (wk_split_t *nx; sp != NULL; sp = nx) {
        nx = sp->next_split;
        wk_split_free(sp);
    }
}

void wk_job_unref(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int left = --job->refs;
    pthread_mutex_unlock(&job->mu);
    if (left > 0) {
        return;
    }
    wk_msglist_clear(&job->out);
    split_list_free(job->splits);
    split_list_free(job->dropped);
    for (int i = 0; i < WK_ORDER_SLOTS; i++) {
        free(job->orders[i].order);
    }
    free(job->slots);
    sl_source_free(job->src);
    free(job->tcost);
    free(job->ttok);
    free(job->ttiles);
    sl_pipeline_free(job->pipe);
    sl_spec_clear(&job->spec);
    pthread_mutex_destroy(&job->mu);
    pthread_cond_destroy(&job->cv);
    free(job);
}

void wk_split_unlink_locked(wk_job_t *job, wk_split_t *sp)
{
    wk_split_t *prev = NULL;
    for (wk_split_t *cur = job->splits; cur != NULL; prev = cur, cur = cur->next_split) {
        if (cur != sp) {
            continue;
        }
        if (prev != NULL) {
            prev->next_split = sp->next_split;
        } else {
            job->splits = sp->next_split;
        }
        if (job->splits_tail == sp) {
            job->splits_tail = prev;
        }
        job->nsplits--;
        return;
    }
}

/* The split is freed now or, with samples in flight, parked on job->dropped
 * until the runner has them back (the runner's slots point at it). */
void wk_split_drop_locked(wk_job_t *job, wk_split_t *sp)
{
    wk_split_unlink_locked(job, sp);
    job->partial_bytes -= wk_packer_bytes(&sp->pk);
    wk_packer_reset(&sp->pk);
    sp->state = WK_SPLIT_DROPPED;
    if (sp->inflight == 0) {
        wk_split_free(sp);
    } else {
        sp->next_split = job->dropped;
        job->dropped = sp;
    }
}

size_t wk_job_drop_out_locked(wk_job_t *job, uint64_t split_id, int all)
{
    wk_msglist_t keep;
    wk_msglist_init(&keep);
    size_t dropped = 0;
    wk_msg_t *m;
    while ((m = wk_msglist_pop(&job->out)) != NULL) {
        if (all || m->batch.split_id == split_id) {
            wk_msg_free(m);
            dropped++;
        } else {
            wk_msglist_push(&keep, m);
        }
    }
    job->out = keep;
    return dropped;
}

void wk_job_drop_all_locked(wk_job_t *job, size_t *ret_msgs, size_t *ret_splits)
{
    size_t nsplits = 0;
    while (job->splits != NULL) {
        wk_split_drop_locked(job, job->splits);
        nsplits++;
    }
    size_t nmsgs = wk_job_drop_out_locked(job, 0, 1);
    if (ret_msgs != NULL) {
        *ret_msgs = nmsgs;
    }
    if (ret_splits != NULL) {
        *ret_splits = nsplits;
    }
    pthread_cond_broadcast(&job->cv); /* room in the buffer, nothing to run */
}

static int move_allowed(wk_job_state_e from, wk_job_state_e to)
{
    switch (to) {
    case WK_JOB_LOADING:
        return 0; /* only ever the initial state */
    case WK_JOB_READY:
        return from == WK_JOB_LOADING;
    case WK_JOB_FAILED:
        return from == WK_JOB_LOADING || from == WK_JOB_READY;
    case WK_JOB_CLOSED:
        return from != WK_JOB_CLOSED;
    }
    return 0;
}

int wk_job_transition_locked(wk_job_t *job, wk_job_state_e to)
{
    int revive = to == WK_JOB_READY && job->state == WK_JOB_FAILED && job->down;
    if (!move_allowed(job->state, to) && !revive) {
        return -EINVAL;
    }
    job->state = to;
    if (revive) {
        job->down = 0;
    }
    if (to == WK_JOB_CLOSED) {
        __atomic_store_n(&job->probe_cancel, 1, __ATOMIC_RELAXED); /* job_revive.c */
    }
    if (to == WK_JOB_FAILED || to == WK_JOB_CLOSED) {
        size_t nmsgs = 0, nsplits = 0;
        wk_job_drop_all_locked(job, &nmsgs, &nsplits);
        /* A stream of a job closed with work in hand must tell its client
         * to retry (UNAVAILABLE); a failed job's stream ends FAILED anyway. */
        if (to == WK_JOB_CLOSED && nmsgs + nsplits > 0) {
            job->lost_work = 1;
        }
    }
    pthread_cond_broadcast(&job->cv);
    return 0;
}

int wk_job_fail(wk_job_t *job, const char *fmt, ...)
{
    char why[sizeof(job->reason)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&job->mu);
    int rc = wk_job_transition_locked(job, WK_JOB_FAILED);
    if (rc == 0) {
        snprintf(job->reason, sizeof(job->reason), "%s", why);
    }
    pthread_mutex_unlock(&job->mu);
    if (rc == 0) {
        SL_ERR("job %" PRIu64 ": failed on this worker: %s", job->id, why);
    }
    return rc;
}

void wk_job_close_locked(wk_job_t *job, int stopping)
{
    if (job->state == WK_JOB_CLOSED) {
        return;
    }
    job->stopping = stopping;
    (void)wk_job_transition_locked(job, WK_JOB_CLOSED);
}
