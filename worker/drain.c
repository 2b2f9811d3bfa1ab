/* drain: the worker's way out after SIGTERM or SIGINT. Logs what it waits
 * for; runs on the main thread, which holds the blocked signals. */
#include "worker/drain.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/clock.h"
#include "common/base/log.h"

#define WK_DRAIN_MAX_JOBS 256 /* jobs looked at while draining (as /status) */
#define WK_DRAIN_POLL_MS 50

/* The end of the drain: unfinished work is dropped, then the final
 * heartbeat (leaving, nothing in progress) lets the dispatcher forget us. */
static void leave(wk_control_t *ctl, wk_tasks_t *tasks)
{
    wk_tasks_quiesce(tasks);
    int rc = wk_control_finish(ctl);
    if (rc == 0) {
        SL_NOTICE("told the dispatcher this worker is leaving");
    } else if (rc != -ENOTCONN) {
        SL_WARN("could not tell the dispatcher this worker is leaving (%s); it re-assigns our "
                "splits after its worker timeout",
                strerror(-rc));
    }
}

/* Work a client is still waiting for: splits queued or running, batches
 * buffered, on jobs whose client is attached. A job nobody streams from has
 * nobody to drain to; its splits are re-assigned by the dispatcher. Returns
 * the number of such jobs (0 also when the snapshot cannot be taken). */
static size_t drain_pending(wk_tasks_t *tasks, wk_job_info_t *rows)
{
    size_t n = wk_tasks_snapshot(tasks, rows, WK_DRAIN_MAX_JOBS);
    size_t busy = 0;
    for (size_t i = 0; i < n && i < WK_DRAIN_MAX_JOBS; i++) {
        const wk_job_info_t *r = &rows[i];
        int work = r->splits_queued > 0 || r->splits_running > 0 || r->buffered_msgs > 0 ||
                   r->inflight > 0;
        if (work && r->stream_attached) {
            busy++;
        }
    }
    return busy;
}

/* SIGTERM (docs/protocol.md "Leaving"): take no new splits and say so in
 * every heartbeat from now on (leaving=true), so the dispatcher hands us
 * nothing new and re-queues what we never started; then let the Fetch
 * streams carry out what is queued, running or buffered, for at most
 * drain_ms (a second SIGTERM/SIGINT cuts the wait short); then drop what is
 * left and send the last heartbeat, which reports nothing in progress: the
 * dispatcher re-queues the rest at once instead of after worker_timeout. */
void wk_drain(wk_control_t *ctl, wk_tasks_t *tasks, const sigset_t *sigs, long long drain_ms)
{
    wk_tasks_begin_drain(tasks);
    wk_control_leave(ctl);
    wk_job_info_t *rows = calloc(WK_DRAIN_MAX_JOBS, sizeof(*rows));
    if (rows == NULL || drain_ms <= 0) {
        free(rows);
        leave(ctl, tasks);
        return;
    }
    double deadline = sl_mono_sec() + (double)drain_ms / 1000.0;
    size_t busy = drain_pending(tasks, rows);
    if (busy > 0) {
        SL_NOTICE("draining: %zu job%s still streaming (at most %lld ms)", busy,
                  busy == 1 ? "" : "s", drain_ms);
    }
    while (busy > 0) {
        if (sl_mono_sec() >= deadline) {
            SL_WARN("drain: %zu job%s still busy after %lld ms; stopping anyway", busy,
                    busy == 1 ? "" : "s", drain_ms);
            break;
        }
        struct timespec poll = {.tv_sec = 0, .tv_nsec = WK_DRAIN_POLL_MS * 1000000L};
        int sig = sigtimedwait(sigs, NULL, &poll);
        if (sig == SIGTERM || sig == SIGINT) {
            SL_NOTICE("second signal: stopping without waiting for the drain");
            break;
        }
        busy = drain_pending(tasks, rows);
    }
    free(rows);
    leave(ctl, tasks);
}
