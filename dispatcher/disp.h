/* disp: the dispatcher's whole state behind one mutex.
 *
 * Threads: RPC handlers (rpc pool threads), the status HTTP thread and the
 * main loop's periodic tick all take `mu` for the whole of their work on
 * registry and jobs. Under it nothing waits for the network or for another
 * thread. The one I/O under it is the journal's (--journal only): a
 * handler appends its record with write(2) but does not sync it; it waits
 * for durability after releasing `mu` (disp_jstate_wait, one fdatasync
 * shared by every handler waiting then) and answers only after. So other
 * threads may see a change before it is durable; a crash then loses only
 * unanswered changes, which the client retries. Compaction (the tick, once
 * the log passes 4 MiB or after a failed sync) writes and fsyncs the
 * snapshot under `mu`: a rare stall, and it keeps appends out of the
 * snapshot it writes. */
#ifndef DISP_DISP_H
#define DISP_DISP_H

#include <pthread.h>
#include <stdint.h>

#include "common/base/tenants.h"
#include "dispatcher/config.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/core/registry.h"

#define DISP_TICK_MS 100
#define DISP_LOST_PER_TICK 256 /* workers declared lost per tick (the rest next tick) */

typedef struct disp_s {
    pthread_mutex_t mu;
    disp_config_t cfg;     /* read-only after init except log_level (atomic in log.c) */
    disp_registry_t reg;
    disp_jobs_t jobs;
    int64_t start_ms;
    struct disp_pcache_s *pcache; /* planner profile cache (planner_job.h); owned */
    struct disp_mcache_s *mcache; /* mixes' per-source costs (mix_cost_cache.h); owned */
    struct disp_lcache_s *lcache; /* clients' link probes (link_cache.h); owned */
    struct disp_journal_s *journal; /* NULL = no --journal (journal_state.h); owned */
    int64_t journal_retry_ms;       /* broken journal: next snapshot attempt */
    /* Tenants and their limits (dispatcher/core/tenants.h), replaced whole on
     * SIGHUP under mu; the RPC server holds its own copy of the tokens. */
    sl_tenants_t tenants;
} disp_t;

/* first_id seeds both worker and job ids (disp_id_seed() in the daemon, a
 * small constant in tests). */
int disp_init(disp_t *d, const disp_config_t *cfg, uint64_t first_id, int64_t now_ms);
void disp_destroy(disp_t *d);

/* Periodic work (main loop, every DISP_TICK_MS): expire workers and clients,
 * re-queue lost splits, hand out pending splits, re-plan. Takes the mutex,
 * then waits for the journal records that work appended without it. */
void disp_tick(disp_t *d, int64_t now_ms);

/* A job whose submission could not be made durable must not exist: closes
 * job_id (if still open), journaling the close in case the job's record
 * reached the disk. Takes the mutex. */
void disp_drop_job(disp_t *d, uint64_t job_id, const char *reason, int64_t now_ms);

/* Monotonic milliseconds. */
int64_t disp_now_ms(void);
/* Ids that do not repeat across restarts (no journal yet): wall-clock
 * seconds << 20, below 2^53 so JSON readers keep them exact. */
uint64_t disp_id_seed(void);

#endif
