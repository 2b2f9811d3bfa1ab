/* locality: which worker holds which splits' prefix cache entries, and the
 * split hand-out's preference for them (docs/cache.md "Locality").
 *
 * A worker marks each split it ran through its prefix cache in its
 * heartbeat's `sent` list (SplitAssignment.cached): it then holds that
 * split's entries, unless evicted since. A split given to a worker that
 * registered a cache budget, to run at least the prefix, counts as held by
 * it from the hand-out (disp_loc_given). The dispatcher keeps, per job and
 * worker, a bitmap of the split indices within an epoch (split id mod
 * splits per epoch; bounded by DISP_LOC_MAX_SPLITS). When the job's order
 * is the same every epoch (no shuffle, no mix) the same index covers the
 * same samples in the next epoch, so when the speed-based pick
 * (assign.c pick_worker) has chosen a worker for the front of the remote
 * queue and that worker does not hold it, the first split it does hold
 * among the next DISP_LOC_LOOKAHEAD queued ones goes out instead: the pick
 * of who works stays the speed-based one, only which split it gets
 * changes, and stealing is untouched. A shuffled order puts every sample
 * in another split each epoch: nothing to prefer (workers sharing one
 * cache_dir share the entries anyway).
 *
 * Caller holds the dispatcher mutex. */
#ifndef DISP_LOCALITY_H
#define DISP_LOCALITY_H

#include <stdint.h>

#include "dispatcher/core/jobs.h"

#define DISP_LOC_MAX_SPLITS (1u << 20) /* per epoch: beyond it not tracked (128 KB a worker) */
#define DISP_LOC_LOOKAHEAD 32          /* queued splits looked at past the front */

/* The job's order puts the same samples in the same split every epoch and
 * the job caches its prefix: locality applies. */
int disp_loc_applies(const disp_job_t *job);

/* Worker worker_id reported split_id of job sent through its prefix cache.
 * 0, or -ENOMEM (the bitmap; the note is lost, not the split). */
int disp_loc_note(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id, uint64_t split_id);

/* split_id was just given to worker w to run units [0, stage_to): when w
 * keeps a cache (it registered a cache_bytes) and that covers the prefix,
 * it will hold the split's entries once it ran it -- noted now, so the
 * next epoch's first splits, handed out while this epoch's last ones run,
 * already follow (its `sent` report confirms, and names the worker that
 * really ran it after a steal). */
void disp_loc_given(disp_jobs_t *js, disp_job_t *job, const disp_worker_t *w, uint64_t split_id,
                    uint32_t stage_to);

/* Whether jw's worker holds split index idx (within an epoch). jw NULL: no. */
int disp_loc_holds(const disp_jw_t *jw, uint32_t idx);

/* The front of ep's remote queue is idx, the pick went to worker_id: the
 * split to give it -- idx, or a queued PENDING one it holds, moved to the
 * front (the queue keeps every other entry in its order). Counts in the
 * job's locality stats. */
uint32_t disp_loc_prefer(disp_job_t *job, disp_epoch_t *ep, uint64_t worker_id, uint32_t idx);

#endif
