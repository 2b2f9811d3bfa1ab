/* journal_state: what of the dispatcher's state goes into the journal
 * (dispatcher/journal/journal.h), and how replay rebuilds the job table from it
 * (the replay itself: journal_replay.c).
 *
 * Durable: every open job (canonical spec, sample count, fingerprint, split
 * size, plan, id, multi-rank group), its acknowledged splits, its plan
 * changes with the planner state behind them (the client's PlannerInputs as
 * refined by its reports, and the planner input each plan was computed
 * from), and every close: CloseJob and client timeouts alike. Not durable,
 * by design: workers (they re-register, keeping their ids), assignments
 * (every unacknowledged split is PENDING after a restart), rates (stale
 * after a restart; the client reports fresh ones within seconds). Epochs are
 * derived: every epoch below the oldest one with an unacknowledged split is
 * done. A restored auto/fastflow job re-plans as its workers re-register.
 *
 * Record types (proto/sluice.proto, one message each), all idempotent:
 *   1 JournalJob    a job, by id; a second copy of a known id is ignored
 *   2 JournalAcks   acked split ids (+ done_below in snapshots); a set union
 *   3 JournalPlan   the job's plan now (+ planner state)
 *   4 JournalClose  the job is closed; later records of it are ignored
 *   5 JournalRank   the job is a rank of multi-rank job `group`
 * Fields added after the first release (JournalJob.planner and .group,
 * JournalPlan.planner) and type 5 are optional: a journal written without
 * them restores as before (no planner state, no group).
 *
 * Durable before answered, without disk waits under the mutex: a handler
 * appends the record (disp_jstate_submitted ...: a write, no sync) and
 * applies the change under d->mu, takes disp_jstate_seq before releasing
 * it, and after releasing it waits in disp_jstate_wait, where concurrent
 * handlers share one fdatasync (dispatcher/journal/journal.h). A failed wait is
 * answered as a failed append was before (UNAVAILABLE, or the new job
 * dropped) although the change stays applied in memory: the journal is
 * broken until disp_jstate_maybe_compact snapshots that memory, and every
 * wait fails until then, so nothing that depends on the lost record is
 * answered either (an acked split's ack, retried, finds nothing new to
 * write but still waits on the journal).
 *
 * Every function takes the dispatcher mutex held by the caller, except
 * disp_jstate_open (start-up, before any thread) and disp_jstate_wait
 * (without it). All return 0 when the dispatcher has no journal. */
#ifndef DISP_JOURNAL_STATE_H
#define DISP_JOURNAL_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "dispatcher/disp.h"

#define DISP_JREC_JOB 1u
#define DISP_JREC_ACKS 2u
#define DISP_JREC_PLAN 3u
#define DISP_JREC_CLOSE 4u
#define DISP_JREC_RANK 5u

/* Compact when the log has grown past this (a snapshot is O(open jobs)). */
#define DISP_JOURNAL_COMPACT_BYTES (4u << 20)
/* A broken journal (a failed sync) tries a snapshot this often. */
#define DISP_JOURNAL_RETRY_MS 1000

/* Opens DIR, replays it into d's job table (which must be empty), bumps
 * job ids past the replayed ones and compacts. A torn tail is truncated and
 * logged; a corrupt middle returns -EBADMSG with err naming file and
 * offset. On success d owns the journal. */
int disp_jstate_open(disp_t *d, const char *dir, int64_t now_ms, char *err, size_t errlen);
void disp_jstate_close(disp_t *d);

/* Append the change's record (a write, no sync). Return 0 or a negative
 * errno (the caller does not apply the change, or drops the job it just
 * submitted, and answers UNAVAILABLE). */
int disp_jstate_submitted(disp_t *d, const disp_job_t *job);
/* ids: what the client acknowledges; only those not yet ACKED are written. */
int disp_jstate_acked(disp_t *d, disp_job_t *job, const uint64_t *ids, size_t n);
int disp_jstate_plan(disp_t *d, const disp_job_t *job);
/* Also installed as the job table's expire hook by disp_jstate_open, so a
 * client timeout is in the log before the job closes (disp_tick waits for
 * it after releasing the mutex). */
int disp_jstate_closed(disp_t *d, const disp_job_t *job, const char *reason);
/* A newly submitted job was tagged as a rank of job->group. */
int disp_jstate_rank(disp_t *d, const disp_job_t *job);

/* What a reply must wait for: every record appended so far. Under the
 * mutex, after the change's append (and when nothing was appended: a
 * retried ack may depend on another handler's record not yet durable). */
uint64_t disp_jstate_seq(disp_t *d);
/* Without the mutex: returns 0 once every record up to seq is durable,
 * else -EIO (answer as for a failed append). */
int disp_jstate_wait(disp_t *d, uint64_t seq);

/* Compacts when the log is past DISP_JOURNAL_COMPACT_BYTES, or, at most
 * every DISP_JOURNAL_RETRY_MS, when a failed sync broke the journal (main
 * loop tick). */
void disp_jstate_maybe_compact(disp_t *d, int64_t now_ms);

#endif
