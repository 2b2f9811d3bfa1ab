/* client_impl: the job object shared by the client's three parts.
 *   job.c     the consumer side (the caller's thread): feeds the executor from
 *             received messages and local splits, batches, counts completion.
 *   control.c the control thread: assignments, acknowledgements, fetchers.
 *   fetch.c   one thread per worker: the Fetch stream with credits.
 * Locking: job->mu guards the split table, the inbound queue, the ack queue
 * and fetcher bookkeeping; the executor and batcher belong to the consumer. */
#ifndef SL_CLIENT_IMPL_H
#define SL_CLIENT_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "client/lib/sluice.h"
#include "common/engine/batcher.h"
#include "common/engine/executor.h"
#include "common/engine/pipeline.h"
#include "common/rpc/rpc.h"
#include "common/base/secret.h"
#include "common/data/source.h"
#include "common/spec/spec.h"
#include "proto/sluice.pb-c.h"

#define CL_MAX_FETCHERS 64
#define CL_CREDITS 4           /* messages in flight per worker stream */
#define CL_MAX_SPLITS 65536    /* live splits the client tracks */
#define CL_ORDER_CACHE 3       /* epoch orders kept */
/* Restarting the Fetch stream to a worker whose last one failed without
 * delivering anything waits this long, doubling per failure. */
#define CL_BACKOFF_MIN_MS 200
#define CL_BACKOFF_MAX_MS 2000

typedef enum {
    CL_SPLIT_REMOTE = 0, /* a worker produces it */
    CL_SPLIT_LOCAL,      /* the client runs every unit itself */
} cl_split_kind_e;

typedef struct cl_split_s {
    uint64_t id;
    uint64_t epoch, begin, end;
    uint64_t owner;    /* worker id, 0 = the client */
    uint64_t done;     /* positions delivered or skipped (first copies only) */
    uint64_t added;    /* multi-rank: first copies in the batcher (done counts on pop) */
    uint64_t next;     /* local: next position to submit */
    int range_known;   /* 0 until an assignment names its range: samples of a
                        * split can arrive before the client polls its assignment */
    int acked;         /* acknowledgement queued or sent */
    /* Multi-rank: every sample is in the batcher (AckSplits
     * received_split_ids): 0 not yet, 1 queued, 2 the dispatcher has it. */
    int received;
    int in_use;
} cl_split_t;

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
    int stop;              /* set under job->mu */
    int delivered;         /* a message arrived on this stream (under job->mu) */
    char error[512];
} cl_fetcher_t;

/* Per-worker restart backoff; control thread only. */
typedef struct cl_backoff_s {
    uint64_t worker_id; /* 0 = free slot */
    int delay_ms;       /* the last wait; 0 once a stream delivered */
    double not_before;  /* monotonic seconds */
} cl_backoff_t;

typedef struct cl_order_s {
    uint64_t epoch;
    uint64_t *order;
} cl_order_t;

struct sluice_job {
    sl_spec_t spec;
    sluice_options_t opts;
    char data_root[1024];
    char dispatcher[256];
    int timeout_ms;
    int dispatcher_timeout_ms; /* give up after the dispatcher is silent this long */
    /* Every channel's security (options copied: the caller's strings need
     * not outlive sluice_open). sec points into the buffers below. */
    sl_rpc_security_t sec;
    char tls_ca[1024], tls_cert[1024], tls_key[1024];
    char token[SL_SECRET_MAX];
    sl_source_t *src;
    sl_pipeline_t *pipe;
    uint32_t nunits;
    sl_exec_t *exec;
    sl_batcher_t *batcher;
    uint64_t num_samples;
    uint64_t declared_epochs; /* epochs declared to the batcher */
    /* Positions per epoch: num_samples, or this rank's share of them
     * (common/engine/ranks.h); epoch orders and splits are over these. */
    uint64_t positions;
    uint64_t *order_scratch;  /* multi-rank: the full epoch order (num_samples) */
    char job_name[128];       /* multi-rank: the job the ranks share */
    uint64_t resumed_positions; /* multi-rank restart: delivered by an earlier process */
    /* Multi-rank remote jobs: a split is acknowledged once the training loop
     * has taken every one of its samples (not when they reach the batcher),
     * so a restarted rank neither loses nor repeats acknowledged samples. */
    int ack_on_pop;

    /* remote only */
    sl_rpc_channel_t *disp;
    uint64_t job_id;
    uint32_t split_units;  /* plan: units the workers run */
    double local_share;
    char plan_mode[64];
    char sample_costs[16]; /* what the sample costs came from (costs.h); "" = none sent */
    struct cl_planner_s *planner; /* client/lib/profile.h: profiles, rate reports; owned */
    pthread_t control;
    int control_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;       /* inbound message or state change */
    int closing;
    int finished_remote;     /* dispatcher says every epoch is acknowledged */
    char failure[512];       /* non-empty: the job failed */
    cl_split_t *splits;      /* CL_MAX_SPLITS slots */
    cl_msg_t *in_head, *in_tail;
    unsigned in_count;
    uint64_t *acks;          /* split ids to acknowledge */
    size_t nacks, capacks;
    uint64_t *recvd;         /* multi-rank: split ids to report received */
    size_t nrecvd, caprecvd;
    cl_fetcher_t fetchers[CL_MAX_FETCHERS];
    /* Skips accepted by the batcher, and how many of them the dispatcher has
     * been told about in AckSplits (its /status and /metrics count them). */
    uint64_t skips_counted[SL_SKIP__COUNT];
    uint64_t skips_reported[SL_SKIP__COUNT];
    /* Control thread only: backoff per worker, and workers whose stream broke
     * and whose splits the dispatcher has not yet been asked to retry. */
    cl_backoff_t backoff[CL_MAX_FETCHERS];
    uint64_t retry_workers[CL_MAX_FETCHERS];
    size_t nretry_workers;
    uint64_t *local_pending; /* local split ids with positions left to submit, FIFO */
    size_t nlocal_pending, caplocal;

    /* consumer only */
    cl_order_t orders[CL_ORDER_CACHE];
    sl_unit_stat_t unit_stats[SL_PIPE_MAX_UNITS];
    char last_error[512];
    double t_start, wait_sec;
    uint64_t from_local, from_remote;
    char first_skip[256];
    uint64_t local_epoch, local_pos; /* local mode: the next position to run */
};

/* ranks.c: multi-rank jobs (docs/protocol.md "Multi-rank jobs"). */
/* Applies opts' rank / world_size to job->spec. */
int cl_ranks_apply(struct sluice_job *job, const sluice_options_t *opts, char *err,
                   size_t errlen);
/* The job name to submit: opts->job_name, or one derived from the spec
 * without its rank (equal for every rank of the same spec and source). */
void cl_ranks_job_name(const struct sluice_job *job, char *buf, size_t len);
/* A re-attached rank: declares epochs from the resume epoch on and marks
 * what the dispatcher says is acknowledged as delivered. */
int cl_ranks_resume(struct sluice_job *job, const Sluice__SubmitJobResponse *r, char *err,
                    size_t errlen);
/* job.c: one step of the consumer's work; waits briefly when idle. */
int cl_job_pump(struct sluice_job *job, uint64_t *local_epoch, uint64_t *local_pos);
/* control.c */
int cl_control_start(struct sluice_job *job);
void cl_control_stop(struct sluice_job *job);
/* Pure: the next restart delay after cur ms (0 = none yet): CL_BACKOFF_MIN_MS
 * doubling up to CL_BACKOFF_MAX_MS. */
int cl_backoff_next(int cur);
/* fetch.c */
void *cl_fetch_main(void *arg);
void cl_msg_free(cl_msg_t *m); /* NULL ok */
/* split_table.c: the live split table, called with job->mu held */
cl_split_t *cl_split_find(struct sluice_job *job, uint64_t id);
cl_split_t *cl_split_add(struct sluice_job *job, uint64_t id);
void cl_split_remove(struct sluice_job *job, cl_split_t *s);
/* Queues the ack once every position of s is done (job->mu held). */
void cl_split_check_done(struct sluice_job *job, cl_split_t *s);
/* Multi-rank: queues s for AckSplits.received_split_ids once every sample
 * of it is in the batcher (job->mu held; no-op for a single consumer). */
void cl_split_check_received(struct sluice_job *job, cl_split_t *s);

#endif
