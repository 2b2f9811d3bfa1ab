/* short_job: the short-job guard (issue 39 part 4, docs/planner.md "A right
 * first plan"). An auto or fastflow job profiles before it starts: link
 * probes, a profile pass of up to SL_PROFILE_DEFAULT_SAMPLES samples on one
 * thread, the workers' profiles. A job too short to repay that starts on the
 * better fixed policy instead, so it never loses to that policy because it
 * profiled.
 *
 * The gain: what running `off` and `all` at once would deliver beyond the
 * better of them, the client's CPU shared between its local samples and
 * receiving (rate_both): samples / max(rate_off, rate_all) - samples /
 * rate_both seconds. It is an estimate, not a bound: a plan that cuts the
 * pipeline in the middle can do better where the link binds (smaller
 * messages; on the emulated clusters profiled short jobs gained up to 2x
 * this figure), but a first plan ramps up and errs (on one it gained
 * nothing), so the guard counts on no more. The job profiles when that
 * gain is more than profiling would take (CL_SHORT_COST_FACTOR times the
 * estimate), or when that is at most CL_SHORT_FREE_SHARE of the job's time
 * (a long job: it then gets re-plans, and leaves the next job of the spec
 * its overhead and unit costs under load); else it runs `off` or `all`,
 * whichever the estimates say is faster -- `all` only with the link priced:
 * cached by the dispatcher (10 minutes per client), else one probe of a
 * worker, which the profiling that may follow reuses. The estimates come
 * from what is known before profiling: a cached client profile of the
 * spec, else a pass over CL_SHORT_SAMPLES samples; the live workers'
 * threads; the link; the per-sample overhead a job measured on this host
 * (this spec's cached, else another spec's prior). With no live workers,
 * or the rates unknown, the job profiles as it did before the guard.
 *
 * cl_short_decide and cl_short_inputs are pure; cl_short_assess talks to the
 * dispatcher and a worker and runs the pipeline on this thread. Never logs. */
#ifndef CL_SHORT_JOB_H
#define CL_SHORT_JOB_H

#include <stdint.h>

#include "client/lib/profile.h"

/* Samples the guard's own profile pass runs (when none is cached), and the
 * wall time it may take: it is paid by every cold auto job, the short ones
 * it protects too (8 samples of 30 % large photographs took 0.8 s of a
 * 0.3-CPU client's quota). */
#define CL_SHORT_SAMPLES 4
#define CL_SHORT_MAX_MS 250
/* A job profiles whenever profiling takes at most this share of its time
 * on the better fixed policy: what it could lose is within how much a rate
 * moves between runs, and it gets what a fixed plan lacks (re-plans, its
 * overhead measured for the next job of the spec). */
#define CL_SHORT_FREE_SHARE 0.02
/* What profiling took over what cl_short_inputs estimated, at most, on the
 * emulated clusters of scripts/bench-first-plan (1.3-1.9x there; 0.9-1.6x
 * on loopback): the workers' profiles under their quotas, and the RPCs to
 * them, are not priced. The decision charges profiling this multiple of
 * the estimate, so a verdict near the line runs the fixed policy, which
 * cannot lose to itself. */
#define CL_SHORT_COST_FACTOR 1.5
/* Wall seconds one link probe takes: CL_PROBE_MAX_SEC plus set-up, plus its
 * first chunk's time on the link once the link is known (cl_short_probe_sec). */
#define CL_SHORT_PROBE_SEC 0.2

typedef enum {
    CL_SHORT_PROFILE = 0, /* profiling may pay (or nothing is known): profile */
    CL_SHORT_OFF,         /* too short: everything local */
    CL_SHORT_ALL,         /* too short: everything remote */
} cl_short_e;

/* Why the guard chose as it did (cl_short_why_name: --explain's words). */
typedef enum {
    CL_SHORT_WHY_UNKNOWN = 0, /* nothing to estimate from (or no live workers): profile */
    CL_SHORT_WHY_PAYS,        /* the gain is more than profiling takes: profile */
    CL_SHORT_WHY_LONG,        /* profiling is at most CL_SHORT_FREE_SHARE of the job: profile */
    CL_SHORT_WHY_LINK,        /* `all` would win but its link is not known: profile */
    CL_SHORT_WHY_SHORT,       /* too short to repay profiling: a fixed policy */
    CL_SHORT_WHY_FORCED,      /* always_profile (sluice.h): profile, not assessed */
} cl_short_why_e;

typedef struct cl_short_in_s {
    double samples;     /* this rank's samples over the whole job */
    double profile_sec; /* wall seconds profiling would take */
    double rate_off;    /* samples/s everything local; <= 0 = unknown */
    double rate_all;    /* samples/s everything remote; <= 0 = unknown (or no workers) */
    double rate_both;   /* samples/s of off and all at once; <= 0: rate_off + rate_all */
    int all_unpriced;   /* 1: rate_all leaves out the link (not known): an upper bound */
} cl_short_in_t;

typedef struct cl_short_s {
    cl_short_e choice;
    cl_short_why_e why;
    cl_short_in_t in;
    double fixed_sec;  /* the job's seconds on the better fixed policy; 0 = unknown */
    double saving_sec; /* what profiling could gain over it (estimate) */
    double bandwidth;  /* bytes/s of the link `all` was priced with; 0 = none */
    int link_probed;   /* 1: the guard probed it (else the dispatcher's cache, or none) */
} cl_short_t;

/* "profile", "off", "all". */
const char *cl_short_name(cl_short_e c);
/* "unknown", "pays", "long", "link", "short", "forced". */
const char *cl_short_why_name(cl_short_why_e w);

/* The decision above into *ret (choice and why; in copied, fixed_sec and
 * saving_sec set when the rates are known). Unknown rates or no samples:
 * profile. */
void cl_short_decide(const cl_short_in_t *in, cl_short_t *ret);

/* 1 when a job must profile whatever its length: opt (sluice_options_t
 * always_profile) non-zero, else the environment's SLUICE_ALWAYS_PROFILE
 * is "1". */
int cl_short_forced(int opt);

/* What the estimates start from. */
typedef struct cl_short_est_s {
    double local_sec;       /* CPU per sample to read and run every unit */
    double out_bytes;       /* bytes per sample of the pipeline's output */
    double overhead;        /* the client's per-sample overhead (cached or prior); 0 = none */
    double client_cpus;     /* the client's CPU budget */
    double worker_cpus;     /* the live workers' CPUs, summed */
    double bandwidth;       /* bytes/s the client takes in; 0 = unknown (all_unpriced) */
    double recv_per_byte;   /* client CPU per received byte */
    double profile_samples; /* samples the profile pass would run; 0 = cached */
    double pass_max_sec;    /* the pass's wall-time cap (its max_ms); 0 = none */
    double codec_samples;   /* samples the codec profile runs (every plan, cached or not) */
    double probe_sec;       /* wall seconds of the probes profiling would run */
    double consumer_rate;   /* samples/s the training loop takes; 0 = unknown: unlimited */
} cl_short_est_t;

/* rate_off = client_cpus / (local_sec + overhead); rate_all = the least of
 * worker_cpus / local_sec (workers as fast per CPU as this host), bandwidth
 * / out_bytes and client_cpus / (recv_per_byte x out_bytes + overhead),
 * all_unpriced when the bandwidth is unknown; rate_both = rate_all plus what
 * the client's CPU left after receiving them delivers locally (rate_off
 * when a received sample costs the client no less than a local one); each
 * at most consumer_rate when that is known (a consumer that binds leaves
 * profiling nothing to gain);
 * profile_sec is wall time on one thread's share of the budget (at most a
 * CPU: a cgroup quota of 0.5 doubles it), where a sample takes local_sec
 * over that share: the profile pass (profile_samples and its untimed first
 * sample, stopped at pass_max_sec plus the sample running then), the codec
 * profile's codec_samples (uncapped), plus probe_sec. Without the cap a
 * long job's estimate grew with its pass's samples (9.6 s estimated, 3.3 s
 * taken under a 0.25-CPU quota); the codec pass took 0.4-0.8 s of it
 * (docs/benchmarks.md "Short-job guard: profiling's time under a quota"). */
void cl_short_inputs(const cl_short_est_t *e, double samples, cl_short_in_t *ret);

/* Wall seconds of the probes cl_planner_profile runs (profile.c steps 5-7):
 * unless links_cached, one class's probe (a CL_PROBE_CHUNK first chunk;
 * not when class_probed: the guard's probe is reused) and,
 * with more than one worker, the ingress probe (every worker's first chunk
 * at once, at most CL_PROBE_CONCURRENT); the overhead probe when
 * step7_bytes > 0 (its first chunk: a batch of the output, at most
 * CL_PROBE_SAMPLES_MAX_CHUNK). Each is CL_SHORT_PROBE_SEC plus its first
 * chunks over bandwidth (bytes/s; 0 = unknown: the flat figure). None
 * without workers. On a 100 Mbit/s cluster the probes took 0.9 s where the
 * flat figure said 0.6 s. */
double cl_short_probe_sec(double bandwidth, int links_cached, int class_probed, uint32_t workers,
                          double step7_bytes);

/* Gathers the estimates for a job of job_samples samples (this rank's,
 * every epoch) and decides. Probes the link (once, a worker's) only when
 * the dispatcher has none cached and the decision is not `off` without it
 * (a link only lowers rate_all); the probe is left in p for profiling
 * (cl_planner_profile then skips that class's). p: the job's planner (its
 * spec hash and host key are set, as cl_planner_profile would). Returns 0
 * with *ret set, or a negative code with err filled (the job then profiles
 * as before). */
int cl_short_assess(cl_planner_t *p, const cl_plan_args_t *a, uint64_t job_samples, cl_short_t *ret,
                    char *err, size_t errlen);

#endif
