/* job_out: the Fetch stream's side of a job -- becoming its one stream,
 * taking finished messages, noting them sent, detaching. Called on the
 * stream's thread (stream.c), which holds a reference from attach to detach. */
#include "worker/tasks_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "common/base/clock.h"
#include "common/base/log.h"

wk_attach_e wk_job_attach_stream(wk_job_t *job, double deadline, char *why, size_t whylen)
{
    wk_attach_e a = WK_ATTACH_OK;
    int timed_out = 0;
    pthread_mutex_lock(&job->mu);
    for (;;) {
        if (job->state == WK_JOB_FAILED) {
            snprintf(why, whylen, "job %" PRIu64 " failed on this worker: %s", job->id,
                     job->reason);
            a = WK_ATTACH_FAILED;
            break;
        }
        if (job->state == WK_JOB_CLOSED) {
            snprintf(why, whylen, "job %" PRIu64 " is %s", job->id,
                     job->stopping ? "stopping with the worker" : "closed");
            a = job->stopping ? WK_ATTACH_SHUTTING_DOWN : WK_ATTACH_NOT_FOUND;
            break;
        }
        if (!job->stream_attached) {
            job->stream_attached = 1;
            job->streams++;
            break;
        }
        if (timed_out) {
            snprintf(why, whylen, "job %" PRIu64 " already has a Fetch stream on this worker",
                     job->id);
            a = WK_ATTACH_BUSY;
            break;
        }
        /* The first stream's detach broadcasts, as does every state move. */
        timed_out = sl_cond_wait_until(&job->cv, &job->mu, deadline) == ETIMEDOUT;
    }
    pthread_mutex_unlock(&job->mu);
    return a;
}

/* What the stream should do given the job's state (job->mu held). */
static wk_next_e state_locked(const wk_job_t *job)
{
    switch (job->state) {
    case WK_JOB_CLOSED:
        if (!job->stopping) {
            return WK_NEXT_CLOSED;
        }
        return job->lost_work ? WK_NEXT_STOPPING : WK_NEXT_LEFT;
    case WK_JOB_FAILED:
        return WK_NEXT_FAILED;
    case WK_JOB_LOADING:
    case WK_JOB_READY:
        break;
    }
    return WK_NEXT_TIMEOUT;
}

wk_next_e wk_job_poll_state(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    wk_next_e s = state_locked(job);
    pthread_mutex_unlock(&job->mu);
    return s;
}

wk_next_e wk_job_next_msg(wk_job_t *job, int wait_ms, wk_msg_t **ret_msg)
{
    double deadline = sl_mono_sec() + wait_ms / 1000.0;
    pthread_mutex_lock(&job->mu);
    wk_next_e s = state_locked(job);
    /* The runner broadcasts when it queues a message, as does every state
     * move; the deadline is the caller's (it looks at its peer). */
    int timed_out = wait_ms <= 0;
    while (s == WK_NEXT_TIMEOUT && job->out.head == NULL && !timed_out) {
        timed_out = sl_cond_wait_until(&job->cv, &job->mu, deadline) == ETIMEDOUT;
        s = state_locked(job);
    }
    if (s == WK_NEXT_TIMEOUT) {
        wk_msg_t *m = wk_msglist_pop(&job->out);
        if (m != NULL) {
            *ret_msg = m;
            s = WK_NEXT_MSG;
            job->sending = 1;
            job->sending_split = m->batch.split_id;
            job->sending_assignment = m->assignment;
            pthread_cond_broadcast(&job->cv); /* room in the buffer: the runner may submit */
        }
    }
    pthread_mutex_unlock(&job->mu);
    return s;
}

void wk_job_note_sent(wk_job_t *job, const wk_msg_t *m)
{
    wk_tasks_t *t = job->tasks;
    pthread_mutex_lock(&job->mu);
    job->msgs_sent++;
    if (job->sending && job->sending_split == m->batch.split_id) {
        job->sending = 0;
    }
    /* Under job->mu, so a heartbeat report sees the split either in
     * progress or sent, never in neither. */
    if (m->batch.split_done) {
        /* Its samples' prefix entries are in this worker's cache now
         * (docs/cache.md "Locality"). */
        int cached = job->pc != NULL && m->batch.stage_to >= job->pc_prefix;
        wk_sent_add(t, job->id, m->batch.split_id, m->assignment, cached);
    }
    pthread_mutex_unlock(&job->mu);
    atomic_fetch_add(&t->n_msgs, 1);
    atomic_fetch_add(&t->n_bytes_sent, sluice__batch__get_packed_size(&m->batch));
}

void wk_job_detach(wk_job_t *job, int broken, const char *why)
{
    size_t nmsgs = 0, nsplits = 0;
    pthread_mutex_lock(&job->mu);
    job->stream_attached = 0;
    job->sending = 0; /* whatever the stream held is gone with it */
    if (broken && job->state != WK_JOB_CLOSED) {
        job->streams_broken++;
        atomic_fetch_add(&job->tasks->n_broken, 1);
        wk_job_drop_all_locked(job, &nmsgs, &nsplits);
    }
    pthread_cond_broadcast(&job->cv); /* a second stream may be waiting in attach */
    pthread_mutex_unlock(&job->mu);
    if (broken && nmsgs + nsplits > 0) {
        SL_NOTICE("job %" PRIu64 ": Fetch stream ended abnormally (%s); dropped %zu buffered "
                  "messages and %zu unfinished splits",
                  job->id, why != NULL ? why : "?", nmsgs, nsplits);
    } else if (broken) {
        SL_INFO("job %" PRIu64 ": Fetch stream ended abnormally (%s) with nothing pending",
                job->id, why != NULL ? why : "?");
    }
    wk_job_unref(job);
}

void wk_job_reason(wk_job_t *job, char *buf, size_t len)
{
    pthread_mutex_lock(&job->mu);
    snprintf(buf, len, "%s", job->reason);
    pthread_mutex_unlock(&job->mu);
}
