/* ranks: multi-rank jobs at the dispatcher (docs/protocol.md "Multi-rank
 * jobs"). A job opened by world_size consumers is one dispatcher job per
 * rank, all tagged with the job's name: each rank's part has its own epochs,
 * splits (cut over the rank's share of every epoch, common/order/ranks.h),
 * acknowledgements and re-assignment, so exactly-once holds per rank by the
 * single-consumer rules. Ranks do not wait for each other: a late rank
 * starts its part when it submits.
 *
 * A rank that submits again while its part is open (its process restarted)
 * re-attaches: acknowledged splits stay acknowledged, everything handed to
 * workers returns to the queue (the old process's streams are gone), and
 * the reply tells the client what is already acknowledged.
 *
 * Pure bookkeeping like jobs.h: the caller holds the dispatcher mutex. */
#ifndef DISP_RANKS_H
#define DISP_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec/spec.h"
#include "dispatcher/core/jobs.h"

/* Position ranges acknowledged in a live epoch, reported on re-attach. */
#define DISP_RANKS_ACKED_MAX 65536

typedef struct disp_range_s {
    uint64_t epoch, begin, end;
} disp_range_t;

/* The open (not CLOSED) part of rank `rank` of job `name`, or NULL. */
disp_job_t *disp_ranks_find(disp_jobs_t *js, const char *name, uint32_t world, uint32_t rank);
/* May a rank with this spec (and source) join job `name`? The open parts
 * must agree on world size, spec (but for the rank) and source. 0 or
 * -EINVAL with err set. */
int disp_ranks_check(disp_jobs_t *js, const char *name, const sl_spec_t *spec,
                     uint64_t num_samples, uint64_t fingerprint, char *err, size_t errlen);
/* Tags a newly submitted job as a part of `name`. */
void disp_ranks_tag(disp_job_t *job, const char *name);
/* A restarted rank: every split ASSIGNED to a worker returns to the queue
 * (revoked there); the client's own splits stay its own. Returns how many
 * returned. */
size_t disp_ranks_reattach(disp_jobs_t *js, disp_job_t *job, int64_t now_ms);
/* The first epoch with unacknowledged splits (one past the last once
 * finished). */
uint64_t disp_ranks_resume_epoch(const disp_job_t *job);
/* The acknowledged position ranges of the live epochs, adjacent splits
 * merged, into out[max]. Returns how many, or -E2BIG when more than max. */
int disp_ranks_acked(const disp_job_t *job, disp_range_t *out, size_t max);

#endif
