/* client_impl: the job object shared by the client's three parts.
 *   job.c     the consumer side (the caller's thread): feeds the line
 *             (client/lib/line.h: executor -> batcher) from received messages
 *             and local splits, collects, pops batches.
 *   control.c the control thread: assignments, acknowledgements, fetchers.
 *   fetch.c   one thread per worker: the Fetch stream with credits.
 * splits.c holds the split table and the one function that moves a split
 * between states; account.c what each sample the line batched, dropped or
 * popped means for its split. struct sluice_job is cut by owner: what the
 * opening thread sets before the others start (then read-only), each
 * thread's own part (consumer, control, fetch), and what they share under
 * job->mu (the split table, the ack queues, the job's failure). */
#ifndef SL_CLIENT_IMPL_H
#define SL_CLIENT_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "client/lib/line.h"
#include "client/lib/sluice.h"
#include "client/lib/steps.h"
#include "common/order/balance.h"
#include "common/order/pack.h"
#include "common/base/jobcap.h"
#include "common/base/ring.h"
#include "common/base/secret.h"
#include "common/data/source.h"
#include "common/engine/pipeline.h"
#include "common/rpc/rpc.h"
#include "common/spec/spec.h"
#include "proto/sluice.pb-c.h"

#define CL_MAX_FETCHERS 64
#define CL_CREDITS 4           /* messages in flight per worker stream */
#define CL_MAX_SPLITS 65536    /* live splits the client tracks */
/* Restarting the Fetch stream to a worker whose last one failed without
 * delivering anything waits this long, doubling per failure. */
#define CL_BACKOFF_MIN_MS 200
#define CL_BACKOFF_MAX_MS 2000

/* A split on the client. Samples of a split can arrive before the client
 * polls the assignment that names its range (HEARD). Multi-rank jobs
 * acknowledge a split when the training loop has taken every sample, and
 * before that report it "received" once every sample is in the batcher, so
 * the dispatcher frees the worker's slot (docs/protocol.md "Acknowledgement
 * on consumption"); the dispatcher may hand a received split out anew, which
 * is reported again. Every change of state is in cl_split_on (splits.c). */
typedef enum {
    CL_SPLIT_FREE = 0,  /* an empty slot of the table */
    CL_SPLIT_HEARD,     /* samples counted, range not known yet */
    CL_SPLIT_OPEN,      /* range known, positions outstanding */
    CL_SPLIT_RECEIVING, /* multi-rank: every sample in the batcher, report queued */
    CL_SPLIT_RECEIVED,  /* multi-rank: the dispatcher has the report */
    CL_SPLIT_ACKED,     /* every position done: ack queued or sent (then removed) */
} cl_split_state_e;

typedef enum {
    CL_SPLIT_EV_LISTED,   /* an assignment lists it (set the range first when HEARD) */
    CL_SPLIT_EV_ADDED,    /* multi-rank: a first copy of one sample reached the batcher */
    CL_SPLIT_EV_DONE,     /* one position delivered or skipped (first copies only) */
    CL_SPLIT_EV_REPORTED, /* the dispatcher answered its received report */
} cl_split_ev_e;

typedef struct cl_split_s {
    uint64_t id;
    uint64_t epoch, begin, end;
    uint64_t owner;    /* worker id, 0 = the client, UINT64_MAX = not known */
    uint64_t done;     /* positions delivered or skipped (first copies only) */
    uint64_t added;    /* multi-rank: first copies in the batcher (done counts on pop) */
    uint64_t next;     /* local: next position to submit */
    cl_split_state_e state;
    int prefetched; /* its URL shards were handed to the prefetcher (prefetch_ahead.c) */
} cl_split_t;

/* A growing list of split ids to send (acknowledgements, received reports,
 * retries); job->mu held for the job's. */
typedef struct cl_ids_s {
    uint64_t *v;
    size_t n, cap;
} cl_ids_t;

typedef struct cl_msg_s {
    Sluice__Batch *batch;  /* unpacked (tests, fuzzing), or NULL; freed by the consumer */
    struct cl_rx_s *rx;    /* client/lib/rx.h: received bytes + index (from batch if NULL) */
    uint64_t worker_id;
    size_t cursor;         /* samples already taken */
    struct cl_msg_s *next;
} cl_msg_t;

typedef enum {
    CL_FETCH_RUNNING = 0,
    CL_FETCH_BROKEN,   /* stream failed: its splits must be retried */
    CL_FETCH_ENDED,    /* thread finished; may be joined */
} cl_fetch_state_e;

typedef struct cl_fetcher_s {
    struct sluice_job *job;
    uint64_t worker_id;
    char address[256];
    pthread_t thread;
    int started;
    cl_fetch_state_e state;
    unsigned credits_owed; /* messages consumed, credit not yet sent (under job->mu) */
    int stop;              /* set under job->mu, by cl_fetch_stop */
    /* Under job->mu. The fetch thread blocks instead of polling: in the
     * receive while the worker holds credits (cs, cancelled by
     * cl_fetch_stop), else on cv until a credit is owed (waiting: the
     * consumer signals cv only then). cv lives while the thread runs. */
    sl_rpc_cstream_t *cs;
    pthread_cond_t cv;
    int waiting;
    int delivered;         /* a message arrived on this stream (under job->mu) */
    char error[512];
} cl_fetcher_t;

/* Per-worker restart backoff; control thread only. */
typedef struct cl_backoff_s {
    uint64_t worker_id; /* 0 = free slot */
    int delay_ms;       /* the last wait; 0 once a stream delivered */
    double not_before;  /* monotonic seconds */
} cl_backoff_t;

/* The consumer's: the training loop's thread (sluice_next_batch and the
 * other calls the loop makes: stats, save, report_step). No lock. */
typedef struct cl_job_consumer_s {
    cl_line_t *line;  /* executor -> batcher (line.h); cl_line_unit_stats from any thread */
    cl_steps_t steps; /* the trainer's step times (sluice_report_step) */
    char last_error[512];
    double t_start, wait_sec;
    uint64_t from_local, from_remote;
    uint64_t local_epoch, local_pos; /* local mode: the next position to run */
    /* Local mode: positions before (ahead_epoch, ahead_pos) were handed to
     * the prefetcher (prefetch_ahead.c); ahead_off: the source has no URL
     * shards, nothing to do. */
    uint64_t ahead_epoch, ahead_pos;
    int ahead_off;
} cl_job_consumer_t;

/* The control thread's (control.c). */
typedef struct cl_job_control_s {
    pthread_t thread; /* started and joined by the opening/closing thread */
    int started;
    /* Control thread only, no lock: backoff per worker, and workers whose
     * stream broke and whose splits the dispatcher has not yet been asked
     * to retry. */
    cl_backoff_t backoff[CL_MAX_FETCHERS];
    uint64_t retry_workers[CL_MAX_FETCHERS];
    size_t nretry_workers;
    /* Under job->mu: the consumer sets kick and signals cv (job.c
     * note_idle) so the control thread asks at once instead of at its next
     * poll; due (cl_control_due) makes the next round come within
     * CL_PACE_MIN_MS of the last however long its quiet interval (pace.h). */
    int kick;
    int due;
    pthread_cond_t cv;
} cl_job_control_t;

/* The fetch threads' (fetch.c), under job->mu: the control thread starts,
 * stops and joins fetchers; each fetch thread appends what it receives to
 * the inbound queue, which only the consumer takes from (its head stays
 * valid unlocked); the consumer owes the credits. */
typedef struct cl_job_fetch_s {
    cl_fetcher_t fetchers[CL_MAX_FETCHERS];
    cl_msg_t *in_head, *in_tail;
} cl_job_fetch_t;

struct sluice_job {
    /* ---- Set while opening (sluice_open, the caller's thread) before any
     * other thread starts; read-only after, by every thread, no lock. */
    sl_spec_t spec;
    sluice_options_t opts;
    char data_root[1024];
    struct sl_remote_s *remote; /* URL sources: remote_roots + cache (client/lib/remote_opts.h) */
    /* The prefix cache of the client's own share (docs/cache.md): its
     * store (NULL without a cache_dir) and this job's cache (NULL when
     * nothing is cached); the executor's threads use pc, its counters are
     * atomic. */
    struct sl_cache_s *pc_store;
    struct sl_pcache_s *pc;
    char dispatcher[256];
    int timeout_ms;
    int dispatcher_timeout_ms; /* give up after the dispatcher is silent this long */
    /* Every channel's security (options copied: the caller's strings need
     * not outlive sluice_open). sec points into the buffers below. */
    sl_rpc_security_t sec;
    char tls_ca[1024], tls_cert[1024], tls_key[1024];
    char token[SL_SECRET_MAX];
    sl_source_t *src;
    /* The job's one version per URL object (url_pins.h): the saved state's
     * pins loaded at open, then the consumer's checks; thread-safe. */
    struct cl_upins_s *pins;
    sl_pipeline_t *pipe;
    struct sl_plugins_s *plugins; /* the plugin_dir's stages (a plugin spec only) */
    uint32_t nunits;
    uint64_t num_samples;
    /* The job's epochs are [first_epoch, end_epoch): numbered as in one
     * longer job (sluice_options_t.first_epoch), end = first + spec.epochs. */
    uint64_t first_epoch, end_epoch;
    /* Positions per epoch: num_samples, or this rank's share of them
     * (common/order/ranks.h); epoch orders and splits are over these. */
    uint64_t positions;
    float *tcost; /* balanced batching: per-sample predictions (open.c) */
    uint32_t *ttok;
    uint32_t *ttiles;
    sl_balance_stats_t bstats; /* what the first epoch's schedule predicts (open.c) */
    sl_pack_stats_t pstats;    /* packed: the same, with fill and oversize */
    char job_name[128];       /* multi-rank: the job the ranks share */
    /* The job's capability (docs/protocol.md "Job capabilities"): what
     * SubmitJob answered (multi-rank: what every rank derives alike,
     * cl_ranks_job_secret), sent with every RPC about the job. */
    char job_secret[SL_JOBCAP_MAX + 1];
    /* Multi-rank: the caller's sluice_options_t.job_secret, copied at open
     * ("" = none given); no_secret: the capability derives from the name
     * alone (cl_ranks_job_secret), so sluice_secret_warning warns. */
    char secret_key[SL_JOBCAP_MAX + 1];
    int no_secret;
    /* Multi-rank remote jobs: a split is acknowledged once the training loop
     * has taken every one of its samples (not when they reach the batcher),
     * so a restarted rank neither loses nor repeats acknowledged samples. */
    int ack_on_pop;
    /* remote only */
    sl_rpc_channel_t *disp;
    uint64_t job_id;
    char plan_mode[64];
    char sample_costs[16]; /* what the sample costs came from (costs.h); "" = none sent */
    /* The short-job guard's verdict (short_job.h), for sluice_stats. */
    struct {
        char choice[8]; /* "" = not asked */
        char reason[8];
        double rate_off, rate_all, rate_both, profile_sec, gain_sec, seconds;
    } guard;
    struct cl_planner_s *planner; /* client/lib/profile.h: profiles, rate reports; owned */

    /* ---- Each thread's own. */
    cl_job_consumer_t consumer;
    cl_job_control_t control;
    cl_job_fetch_t fetch;

    /* ---- Shared by the consumer, the control and the fetch threads:
     * guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* inbound message or state change */
    int closing;
    char failure[512];       /* non-empty: the job failed */
    char fallback[256];      /* non-empty: why the dispatcher runs remote work here */
    /* The job's workers' prefix cache counters as the dispatcher last said
     * (GetAssignmentResponse.cache; docs/cache.md), hits, misses,
     * bytes_read, bytes_written, evictions, store_errors, corrupt,
     * bytes_evicted. */
    uint64_t workers_cache[8];
    /* The plan: SubmitJob's, then each GetAssignment's (control thread);
     * read unlocked by the consumer's stats (a torn read is one stale
     * figure). */
    uint32_t split_units; /* units the workers run */
    int plan_compress;    /* the planner had the workers compress */
    double local_share;
    cl_split_t *splits;      /* CL_MAX_SPLITS slots */
    cl_ids_t acks;           /* split ids to acknowledge */
    cl_ids_t recvd;          /* multi-rank: split ids to report received */
    /* Skips accepted by the batcher, and how many of them the dispatcher has
     * been told about in AckSplits (its /status and /metrics count them). */
    uint64_t skips_counted[SL_SKIP__COUNT];
    uint64_t skips_reported[SL_SKIP__COUNT];
    /* Local split ids with positions left to submit, oldest first
     * (CL_MAX_SPLITS; stale entries are dropped when they reach the front). */
    sl_ring_t local_pending;
    /* The consumer found no local split left to start and the executor
     * about to run dry (job.c note_idle): the next GetAssignment says so
     * (docs/protocol.md "Idle clients"). */
    int idle;
    /* The last ReportRates window used at least CL_BUSY_FRACTION of the
     * client's CPU budget (rates.c). A client whose executor runs dry
     * then is not idle: its CPU goes to receiving, and a split it took
     * would slow the remote samples down more than it adds. */
    int cpu_busy;
    /* The consumer's note at the end of each pump, for a diagnosis from
     * another thread (diagnose.h): how many, when (monotonic seconds), and
     * the executor's places in use then. */
    uint64_t pumps;
    double pump_at;
    unsigned pump_inflight, pump_capacity;
};

/* ranks.c: multi-rank jobs (docs/protocol.md "Multi-rank jobs"). */
/* Applies opts' rank / world_size to job->spec. */
int cl_ranks_apply(struct sluice_job *job, const sluice_options_t *opts, char *err,
                   size_t errlen);
/* The job name to submit: opts->job_name, or one derived from the spec
 * without its rank (equal for every rank of the same spec and source). */
void cl_ranks_job_name(const struct sluice_job *job, char *buf, size_t len);
/* The capability every rank of the job named job->job_name derives alike
 * into job->job_secret: HMAC-SHA256 over the name under $SLUICE_JOB_SECRET
 * (a secret the launcher gives all ranks: only they can join), else under
 * the token (anyone holding it who knows the name can join), else under
 * nothing (no token: the cluster authenticates no one). -EINVAL when
 * SLUICE_JOB_SECRET is set but shorter than SL_JOBCAP_MIN. */
int cl_ranks_job_secret(struct sluice_job *job, char *err, size_t errlen);
/* A re-attached rank: declares epochs from the resume epoch on and marks
 * what the dispatcher says is acknowledged as delivered. */
int cl_ranks_resume(struct sluice_job *job, const Sluice__SubmitJobResponse *r, char *err,
                    size_t errlen);
/* job.c: one step of the consumer's work; waits briefly when idle. */
int cl_job_pump(struct sluice_job *job);
/* account.c: the line's account function (cl_line_account_fn; arg: the
 * job): what a sample the line batched, dropped or popped means for its
 * split and the skip counts. */
void cl_job_account(void *arg, cl_line_ev_e ev, const cl_line_took_t *t);
/* control.c */
int cl_control_start(struct sluice_job *job);
void cl_control_stop(struct sluice_job *job);
/* Something needs a control round soon (job->mu held): acknowledgements
 * queued, samples of a split the client was not told of, a fetch stream's
 * end. Any thread. */
void cl_control_due(struct sluice_job *job);
/* Pure: the next restart delay after cur ms (0 = none yet): CL_BACKOFF_MIN_MS
 * doubling up to CL_BACKOFF_MAX_MS. */
int cl_backoff_next(int cur);
/* fetch.c */
void *cl_fetch_main(void *arg);
/* Stops f's thread promptly (job->mu held): wakes its wait, cancels its
 * stream. A fetcher not started is only marked. */
void cl_fetch_stop(cl_fetcher_t *f);
/* A credit owed to f's worker (job->mu held); wakes f's thread if it waits. */
void cl_fetch_owe(cl_fetcher_t *f);
void cl_msg_free(cl_msg_t *m); /* NULL ok */
/* splits.c: the live split table and split states, called with job->mu
 * held. A full table fails the job. */
cl_split_t *cl_split_find(struct sluice_job *job, uint64_t id);
/* The split, entered as HEARD (owner not known) if new; NULL when the table
 * is full (the job has failed). */
cl_split_t *cl_split_add(struct sluice_job *job, uint64_t id);
void cl_split_remove(struct sluice_job *job, cl_split_t *s);
/* The one transition function: applies ev to s, then queues its ack once
 * every position is done, or (multi-rank) its received report once every
 * sample is in the batcher. Queueing out of memory fails the job. */
void cl_split_on(struct sluice_job *job, cl_split_t *s, cl_split_ev_e ev);
/* 0 or -ENOMEM. */
int cl_ids_push(cl_ids_t *q, uint64_t id);
/* Forgets the first n (sent) ids. */
void cl_ids_drop(cl_ids_t *q, size_t n);
void cl_ids_free(cl_ids_t *q);

#endif
