/* jobs_impl: what the pieces of the job table share and nobody else sees.
 *
 *   jobs.c            the table: submit, acks, retries, close, expiry
 *   splits.c          a split's states (disp_split_move, the one way they
 *                     change), split geometry (ids, sizes, the cost cut),
 *                     epochs and their queues of PENDING splits, re-plan,
 *                     restore
 *   assign.c          who gets a split: per-worker records and speeds,
 *                     give, take back, revoke, pick, steal
 *   worker_reports.c  what a worker's heartbeats, refusal, departure or
 *                     loss do to its splits
 *
 * Same rules as jobs.h: the caller holds the dispatcher mutex. Invariants
 * the pieces keep together:
 *  - a split is in its epoch's queue at most once, and only while PENDING
 *    (acked-while-queued entries are skipped when they reach the front);
 *  - an ASSIGNED split's id is in exactly one owner list: job->client_ids
 *    for owner 0, else the owner's disp_jw_t;
 *  - worker->outstanding is the sum of its jw->n over open jobs;
 *  - js->split_slots is 2 * nsplits summed over open jobs. */
#ifndef DISP_JOBS_IMPL_H
#define DISP_JOBS_IMPL_H

#include "dispatcher/core/jobs.h"

/* ------------------------------------------------------------ splits.c */

/* Whether a split may move from state `from` to `to` (the allow table). */
int disp_split_move_allowed(disp_split_state_e from, disp_split_state_e to);
/* The one way a split's state changes: moves split idx of ep to `to` and
 * keeps the epoch's per-state counts (npending, nacked, nreceived) and, on
 * ACKED, the acknowledged positions and job->acked_total. A move the table
 * refuses changes nothing, counts in js->split_moves_refused, is logged and
 * returns -EINVAL: the caller must not go on as if it moved. */
__attribute__((warn_unused_result)) int disp_split_move(disp_jobs_t *js, disp_job_t *job,
                                                        disp_epoch_t *ep, uint32_t idx,
                                                        disp_split_state_e to);

uint64_t disp_split_id(const disp_job_t *job, const disp_epoch_t *ep, uint32_t idx);
/* The live epoch holding split id (and its index there), or NULL. */
disp_epoch_t *disp_epoch_of(disp_job_t *job, uint64_t id, uint32_t *ret_idx);
/* Positions of split idx of ep. */
uint64_t disp_split_len(const disp_job_t *job, const disp_epoch_t *ep, uint32_t idx);
void disp_epoch_free(disp_epoch_t *ep);
/* Frees fully acknowledged epochs, creates the next one when allowed,
 * marks the job finished after the last. Returns 1 if an epoch was created. */
int disp_epoch_advance(disp_job_t *job, int64_t now_ms);
/* The front entry of queue q of ep that is still PENDING (1), dropping
 * stale entries on the way; 0 when none is left. */
int disp_queue_front(const disp_epoch_t *ep, sl_ring_t *q, uint32_t *ret_idx);
/* Split idx, PENDING again, goes to the front of its queue. */
void disp_queue_return(const disp_job_t *job, disp_epoch_t *ep, uint32_t idx);

/* ------------------------------------------------------------ assign.c */

/* The record of worker_id in job, created when missing; NULL: no memory. */
disp_jw_t *disp_jw_create(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id);
/* Frees jw's arrays (not jw itself: it lives in job->jw). */
void disp_jw_free(disp_jw_t *jw);
void disp_jw_remove(disp_job_t *job, disp_jw_t *jw);
/* jw finished a split of predicted cost c at now (reported sent, or the
 * client has all of it): it counts toward jw's speed. */
void disp_jw_done(disp_jw_t *jw, double c, int64_t now_ms);
/* Busy-time bookkeeping at now (after a heartbeat). */
void disp_jw_clock(disp_jw_t *jw, int64_t now_ms);
/* Predicted cost of a live split (0 when its epoch is gone). */
double disp_split_cost(disp_job_t *job, uint64_t id);
/* Takes an ASSIGNED split off its owner's list. */
void disp_detach(disp_jobs_t *js, disp_job_t *job, disp_split_t *s, uint64_t id);
/* An ASSIGNED split returns to the front of its queue. -EINVAL when its
 * state may not move to PENDING (disp_split_move): then nothing changed. */
__attribute__((warn_unused_result)) int disp_take_back(disp_jobs_t *js, disp_job_t *job,
                                                       disp_epoch_t *ep, uint32_t idx);
/* Every split of jw returns, last first so that they keep their order at
 * the front of the queue; revoked at the worker if revoke. Returns how many. */
size_t disp_take_back_all(disp_jobs_t *js, disp_job_t *job, disp_jw_t *jw, int revoke);
/* Queues a revocation of split id at its worker owner (none for the client). */
void disp_revoke_at_owner(disp_job_t *job, const disp_split_t *s, uint64_t id);

#endif
