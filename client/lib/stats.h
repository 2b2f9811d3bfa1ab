/* stats: what a job reports. The public half is sluice_get_stats and
 * sluice_skip_counts (client/lib/sluice.h). The half declared here is
 * internal: the `sluice` CLI's view of what its --json and text summaries
 * print beyond the public stats. It is not exported from libsluice.so
 * (libsluice.map); the CLI links the static library. Same thread rules as
 * the public calls: the job's caller. */
#ifndef CL_STATS_H
#define CL_STATS_H

#include <stdint.h>

#include "client/lib/sluice.h"
#include "common/engine/pipeline.h"

typedef struct cl_job_info_s {
    uint32_t epochs;
    char first_skip[256];                        /* "" = nothing skipped */
    char failed_on[256];                         /* on_error "fail": the bad sample, or "" */
    uint32_t nunits;
    const char *unit_names[SL_PIPE_MAX_UNITS];   /* the job's; valid until sluice_close */
    sl_unit_stat_t units[SL_PIPE_MAX_UNITS];     /* measured on this host so far */
    /* The prefix cache of this host's own samples (docs/cache.md): units
     * cached (0: none) and its counters (common/pcache/pcache.h). */
    uint32_t cache_prefix;
    uint64_t cache_hits, cache_misses, cache_bytes_read, cache_bytes_written, cache_evictions,
        cache_bytes_evicted, cache_store_errors, cache_corrupt;
    uint64_t cache_waited, cache_claim_timeouts; /* concurrent fillers (pclaim.h) */
    /* The same counters of the job's workers, as the dispatcher last said
     * (remote jobs; in the order above, from hits). */
    uint64_t workers_cache[8];
} cl_job_info_t;

void cl_job_info(const sluice_job_t *job, cl_job_info_t *ret);

#endif
