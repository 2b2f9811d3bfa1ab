/* job_revive: a job that failed here only because its data server could
 * not be reached (every retry of a read failed: SL_SKIP_SOURCE_DOWN) is not
 * failed for good. Its runner keeps the source and executor, probes the
 * server (a HEAD of the URL that failed, common/remote/probe.h) after a
 * back-off that doubles (WK_REVIVE_FIRST_MS .. WK_REVIVE_MAX_MS), and when
 * it answers moves the job FAILED -> READY: the next heartbeat reports the
 * job no longer failed and the dispatcher gives it splits again after its
 * own back-off (dispatcher/core/worker_back.c). At most WK_REVIVE_MAX
 * times per job, so a flapping server cannot keep a job bouncing. Runner
 * thread; the locking rules are in tasks_impl.h. */
#include "worker/tasks_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/log.h"
#include "common/remote/probe.h"

#define WK_REVIVE_FIRST_MS 1000
#define WK_REVIVE_MAX_MS 30000
#define WK_REVIVE_MAX 8

int wk_url_in_text(const char *text, char *url, size_t urllen)
{
    static const char *const schemes[] = {"http://", "https://", "s3://"};
    const char *best = NULL;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        const char *p = strstr(text, schemes[i]);
        if (p != NULL && (best == NULL || p < best)) {
            best = p;
        }
    }
    if (best == NULL) {
        return -ENOENT;
    }
    size_t n = strcspn(best, " \t\r\n'\"");
    /* Messages put ": why" after the URL; a URL does not end in these. */
    while (n > 0 && strchr(":;,.)", best[n - 1]) != NULL) {
        n--;
    }
    if (n == 0 || n >= urllen) {
        return -ENAMETOOLONG;
    }
    memcpy(url, best, n);
    url[n] = '\0';
    return 0;
}

void wk_job_note_down_locked(wk_job_t *job, const char *detail)
{
    if (wk_url_in_text(detail, job->down_url, sizeof(job->down_url)) == 0) {
        job->down = 1;
    } else {
        SL_WARN("job %" PRIu64 ": no URL in the failure to probe; the job stays failed here",
                job->id);
    }
}

/* Probes the failed job's data server with a growing back-off until it
 * answers (returns 1, the job still FAILED and down, job->revivals counted)
 * or the job closes or may not come back (returns 0). job->mu held on entry
 * and on return; dropped while waiting and probing. */
static int probe_until_answers_locked(wk_job_t *job)
{
    const sl_remote_t *remote = job->tasks->remote;
    if (job->state != WK_JOB_FAILED || !job->down || remote == NULL) {
        return 0;
    }
    if (job->revivals >= WK_REVIVE_MAX) {
        SL_WARN("job %" PRIu64 ": its data server went away %u times; the job stays failed here",
                job->id, job->revivals + 1);
        return 0;
    }
    char url[sizeof(job->down_url)];
    snprintf(url, sizeof(url), "%s", job->down_url);
    double started = sl_mono_sec();
    int64_t delay_ms = WK_REVIVE_FIRST_MS;
    unsigned probes = 0;
    for (;;) {
        double deadline = sl_mono_sec() + (double)delay_ms / 1000.0;
        while (job->state == WK_JOB_FAILED &&
               sl_cond_wait_until(&job->cv, &job->mu, deadline) != ETIMEDOUT) {
        }
        if (job->state != WK_JOB_FAILED) {
            return 0; /* closed meanwhile */
        }
        pthread_mutex_unlock(&job->mu);
        char err[512];
        int rc = sl_remote_probe(remote, url, &job->probe_cancel, err, sizeof(err));
        probes++;
        pthread_mutex_lock(&job->mu);
        if (job->state != WK_JOB_FAILED) {
            return 0;
        }
        if (rc == 0) {
            break;
        }
        if (rc == -EPERM || rc == -EINVAL) {
            /* Not a server that is away: a URL this host may not read. */
            SL_WARN("job %" PRIu64 ": cannot probe its data server: %s; the job stays failed "
                    "here",
                    job->id, err);
            return 0;
        }
        delay_ms = delay_ms * 2 < WK_REVIVE_MAX_MS ? delay_ms * 2 : WK_REVIVE_MAX_MS;
        SL_INFO("job %" PRIu64 ": data server still unreachable (probe %u): %s; next probe in "
                "%.1f s",
                job->id, probes, err, (double)delay_ms / 1000.0);
    }
    job->revivals++;
    SL_NOTICE("job %" PRIu64 ": data server answers again (%s, after %.1f s, %u probe(s)); "
              "the job runs here again (time %u of at most %d)",
              job->id, url, sl_mono_sec() - started, probes, job->revivals, WK_REVIVE_MAX);
    return 1;
}

int wk_job_revive_wait(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int rc = probe_until_answers_locked(job) ? wk_job_revive_locked(job) : -EAGAIN;
    pthread_mutex_unlock(&job->mu);
    return rc == 0;
}

int wk_job_probe_wait(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int back = probe_until_answers_locked(job);
    pthread_mutex_unlock(&job->mu);
    return back;
}

int wk_job_revive_locked(wk_job_t *job)
{
    int rc = wk_job_transition_locked(job, WK_JOB_READY);
    if (rc == 0) {
        job->reason[0] = '\0';
    }
    return rc;
}

int wk_job_fail_open(wk_job_t *job, int down, const char *why)
{
    pthread_mutex_lock(&job->mu);
    int rc = job->state == WK_JOB_FAILED ? 0 : wk_job_transition_locked(job, WK_JOB_FAILED);
    if (rc == 0) {
        snprintf(job->reason, sizeof(job->reason), "%s", why);
        job->down = 0;
        if (down) {
            wk_job_note_down_locked(job, why);
        }
    }
    pthread_mutex_unlock(&job->mu);
    if (rc == 0) {
        SL_ERR("job %" PRIu64 ": failed on this worker: %s", job->id, why);
    }
    return rc;
}
