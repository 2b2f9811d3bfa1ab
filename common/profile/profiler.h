/* profiler: runs a pipeline's units on a few samples of the job's own data
 * on the calling thread and sums per-unit thread CPU time and output bytes
 * (the planner's per-stage profile, docs/planner.md), fitting the cost model
 * on the way. The client and the workers run the same code on the same
 * sample indices. Nothing here logs; samples are read through the source. */
#ifndef SL_PROFILER_H
#define SL_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "common/cost/costmodel.h"
#include "common/data/source.h"
#include "common/engine/pipeline.h"
#include "common/spec/spec.h"

#define SL_PROFILE_MAX_SAMPLES 1024
#define SL_PROFILE_DEFAULT_SAMPLES 200
#define SL_PROFILE_DEFAULT_MS 2000

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
    /* The wire codec at every boundary k = 0..nunits (k = output of unit
     * k - 1), filled by sl_profile_codec: sums over codec_samples samples.
     * Boundary 0 (encoded bytes) is never compressed: packed = raw. */
    uint64_t codec_samples;
    uint64_t codec_raw[SL_PIPE_MAX_UNITS + 1];    /* bytes before */
    uint64_t codec_packed[SL_PIPE_MAX_UNITS + 1]; /* after (raw when it would not shrink) */
    double codec_compress_sec[SL_PIPE_MAX_UNITS + 1];   /* thread CPU */
    double codec_decompress_sec[SL_PIPE_MAX_UNITS + 1]; /* thread CPU */
} sl_profile_t;

/* n evenly spread indices of a source of `total` samples (fewer when the
 * source is smaller). Returns how many were written. */
size_t sl_profile_pick(uint64_t total, size_t n, uint64_t *ret_indices);

/* Runs units [0, nunits) of p on each index (epoch 0) on this thread until
 * done or max_ms of wall time (<= 0: SL_PROFILE_DEFAULT_MS) has passed,
 * counted after an untimed warm-up sample and never before the first timed
 * one; n <= SL_PROFILE_MAX_SAMPLES. Returns 0 (failed samples are counted, not
 * errors), -EINVAL for bad arguments, -ENOMEM. */
int sl_profile_run(const sl_pipeline_t *p, const sl_source_t *src, const uint64_t *indices,
                   size_t n, int max_ms, sl_profile_t *ret, char *err, size_t errlen);

/* Samples the codec pass runs at most. */
#define SL_PROFILE_CODEC_SAMPLES 8

/* The codec pass, after sl_profile_run on the same pr: runs the first
 * SL_PROFILE_CODEC_SAMPLES of the indices that read and run, one unit at
 * a time, and at every boundary compresses the tensor as a worker would
 * (sl_codec_for_tensor) and decompresses it, summing bytes and thread CPU
 * into pr's codec_* fields. Does not touch the unit costs. Returns 0
 * (failed samples are skipped), -EINVAL, -ENOMEM, or -EBADMSG when the
 * codec does not round-trip. */
int sl_profile_codec(const sl_pipeline_t *p, const sl_source_t *src, const uint64_t *indices,
                     size_t n, sl_profile_t *pr, char *err, size_t errlen);

/* Raw over compressed bytes at boundary k of a profile: 1 when not
 * measured or never compressed. */
double sl_profile_codec_ratio(const sl_profile_t *pr, uint32_t k);

/* A hash of what makes a job's per-sample cost: the canonical spec with
 * everything that does not change it (epochs, offload, batching, seed,
 * order) normalised, mixed with the data set fingerprint. The profile
 * cache key with the host. */
uint64_t sl_spec_cost_hash(const sl_spec_t *spec, uint64_t fingerprint);

#endif
