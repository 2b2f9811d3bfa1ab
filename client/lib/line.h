/* line: the client's production line -- the executor (common/engine/executor.h)
 * feeding the batcher (common/engine/batcher.h; not "pipeline": that name is
 * the stage chain's, common/engine/pipeline.h) -- with the epoch bookkeeping
 * inside: an epoch is declared to the batcher when its first sample is
 * described, in order, and each epoch's order (position -> sample index, this
 * rank's share: common/order/ranks.h) is computed once and cached. It also
 * sizes the executor (room for a batch beyond the threads' own window, so a
 * batch is made while the training loop works on the previous one) and
 * applies the spec's on_error policy to every sample it batches.
 *
 * The consumer (client/lib/job.c) drives it through three calls: feed a
 * sample in (cl_line_feed: a position of the client's own to run from the
 * source, or a received one, to the executor when units are left, else
 * straight to the batcher), collect what the executor finished into the
 * batcher (cl_line_collect), and pop a ready batch (cl_line_pop); it reads
 * where the line stands with cl_line_gauge. What a sample means for splits,
 * acknowledgements and the skips the dispatcher is told about stays with the
 * job: the line tells it through the one account function the job gave
 * cl_line_new, for every sample batched, dropped or popped, whichever call
 * did it. It remembers the most recent skipped samples
 * (cl_line_recent_skips).
 *
 * Below those, the steps they are made of (describe a position:
 * cl_line_sample; run units: cl_line_run; batch: cl_line_put,
 * cl_line_collect_one) stay callable for tests; they tell no account.
 *
 * Why in client/lib and not common/engine: the worker runs the executor too,
 * but it ships every finished sample to a stream as it comes (worker/tasks.c)
 * and never batches nor declares epochs; turning samples into the training
 * loop's batches is the client's alone (`sluice run --local` is the client).
 *
 * Thread: the consumer's (the caller of sluice_next_batch), but
 * cl_line_unit_stats, which any thread may call (slightly stale sums). */
#ifndef CL_LINE_H
#define CL_LINE_H

#include <stddef.h>
#include <stdint.h>

#include "client/lib/sluice.h"
#include "common/data/source.h"
#include "common/engine/batcher.h"
#include "common/engine/pipeline.h"
#include "common/spec/spec.h"

typedef struct cl_line_s cl_line_t;

/* What became of a sample the line batched. */
typedef struct cl_line_took_s {
    uint64_t split_id;
    int skip;         /* -1 delivered, else its sl_skip_e */
    int duplicate;    /* dropped: its (epoch, position) was batched before */
    char detail[256]; /* why it was skipped ("" when delivered) */
} cl_line_took_t;

/* What the line tells the job's account (cl_line_args_t.account). */
typedef enum {
    CL_LINE_EV_BATCHED, /* the batcher took t's sample (a first copy or a duplicate) */
    CL_LINE_EV_DROPPED, /* track_drops: drop_last discarded a sample of split t->split_id */
    CL_LINE_EV_POPPED,  /* a sample of split t->split_id left in a popped batch */
} cl_line_ev_e;

/* Called on the consumer's thread, inside cl_line_feed, cl_line_collect and
 * cl_line_pop. */
typedef void (*cl_line_account_fn)(void *arg, cl_line_ev_e ev, const cl_line_took_t *t);

typedef struct cl_line_args_s {
    /* Batching, epochs, ranks and on_error come from spec; spec, pipe and src
     * must outlive the line. */
    const sl_spec_t *spec;
    const sl_pipeline_t *pipe;
    const sl_source_t *src;
    uint64_t num_samples; /* in the source */
    uint64_t positions;   /* per epoch: num_samples, or this rank's share */
    unsigned threads;     /* executor threads */
    struct sl_pcache_s *pcache; /* the prefix cache for `threads`, or NULL; outlives the line */
    int track_drops;      /* tell the account of drop_last discards (CL_LINE_EV_DROPPED) */
    /* The epochs are numbered [first_epoch, first_epoch + spec->epochs), as
     * in one longer job (sluice_options_t.first_epoch). */
    uint64_t first_epoch;
    /* "batching": "balanced": every sample's predicted trainer cost and
     * tokens (sl_balance_sample_costs; num_samples entries, outliving the
     * line); NULL for count-based batches. */
    const float *tcost;
    const uint32_t *ttok;
    const uint32_t *ttiles;
    /* The job's split accounting; NULL tells nothing. */
    cl_line_account_fn account;
    void *account_arg;
    /* The job's one version per URL (url_pins.h): every sample about to be
     * delivered is judged against it (another version: a counted skip; one
     * the resumed state saved: the job fails). NULL: not checked.
     * Outlives the line. */
    struct cl_upins_s *pins;
} cl_line_args_t;

/* Returns 0, -EINVAL (no threads), -ENOMEM. */
int cl_line_new(const cl_line_args_t *a, cl_line_t **ret);
void cl_line_free(cl_line_t *l); /* waits for samples in flight; NULL ok */
/* The line no longer uses its prefix cache (the planner decided against
 * it, docs/cache.md "When"). Only before the first sample is fed: -EBUSY
 * after, the cache kept. */
int cl_line_drop_pcache(cl_line_t *l);

/* ---- the consumer's three calls */

struct sl_wire_sample_s; /* client/lib/batch_wire.h */

/* One sample to feed in: position pos of epoch, counted towards split_id
 * (0: none, local mode). */
typedef struct cl_line_in_s {
    uint64_t epoch, pos, split_id;
    /* A received sample whose units [0, stage_to) ran on a worker (its
     * fields are judged like any peer's: anything inconsistent becomes a
     * skip); NULL: a position the client runs from the source. */
    const struct sl_wire_sample_s *wire;
    uint32_t stage_to;
    /* A position of the client's own split: not started when it was batched
     * already (a worker delivered it before the split became the client's). */
    int once;
} cl_line_in_t;

/* Feeds one sample in: a position into the executor (every unit), a
 * received sample into the executor (units left) or the batcher (finished,
 * skipped, damaged, a duplicate). Returns 1 when it counts as a sample from
 * its source (a position started; a received payload taken), 2 for a
 * position that holds no sample (a hole: resumed or packed epochs), 0 when taken
 * otherwise or ignored (a received sample of no epoch or position of the
 * job; a once position batched already), -EAGAIN when it needs the executor
 * and there is no room (nothing done), -ERANGE for a position outside the
 * job, other negative codes (-EIO: an on_error "fail" skip or a crashed
 * plugin), with err saying why. */
int cl_line_feed(cl_line_t *l, const cl_line_in_t *in, char *err, size_t errlen);
/* Batches what the executor finished, the first waiting up to timeout_ms.
 * Returns how many, or a negative code as cl_line_feed's with err filled. */
int cl_line_collect(cl_line_t *l, int timeout_ms, char *err, size_t errlen);
/* A ready batch (sl_batch_free it; any thread), or NULL. */
sl_batch_t *cl_line_pop(cl_line_t *l);

/* Where the line stands. */
typedef struct cl_line_gauge_s {
    unsigned room, inflight, capacity; /* the executor's places */
    uint64_t accepted;                 /* samples the batcher has taken */
    int done;                          /* cl_line_done */
} cl_line_gauge_t;
void cl_line_gauge(const cl_line_t *l, cl_line_gauge_t *ret);

/* ---- the steps the three calls are made of (tests) */

/* Samples that may be started now; in flight; at most in flight. */
/* Packed batching: this rank's tokens in global step `step` of epoch and
 * the step's over every rank (the schedule's, computed with the epoch's
 * order). 0, -ENOMEM, -EINVAL (not packed), -ERANGE (no such step). */
int cl_line_pack_counts(cl_line_t *l, uint64_t epoch, uint64_t step, uint64_t *ret_rank,
                        uint64_t *ret_global);
unsigned cl_line_room(const cl_line_t *l);
unsigned cl_line_inflight(const cl_line_t *l);
unsigned cl_line_capacity(const cl_line_t *l);

/* Describes position pos of epoch as a sample to run or batch (index and
 * label from the epoch's order; no bytes), declaring the epoch (and those
 * of the job before it) to the batcher. Returns 0, 1 when the position was
 * batched already (batching it again only counts a duplicate), -ERANGE for
 * an epoch or position outside the job, -ENOMEM. */
int cl_line_sample(cl_line_t *l, uint64_t epoch, uint64_t pos, uint64_t split_id,
                   sl_sample_t *ret);
/* Runs units [from, last) on s, which cl_line_sample described: from 0
 * without bytes reads them from the source. Takes s->t's bytes. Returns 0,
 * -EAGAIN without room, -ENOMEM. */
int cl_line_run(cl_line_t *l, sl_sample_t *s, uint32_t from);
/* Batches a finished or skipped sample. With fill, s is delivered and its
 * bytes are not in memory yet: fill writes them once, to their place
 * (sl_batcher_add_fill). detail: a skip's reason. The sample's bytes are
 * taken or freed. Returns 0 with *ret filled; -EIO for a skip when the spec's
 * on_error is "fail" (ret->detail says which); -EINVAL for a sample the
 * batcher refuses; -ENOMEM. */
int cl_line_put(cl_line_t *l, sl_sample_t *s, const char *detail, sl_batcher_fill_fn fill,
                void *arg, cl_line_took_t *ret);
/* Batches the executor's next finished sample, waiting up to timeout_ms.
 * Returns as cl_line_put, or -EAGAIN when none finished in time or none is
 * in flight. */
int cl_line_collect_one(cl_line_t *l, int timeout_ms, cl_line_took_t *ret);

/* Every epoch declared and batched, nothing in flight, every batch popped. */
int cl_line_done(const cl_line_t *l);

/* A restarted rank (docs/protocol.md "Multi-rank jobs"): epochs before
 * epoch were delivered by an earlier process and are never declared (their
 * late copies count as duplicates). Before anything else is declared; an
 * epoch before the job's first is ignored. */
void cl_line_resume_at(cl_line_t *l, uint64_t epoch);
/* ... and positions [begin, end) of epoch were delivered too
 * (sl_batcher_mark_done). Returns how many were newly marked, -EINVAL for a
 * range outside the job, -ENOMEM. */
int64_t cl_line_mark_done(cl_line_t *l, uint64_t epoch, uint64_t begin, uint64_t end);

/* What the training loop has consumed so far (client/lib/taken.h). */
struct cl_taken_s;
const struct cl_taken_s *cl_line_taken(const cl_line_t *l);

void cl_line_stats(const cl_line_t *l, sl_batcher_stats_t *ret);
/* Samples in the batches cl_line_pop handed out: what the training loop got.
 * Not the batcher's count (sl_batcher_stats_t.delivered), which also holds
 * samples batched but not yet popped and drop_last's discarded remainders. */
uint64_t cl_line_popped(const cl_line_t *l);
/* Per-unit cost so far (sl_pipeline_nunits entries). Any thread. */
void cl_line_unit_stats(cl_line_t *l, sl_unit_stat_t *ret);
/* CPU seconds the executor's threads have used so far; any thread. */
double cl_line_threads_cpu_sec(const cl_line_t *l);
/* The first skipped sample's reason, "" when none was skipped. */
const char *cl_line_first_skip(const cl_line_t *l);
/* The most recent skipped samples (first copies the batcher counted, at
 * most SLUICE_RECENT_SKIPS), oldest first, into out[max]; returns how many. */
size_t cl_line_recent_skips(const cl_line_t *l, sluice_skip_t *out, size_t max);
/* Why an on_error "fail" job stopped (the bad sample), "" while it has not. */
const char *cl_line_failed_on(const cl_line_t *l);
/* Epoch's order (positions -> sample indices; a hole is SL_POS_HOLE),
 * computed and cached as cl_line_sample does, or NULL (out of memory, an
 * epoch outside the job). Valid until the next call that computes one. */
const uint64_t *cl_line_order(cl_line_t *l, uint64_t epoch);

#endif
