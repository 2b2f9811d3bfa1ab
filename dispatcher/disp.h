/* disp: the dispatcher's whole state behind one mutex.
 *
 * Threads: RPC handlers (rpc pool threads), the status HTTP thread and the
 * main loop's periodic tick all take `mu` for the whole of their work on
 * registry and jobs; nothing under it blocks or does I/O. */
#ifndef DISP_DISP_H
#define DISP_DISP_H

#include <pthread.h>
#include <stdint.h>

#include "dispatcher/config.h"
#include "dispatcher/jobs.h"
#include "dispatcher/registry.h"

#define DISP_TICK_MS 100
#define DISP_LOST_PER_TICK 256 /* workers declared lost per tick (the rest next tick) */

typedef struct disp_s {
    pthread_mutex_t mu;
    disp_config_t cfg;     /* read-only after init except log_level (atomic in log.c) */
    disp_registry_t reg;
    disp_jobs_t jobs;
    int64_t start_ms;
    struct disp_pcache_s *pcache; /* planner profile cache (planner_job.h); owned */
    struct disp_journal_s *journal; /* NULL = no --journal (journal_state.h); owned */
} disp_t;

/* first_id seeds both worker and job ids (disp_id_seed() in the daemon, a
 * small constant in tests). */
int disp_init(disp_t *d, const disp_config_t *cfg, uint64_t first_id, int64_t now_ms);
void disp_destroy(disp_t *d);

/* Periodic work (main loop, every DISP_TICK_MS): expire workers and clients,
 * re-queue lost splits, hand out pending splits. Takes the mutex. */
void disp_tick(disp_t *d, int64_t now_ms);

/* Monotonic milliseconds. */
int64_t disp_now_ms(void);
/* Ids that do not repeat across restarts (no journal yet): wall-clock
 * seconds << 20, below 2^53 so JSON readers keep them exact. */
uint64_t disp_id_seed(void);

#endif
