/* overhead: the client's CPU per sample outside the units it runs
 * (receiving, batching, reading, control), as ReportRates carries it to the
 * planner (docs/planner.md "Inputs": the sample overhead). Samples are
 * counted as the batcher takes them, so a batch held open by one late
 * sample does not charge its CPU to the window that delivers it.
 *
 * Measured over a plan version's recent report windows, not one window:
 * samples reach the consumer in batches (a 1 s window at ~200 samples/s
 * holds 2-4 batches of 64) while the CPU is spent evenly, so one window's
 * figure swung between 0.01 and 0.76 ms on one plan, and the dispatcher
 * caches the last figure for the next job of the spec. Each older window
 * weighs 1 - 1 / CL_OVERHEAD_WINDOW_REPORTS less (~30 s of memory: the
 * figure still follows a host that gets busier). A new plan version starts
 * a new window, because the dispatcher prices the overhead under the plan
 * it was measured on.
 *
 * Pure arithmetic. Not thread-safe: one owner (the control thread). */
#ifndef CL_OVERHEAD_H
#define CL_OVERHEAD_H

#include <stdint.h>

/* Reported once the window holds this many samples (0 before). */
#define CL_OVERHEAD_MIN_SAMPLES 50
#define CL_OVERHEAD_WINDOW_REPORTS 30.0

typedef struct cl_overhead_s {
    uint32_t version; /* the plan version the sums belong to */
    double cpu;       /* CPU seconds outside the units, aged */
    double samples;   /* samples taken, aged */
} cl_overhead_t;

/* Adds one report window (samples taken, CPU seconds outside the units;
 * a negative CPU counts as 0) measured under plan `version`. Returns the
 * overhead in CPU seconds per sample, or 0 while the window holds fewer than
 * CL_OVERHEAD_MIN_SAMPLES. */
double cl_overhead_add(cl_overhead_t *o, uint32_t version, double samples, double cpu);

/* The overhead a sample-sized probe measured (issue 39 part 4, profile.c):
 * cpu seconds of Sluice's threads while `bytes` arrived in messages of
 * samples of sample_bytes, per sample, beyond what the model already charges
 * per byte received (recv_per_byte x sample_bytes): the fixed per-message
 * and per-sample part under the client's real quota. Never negative (a
 * per-byte figure taken from larger chunks may already cover it). Returns 0
 * with *ret_sec set, or -EINVAL when nothing was measured (no bytes, a
 * sample under a byte, a CPU figure not finite or negative). */
int cl_overhead_from_probe(double cpu, double bytes, double sample_bytes, double recv_per_byte,
                           double *ret_sec);

#endif
