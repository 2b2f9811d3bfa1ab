/* persec: the client's per-second cost -- CPU it spends whatever its
 * sample rate: the control thread's 100 ms polls, acks and 1 s reports,
 * gRPC's timer and executor threads, and the consumer inside
 * sluice_next_batch, whose waits wake it every 10-100 ms (docs/planner.md
 * "A right first plan"). Under a 0.2-0.5 CPU quota it is a visible part of
 * the budget, and neither an idle-core profile nor a sample-sized probe sees
 * it (none of these threads runs while profiling). Measured on loopback
 * under a 0.25-CPU quota (`sluice bench --offload all`, thread clocks): the
 * control thread took 0.0046 CPU/s and the consumer's thread 0.0083 at 18
 * and at 137 samples/s alike (the fetch thread: 0.0026 and 0.018, per
 * sample).
 *
 * Measured where it is clean: those threads' clocks over wall time,
 * per report window, averaged over the windows (each older one weighing
 * 1 - 1 / CL_PERSEC_WINDOW_REPORTS less). Left out: the first window (the
 * job's start-up: connections, first assignments) and a saturated window,
 * where the process used CL_PERSEC_SATURATED of its budget or more -- a
 * throttled control thread runs its polls late and in bursts, so its CPU
 * over wall time says what the quota let it do, not what it costs.
 *
 * Pure arithmetic. Not thread-safe: one owner (the control thread). */
#ifndef CL_PERSEC_H
#define CL_PERSEC_H

#include <stdint.h>

#define CL_PERSEC_SATURATED 0.9
#define CL_PERSEC_SKIP_WINDOWS 1
/* Reported once this many windows entered (0 before). */
#define CL_PERSEC_MIN_WINDOWS 3
#define CL_PERSEC_WINDOW_REPORTS 30.0

typedef struct cl_persec_s {
    uint32_t seen;    /* windows offered */
    uint32_t entered; /* windows that entered the sums */
    double cpu;       /* CPU seconds of the time-driven threads, aged */
    double wall;      /* wall seconds, aged */
} cl_persec_t;

/* Offers one report window: cpu seconds the time-driven threads used in
 * wall seconds, while the whole process used proc_cpu seconds of a budget
 * of `budget` CPUs (0 = not known: the window is never called saturated).
 * A window with a wall time <= 0 or figures not finite or negative does
 * not enter. Returns the per-second cost in CPUs (CPU s per s), or 0 while
 * fewer than CL_PERSEC_MIN_WINDOWS windows entered. */
double cl_persec_add(cl_persec_t *s, double cpu, double wall, double proc_cpu, double budget);

/* 1 when a window of wall seconds in which the process used proc_cpu
 * seconds saturated a budget of `budget` CPUs (0 = unknown: never). */
int cl_persec_saturated(double proc_cpu, double wall, double budget);

#endif
