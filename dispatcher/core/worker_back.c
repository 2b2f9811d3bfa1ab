/* worker_back: a worker that gave a job back because its data server was
 * unreachable (its reads failed after the retries) takes the job's splits
 * again once it can read: its heartbeat reports the job again and no longer
 * failed (the worker probed the server, worker/job_revive.c) and the
 * dispatcher's back-off for it has passed. The back-off doubles with every
 * time out (DISP_BACK_MIN_MS .. DISP_BACK_MAX_MS) and a worker out
 * DISP_BACK_MAX_OUTS times stays out, so a flapping server costs a few
 * re-queued splits, not a stream of them. Any other refusal (a changed
 * dataset, a spec it cannot run) is for good, as before. Caller holds the
 * dispatcher mutex (jobs.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/base/log.h"
#include "dispatcher/core/jobs_impl.h"

/* The text a worker's failure names for a server it could not reach
 * (common/data/source_remote.c sl_src_url_read_error). */
#define DATA_SERVER_DOWN "data server unreachable"

int64_t disp_back_delay_ms(uint32_t nout)
{
    int64_t d = DISP_BACK_MIN_MS;
    for (uint32_t i = 1; i < nout && d < DISP_BACK_MAX_MS; i++) {
        d *= 2;
    }
    return d < DISP_BACK_MAX_MS ? d : DISP_BACK_MAX_MS;
}

int disp_failure_is_data_server(const char *failure, uint64_t job_id)
{
    if (failure == NULL) {
        return 0;
    }
    char head[40];
    snprintf(head, sizeof(head), "job %" PRIu64 ": ", job_id);
    const char *p = strstr(failure, head);
    if (p == NULL) {
        return 0;
    }
    p += strlen(head);
    /* This job's part only: up to the next job's "; job ". */
    const char *end = strstr(p, "; job ");
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    size_t n = strlen(DATA_SERVER_DOWN);
    for (size_t i = 0; i + n <= len; i++) {
        if (memcmp(p + i, DATA_SERVER_DOWN, n) == 0) {
            return 1;
        }
    }
    return 0;
}

int disp_jobs_worker_back(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id, int64_t now_ms)
{
    disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, worker_id);
    if (jw == NULL || !jw->banned || !jw->down || jw->nout >= DISP_BACK_MAX_OUTS ||
        now_ms < jw->back_after_ms) {
        return 0;
    }
    jw->banned = 0;
    jw->down = 0;
    jw->nback++;
    SL_NOTICE("job %" PRIu64 ": worker %" PRIu64 " is back: it reads from its data server again "
              "(out %.1f s, time %" PRIu32 " of at most %d); it takes the job's splits again",
              job->id, worker_id, (double)(now_ms - jw->out_ms) / 1000.0, jw->nout,
              DISP_BACK_MAX_OUTS);
    disp_jobs_assign(js, job, now_ms);
    return 1;
}

static int listed(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id) {
            return 1;
        }
    }
    return 0;
}

void disp_jobs_worker_back_all(disp_jobs_t *js, uint64_t worker_id, const uint64_t *known,
                               size_t nknown, const uint64_t *failed, size_t nfailed,
                               int64_t now_ms)
{
    for (size_t i = 0; i < js->n; i++) {
        disp_job_t *job = js->jobs[i];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, worker_id);
        if (jw == NULL || !jw->banned || !jw->down) {
            continue; /* the common case: nothing to look up */
        }
        if (listed(known, nknown, job->id) && !listed(failed, nfailed, job->id)) {
            (void)disp_jobs_worker_back(js, job, worker_id, now_ms);
        }
    }
}
