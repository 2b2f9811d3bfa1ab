/* profile_budget: the client's CPU budget when no cgroup tells it
 * (common/cost/hostfacts.h SL_BUDGET_UNKNOWN: inside some containers no
 * cgroup is visible, and a quota the process cannot see would otherwise be
 * taken for all of its CPUs). It is estimated from what the process gets
 * (docs/planner.md "Inputs", "Live re-planning"):
 *
 *  - At the start, for free: the profile pass runs one thread flat out.
 *    Its CPU time over wall time r is what a lone thread gets. Below
 *    CL_BUDGET_LONE_MAX something keeps it off a core -- a quota under one
 *    CPU, or neighbours -- and r is the estimate. Under a quota that is
 *    the quota; under contention alone it is low by at most the thread
 *    count (each of our threads would get about as much), which the live
 *    measurement corrects. At or above it nothing is known: no estimate
 *    (a quota of one CPU or more does not show on one thread).
 *  - While running, every report window: the process's CPU (every thread)
 *    and the time its threads were runnable but waited for a CPU (the
 *    kernel's run_delay per thread, /proc/self/task/TID/schedstat; it
 *    counts throttled time and time queued behind other tasks alike). A
 *    window whose threads wanted about as much CPU as the pipeline can use
 *    (runnable demand >= CL_BUDGET_DEMAND x the nominal budget) and waited
 *    for it (>= CL_BUDGET_WAITED of the runnable time) measured the budget
 *    directly: what the process got, quota or contention alike. Any other
 *    window only raises the estimate when the process got more than it
 *    (it did get that much): a busy but unthrottled host, where a lone
 *    thread was slowed, is corrected upwards as soon as the pipeline runs
 *    its threads.
 *
 * Pure arithmetic but cl_rundelay_sample (reads /proc). Not thread-safe:
 * one owner (the profiling thread, then the control thread). */
#ifndef CL_PROFILE_BUDGET_H
#define CL_PROFILE_BUDGET_H

#include <stdint.h>

/* A lone thread getting less than this of a core shows a limit. */
#define CL_BUDGET_LONE_MAX 0.85
/* A lone-thread measurement needs this much wall time (a quota period is
 * typically 100 ms: shorter spans see one burst). */
#define CL_BUDGET_LONE_MIN_WALL 0.2
/* A window measures the budget when the runnable demand is at least this
 * share of the nominal budget ... */
#define CL_BUDGET_DEMAND 0.75
/* ... and at least this share of the runnable time was spent waiting. */
#define CL_BUDGET_WAITED 0.2
/* Windows shorter than this say nothing (quota periods). */
#define CL_BUDGET_MIN_WALL 0.5
/* Threads remembered by cl_rundelay_sample; more are not counted. */
#define CL_RUNDELAY_MAX 512

typedef struct cl_budget_est_s {
    double nominal;   /* affinity capped by the pipeline's threads: the most it can be */
    double estimate;  /* CPUs; 0 = nothing measured */
    uint32_t windows; /* running windows that measured it */
    double last_got;  /* the last window's CPUs got, its demand and wait (for tests/JSON) */
    double last_demand;
    double last_waited;
} cl_budget_est_t;

void cl_budget_est_init(cl_budget_est_t *e, double nominal);
/* The start: a single-threaded pass's thread CPU and wall seconds. Sets and
 * returns the estimate (capped by nominal), or returns 0 and leaves it when
 * the pass was too short or the thread got at least CL_BUDGET_LONE_MAX. */
double cl_budget_est_lone(cl_budget_est_t *e, double thread_cpu, double wall);
/* One running window: the process's CPU seconds, its threads' run-queue
 * wait in thread-seconds (< 0: unknown, nothing is measured) and the wall
 * seconds. Returns 1 when the estimate changed. A measuring window moves
 * the estimate half way to what it got (the first one sets it). */
int cl_budget_est_window(cl_budget_est_t *e, double cpu, double delay, double wall);

/* A window in which the client used this much of its CPU budget leaves no
 * room for work it was not planned to do (job.c note_idle): under a quota
 * a saturated process measures 0.95-1.0, one waiting on remote samples
 * well below. */
#define CL_BUSY_FRACTION 0.9
/* Whether a window of wall seconds in which the process used cpu seconds
 * kept it busy against budget CPUs. No budget or no wall time: 0 (a used
 * fraction of nothing known says nothing). */
int cl_budget_busy(double cpu, double wall, double budget);

/* Run-queue wait of this process's threads, summed: each thread's
 * run_delay since the previous sample (a thread first seen counts whole:
 * it started in the window). */
typedef struct cl_rundelay_s {
    uint32_t n;
    int have; /* a previous sample exists */
    struct {
        int tid;
        uint64_t ns;
    } t[CL_RUNDELAY_MAX];
} cl_rundelay_t;

/* Reads task_dir/TID/schedstat for every thread (task_dir: NULL =
 * /proc/self/task). Returns 0 with *ret_sec the wait since the previous
 * sample, 1 for the first sample (a baseline: *ret_sec 0), -ENOENT when no
 * thread's schedstat reads (kernels without CONFIG_SCHED_INFO). */
int cl_rundelay_sample(cl_rundelay_t *rd, const char *task_dir, double *ret_sec);

#endif
