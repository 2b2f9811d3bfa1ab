/* tasks: the worker's jobs and their assigned splits.
 *
 * Threads:
 *  - the control thread (control.c) adds jobs, assignments, closes and
 *    revocations from heartbeat replies and reads reports for heartbeats;
 *  - one runner thread per job (runner.c) opens the job's source, owns
 *    the job's executor (common/engine/executor.h, whose owner must be one thread),
 *    submits the positions of its splits in assignment order and packs
 *    finished samples into Batch messages (msg.h) in the job's output queue;
 *  - Fetch stream threads (stream.c) take messages from the output queue;
 *  - the HTTP thread reads snapshots.
 * Locks: tasks->mu (the job table) before job->mu, never the other way.
 * Nobody polls: every wait is on a condition that whoever changes what it
 * waits for broadcasts, bounded only by a caller's deadline.
 *
 * A job's state (wk_job_state_e) moves LOADING -> READY when its source is
 * open; LOADING or READY -> FAILED when it is refused or breaks here; any
 * state -> CLOSED when the dispatcher closes it or the worker stops.
 *
 * Bounds: at most WK_MAX_JOBS jobs run at a time, WK_MAX_SPLITS_PER_JOB splits
 * wait per job, samples in flight over all jobs <= 2 x threads, shared
 * fairly among the jobs that have work and buffer room (wk_fair_share: a
 * job with a full buffer holds none, so a slow consumer's job -- one rank
 * of a multi-rank job -- never starves another), and a job's
 * output queue plus its in-flight samples stay within buffer_bytes (the
 * estimate for an in-flight sample is a running average of finished ones; a
 * job with nothing buffered and nothing in flight may always submit one, so
 * one oversized sample cannot stall it). */
#ifndef WK_TASKS_H
#define WK_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "common/pcache/pcache.h"
#include "common/remote/remote.h"
#include "proto/sluice.pb-c.h"
#include "worker/msg.h"

#define WK_MAX_JOBS 64
#define WK_MAX_FAILED_JOBS 1024
#define WK_MAX_SPLITS_PER_JOB 4096
#define WK_MAX_SENT 4096 /* sent splits remembered until a heartbeat reports them */
#define WK_UNIT_NAME_MAX 96

typedef struct wk_tasks_s wk_tasks_t;
typedef struct wk_job_s wk_job_t;

typedef enum {
    WK_JOB_LOADING = 0, /* runner is opening the source */
    WK_JOB_READY,       /* running splits */
    WK_JOB_FAILED,      /* spec or source refused: reported in failed_jobs, runs nothing */
    WK_JOB_CLOSED,      /* closed by the dispatcher or the worker is stopping */
} wk_job_state_e;

/* Test-only fault injection (docs/protocol.md): all zero in production.
 * main reads them once from the environment (SLUICE_TEST_CORRUPT_COMPRESSED=1,
 * SLUICE_TEST_CORRUPT_RECORDS=1) so that no job start looks at it; a unit
 * test sets them here directly. */
typedef struct wk_faults_s {
    int corrupt_compressed; /* damage every compressed payload (wk_sample_compress) */
    int corrupt_records;    /* damage the first field header of every finished record */
} wk_faults_t;

typedef struct wk_tasks_opts_s {
    const char *data_root;
    unsigned threads;         /* pool threads per job executor, >= 1 */
    size_t buffer_bytes;      /* per job */
    size_t max_message_bytes; /* per Batch message */
    const struct sl_plugins_s *plugins; /* the plugin_dir's stages, NULL = none; outlives */
    wk_faults_t faults;                 /* test-only; zero in production */
    const sl_remote_t *remote; /* URL sources (remote_roots, cache); NULL: refused; outlives */
    /* The prefix cache's store (<cache_dir>/samples, docs/cache.md); NULL:
     * no prefix cache. Outlives the tasks. */
    struct sl_cache_s *samples;
} wk_tasks_opts_t;

wk_tasks_t *wk_tasks_new(const wk_tasks_opts_t *o);
/* Stops (if not yet), waits for every runner thread, frees. Stream threads
 * must be gone (rpc server freed) before. NULL ok. */
void wk_tasks_free(wk_tasks_t *t);
/* SIGTERM, in this order (docs/protocol.md "Leaving"):
 *  1. begin_drain: no new splits are accepted (assignments are ignored);
 *     queued and running ones finish and streams keep serving.
 *  2. quiesce (after the drain, or at once): every job's unfinished work is
 *     dropped, so the final heartbeat reports nothing in progress; streams
 *     stay open.
 *  3. stop: takes no more jobs, closes every job. A job's stream ends OK
 *     ("worker left") when nothing of it was dropped in 2 or 3, else
 *     UNAVAILABLE; in-flight samples are discarded.
 * stop alone does 2 and 3. Any thread. */
void wk_tasks_begin_drain(wk_tasks_t *t);
void wk_tasks_quiesce(wk_tasks_t *t);
void wk_tasks_stop(wk_tasks_t *t);

/* ---- control thread: apply a heartbeat reply. Peer input is validated here;
 * anything invalid is logged and ignored. */
void wk_tasks_add_job(wk_tasks_t *t, const Sluice__JobSpec *js);
void wk_tasks_assign(wk_tasks_t *t, const Sluice__SplitAssignment *a);
void wk_tasks_close_job(wk_tasks_t *t, uint64_t job_id);
/* Drops the split (queued, running or buffered) of that job only: split ids
 * are unique within a job. */
void wk_tasks_revoke(wk_tasks_t *t, uint64_t job_id, uint64_t split_id);

/* What a heartbeat reports. Unit stats are summed by unit name over jobs. */
typedef struct wk_unit_report_s {
    char name[WK_UNIT_NAME_MAX];
    double cpu_sec;
    uint64_t out_bytes;
    uint64_t samples;
} wk_unit_report_t;

/* A split named by job (split ids repeat across jobs) and by the
 * dispatcher's hand-out of it (SplitAssignment.assignment, echoed back). */
typedef struct wk_split_ref_s {
    uint64_t job_id, split_id, assignment;
    int cached; /* sent refs: it ran through the job's prefix cache (its entries are here) */
} wk_split_ref_t;

typedef struct wk_tasks_report_s {
    uint64_t *known_jobs;
    size_t n_known;
    wk_split_ref_t *splits; /* queued, running, buffered or being sent */
    size_t n_splits;
    /* Splits whose last message went out since the last report_done (and
     * that the worker does not hold again); sent_seq is internal. */
    wk_split_ref_t *sent;
    uint64_t *sent_seq;
    size_t n_sent;
    uint64_t *failed_jobs;
    size_t n_failed;
    char failure[512]; /* the reasons, "job N: why; ..." */
    uint64_t buffered_bytes;
    uint64_t bytes_sent; /* worker-wide, since start */
    wk_unit_report_t *units;
    size_t n_units;
    /* Prefix caches' growth since the last report_done, per job. */
    uint64_t *cache_jobs;
    sl_pcache_stats_t *cache;
    size_t n_cache;
} wk_tasks_report_t;

int wk_tasks_report(wk_tasks_t *t, wk_tasks_report_t *ret); /* 0 or -ENOMEM */
/* The heartbeat carrying r succeeded: its sent splits are forgotten. */
void wk_tasks_report_done(wk_tasks_t *t, const wk_tasks_report_t *r);
void wk_tasks_report_free(wk_tasks_report_t *r);

/* ---- HTTP thread: one row per job for /status. */
typedef struct wk_job_info_s {
    uint64_t job_id;
    wk_job_state_e state;
    char reason[1024];
    char source[128];
    uint64_t num_samples;
    uint32_t nunits;
    size_t splits_queued;
    size_t splits_running;
    uint64_t buffered_bytes;
    size_t buffered_msgs; /* queued for the stream, plus the one being sent */
    unsigned inflight;
    uint64_t samples_done;
    uint64_t samples_skipped;
    uint64_t splits_done;
    uint64_t msgs_sent;
    uint64_t streams;        /* Fetch streams served so far */
    uint64_t streams_broken; /* of which ended abnormally */
    int stream_attached;
    uint32_t cache_prefix;   /* units cached (docs/cache.md), 0: the job caches nothing */
    sl_pcache_stats_t cache; /* its prefix cache's counters */
} wk_job_info_t;

/* Worker-wide counters since start, closed jobs included. */
typedef struct wk_totals_s {
    uint64_t jobs;            /* job specs accepted */
    uint64_t samples_done;    /* processed (delivered or skipped) */
    uint64_t samples_skipped;
    uint64_t splits_done;
    uint64_t msgs_sent;
    uint64_t bytes_sent; /* packed Batch bytes sent to clients */
    uint64_t streams_broken;
    uint64_t early_fetches; /* Fetch streams that arrived before their job */
    uint64_t sent_unprocessed; /* too big to send processed: sent raw (msg.c) */
    sl_pcache_stats_t cache;   /* every job's prefix cache, closed jobs included */
} wk_totals_t;

void wk_tasks_totals(wk_tasks_t *t, wk_totals_t *ret);

/* News worth an early heartbeat: a split's last message went out (the
 * reply hands out the next split), or a Fetch came for a job this worker
 * has not been told about (the reply brings it). fn runs on the thread
 * that made the news, under the tasks' locks, so it may only set a flag and
 * signal. Replaces the previous fn (NULL: none); once this returns the old
 * one is not running. Any thread. */
typedef void (*wk_tasks_news_fn)(void *arg);
void wk_tasks_on_news(wk_tasks_t *t, wk_tasks_news_fn fn, void *arg);

/* Fills up to max rows; returns the number of jobs (may exceed max). */
size_t wk_tasks_snapshot(wk_tasks_t *t, wk_job_info_t *rows, size_t max);
const char *wk_job_state_name(wk_job_state_e s);

/* ---- Fetch stream threads. */
typedef enum {
    WK_ATTACH_OK = 0,
    WK_ATTACH_NOT_FOUND,     /* no such job after waiting */
    WK_ATTACH_FAILED,        /* the job failed here; why says so */
    WK_ATTACH_BUSY,          /* another stream serves the job */
    WK_ATTACH_SHUTTING_DOWN, /* the worker is stopping */
    WK_ATTACH_DENIED,        /* wrong or missing job secret: the job is left as it was */
} wk_attach_e;

/* Finds the job, waiting up to wait_ms for it to appear (the heartbeat that
 * carries its spec may lag the client), checks secret (NULL = none) against
 * the job's capability hash, and only then makes the caller its one Fetch
 * stream (so a stranger never holds the slot the owner needs); a second
 * stream waits up to wait_ms for the first to end. On OK *ret_job holds a
 * reference released by wk_job_detach. */
wk_attach_e wk_tasks_attach(wk_tasks_t *t, uint64_t job_id, const char *secret, int wait_ms,
                            wk_job_t **ret_job, char *why, size_t whylen);

typedef enum {
    WK_NEXT_MSG = 0,   /* *ret_msg holds a message (the caller owns it) */
    WK_NEXT_TIMEOUT,   /* nothing within wait_ms */
    WK_NEXT_CLOSED,    /* the dispatcher closed the job: end the stream OK */
    WK_NEXT_LEFT,      /* the worker stopped with nothing of the job lost: end OK */
    WK_NEXT_STOPPING,  /* the worker is shutting down and dropped work of the job */
    WK_NEXT_FAILED,    /* the job failed here (source mismatch...): FAILED_PRECONDITION */
} wk_next_e;

/* The popped message counts as in progress (heartbeats) until
 * wk_job_note_sent or wk_job_detach. */
wk_next_e wk_job_next_msg(wk_job_t *job, int wait_ms, wk_msg_t **ret_msg);
/* Job state without waiting (WK_NEXT_TIMEOUT = still open). */
wk_next_e wk_job_poll_state(wk_job_t *job);
/* Accounting after a message went out; the split's last message puts it in
 * the next heartbeat's `sent`. */
void wk_job_note_sent(wk_job_t *job, const wk_msg_t *m);
/* Why the job failed ("" if it did not). */
void wk_job_reason(wk_job_t *job, char *buf, size_t len);
/* Ends the caller's stream. broken = the stream ended abnormally: every
 * buffered message and unfinished split of the job is dropped (the client
 * asks the dispatcher to retry them; docs/protocol.md). Releases the ref. */
void wk_job_detach(wk_job_t *job, int broken, const char *why);
uint64_t wk_job_id(const wk_job_t *job);

/* Pure helpers, exposed for unit tests. */
/* May a job with `buffered` bytes queued (drainable by the stream), `partial`
 * bytes in unfinished messages and `inflight` samples of estimated
 * `est` bytes each submit one more under `limit`? */
int wk_budget_allows(size_t buffered, size_t partial, unsigned inflight, size_t est,
                     size_t limit);
/* A job's share of the worker-wide in-flight bound `cap` while `nwant` jobs
 * have work and buffer room: cap / nwant rounded up (>= 1; all of it for
 * one). A job above its share submits nothing until it is below. */
unsigned wk_fair_share(unsigned cap, unsigned nwant);

#endif
