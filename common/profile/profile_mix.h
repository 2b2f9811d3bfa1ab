/* profile_mix: what each source of a mixed job costs (docs/mixing.md
 * "Costs per source"). The job's profile (profiler.h) samples the blend, so
 * its per-sample costs are the mix's average; this profiles each source on
 * its own samples (evenly spread over it, the same indices on every host),
 * so a text-only source shows that it costs nothing to decode, and the
 * blend's cost at any weights is the share-weighted sum. */
#ifndef SL_PROFILE_MIX_H
#define SL_PROFILE_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "common/data/source.h"
#include "common/engine/pipeline.h"
#include "common/spec/mix.h"
#include "common/spec/spec.h"

typedef struct sl_profile_source_s {
    uint64_t samples;                   /* profiled */
    double cpu_sec;                     /* per sample, every unit */
    double unit_sec[SL_PIPE_MAX_UNITS]; /* per sample, by unit */
    double read_sec;                    /* per sample: reading it */
    double encoded_bytes;               /* per sample, at the source */
    double out_bytes;                   /* per sample, after the last unit */
    /* Per sample at each boundary k = 0..nunits (0: encoded; k: after unit
     * k - 1); a unit the source skips passes its bytes on unchanged. */
    double bytes[SL_PIPE_MAX_UNITS + 1];
} sl_profile_source_t;

typedef struct sl_profile_mix_s {
    uint32_t nsources, nunits;
    sl_profile_source_t src[SL_MIX_MAX_SOURCES];
} sl_profile_mix_t;

/* Profiles each source of spec's mix (resolved) on up to n / nsources of
 * its samples, within max_ms in all. -EINVAL for an unmixed spec, else
 * sl_profile_run's errors (err says which source). */
int sl_profile_mix(const sl_pipeline_t *p, const sl_source_t *src, const sl_spec_t *spec, size_t n,
                   int max_ms, sl_profile_mix_t *ret, char *err, size_t errlen);

/* The blend's per-sample CPU seconds at weights w (by source, not
 * normalized): sum_j w_j / sum(w) * cpu_sec_j. */
double sl_profile_mix_sec(const sl_profile_mix_t *pm, const double *w);

#endif
