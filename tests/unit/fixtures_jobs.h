/* fixtures_jobs: a bare job table over a registry (dispatcher/core/jobs.h), no
 * service layer, for the suites that drive assignment directly. Each
 * helper asserts success itself. */
#ifndef TESTS_UNIT_FIXTURES_JOBS_H
#define TESTS_UNIT_FIXTURES_JOBS_H

#include <stdint.h>

#include "dispatcher/core/jobs.h"
#include "dispatcher/core/registry.h"

typedef struct fx_jobs_s {
    disp_registry_t reg; /* room for 16 workers */
    disp_jobs_t js;
    int64_t now; /* starts at 100000 */
} fx_jobs_t;

void fx_jobs_init(fx_jobs_t *e, const disp_limits_t *lim);
void fx_jobs_free(fx_jobs_t *e);
/* Submits spec_json over n samples from client "c". */
disp_job_t *fx_jobs_submit(fx_jobs_t *e, const char *spec_json, uint64_t n);
/* Registers a 4-thread worker at addr and runs an assignment round;
 * returns its id. */
uint64_t fx_jobs_add_worker(fx_jobs_t *e, const char *addr);

/* One step of the randomized exactly-once suites: acknowledges one split
 * some owner holds (the client's or a worker's, at random) and checks it
 * was not acknowledged before and that a duplicate ack counts nothing.
 * acked: one flag per split id below total. Returns 1 when it acked one. */
int fx_jobs_ack_random(fx_jobs_t *e, disp_job_t *job, uint8_t *acked, uint64_t total);
/* Each of the n workers still live and not yet timed out heartbeats now
 * with probability 1/2 (the others drift towards their timeout). */
void fx_jobs_beat_random(fx_jobs_t *e, const uint64_t *ids, int n, int64_t timeout_ms);
/* Costs for n samples (malloc'd): every tenth one 8 times the others, a
 * skewed set for the cost-cut splits. */
float *fx_skewed_costs(uint64_t n);

#endif
