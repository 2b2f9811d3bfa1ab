/* journal_state: what of the dispatcher's state goes into the journal
 * (dispatcher/journal.h), and how replay rebuilds the job table from it.
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
 * Every function takes the dispatcher mutex held by the caller, except
 * disp_jstate_open (start-up, before any thread). All return 0 when the
 * dispatcher has no journal. */
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

/* Opens DIR, replays it into d's job table (which must be empty), bumps
 * job ids past the replayed ones and compacts. A torn tail is truncated and
 * logged; a corrupt middle returns -EBADMSG with err naming file and
 * offset. On success d owns the journal. */
int disp_jstate_open(disp_t *d, const char *dir, int64_t now_ms, char *err, size_t errlen);
void disp_jstate_close(disp_t *d);

/* Append + fdatasync before the RPC that caused the change is answered.
 * Return 0 or a negative errno (the caller answers UNAVAILABLE and, for a
 * submit, drops the job). */
int disp_jstate_submitted(disp_t *d, const disp_job_t *job);
/* ids: what the client acknowledges; only those not yet ACKED are written. */
int disp_jstate_acked(disp_t *d, disp_job_t *job, const uint64_t *ids, size_t n);
int disp_jstate_plan(disp_t *d, const disp_job_t *job);
/* Also installed as the job table's expire hook by disp_jstate_open, so a
 * client timeout is durable before the job closes. */
int disp_jstate_closed(disp_t *d, const disp_job_t *job, const char *reason);
/* A newly submitted job was tagged as a rank of job->group. */
int disp_jstate_rank(disp_t *d, const disp_job_t *job);

/* Compacts when the log is past DISP_JOURNAL_COMPACT_BYTES (main loop tick). */
void disp_jstate_maybe_compact(disp_t *d);

#endif
