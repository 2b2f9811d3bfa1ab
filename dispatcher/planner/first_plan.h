/* first_plan: what a job's first plan charges for the client's own cost per
 * sample, and where that figure came from (issue 39 part 4, docs/planner.md
 * "A right first plan").
 *
 * A cold profile is taken on an idle core and carries no overhead; the
 * client's real cost under its quota shows only once a job runs. The first
 * plan of a spec therefore takes, in this order:
 *   cached    what an earlier running job of this spec measured on this host
 *             (the cached client profile's sample_overhead_sec);
 *   prior     what a running job of another spec measured last on this host
 *             (disp_pcache_host_prior);
 *   profiled  what the client measured under its own quota while profiling
 *             (PlannerInputs.client_overhead_profiled_sec);
 *   none      nothing known: 0 is charged.
 * Once the job reports, its own measurement ("measured") replaces it.
 *
 * Pure arithmetic: no locks, no logging. */
#ifndef DISP_FIRST_PLAN_H
#define DISP_FIRST_PLAN_H

typedef enum {
    DISP_OVH_NONE = 0,
    DISP_OVH_CACHED,
    DISP_OVH_PRIOR,
    DISP_OVH_PROFILED,
    DISP_OVH_MEASURED,
    DISP_OVH_COUNT
} disp_ovh_src_e;

/* A running job's overhead becomes other specs' prior on the host only once
 * the job has run this long: before, it measured mostly its own start-up
 * (connections, threads, the first batches under the quota). A one-epoch job
 * of 400 samples on a 0.2-CPU client left a 1.37 ms prior; the next spec's
 * first plan then predicted a quarter of what it measured (docs/benchmarks.md
 * "First plan (issue 39 part 4)"). The spec's own next job still takes it. */
#define DISP_PRIOR_MIN_RUN_MS 10000

/* The client's per-second cost (its control thread's polls and reports,
 * gRPC's timers, the consumer's waits: CPU whatever the rate,
 * client/lib/persec.h) as a running
 * job on the host measured it, charged as CPU taken off the client's budget
 * (planner.h client_persec_cpu). Only where the per-sample overhead charged
 * is not a running job's: a running job's per-sample figure already holds
 * its per-second cost spread over its samples (own_cpu counts the control
 * thread), so charging both would count it twice. And at most this share
 * of the budget: what is left must still run the samples (the cache bounds
 * what it keeps the same way, disp_pcache_note_persec). */
#define DISP_PERSEC_MAX_SHARE 0.5
/* ... and at most this many CPUs whatever the budget: two polls a second's
 * worth of threads never take a core. */
#define DISP_PERSEC_MAX_CPU 0.25

/* The per-second CPU the first plan charges, from the host's figure
 * (CPU/s; 0, negative or not finite = none) given the per-sample
 * overhead's source and the client's budget: 0 when src is a running job's
 * measurement (cached, prior, measured), else the figure, capped at
 * DISP_PERSEC_MAX_SHARE x budget and DISP_PERSEC_MAX_CPU. */
double disp_first_persec(disp_ovh_src_e src, double host_persec, double budget);

/* "none", "cached", "prior", "profiled", "measured" (the status JSON's
 * sample_overhead_source); "?" for anything else. */
const char *disp_ovh_src_name(disp_ovh_src_e s);

/* The first plan's per-sample overhead from the candidates above (each in
 * CPU seconds per sample; 0, negative or not finite = not known) into
 * *ret_sec, and its source. */
disp_ovh_src_e disp_first_overhead(double cached, double prior, double profiled, double *ret_sec);

#endif
