/* tasks: the job table -- jobs added, assigned splits, closed and revoked by
 * the control thread; Fetch streams attached; the SIGTERM sequence. The
 * rules are in tasks.h; how the module's files share the work, in
 * tasks_impl.h. */
#include "worker/tasks_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/log.h"
#include "common/order/ranks.h"

wk_tasks_t *wk_tasks_new(const wk_tasks_opts_t *o)
{
    wk_tasks_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    if (sl_cond_init_mono(&t->cv) != 0) {
        free(t);
        return NULL;
    }
    if (wk_sent_init(t) < 0) {
        pthread_cond_destroy(&t->cv);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    snprintf(t->data_root, sizeof(t->data_root), "%s", o->data_root);
    t->threads = o->threads > 0 ? o->threads : 1;
    t->inflight_cap = 2 * t->threads;
    t->buffer_bytes = o->buffer_bytes;
    t->max_message_bytes = o->max_message_bytes;
    t->plugins = o->plugins;
    t->faults = o->faults;
    t->remote = o->remote;
    t->samples = o->samples;
    atomic_init(&t->draining, 0);
    atomic_init(&t->inflight, 0);
    atomic_init(&t->nwant, 0);
    atomic_init(&t->nheld, 0);
    atomic_init(&t->n_jobs, 0);
    atomic_init(&t->n_samples, 0);
    atomic_init(&t->n_skipped, 0);
    atomic_init(&t->n_splits, 0);
    atomic_init(&t->n_msgs, 0);
    atomic_init(&t->n_bytes_sent, 0);
    atomic_init(&t->n_unprocessed, 0);
    atomic_init(&t->n_broken, 0);
    atomic_init(&t->n_early_fetches, 0);
    return t;
}

void wk_tasks_begin_drain(wk_tasks_t *t)
{
    atomic_store(&t->draining, 1);
}

void wk_tasks_quiesce(wk_tasks_t *t)
{
    atomic_store(&t->draining, 1);
    size_t njobs = 0, nmsgs = 0, nsplits = 0;
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job) {
        size_t m = 0, s = 0;
        pthread_mutex_lock(&job->mu);
        wk_job_drop_all_locked(job, &m, &s);
        /* A message being sent is not ours to take back: if it goes out, the
         * split is reported sent; if not, its stream breaks. Either way it
         * is no longer "in progress" here. */
        job->sending = 0;
        if (m + s > 0) {
            job->lost_work = 1;
            njobs++;
        }
        pthread_mutex_unlock(&job->mu);
        nmsgs += m;
        nsplits += s;
    }
    pthread_mutex_unlock(&t->mu);
    if (njobs > 0) {
        SL_NOTICE("stopping: dropped %zu unfinished split(s) and %zu buffered message(s) of %zu "
                  "job(s); the dispatcher re-assigns them",
                  nsplits, nmsgs, njobs);
    }
}

void wk_tasks_stop(wk_tasks_t *t)
{
    atomic_store(&t->draining, 1);
    pthread_mutex_lock(&t->mu);
    t->stopping = 1;
    wk_job_t *list = t->jobs;
    t->jobs = NULL;
    t->njobs = 0;
    for (wk_job_t *job = list; job != NULL; job = job->next_job) {
        pthread_mutex_lock(&job->mu);
        wk_job_close_locked(job, 1);
        pthread_mutex_unlock(&job->mu);
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    for (wk_job_t *job = list, *nx; job != NULL; job = nx) {
        nx = job->next_job;
        wk_job_unref(job); /* the table's reference */
    }
}

void wk_tasks_free(wk_tasks_t *t)
{
    if (t == NULL) {
        return;
    }
    wk_tasks_stop(t);
    pthread_mutex_lock(&t->mu);
    while (t->runners > 0) {
        pthread_cond_wait(&t->cv, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    wk_sent_free(t);
    free(t);
}

/* Table lookup (tasks->mu held); no reference taken. */
static wk_job_t *find_locked(wk_tasks_t *t, uint64_t id)
{
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job) {
        if (job->id == id) {
            return job;
        }
    }
    return NULL;
}

/* Table lookup with a new reference. */
static wk_job_t *find_ref(wk_tasks_t *t, uint64_t id)
{
    pthread_mutex_lock(&t->mu);
    wk_job_t *job = find_locked(t, id);
    if (job != NULL) {
        wk_job_ref(job);
    }
    pthread_mutex_unlock(&t->mu);
    return job;
}

static wk_job_state_e job_state(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    wk_job_state_e s = job->state;
    pthread_mutex_unlock(&job->mu);
    return s;
}

/* Failed jobs in the table (tasks->mu held). */
static size_t count_failed_locked(wk_tasks_t *t)
{
    size_t n = 0;
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job) {
        n += job_state(job) == WK_JOB_FAILED;
    }
    return n;
}

static int start_runner_locked(wk_tasks_t *t, wk_job_t *job)
{
    wk_job_ref(job); /* the runner's */
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, wk_runner_main, job);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        wk_job_unref(job);
        wk_job_fail(job, "cannot start a thread: %s", strerror(rc));
        return -rc;
    }
    t->runners++;
    return 0;
}

/* Puts a new job in the table and starts its runner (tasks->mu held).
 * A job over the bound on running jobs is kept FAILED, so the dispatcher
 * hears why. Returns 0 when the job runs, 1 when it is held FAILED,
 * -ESHUTDOWN when stopping, -ENOSPC when too many failed jobs are held
 * already (the job is not tracked: the caller drops it). */
static int admit_locked(wk_tasks_t *t, wk_job_t *job)
{
    if (t->stopping) {
        return -ESHUTDOWN;
    }
    size_t nfailed = count_failed_locked(t);
    if (t->njobs - nfailed >= WK_MAX_JOBS) {
        wk_job_fail(job, "worker already runs %d jobs", WK_MAX_JOBS);
    }
    if (job_state(job) == WK_JOB_FAILED && nfailed >= WK_MAX_FAILED_JOBS) {
        return -ENOSPC;
    }
    int rc = 1;
    if (job_state(job) != WK_JOB_FAILED && start_runner_locked(t, job) == 0) {
        rc = 0;
    }
    job->next_job = t->jobs;
    t->jobs = job;
    t->njobs++;
    pthread_cond_broadcast(&t->cv); /* a Fetch stream may wait for it */
    return rc;
}

void wk_tasks_add_job(wk_tasks_t *t, const Sluice__JobSpec *js)
{
    if (js->job_id == 0) {
        SL_WARN("dispatcher sent a job spec with job_id 0; ignored");
        return;
    }
    wk_job_t *dup = find_ref(t, js->job_id);
    if (dup != NULL) {
        wk_job_unref(dup);
        SL_DEBUG("job %" PRIu64 ": spec already held", js->job_id);
        return;
    }
    wk_job_t *job = wk_job_new(t, js);
    if (job == NULL) {
        SL_ERR("job %" PRIu64 ": out of memory", js->job_id);
        return;
    }
    pthread_mutex_lock(&t->mu);
    int rc = admit_locked(t, job);
    pthread_mutex_unlock(&t->mu);
    if (rc < 0) {
        if (rc == -ENOSPC) {
            SL_WARN("job %" PRIu64 ": too many failed jobs held; not tracked", js->job_id);
        }
        wk_job_unref(job);
        return;
    }
    if (rc == 0) {
        atomic_fetch_add(&t->n_jobs, 1);
        SL_NOTICE("job %" PRIu64 ": accepted: %" PRIu64 " samples, %u units, batch %u",
                  job->id, job->num_samples, job->nunits, job->spec.batch_size);
    }
}

/* Why an assignment cannot be taken, or NULL (job->mu held). A split held
 * already takes the new hand-out's id. */
static const char *assign_refusal_locked(wk_tasks_t *t, wk_job_t *job,
                                         const Sluice__SplitAssignment *a)
{
    if (atomic_load(&t->draining)) {
        return "the worker is draining"; /* the dispatcher re-queues it */
    }
    if (job->state == WK_JOB_FAILED || job->state == WK_JOB_CLOSED) {
        return job->state == WK_JOB_FAILED ? "the job failed here" : "the job is closed";
    }
    if (a->begin > a->end || a->end > sl_spec_positions(&job->spec, job->num_samples)) {
        return "range outside the job's samples";
    }
    if (a->stage_to > job->nunits) {
        return "stage_to beyond the pipeline's units";
    }
    if (job->nsplits >= WK_MAX_SPLITS_PER_JOB) {
        return "too many splits queued";
    }
    for (wk_split_t *sp = job->splits; sp != NULL; sp = sp->next_split) {
        if (sp->id == a->split_id) {
            /* Handed out again while we still run it (its revocation was
             * lost): the same work, so it just takes the new hand-out's id,
             * which is the one the dispatcher now waits for. */
            sp->assignment = a->assignment;
            sp->pk.assignment = a->assignment;
            return "already held";
        }
    }
    return NULL;
}

/* Queues a new split, or finishes an empty one at once (job->mu held). */
static int split_add_locked(wk_tasks_t *t, wk_job_t *job, const Sluice__SplitAssignment *a)
{
    wk_split_t *sp = calloc(1, sizeof(*sp));
    if (sp == NULL) {
        return -ENOMEM;
    }
    sp->id = a->split_id;
    sp->epoch = a->epoch;
    sp->begin = a->begin;
    sp->end = a->end;
    sp->next = a->begin;
    sp->stage_to = a->stage_to;
    sp->compress = a->compress;
    sp->assignment = a->assignment;
    sp->state = WK_SPLIT_QUEUED;
    wk_packer_init(&sp->pk, job->id, sp->id, sp->stage_to, job->spec.batch_size,
                   t->max_message_bytes);
    sp->pk.assignment = sp->assignment;
    if (sp->begin == sp->end) {
        /* An empty split is done at once: one message with split_done. */
        if (wk_packer_finish(&sp->pk, &job->out) == 0) {
            job->splits_done++;
            atomic_fetch_add(&t->n_splits, 1);
        }
        wk_split_free(sp);
    } else {
        if (job->splits_tail != NULL) {
            job->splits_tail->next_split = sp;
        } else {
            job->splits = sp;
        }
        job->splits_tail = sp;
        job->nsplits++;
    }
    pthread_cond_broadcast(&job->cv); /* the runner has work, or the stream a message */
    return 0;
}

void wk_tasks_assign(wk_tasks_t *t, const Sluice__SplitAssignment *a)
{
    wk_job_t *job = find_ref(t, a->job_id);
    if (job == NULL) {
        SL_WARN("assignment of split %" PRIu64 " for unknown job %" PRIu64 "; ignored",
                a->split_id, a->job_id);
        return;
    }
    pthread_mutex_lock(&job->mu);
    const char *bad = assign_refusal_locked(t, job, a);
    int rc = bad == NULL ? split_add_locked(t, job, a) : 0;
    pthread_mutex_unlock(&job->mu);
    if (bad != NULL) {
        SL_WARN("job %" PRIu64 ": split %" PRIu64 " (epoch %" PRIu64 ", [%" PRIu64 ", %" PRIu64
                "), stage_to %u) ignored: %s",
                a->job_id, a->split_id, a->epoch, a->begin, a->end, a->stage_to, bad);
    } else if (rc < 0) {
        SL_ERR("job %" PRIu64 ": out of memory for split %" PRIu64, a->job_id, a->split_id);
    } else {
        SL_DEBUG("job %" PRIu64 ": split %" PRIu64 " assigned (epoch %" PRIu64 ", [%" PRIu64
                 ", %" PRIu64 "), units [0, %u))",
                 a->job_id, a->split_id, a->epoch, a->begin, a->end, a->stage_to);
    }
    wk_job_unref(job);
}

void wk_tasks_close_job(wk_tasks_t *t, uint64_t job_id)
{
    pthread_mutex_lock(&t->mu);
    wk_job_t **pp = &t->jobs;
    while (*pp != NULL && (*pp)->id != job_id) {
        pp = &(*pp)->next_job;
    }
    wk_job_t *job = *pp;
    if (job != NULL) {
        *pp = job->next_job;
        t->njobs--;
        pthread_mutex_lock(&job->mu);
        wk_job_close_locked(job, 0);
        pthread_mutex_unlock(&job->mu);
    }
    pthread_mutex_unlock(&t->mu);
    if (job == NULL) {
        SL_DEBUG("close of unknown job %" PRIu64 "; ignored", job_id);
        return;
    }
    SL_NOTICE("job %" PRIu64 ": closed by the dispatcher", job_id);
    wk_job_unref(job); /* the table's reference */
}

void wk_tasks_revoke(wk_tasks_t *t, uint64_t job_id, uint64_t split_id)
{
    wk_job_t *job = find_ref(t, job_id);
    if (job == NULL) {
        SL_DEBUG("revocation of split %" PRIu64 " of unknown job %" PRIu64 "; ignored", split_id,
                 job_id);
        return;
    }
    pthread_mutex_lock(&job->mu);
    int found = 0;
    for (wk_split_t *sp = job->splits; sp != NULL; sp = sp->next_split) {
        if (sp->id == split_id) {
            wk_split_drop_locked(job, sp);
            found = 1;
            break;
        }
    }
    size_t n = wk_job_drop_out_locked(job, split_id, 0);
    if (found || n > 0) {
        pthread_cond_broadcast(&job->cv); /* room in the buffer */
    }
    pthread_mutex_unlock(&job->mu);
    if (found || n > 0) {
        SL_INFO("job %" PRIu64 ": split %" PRIu64 " revoked (%zu buffered messages dropped)",
                job_id, split_id, n);
    }
    wk_job_unref(job);
}

/* Finds the job with a new reference, waiting until deadline for its spec
 * (the heartbeat that carries it may lag the client; add_job broadcasts). */
static wk_attach_e find_wait(wk_tasks_t *t, uint64_t job_id, double deadline,
                             wk_job_t **ret_job, char *why, size_t whylen)
{
    wk_attach_e a = WK_ATTACH_OK;
    int counted = 0, timed_out = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->stopping) {
            snprintf(why, whylen, "worker is shutting down");
            a = WK_ATTACH_SHUTTING_DOWN;
            break;
        }
        wk_job_t *job = find_locked(t, job_id);
        if (job != NULL) {
            wk_job_ref(job);
            *ret_job = job;
            break;
        }
        if (!counted) {
            /* The client knows of work for us the dispatcher has not told
             * us yet: the control thread heartbeats early to fetch it. */
            atomic_fetch_add(&t->n_early_fetches, 1);
            wk_news(t);
            counted = 1;
        }
        if (timed_out) {
            snprintf(why, whylen, "job %" PRIu64 " is not known to this worker", job_id);
            a = WK_ATTACH_NOT_FOUND;
            break;
        }
        timed_out = sl_cond_wait_until(&t->cv, &t->mu, deadline) == ETIMEDOUT;
    }
    pthread_mutex_unlock(&t->mu);
    return a;
}

wk_attach_e wk_tasks_attach(wk_tasks_t *t, uint64_t job_id, const char *secret, int wait_ms,
                            wk_job_t **ret_job, char *why, size_t whylen)
{
    double deadline = sl_mono_sec() + (wait_ms > 0 ? wait_ms : 0) / 1000.0;
    wk_job_t *job = NULL;
    wk_attach_e a = find_wait(t, job_id, deadline, &job, why, whylen);
    /* cap_hash is immutable after add: no lock needed. */
    if (a == WK_ATTACH_OK && job->has_cap && !sl_jobcap_check(job->cap_hash, secret)) {
        snprintf(why, whylen, "job %" PRIu64 ": wrong or missing job_secret", job_id);
        a = WK_ATTACH_DENIED;
    }
    if (a == WK_ATTACH_OK) {
        a = wk_job_attach_stream(job, deadline, why, whylen);
    }
    if (a == WK_ATTACH_OK) {
        *ret_job = job;
    } else if (job != NULL) {
        wk_job_unref(job);
    }
    return a;
}
