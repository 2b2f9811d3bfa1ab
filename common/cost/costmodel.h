/* costmodel: what a sample costs and what a host can give, measured.
 *
 *  - The profiler runs a pipeline's units on a few samples of the job's
 *    own data on the calling thread and sums per-unit thread CPU time and
 *    output bytes (the planner's per-stage profile, docs/planner.md). The
 *    client and the workers run the same code on the same sample indices.
 *  - The per-sample cost model (DFLOP's lesson): pipeline CPU seconds
 *    predicted from features read from the JPEG header without decoding --
 *    file size, pixels, progressive -- by a linear model fitted online from
 *    measured times (sufficient statistics, so adding a sample is O(1)).
 *  - Host facts: the CPU budget (affinity, cgroup v1/v2 quota) and the
 *    CPU model, which with the thread count names a worker's speed class.
 *
 * Nothing here logs. Profiling reads files through the source; everything
 * else is pure except the /proc and /sys readers. */
#ifndef SL_COSTMODEL_H
#define SL_COSTMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/engine/pipeline.h"
#include "common/data/source.h"
#include "common/spec/spec.h"

#define SL_PROFILE_MAX_SAMPLES 1024
#define SL_PROFILE_DEFAULT_SAMPLES 200
#define SL_PROFILE_DEFAULT_MS 2000

/* ------------------------------------------------------------ cost model */

typedef struct sl_cost_features_s {
    double kb;        /* encoded size, 1000 bytes */
    double mpix;      /* width * height / 1e6 from the header */
    int progressive;
} sl_cost_features_t;

/* The per-sample cost a client sends with SubmitJob (client/lib/costs.c) is
 * the encoded size plus this share of the mean size: the work that does
 * not grow with pixels. No file is opened for it, unlike the model below;
 * profiles report how far off both are. */
#define SL_COST_SIZE_OVERHEAD_SHARE 0.25

/* That cost of a sample of `bytes` in a set whose mean is mean_bytes. */
static inline double sl_cost_size_proxy(double bytes, double mean_bytes)
{
    return bytes + SL_COST_SIZE_OVERHEAD_SHARE * mean_bytes;
}

/* cost = c0 + c1 kb + c2 mpix + c3 mpix * progressive */
#define SL_COST_NPARAM 4

typedef struct sl_costmodel_s {
    double xtx[SL_COST_NPARAM][SL_COST_NPARAM];
    double xty[SL_COST_NPARAM];
    uint64_t n;
    double coef[SL_COST_NPARAM];
    int fitted;
} sl_costmodel_t;

/* Features of an encoded sample; a file the header probe refuses gets its
 * size only (mpix 0). */
void sl_cost_features(const uint8_t *buf, size_t len, sl_cost_features_t *ret);
/* The same from the first len bytes of a file of file_bytes (its header
 * is in the first few KB unless metadata comes first). */
void sl_cost_features_head(const uint8_t *buf, size_t len, uint64_t file_bytes,
                           sl_cost_features_t *ret);
/* How many bytes of a file sl_cost_features_head wants. */
#define SL_COST_HEAD_BYTES 65536
void sl_costmodel_init(sl_costmodel_t *m);
/* Adds one measured sample (seconds of pipeline CPU). */
void sl_costmodel_add(sl_costmodel_t *m, const sl_cost_features_t *f, double sec);
/* Solves the least squares (a tiny ridge keeps it defined when a feature
 * never varies). Returns 0, or -EDOM with fewer than 2 samples. */
int sl_costmodel_fit(sl_costmodel_t *m);
/* A model fitted elsewhere (a cached profile's coefficients): fitted, with
 * no statistics to add to. Refuses non-finite coefficients (-EINVAL). */
int sl_costmodel_set(sl_costmodel_t *m, const double *coef, size_t n);
/* Predicted seconds (never negative); the mean when not fitted. */
double sl_costmodel_predict(const sl_costmodel_t *m, const sl_cost_features_t *f);

/* ------------------------------------------------------------ profiler */

typedef struct sl_profile_s {
    uint32_t nunits;
    sl_unit_stat_t units[SL_PIPE_MAX_UNITS]; /* sums over profiled samples */
    double read_cpu_sec;                     /* sum over profiled samples */
    uint64_t encoded_bytes;                  /* sum over profiled samples */
    uint64_t samples;                        /* profiled (ran through every unit) */
    uint64_t failed;                         /* refused by a unit or unreadable: not counted */
    double seconds;                          /* wall time */
    sl_costmodel_t model;                    /* fitted on the profiled samples */
    double model_error; /* sum |predicted - measured| / sum measured; -1 = not fitted */
    /* The same for the size proxy (SL_COST_SIZE_OVERHEAD_SHARE), scaled to
     * the measured total: only ratios matter to the split cut. -1 = none. */
    double size_error;
} sl_profile_t;

/* n evenly spread indices of a source of `total` samples (fewer when the
 * source is smaller). Returns how many were written. */
size_t sl_profile_pick(uint64_t total, size_t n, uint64_t *ret_indices);

/* Runs units [0, nunits) of p on each index (epoch 0) on this thread until
 * done or max_ms of wall time (<= 0: SL_PROFILE_DEFAULT_MS) has passed;
 * n <= SL_PROFILE_MAX_SAMPLES. Returns 0 (failed samples are counted, not
 * errors), -EINVAL for bad arguments, -ENOMEM. */
int sl_profile_run(const sl_pipeline_t *p, const sl_source_t *src, const uint64_t *indices,
                   size_t n, int max_ms, sl_profile_t *ret, char *err, size_t errlen);

/* ------------------------------------------------------------ host facts */

/* CPUs this process may use: the affinity mask, capped by a cgroup v2
 * cpu.max or v1 cfs quota found on the way (the smallest wins). why gets a
 * short description of what limited it. Never below 0.01. */
double sl_cpu_budget(char *why, size_t whylen);
/* Parsers, exposed for tests: a v2 cpu.max line ("max 100000", "50000
 * 100000") and a v1 quota/period pair (quota -1 = none). Return the CPU
 * count, or 0 when unlimited or unparsable. */
double sl_cgroup_v2_cpus(const char *cpu_max);
double sl_cgroup_v1_cpus(long long quota_us, long long period_us);
/* "model name" (or equivalent) from /proc/cpuinfo, or "unknown". */
void sl_cpu_model(char *buf, size_t len);

/* A hash of what makes a job's per-sample cost: the canonical spec with
 * everything that does not change it (epochs, offload, batching, seed,
 * order) normalised, mixed with the data set fingerprint. The profile
 * cache key with the host. */
uint64_t sl_spec_cost_hash(const sl_spec_t *spec, uint64_t fingerprint);

#endif
