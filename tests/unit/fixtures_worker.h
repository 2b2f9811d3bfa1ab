/* The worker suites' shared waits (test_worker_tasks.c, test_worker_rpc.c):
 * a job's /status row, and polling it until something that must happen
 * has happened. */
#ifndef TESTS_UNIT_FIXTURES_WORKER_H
#define TESTS_UNIT_FIXTURES_WORKER_H

#include <check.h>
#include <inttypes.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "worker/tasks.h"

/* How long a test waits for something that must happen: long enough for a
 * loaded machine; no check passes by waiting less. */
#define FX_WAIT_MS 20000

/* The job's /status row (the test fails when the job is not listed). */
static inline wk_job_info_t fx_job_info(wk_tasks_t *t, uint64_t id)
{
    wk_job_info_t rows[8];
    size_t n = wk_tasks_snapshot(t, rows, 8);
    for (size_t i = 0; i < n && i < 8; i++) {
        if (rows[i].job_id == id) {
            return rows[i];
        }
    }
    ck_abort_msg("job %" PRIu64 " not in snapshot", id);
    return rows[0];
}

/* Polls the row until ok(row) or FX_WAIT_MS; returns the last row seen. */
static inline wk_job_info_t fx_job_info_wait(wk_tasks_t *t, uint64_t id,
                                             int (*ok)(const wk_job_info_t *))
{
    wk_job_info_t r = fx_job_info(t, id);
    for (int64_t until = sl_mono_ms() + FX_WAIT_MS; !ok(&r) && sl_mono_ms() < until;) {
        usleep(2000);
        r = fx_job_info(t, id);
    }
    return r;
}

#endif
