/* registry: the workers the dispatcher knows. Pure bookkeeping with the
 * caller's clock (now_ms, monotonic) so that tests drive time; not
 * thread-safe: the caller holds the dispatcher mutex (disp.h).
 *
 * A worker is LIVE from RegisterWorker until it has been silent for
 * worker_timeout_ms; then LOST (its splits are re-assigned: jobs.h) and
 * kept for DISP_LOST_LINGER_MS so /status can show it, then removed. A
 * draining worker (heartbeat leaving=true) stays LIVE with `leaving` set
 * (it gets no new splits) until a leaving heartbeat reports nothing in
 * progress; then it is LEFT, which lingers like LOST. A LOST or LEFT worker
 * that heartbeats is told known=false and registers again with a new id.
 * Workers are referenced elsewhere by id, never by pointer. */
#ifndef DISP_REGISTRY_H
#define DISP_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/cost/hostfacts.h"
#include "dispatcher/planner/planner_cache_cost.h"
#include "dispatcher/planner/plugins.h"

#define DISP_ADDR_MAX 256
#define DISP_LOST_LINGER_MS 60000
#define DISP_STAGE_STATS_MAX 32
#define DISP_NAME_MAX 64

typedef enum {
    DISP_WORKER_LIVE = 0,
    DISP_WORKER_LOST,
    DISP_WORKER_LEFT, /* deregistered after draining (SIGTERM) */
} disp_worker_state_e;

typedef struct disp_stage_stat_s {
    char name[DISP_NAME_MAX];
    double cpu_sec_per_sample;
    double out_bytes_per_sample;
    uint64_t samples;
} disp_stage_stat_t;

typedef struct disp_worker_s {
    uint64_t id;
    disp_worker_state_e state;
    char address[DISP_ADDR_MAX];  /* clients dial it for Fetch */
    char hostname[DISP_ADDR_MAX];
    uint32_t threads;
    int64_t registered_ms;
    int64_t last_heartbeat_ms;
    int64_t lost_ms;          /* when it became LOST or LEFT */
    int leaving;              /* draining: no new splits (heartbeat leaving=true) */
    double load;
    uint64_t buffered_bytes;
    uint64_t bytes_sent; /* the worker's own counter, as last reported */
    uint32_t in_progress;     /* splits_in_progress in the last heartbeat */
    uint32_t outstanding;     /* ASSIGNED splits over all jobs (kept by assign.c) */
    uint32_t hb_seq;          /* heartbeats answered (worker_reports.c resend rule) */
    disp_stage_stat_t stages[DISP_STAGE_STATS_MAX];
    uint32_t nstages;
    /* Where it runs (RegisterWorkerRequest; set by service_workers.c): machine ""
     * = unknown, its own machine; has_cpus 0 = CPU set not reported. */
    char machine_id[SL_MACHINE_ID_MAX];
    sl_cpuset_t cpus;
    int has_cpus;
    double cpu_budget;
    uint64_t cache_bytes; /* its prefix cache budget (RegisterWorker); 0 = none */
    /* Its prefix cache hits' read-back cost, from its heartbeats' timings
     * (planner_cache_cost.h): the planner prices reading an entry with it. */
    disp_pc_costwin_t pc_read;
    /* Its plugin_dir's stages (RegisterWorker; dispatcher/planner/plugins.h). */
    disp_plugin_t plugins[DISP_WORKER_PLUGINS_MAX];
    uint32_t nplugins;
} disp_worker_t;

typedef struct disp_registry_s {
    disp_worker_t **workers; /* owned; order of registration */
    size_t n, cap;           /* cap = max_workers (live + lingering lost) */
    /* id -> worker (linear probing, at most half full): a Heartbeat's
     * lookup must not walk thousands of workers under the main lock. */
    disp_worker_t **index;
    size_t index_mask;
    size_t nlive;
    uint64_t next_id;
    /* When the live count last dropped to 0 (or start-up): with no live
     * worker for worker_timeout_ms, remote splits fall back to clients. */
    int64_t no_live_since_ms;
    /* Batch bytes all workers sent to clients; grows by each heartbeat's
     * increase, so it survives workers leaving or restarting. */
    uint64_t bytes_sent_total;
    /* Every job's workers' prefix cache counters, closed jobs included
     * (docs/cache.md; disp_cache_stats_t's fields in order). */
    uint64_t cache_total[8]; /* + bytes_evicted */
} disp_registry_t;

/* first_id: the first id handed out (main seeds it from the wall clock so
 * ids from before a restart are not reused). */
int disp_registry_init(disp_registry_t *r, size_t max_workers, uint64_t first_id, int64_t now_ms);
void disp_registry_destroy(disp_registry_t *r);

/* Registers (or refreshes) a worker. want_id != 0 asks for that id back:
 * granted when it is LIVE with the same address (a retried register) or
 * unknown here (the dispatcher restarted); a LOST id gets a new one.
 * Returns 0, -ENOSPC when the table is full of live workers, -EINVAL for
 * an empty or overlong address. *ret_new is 1 when the id is new to us. */
int disp_registry_register(disp_registry_t *r, const char *address, const char *hostname,
                           uint32_t threads, uint64_t want_id, int64_t now_ms,
                           disp_worker_t **ret, int *ret_new);
disp_worker_t *disp_registry_find(disp_registry_t *r, uint64_t id);
/* LIVE worker with this id, or NULL. */
disp_worker_t *disp_registry_live(disp_registry_t *r, uint64_t id);

/* Marks workers silent for timeout_ms LOST; writes up to max of their ids
 * to lost_ids and returns how many (the rest are found on the next call:
 * each call marks at most max). Removes LOST entries older than the linger. */
size_t disp_registry_expire(disp_registry_t *r, int64_t now_ms, int64_t timeout_ms,
                            uint64_t *lost_ids, size_t max);
/* A draining worker that has nothing left: LIVE -> LEFT (no-op otherwise). */
void disp_registry_leave(disp_registry_t *r, disp_worker_t *w, int64_t now_ms);
/* Whether remote work should fall back to clients: no live worker for at
 * least timeout_ms. */
int disp_registry_no_workers(const disp_registry_t *r, int64_t now_ms, int64_t timeout_ms);

const char *disp_worker_state_name(disp_worker_state_e s);

/* Copies peer-supplied text for logs and /status: at most dstlen-1 bytes,
 * every byte outside printable ASCII replaced by '?' (no log injection, and
 * always valid JSON text). src NULL copies "". */
void disp_text_copy(char *dst, size_t dstlen, const char *src);
/* Whether addr is usable as a dial address: printable ASCII, no spaces. */
int disp_addr_ok(const char *addr);

#endif
