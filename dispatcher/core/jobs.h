/* jobs: the job table and the truth about splits (docs/protocol.md).
 *
 * Pure bookkeeping over the caller's clock (now_ms, monotonic): no sockets,
 * no protobuf, no I/O, no locking -- every function here is called with the
 * dispatcher mutex held (disp.h: RPC handler threads, the status thread,
 * the main loop's tick). Unit tests drive it directly
 * (tests/unit/test_dispatcher_jobs.c). The table owns its jobs, each job
 * its epochs, split arrays, queues and per-worker records; workers are
 * referred to by id (dispatcher/core/registry.h owns them). The code is in
 * jobs.c (table, submit, acks, close), splits.c (split geometry, epochs,
 * queues), assign.c (who gets a split) and worker_reports.c (what a
 * worker's heartbeats and departure do): dispatcher/core/jobs_impl.h.
 *
 * Per job:
 *  - Epochs are created lazily: epoch e+1 once no split of epoch e is
 *    PENDING, and at most two epochs are live (have unacknowledged splits).
 *    A fully acknowledged epoch is freed; after the last one the job is
 *    FINISHED.
 *  - nsplits = ceil(positions / split_size); split_size is the config's, or
 *    (0 = auto) disp_split_size_auto at submission, and stays the job's.
 *    Split i of an epoch has id epoch*nsplits + i (unique within the job)
 *    and covers positions [i*split_size, min(n, (i+1)*split_size)) -- or,
 *    when the client sent per-sample costs (cost_splits), [bounds[i],
 *    bounds[i+1]) cut at equal cumulative predicted cost of that epoch's
 *    order (every split non-empty). Only disp_job_split knows which.
 *  - A split is PENDING, ASSIGNED(owner) or ACKED (multi-rank: RECEIVED);
 *    owner 0 is the client. Its state changes only through disp_split_move
 *    (jobs_impl.h), whose allow table lists the moves.
 *    Local-share splits (plan.c rule) go to the client only. Remote splits go
 *    to the live worker predicted to finish them first: (its active splits'
 *    cost + this one) / its measured speed in cost per second (unknown
 *    speeds: the mean of the known ones, or 1); ties: fewest over all jobs,
 *    then lowest id. A worker that has work gets it only if no full worker
 *    would finish it sooner after its queue (else it waits for that one);
 *    an idle worker always gets one. A worker holds at most max_splits_per_worker active
 *    (not yet DELIVERED) splits of a job, and as many more delivered ones
 *    awaiting the client's ack -- so a worker that reports a split sent
 *    gets the next in that heartbeat's reply. A split returned because of
 *    worker W goes elsewhere if anyone else has room.
 *  - Stealing (lim.steal): when the remote queues are empty and a worker has
 *    room, the last active split of the worker predicted to finish last
 *    (one holding at least two, so the split is likely still queued) moves
 *    to it if that finishes sooner; revoked at the old owner, each split at
 *    most once. The client keeps the first copy of every position, so a
 *    split that had started at the old owner is still delivered once.
 *  - An idle client (disp_jobs_client_idle) takes one PENDING remote split
 *    per GetAssignment that says so, after the workers had their pick;
 *    never one anybody holds. Not for offload "all".
 *  - With no live worker for worker_timeout_ms, or when every live worker
 *    has refused the job, remote splits go to the client.
 *  - The client holds at most max_client_splits unacknowledged splits per
 *    job, so GetAssignment replies stay O(workers * max_splits_per_worker +
 *    max_client_splits) whatever the data set size.
 *  - Returned splits (worker lost or left, client retry, worker refused the
 *    job, worker stopped reporting it: disp_announce_e) go to the front of
 *    the queue: the oldest positions block the client most. A leaving
 *    (draining) worker gets no new splits.
 *  - A worker that reports a job in failed_jobs is banned from that job for
 *    good (its splits return to the queue); the job does not fail: other
 *    workers or the client finish it. Except a data server it could not
 *    reach: it may come back after a growing back-off (worker_back.c).
 *
 * Work per call is O(splits touched + workers), never O(splits of an epoch),
 * except epoch creation and job close (once per epoch / job). */
#ifndef DISP_JOBS_H
#define DISP_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/jobcap.h"
#include "common/base/tenants.h"
#include "common/base/ring.h"
#include "common/spec/spec.h"
#include "dispatcher/planner/plan.h"
#include "dispatcher/core/registry.h"

/* Bounds on what a client can make us allocate. */
#define DISP_MAX_SPLITS_PER_EPOCH (1u << 20)
#define DISP_SPLIT_BUDGET (1ull << 22)  /* live split slots over all jobs (~32 B each) */
#define DISP_CLOSED_KEEP 64             /* closed jobs kept for /status */
#define DISP_CLOSED_LINGER_MS 60000
#define DISP_REVOKE_MAX 64              /* revocations queued per (job, worker) */
#define DISP_SKIP_REASONS_MAX 16
#define DISP_TEXT_MAX 256

typedef enum {
    DISP_SPLIT_PENDING = 0,
    DISP_SPLIT_ASSIGNED,
    DISP_SPLIT_ACKED,
    /* Multi-rank: every sample is at the client, which has not yet handed
     * them all to its training loop. Nobody's slot (owner 0, on no list);
     * not done: ACKED on the ack, PENDING again if the rank restarts. */
    DISP_SPLIT_RECEIVED,
} disp_split_state_e;
/* A split's state changes only through disp_split_move (jobs_impl.h), whose
 * allow table says which moves exist. */
#define DISP_SPLIT_NSTATES 4

typedef enum {
    DISP_JOB_ACTIVE = 0, /* epochs left to deliver */
    DISP_JOB_FINISHED,   /* every epoch acknowledged; waits for CloseJob */
    DISP_JOB_CLOSED,     /* CloseJob or client timeout; kept briefly for /status */
} disp_job_state_e;

typedef struct disp_split_s {
    uint64_t owner; /* ASSIGNED: worker id, 0 = client */
    uint64_t avoid; /* worker the split was last taken from (0 = none) */
    uint8_t state;  /* disp_split_state_e */
    uint8_t local;  /* local share: the client's own */
    /* planner: the split point this split was first handed out with; it
     * keeps it through re-plans and re-assignment (planned = 1 once set). */
    uint8_t stage_to;
    uint8_t compress; /* ... and the wire codec (the plan's), fixed with it */
    uint8_t planned;
    uint8_t stolen; /* moved once by stealing: never again */
} disp_split_t;

/* The queues are FIFOs of split indices (uint32_t); returned splits go to
 * the front. An entry whose split is no longer PENDING is skipped when it
 * reaches the front (an ack may arrive for a split waiting in a queue). */
typedef struct disp_epoch_s {
    uint64_t epoch;
    disp_split_t *splits; /* nsplits of the job */
    sl_ring_t remote;     /* PENDING remote splits */
    sl_ring_t local;      /* PENDING local-share splits */
    uint64_t *bounds;     /* cost cut: nsplits + 1 positions; NULL = by count */
    float *cost;          /* predicted cost per split (by count: its length) */
    uint64_t acked_positions; /* positions of its ACKED splits (progress) */
    uint32_t npending;
    uint32_t nacked;
    uint32_t nreceived; /* RECEIVED: at the client, not yet acked */
} disp_epoch_t;

/* What the worker has told us about an assignment, from its heartbeats.
 * Nothing may be stranded at a worker that no longer holds a split (its
 * Fetch stream broke and it dropped the job's work, a heartbeat reply was
 * lost, it refused the assignment), so an ASSIGNED split returns to the
 * queue (and is revoked at the worker) when:
 *  - SENT and not reported in progress DISP_RESEND_AFTER_HB heartbeats
 *    after the reply that carried it (reply lost or assignment refused);
 *  - SEEN and then missing from a heartbeat without being reported sent.
 * A split the worker reports `sent` is DELIVERED: every message of it went
 * out, so the client acknowledges it, or retries it if the stream broke
 * (AckSplits.retry_worker_id); heartbeats no longer decide its fate. */
typedef enum {
    DISP_AN_NEW = 0,   /* not yet in a heartbeat reply */
    DISP_AN_SENT,      /* in a reply at heartbeat sent_seq */
    DISP_AN_SEEN,      /* the worker reported it in progress */
    DISP_AN_DELIVERED, /* the worker reported every message of it sent */
} disp_announce_e;

#define DISP_RESEND_AFTER_HB 3

/* A job-qualified split id (split ids are unique within a job only), and
 * which hand-out of it the worker means (SplitAssignment.assignment; 0 =
 * any: an older worker): a report about an earlier hand-out of the same
 * split must not count for the current one. */
typedef struct disp_split_ref_s {
    uint64_t job_id;
    uint64_t split_id;
    uint64_t assignment;
} disp_split_ref_t;

/* The split part of one heartbeat. The arrays are sorted in place. */
typedef struct disp_progress_s {
    disp_split_ref_t *in_progress; /* queued, running or buffered at the worker */
    size_t n_in_progress;
    /* Unqualified ids from a worker that does not send in_progress (an older
     * one): used only when in_progress is empty; matched in every job. */
    uint64_t *legacy_ids;
    size_t n_legacy;
    disp_split_ref_t *sent; /* every message sent since its last good heartbeat */
    size_t n_sent;
    int leaving; /* the worker is draining: it takes no new splits */
} disp_progress_t;

/* One worker's part in one job. */
typedef struct disp_jw_s {
    uint64_t worker_id;
    int banned;        /* the worker refused the job (failed_jobs) */
    uint32_t n;        /* outstanding split ids, assignment order */
    uint64_t *ids;     /* [max_splits_per_worker] */
    uint8_t *sent;     /* disp_announce_e per id */
    uint32_t *sent_seq; /* the worker's heartbeat number when last sent */
    uint64_t *aid;     /* assignment id per id (js->next_aid when given) */
    uint64_t revoked[DISP_REVOKE_MAX]; /* split ids of this job, for the next reply */
    uint32_t nrevoked;
    /* Speed, in the job's cost units per second while it had active splits:
     * done_cost / busy_ms, halved together now and then so it follows
     * change. busy_from_ms: start of the current busy stretch, 0 = idle. */
    double done_cost;
    double busy_ms;
    int64_t busy_from_ms;
    /* When its oldest active split began, as far as we can tell: its last
     * delivery, or the start of a busy stretch. What a worker has left is
     * its load less the progress on that split since (assign.c jw_left). */
    int64_t head_from_ms;
    /* Split indices (within an epoch) whose prefix cache entries it holds
     * (locality.h); NULL until it reports one. */
    uint8_t *held;
    uint32_t held_bits;
    /* Out of the job for a data-server reason (its reads failed after the
     * retries): it may come back (worker_back.c). nout: times it gave the
     * job back so; nback: times it came back; back_after_ms: not before
     * (out_ms + a back-off growing with nout); why_out: its reason. */
    int down;
    uint32_t nout, nback;
    int64_t out_ms, back_after_ms;
    uint64_t delivered; /* splits it sent whole in this job */
    char why_out[160];
} disp_jw_t;

typedef struct disp_skip_s {
    char reason[DISP_NAME_MAX];
    uint64_t count;
} disp_skip_t;

typedef struct disp_rates_s {
    int have;
    int64_t at_ms;
    double delivered_per_sec;
    double wait_fraction;
    double cpu_fraction;
    double cpu_budget;
    double recv_cpu_sec_per_byte;
    /* Balanced batching (0: count-based): the client's predicted load per
     * step and the schedule's imbalance per step, mean and max. */
    double step_load, step_imbalance, step_imbalance_max;
    double pack_fill;       /* packed batching: mean tokens / budget per pack */
    uint64_t pack_oversize; /* packed batching: samples over a pack's budgets */
    disp_stage_stat_t stages[DISP_STAGE_STATS_MAX];
    uint32_t nstages;
} disp_rates_t;

/* The prefix cache's counters (docs/cache.md), summed from the workers'
 * heartbeats (HeartbeatRequest.job_cache: each one's growth). */
typedef struct disp_cache_stats_s {
    uint64_t hits, misses, bytes_read, bytes_written, evictions, store_errors, corrupt;
    uint64_t bytes_evicted;
} disp_cache_stats_t;

typedef struct disp_job_s {
    uint64_t id;
    disp_job_state_e state;
    sl_spec_t spec;
    char *spec_json; /* canonical (sl_spec_to_json); owned */
    char spec_name[DISP_NAME_MAX];
    char client_id[DISP_NAME_MAX];
    uint64_t fingerprint;
    uint64_t num_samples;
    uint32_t client_threads;
    disp_plan_t plan;
    /* Its capability (common/base/jobcap.h, docs/protocol.md "Job
     * capabilities"): the hash of the job secret, set once at submission or
     * restore. has_cap 0: a job restored from a journal older than
     * capabilities, which any client may act on (as before). The secret
     * itself is never held. */
    uint8_t cap_hash[SL_JOBCAP_HASH];
    int has_cap;
    /* The tenant that submitted it (docs/protocol.md "Tenants"; "" = the
     * cluster token or none): only its calls may act on the job. */
    char tenant[SL_TENANT_NAME_MAX];

    /* Multi-rank jobs (dispatcher/core/ranks.h): this job is rank `rank` of
     * world_size of the job named group ("" and 1 for a single consumer).
     * positions: per epoch, num_samples or the rank's share of them
     * (common/order/ranks.h); splits cut these. */
    char group[DISP_NAME_MAX];
    uint32_t rank, world_size;
    uint64_t positions;

    uint32_t split_size;
    uint32_t nsplits;     /* per epoch */
    float *costs;         /* per sample index [num_samples]; NULL = cut by count */
    struct disp_job_plugins_s *plugins; /* its plugin units (plugins.h); NULL = none */
    uint64_t stolen_total;
    uint64_t client_helped_total; /* remote splits an idle client took (client_idle) */
    uint32_t epochs;      /* total, from the spec */
    /* Epochs are numbered first_epoch .. first_epoch + epochs - 1
     * (SubmitJobRequest.first_epoch): split ids and epoch orders use these. */
    uint64_t first_epoch;
    disp_epoch_t ep[2];   /* ep[0] is the oldest live epoch */
    uint32_t nep;
    uint64_t next_epoch;  /* number of the next epoch to create */

    disp_jw_t *jw;        /* one per worker that had splits or refused */
    size_t njw, capjw;
    uint64_t *client_ids; /* [max_client_splits] owner-0 splits, assignment order */
    uint32_t nclient;

    uint64_t acked_total;
    uint64_t reassigned_total;
    disp_skip_t skips[DISP_SKIP_REASONS_MAX];
    uint32_t nskips;
    disp_rates_t rates;
    char worker_failure[DISP_TEXT_MAX]; /* last refusal by a worker */
    char fallback[DISP_TEXT_MAX];       /* why remote splits last went to the client */
    char close_reason[DISP_TEXT_MAX];
    disp_cache_stats_t cache; /* its workers' prefix caches (service_workers.c) */
    /* Locality (locality.h): remote splits given to a worker that held them,
     * and splits it did not hold while another worker did. */
    uint64_t loc_held, loc_elsewhere;
    uint32_t loc_prefix1; /* 1 + the units its prefix cache keeps (locality.c); 0 = not yet */

    int64_t created_ms;
    int64_t last_client_ms;
    int64_t finished_ms;
    int64_t closed_ms;
    struct disp_pjob_s *planner; /* auto/fastflow: dispatcher/planner/planner_job.h; owned */
} disp_job_t;

typedef struct disp_limits_s {
    uint32_t split_size; /* 0 = auto (disp_split_size_auto) */
    int cost_splits;     /* use submitted sample costs */
    int steal;
    uint32_t max_splits_per_worker;
    uint32_t max_client_splits;
    uint32_t max_jobs;
    uint32_t max_jobs_per_client; /* open jobs of one client_id; 0 = no limit */
    int64_t worker_timeout_ms;
    int64_t client_timeout_ms;
} disp_limits_t;

typedef struct disp_jobs_s {
    disp_limits_t lim;
    disp_registry_t *reg; /* not owned */
    disp_job_t **jobs;    /* open and recently closed, submission order */
    size_t n, cap;
    size_t nopen;
    uint64_t next_id;
    uint64_t next_aid; /* assignment ids: one per hand-out to a worker */
    uint64_t split_slots; /* reserved: 2 * nsplits per open job */
    uint64_t split_moves_refused; /* disp_split_move refusals: a bug if ever non-zero */
    uint64_t cost_slots;  /* floats of sample costs held by open jobs */
    uint64_t splits_acked_total;
    uint64_t splits_reassigned_total;
    /* Called before disp_jobs_expire closes a job (the journal appends the
     * close first: dispatcher/journal/journal_state.c). Non-zero keeps the job
     * open until the next expiry pass. NULL = none. */
    int (*expire_hook)(void *ctx, const disp_job_t *job, const char *reason);
    void *expire_hook_ctx;
} disp_jobs_t;

typedef struct disp_submit_s {
    const char *spec_json;
    size_t spec_len;
    const char *spec_name; /* for error messages; "" or NULL = "<rpc>" */
    uint64_t num_samples;
    uint64_t fingerprint;
    uint32_t client_threads;
    const char *client_id;
    const disp_plan_t *plan; /* planner: use this plan, not the spec's (NULL = spec's) */
    const float *costs;      /* per sample index, ncosts == num_samples; NULL/0 = none */
    size_t ncosts;
    uint64_t first_epoch;    /* the job's first epoch number (0 = from the start) */
} disp_submit_t;

/* Epoch numbers stay below this: first_epoch + epochs at most (split ids are
 * epoch * nsplits + i, nsplits <= DISP_MAX_SPLITS_PER_EPOCH: below 2^52). */
#define DISP_MAX_EPOCHS (1ull << 32)

/* Bounds on sample costs: per job (a SubmitJob of 8 Mi samples is 32 MiB of
 * floats) and over open jobs; beyond the budget a job is cut by count. */
#define DISP_MAX_SAMPLE_COSTS (1u << 23)
#define DISP_COST_BUDGET (1ull << 25)
/* Auto split size: bounds and the target of splits per worker slot. */
#define DISP_AUTO_SPLIT_MIN 16
#define DISP_AUTO_SPLIT_MAX 256
#define DISP_AUTO_SPLITS_PER_SLOT 2
/* A worker's speed counts from its first delivered split (and this much
 * busy time): until then it is assumed as fast as the measured ones, and
 * a slow worker filled its slots on that guess (test_dispatcher_balance:
 * 500 ms made the uniform case's epoch 1.26x as long). */
#define DISP_SPEED_MIN_BUSY_MS 50
/* A steal must end the victim's work sooner by this share of the split's
 * time there (assign.c steal_one): speeds are estimates. */
#define DISP_STEAL_MARGIN 0.5

/* The split size for a job of `positions` per epoch with `workers` live
 * workers holding max_per_worker splits each: ceil(positions / (max(workers,
 * 2) * max_per_worker * DISP_AUTO_SPLITS_PER_SLOT)) within [MIN, MAX], and
 * large enough for DISP_MAX_SPLITS_PER_EPOCH. Small splits keep every
 * worker busy to the end of an epoch; the floor bounds per-split overhead
 * (one message, one ack), the ceiling is the old fixed size. */
uint32_t disp_split_size_auto(uint64_t positions, size_t workers, uint32_t max_per_worker);

/* Cuts positions [0, n) into nsplits non-empty ranges of about equal summed
 * cost (cost[p] of position p; bounds[0] = 0, bounds[nsplits] = n). Needs
 * 1 <= nsplits <= n. Pure; exposed for tests. */
void disp_cut_by_cost(const float *cost, uint64_t n, uint32_t nsplits, uint64_t *bounds);

int disp_jobs_init(disp_jobs_t *js, disp_registry_t *reg, const disp_limits_t *lim,
                   uint64_t first_id);
void disp_jobs_destroy(disp_jobs_t *js);

/* Parses and plans the job and creates its first epoch. Returns 0,
 * -EINVAL / -E2BIG (bad spec or sample count: err is the message to send
 * back, the spec parser's verbatim; also sample costs failing
 * disp_costs_check), -ENOSPC (too many jobs or splits), -ENOMEM. Costs
 * are used for single-consumer jobs within DISP_COST_BUDGET (else the job
 * is cut by count, logged) and kept with the job (the journal needs them). */
int disp_jobs_submit(disp_jobs_t *js, const disp_submit_t *req, int64_t now_ms,
                     disp_job_t **ret, char *err, size_t errlen);
/* Sample costs a peer sent: none, or exactly num_samples (at most
 * DISP_MAX_SAMPLE_COSTS) finite values >= 0. Returns 0 or -EINVAL with err. */
int disp_costs_check(const float *costs, size_t n, uint64_t num_samples, char *err,
                     size_t errlen);
/* Any state, including CLOSED; NULL when unknown. */
disp_job_t *disp_jobs_find(disp_jobs_t *js, uint64_t id);

/* Hands out pending splits of one job / of every active job. */
void disp_jobs_assign(disp_jobs_t *js, disp_job_t *job, int64_t now_ms);
void disp_jobs_assign_all(disp_jobs_t *js, int64_t now_ms);
/* The client says it is idle (GetAssignmentRequest.idle): after the usual
 * assignment, gives it the front PENDING remote split of the oldest live
 * epoch that has one -- a split no worker was ever handed, or one returned
 * to the queue, so nobody else holds it and exactly-once is the ordinary
 * give's. One per call; nothing for offload "all" (every split remote, as
 * the user asked), nor beyond max_client_splits. The split's split point is
 * fixed as any client split's. Returns 1 if a split was given. */
int disp_jobs_client_idle(disp_jobs_t *js, disp_job_t *job, int64_t now_ms);

/* The client acknowledged these splits. Unknown, stale and repeated ids are
 * ignored (acks are idempotent). Returns how many were newly acknowledged.
 * This and the calls below hand out freed capacity at once (assign). */
size_t disp_jobs_ack(disp_jobs_t *js, disp_job_t *job, const uint64_t *ids, size_t n,
                     int64_t now_ms);
/* Multi-rank acknowledgement on consumption: the client has every sample of
 * these splits but its training loop has not taken them all. ASSIGNED
 * splits (worker or client) become RECEIVED: off their owner's list, so the
 * slot goes to new work (a split waiting in a partial batch cannot hold up
 * the samples that would complete it), revoked at a worker that has not
 * reported it sent. Unknown, stale, PENDING (it holds no slot), ACKED and
 * RECEIVED ids are ignored. Returns how many changed. */
size_t disp_jobs_received(disp_jobs_t *js, disp_job_t *job, const uint64_t *ids, size_t n,
                          int64_t now_ms);
/* A rank restarted (dispatcher/core/ranks.h): what the old process received but
 * had not delivered returns to the front of the queue. Returns how many. */
size_t disp_jobs_requeue_received(disp_jobs_t *js, disp_job_t *job, int64_t now_ms);
/* The client's stream to a worker broke. worker_id != 0: every split of the
 * job ASSIGNED to that worker returns to the queue, listed or not (the
 * worker dropped its unfinished work; what it sent may not have arrived),
 * and listed ids owned by anyone else are left alone, so a late retry never
 * takes a split from the owner it has moved to. worker_id 0 (an older
 * client): the listed ids return whoever owns them. Returned splits are
 * revoked at their owner. Returns how many returned. */
size_t disp_jobs_retry(disp_jobs_t *js, disp_job_t *job, const uint64_t *ids, size_t n,
                       uint64_t worker_id, int64_t now_ms);
/* Adds skip counts reported with an ack (bounded number of reasons). */
void disp_jobs_add_skips(disp_job_t *job, const char *reason, uint64_t count);

/* A worker was lost: every split it held returns to the queue. */
void disp_jobs_worker_lost(disp_jobs_t *js, uint64_t worker_id, int64_t now_ms);
/* A worker left after draining: its splits return to the queue except the
 * DELIVERED ones (the client has every message of them: the worker ends
 * its streams cleanly only after its last heartbeat; had a stream broken,
 * the client's retry returns them). Returns how many returned. */
size_t disp_jobs_worker_left(disp_jobs_t *js, uint64_t worker_id, int64_t now_ms);
/* A worker cannot run this job: ban it from the job, return its splits. */
int disp_jobs_worker_refused(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id,
                             const char *reason, int64_t now_ms);
/* The worker reports the job again and not failed (worker_back.c): when it
 * was out for a data-server reason and its back-off has passed, it takes
 * splits of the job again (logged). At most DISP_BACK_MAX_OUTS times out;
 * then it stays out. Returns 1 when it came back, else 0. */
int disp_jobs_worker_back(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id, int64_t now_ms);
/* disp_jobs_worker_back for every job the worker is out of for its data
 * server that its heartbeat lists in known and not in failed. O(jobs x
 * their workers), plus the lists' length per such job only. */
void disp_jobs_worker_back_all(disp_jobs_t *js, uint64_t worker_id, const uint64_t *known,
                               size_t nknown, const uint64_t *failed, size_t nfailed,
                               int64_t now_ms);
/* The wait before a worker out nout times (>= 1) may come back. */
int64_t disp_back_delay_ms(uint32_t nout);
/* Whether a worker's refusal of job_id in its heartbeat's failure text
 * ("job N: why; job M: why") is a data-server reason it may recover from. */
int disp_failure_is_data_server(const char *failure, uint64_t job_id);
#define DISP_BACK_MIN_MS 2000
#define DISP_BACK_MAX_MS 60000
#define DISP_BACK_MAX_OUTS 6

/* Closes a job (client's CloseJob or timeout): frees its splits. Idempotent. */
void disp_jobs_close(disp_jobs_t *js, disp_job_t *job, const char *reason, int64_t now_ms);
/* Closes jobs whose client has been silent for client_timeout_ms and drops
 * closed jobs past their linger. Returns how many jobs were closed. */
size_t disp_jobs_expire(disp_jobs_t *js, int64_t now_ms);

/* Heartbeat bookkeeping for w (the rules at disp_announce_e): assignments
 * become SEEN or DELIVERED, or return to the queue. A leaving worker also
 * gives back its NEW assignments (it takes none now). Then counts the
 * heartbeat. Sorts p's arrays. Returns how many splits returned. */
size_t disp_jobs_worker_progress(disp_jobs_t *js, disp_worker_t *w, disp_progress_t *p,
                                 int64_t now_ms);
/* Marks every NEW assignment of w as SENT (after a reply carried them) and
 * clears its revocations. */
void disp_jobs_worker_sent(disp_jobs_t *js, disp_worker_t *w);
/* Whether an assignment in this state goes into the next heartbeat reply. */
int disp_an_to_send(uint8_t state);

/* The record of worker_id in job, or NULL. */
disp_jw_t *disp_job_jw(disp_job_t *job, uint64_t worker_id);
/* Looks up a split by id in a live epoch; NULL when not live. */
disp_split_t *disp_job_split(disp_job_t *job, uint64_t split_id, uint64_t *ret_epoch,
                             uint64_t *ret_begin, uint64_t *ret_end);
/* Splits per state in the live epochs (ret_received may be NULL: then
 * RECEIVED ones are counted nowhere). */
void disp_job_counts(const disp_job_t *job, uint64_t *ret_pending, uint64_t *ret_assigned,
                     uint64_t *ret_acked, uint64_t *ret_received);

const char *disp_job_state_name(disp_job_state_e s);

/* planner hook (dispatcher/service/planner_svc.c): job->plan changed. PENDING splits
 * never handed out are re-classified local/remote by the new share (the
 * queues keep returned splits first); handed-out splits keep their owner
 * and split point. Then hands out work. */
void disp_jobs_replan(disp_jobs_t *js, disp_job_t *job, int64_t now_ms);

/* One past the job's last epoch number. */
uint64_t disp_job_end_epoch(const disp_job_t *job);

/* journal replay (dispatcher/journal/journal_state.c): rebuilds a just-submitted
 * job's epochs: every epoch below live_epoch is done, live_epoch and
 * live_epoch + 1 are live, the listed split ids (of those two; others are
 * ignored) are ACKED, and every other split is PENDING and unassigned.
 * Returns 0 or -ENOMEM. */
int disp_jobs_restore(disp_jobs_t *js, disp_job_t *job, uint64_t live_epoch,
                      const uint64_t *acked, size_t n, int64_t now_ms);

#endif
