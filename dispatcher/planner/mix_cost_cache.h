/* mix_cost_cache: a mixed job's per-source costs (PlannerInputs.mix_sources)
 * kept by (spec hash, client host) for the profile cache's hour, like the
 * blend's profile (profile_cache.c): a re-submitted auto job of the same
 * mix on the same host gets them back in PlanContextResponse and does not
 * profile its sources again (docs/mixing.md "Costs per source"). Costs
 * that came from the cache are not stored again (their age would reset
 * forever). Under the dispatcher mutex. */
#ifndef DISP_MIX_COST_CACHE_H
#define DISP_MIX_COST_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec/mix.h"
#include "dispatcher/planner/planner.h"
#include "proto/sluice.pb-c.h"

#define DISP_MCACHE_MAX 32
#define DISP_MCACHE_HOST_MAX 256

typedef struct disp_mcost_s {
    char name[SL_MIX_NAME_MAX];
    double unit_sec[DISP_PL_MAX_UNITS];
    double bytes[DISP_PL_MAX_UNITS + 1];
    double read_sec;
    uint64_t samples;
    double profiled_share;
} disp_mcost_t;

typedef struct disp_mcache_entry_s {
    int used;
    uint64_t spec_hash;
    char host[DISP_MCACHE_HOST_MAX];
    int64_t stored_ms, used_ms;
    uint32_t nsources, nunits;
    disp_mcost_t src[SL_MIX_MAX_SOURCES];
} disp_mcache_entry_t;

typedef struct disp_mcache_s {
    disp_mcache_entry_t e[DISP_MCACHE_MAX];
    uint64_t hits, misses;
} disp_mcache_t;

disp_mcache_t *disp_mcache_new(void);
void disp_mcache_free(disp_mcache_t *c); /* NULL ok */

/* Stores in's per-source costs for (in->spec_hash, in->client_host), the
 * least recently used entry making room. Nothing when in has none, came
 * from the cache (mix_sources_cached), names no host, or has more sources
 * or units than fit. in was checked against the job's mix (disp_pjob_new). */
void disp_mcache_put(disp_mcache_t *c, const Sluice__PlannerInputs *in, int64_t now_ms);

/* The fresh entry of (spec_hash, host), or NULL (counted as a hit or a
 * miss). */
const disp_mcache_entry_t *disp_mcache_get(disp_mcache_t *c, uint64_t spec_hash, const char *host,
                                           int64_t now_ms);

#endif
