/* tasks_impl: the objects shared by the files of the tasks module (tasks.h).
 *   tasks.c   the job table: adds, assignments, closes, revocations, stop,
 *             attaching a Fetch stream, /status rows;
 *   job.c     one job: its lifetime, its state machine, dropping its work;
 *   job_out.c the Fetch stream's side of a job: messages out, detach;
 *   runner.c  one runner thread per job, and the worker-wide in-flight bound
 *             the runners share;
 *   report.c  what a heartbeat reports, and the splits sent since the last.
 * Locks, in this order: tasks->mu (the table) before job->mu; tasks->sent_mu
 * is a leaf, taken under either. */
#ifndef WK_TASKS_IMPL_H
#define WK_TASKS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/jobcap.h"
#include "common/base/ring.h"
#include "common/engine/pipeline.h"
#include "common/pcache/pcache.h"
#include "common/data/source.h"
#include "common/spec/spec.h"
#include "worker/msg.h"
#include "worker/tasks.h"

/* Cached epoch orders per job: splits of at most two epochs are outstanding
 * (docs/protocol.md), so two slots make a miss rare. */
#define WK_ORDER_SLOTS 2

typedef enum {
    WK_SPLIT_QUEUED = 0, /* nothing submitted yet */
    WK_SPLIT_RUNNING,    /* some positions submitted */
    WK_SPLIT_DROPPED,    /* revoked or its stream broke: finished samples are discarded */
} wk_split_state_e;

typedef struct wk_split_s {
    uint64_t id, epoch, begin, end;
    uint64_t assignment; /* the dispatcher's hand-out id, echoed in reports */
    uint32_t stage_to;
    int compress;        /* the assignment says compress (SplitAssignment.compress) */
    wk_split_state_e state;
    uint64_t next;      /* next position to submit */
    uint64_t finished;  /* samples back from the executor */
    unsigned inflight;  /* samples in the executor */
    int prefetched;     /* its URL shards were handed to the prefetcher (prefetch.c) */
    wk_packer_t pk;     /* its partial message */
    struct wk_split_s *next_split;
} wk_split_t;

/* A sample in the executor, so a finished one finds its split. Runner only. */
typedef struct wk_slot_s {
    uint64_t epoch, position;
    wk_split_t *split; /* NULL = free slot */
    int compress;      /* its split's compress, read by the runner outside the lock */
} wk_slot_t;

typedef struct wk_order_s {
    int valid;
    uint64_t epoch;
    uint64_t *order;
} wk_order_t;

struct wk_job_s {
    wk_tasks_t *tasks;
    uint64_t id;
    uint64_t fingerprint, num_samples; /* as the dispatcher sent them */
    int cache_off; /* the planner decided not to cache the prefix (JobSpec.cache_off) */
    /* The job's capability hash (JobSpec.secret_sha256), immutable after
     * add; has_cap 0: the dispatcher sent none (a job from an old journal). */
    uint8_t cap_hash[SL_JOBCAP_HASH];
    int has_cap;
    /* Bound of its buffer of finished batches: the worker's buffer_bytes,
     * or its tenant's max_buffered_bytes when lower (JobSpec). Immutable. */
    size_t buffer_bytes;
    sl_spec_t spec;                    /* immutable after add */
    sl_pipeline_t *pipe;               /* immutable after add; NULL when FAILED at add */
    uint32_t nunits;
    sl_source_t *src; /* set by the runner before READY, then immutable */
    float *tcost;     /* balanced batching: per-sample predictions, as src */
    uint32_t *ttok;
    uint32_t *ttiles;

    pthread_mutex_t mu; /* guards everything below */
    /* Broadcast on every change a waiter may need: state, assignments,
     * output, room in the buffer, stream detach, a worker-wide slot given
     * back to a held job. Waited on by the runner, the stream and attach. */
    pthread_cond_t cv;
    int refs;
    wk_job_state_e state; /* changed only by wk_job_transition_locked */
    int stopping;      /* CLOSED because the worker stops */
    int lost_work;     /* quiesce/stop dropped some of its work (stream: UNAVAILABLE) */
    int sending;       /* the stream thread holds a popped message of sending_split */
    uint64_t sending_split, sending_assignment;
    char reason[1024]; /* why FAILED */
    /* FAILED only because the data server at down_url was unreachable: the
     * runner probes it and may move the job back to READY (job_revive.c);
     * revivals: how often it did. */
    int down;
    unsigned revivals;
    char down_url[2048];
    int probe_cancel;                 /* set (atomic) when the job closes: a running probe stops */
    wk_split_t *splits, *splits_tail; /* QUEUED and RUNNING, assignment order */
    size_t nsplits;
    wk_split_t *dropped; /* DROPPED with samples still in flight */
    wk_msglist_t out;    /* finished messages for the stream */
    size_t partial_bytes; /* sum of the splits' partial messages */
    unsigned inflight;
    size_t est_bytes;     /* running average of a finished sample's wire bytes */
    int stream_attached;
    /* The runner has work and room but every worker-wide slot is taken and
     * none of its samples is in flight: a slot given back wakes it. */
    int held;
    sl_unit_stat_t units[SL_PIPE_MAX_UNITS];
    /* The prefix cache (docs/cache.md): the runner's, NULL when the job
     * caches nothing; its counters as of the last stats copy. */
    struct sl_pcache_s *pc;
    uint32_t pc_prefix;
    sl_pcache_stats_t pcs;
    sl_pcache_stats_t pcs_reported; /* what a successful heartbeat carried so far */
    uint64_t samples_done, samples_skipped, splits_done, msgs_sent, streams, streams_broken;

    /* Runner thread only. */
    int wants; /* counted in tasks->nwant: has work and buffer room */
    wk_order_t orders[WK_ORDER_SLOTS];
    wk_slot_t *slots;
    unsigned nslots;
    struct sl_codec_s *codec; /* runner's: spec "compress" or a split's assignment */

    wk_job_t *next_job; /* table link, under tasks->mu */
};

/* A split whose last message went out, numbered in sending order. */
typedef struct wk_sent_s {
    wk_split_ref_t ref;
    uint64_t seq;
} wk_sent_t;

struct wk_tasks_s {
    char data_root[4096];
    unsigned threads;
    unsigned inflight_cap; /* over all jobs */
    size_t buffer_bytes;
    size_t max_message_bytes;
    const struct sl_plugins_s *plugins; /* NULL = no plugin_dir */
    wk_faults_t faults;                 /* test-only, set once by wk_tasks_new, read by runners */
    const sl_remote_t *remote;          /* URL sources; NULL: refused (not owned) */
    struct sl_cache_s *samples;         /* the prefix cache's store; NULL: none (not owned) */

    pthread_mutex_t mu; /* the table, runners, stopping */
    pthread_cond_t cv;  /* a job was added, a runner ended, stopping */
    wk_job_t *jobs;
    size_t njobs;
    unsigned runners;
    int stopping;

    atomic_int draining;  /* no new splits (SIGTERM) */
    atomic_uint inflight; /* samples in flight over all jobs */
    /* Jobs that could submit now (work queued, room in their buffer): the
     * in-flight bound is shared among them (wk_fair_share), so no job --
     * say one rank of a multi-rank job -- waits for another's whole queue,
     * and a job whose buffer is full holds no share. */
    atomic_uint nwant;
    atomic_uint nheld; /* jobs with job->held set */

    /* Splits whose last message went out, until a heartbeat reports them
     * (a ring of wk_sent_t of WK_MAX_SENT, seq increasing; the oldest goes
     * when full), and who hears of news (wk_tasks_on_news). */
    pthread_mutex_t sent_mu;
    sl_ring_t sent;
    uint64_t next_sent_seq;
    wk_tasks_news_fn news_fn;
    void *news_arg;
    /* Worker-wide counters for /status; bumped next to the job's own. */
    atomic_uint_fast64_t n_jobs, n_samples, n_skipped, n_splits, n_msgs, n_broken;
    atomic_uint_fast64_t n_early_fetches; /* Fetch streams that came before their job */
    /* The prefix caches' counters, each job's increments added as the
     * runner copies its stats (sl_pcache_stats_t's fields in order). */
    atomic_uint_fast64_t pc_tot[8]; /* + bytes_evicted */
    /* the same, for the claims' counters */
    atomic_uint_fast64_t pc_waited, pc_claim_timeouts;
    atomic_uint_fast64_t n_bytes_sent; /* packed Batch bytes handed to streams */
    atomic_uint_fast64_t n_unprocessed; /* samples too big to send processed, sent raw */
};

/* ---- job.c */
/* A new job with one reference (the caller's): LOADING, or FAILED when its
 * spec does not parse or compile. NULL when out of memory. */
wk_job_t *wk_job_new(wk_tasks_t *t, const Sluice__JobSpec *js);
void wk_job_ref(wk_job_t *job);
void wk_job_unref(wk_job_t *job); /* frees with the last reference */
/* The only place job->state changes (job->mu held). The moves:
 *   LOADING -> READY              the runner has opened the source
 *   LOADING, READY -> FAILED      refused or broken here (wk_job_fail)
 *   FAILED -> READY               only a job down for its data server
 *                                 whose server answers again (job_revive.c)
 *   LOADING, READY, FAILED -> CLOSED   the dispatcher closed it, or the
 *                                 worker stops (wk_job_close_locked)
 * Entering FAILED or CLOSED drops all of the job's work; every move wakes
 * the job's waiters. Returns 0, or -EINVAL for a move the machine does not
 * have (nothing changes). */
int wk_job_transition_locked(wk_job_t *job, wk_job_state_e to);
/* -> FAILED with the reason from fmt, logged once. Returns 0, or -EINVAL when
 * the job had already failed or closed (nothing is logged). Takes job->mu:
 * any thread, tasks->mu may be held. */
int wk_job_fail(wk_job_t *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ---- job_revive.c */
/* The first http(s):// or s3:// URL in text (a failure's message), without
 * the punctuation messages put after it. 0, -ENOENT, -ENAMETOOLONG. */
int wk_url_in_text(const char *text, char *url, size_t urllen);
/* The job just failed because its data server was unreachable (detail: the
 * read's error): note the URL to probe (job->mu held). */
void wk_job_note_down_locked(wk_job_t *job, const char *detail);
/* Runner thread, after the failed job's in-flight samples were drained:
 * probes its data server with a growing back-off until it answers (then
 * FAILED -> READY, returns 1) or the job closes or may not come back
 * (returns 0). Takes job->mu. */
int wk_job_revive_wait(wk_job_t *job);
/* Runner thread, a job that failed at its open for its data server: the
 * probes of wk_job_revive_wait, but the job stays FAILED when the server
 * answers (returns 1): the runner opens the source again, then calls
 * wk_job_revive_locked. 0: closed, or may not come back. Takes job->mu. */
int wk_job_probe_wait(wk_job_t *job);
/* FAILED (down) -> READY, the reason cleared (job->mu held): 0 or -EINVAL. */
int wk_job_revive_locked(wk_job_t *job);
/* The runner could not open the job's source: -> FAILED, or, FAILED by an
 * earlier open, its reason replaced. down: because the data server named
 * in why was unreachable (marked down, to be probed). 0, or -EINVAL when
 * the job is closed. Takes job->mu. */
int wk_job_fail_open(wk_job_t *job, int down, const char *why);
/* -> CLOSED unless it is (job->mu held); stopping: the worker is stopping. */
void wk_job_close_locked(wk_job_t *job, int stopping);
/* Takes an active split off the job's list (job->mu held). */
void wk_split_unlink_locked(wk_job_t *job, wk_split_t *sp);
/* Drops one active split (job->mu held): unlinked, its partial message
 * gone, its samples still in flight discarded when they come back. */
void wk_split_drop_locked(wk_job_t *job, wk_split_t *sp);
void wk_split_free(wk_split_t *sp); /* NULL ok */
/* Removes the buffered messages of one split (split_id) or of all (all = 1);
 * returns how many. job->mu held. */
size_t wk_job_drop_out_locked(wk_job_t *job, uint64_t split_id, int all);
/* Every split and buffered message goes (job->mu held). */
void wk_job_drop_all_locked(wk_job_t *job, size_t *ret_msgs, size_t *ret_splits);

/* ---- job_out.c */
/* Makes the caller the job's one Fetch stream, waiting until deadline
 * (sl_mono_sec) for another to detach. The caller holds a reference. */
wk_attach_e wk_job_attach_stream(wk_job_t *job, double deadline, char *why, size_t whylen);

/* ---- runner.c */
/* The job's runner thread (detached); owns one reference, which it drops
 * at the end, and counts itself out of tasks->runners. */
void *wk_runner_main(void *arg);

/* ---- report.c */
int wk_sent_init(wk_tasks_t *t);  /* 0 or -ENOMEM */
void wk_sent_free(wk_tasks_t *t);
/* Remembers a split whose last message went out, and tells the news (any
 * thread, sent_mu not held). */
void wk_sent_add(wk_tasks_t *t, uint64_t job_id, uint64_t split_id, uint64_t assignment,
                 int cached);
/* Tells the news (sent_mu not held). */
void wk_news(wk_tasks_t *t);

#endif
