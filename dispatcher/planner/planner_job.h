/* planner_job: the planner's state for one job, and the profile cache.
 *
 * A job submitted with offload auto or fastflow carries the client's
 * PlannerInputs (its own profile, one profile per worker speed class,
 * link bandwidths, CPU budget, consumer rate). They are kept here, turned
 * into a disp_pl_input_t against the live workers of the moment, and fed to
 * dispatcher/planner/planner.c -- at submission and again on every re-plan:
 *  - workers joined or left (the live set differs from the last plan's);
 *  - the client's delivered rate drifted from the prediction by more than
 *    DISP_REPLAN_DRIFT for DISP_REPLAN_DRIFT_MS (measured numbers -- the
 *    client's per-unit costs and consumer rate from ReportRates, the
 *    workers' per-unit costs from heartbeats -- replace the profiled ones:
 *    "re-profile cheaply").
 * A worker that joined after profiling is taken to run at the speed of the
 * largest profiled class, with its own thread count.
 *
 * The profile cache keeps HostProfiles by (spec hash, host) so that a
 * re-submitted job skips profiling (GetPlanContext hands them back).
 *
 * Not thread-safe: everything runs under the dispatcher mutex. */
#ifndef DISP_PLANNER_JOB_H
#define DISP_PLANNER_JOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cost/costmodel.h"
#include "common/spec/spec.h"
#include "dispatcher/planner/plan.h"
#include "dispatcher/planner/planner_cache.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/core/registry.h"
#include "proto/sluice.pb-c.h"

#define DISP_PCACHE_MAX 128
#define DISP_PCACHE_TTL_MS (3600 * 1000)
#define DISP_PJ_MAX_IDS 256          /* worker ids remembered per class */
#define DISP_PJ_KEY_MAX 128
/* The receive cost is fitted to a job's overhead only when at least this
 * share of its samples was received, and never below this per byte (a
 * copy's worth; loopback measured >= 0.3 ns). */
#define DISP_PJ_FIT_REMOTE_MIN 0.5
#define DISP_PJ_MIN_RECV_SEC_PER_BYTE 0.1e-9
/* A report window that delivered less than this share of the job's recent
 * rate (its windows averaged, each new one weighing
 * DISP_PJ_RATE_AVG_WEIGHT) does not update the cached overhead: in a stall
 * the CPU went to samples not delivered yet, and the next job of the spec
 * would plan with it. A job that is steadily slower than its prediction
 * still updates it: there the overhead is the correction. */
#define DISP_PCACHE_STEADY 0.5
#define DISP_PJ_RATE_AVG_WEIGHT 0.3
#define DISP_REPLAN_DRIFT 0.15
#define DISP_REPLAN_DRIFT_MS 10000
#define DISP_REPLAN_WARMUP_MS 3000   /* after a (re-)plan, before drift counts */
#define DISP_REPLAN_RATES_MAX_AGE_MS 5000
/* A drift re-plan that changes nothing (the model is off, not the plan)
 * doubles the drift window, up to this; any real change resets it. */
#define DISP_REPLAN_DRIFT_MAX_MS (300 * 1000)
/* A client that could not read its CPU budget measures it (ReportRates
 * measured_cpu_budget): a measurement this far from the plan's budget
 * re-plans at once -- no warm-up, no drift window -- at most once per
 * DISP_REPLAN_BUDGET_MIN_MS (a new plan changes what the next window sees). */
#define DISP_REPLAN_BUDGET_DIFF 0.25
#define DISP_REPLAN_BUDGET_MIN_MS 2000
/* More CPUs than any client has: a measurement beyond is not believed. */
#define DISP_PJ_MAX_BUDGET 4096.0

/* Coefficients of the per-sample cost model (common/cost/costmodel.h). */
#define DISP_PJ_COST_COEF SL_COST_NPARAM

/* One host's profile (HostProfile on the wire). */
typedef struct disp_hprof_s {
    char host[DISP_PJ_KEY_MAX];
    uint32_t nunits;
    disp_stage_stat_t units[DISP_PL_MAX_UNITS];
    double read_sec;
    double encoded_bytes;
    uint64_t samples;
    double seconds;
    double model_error;
    double size_error; /* HostProfile.size_cost_error */
    double coef[DISP_PJ_COST_COEF]; /* HostProfile.cost_model_coef; ncoef 0 = none */
    uint32_t ncoef;
    double overhead_sec; /* client hosts: measured per-sample overhead (planner.h sample_sec) */
    double source_rate;  /* HostProfile.source_bytes_per_sec (planner_read.c) */
    double source_latency; /* HostProfile.source_latency_sec */
} disp_hprof_t;

typedef struct disp_pcache_entry_s {
    int used;
    uint64_t spec_hash;
    int64_t stored_ms;
    int64_t used_ms;
    disp_hprof_t prof;
    uint64_t overhead_seq; /* a running job's overhead stored: the cache's count then; 0 = never */
    double persec_cpu;     /* the client's per-second cost a job measured (persec.h) */
    uint64_t persec_seq;   /* when stored: the cache's count then; 0 = never */
} disp_pcache_entry_t;

typedef struct disp_pcache_s {
    disp_pcache_entry_t e[DISP_PCACHE_MAX];
    uint64_t hits, misses;
    uint64_t overhead_seq; /* overheads stored so far (which is the latest) */
    uint64_t persec_seq;   /* per-second costs stored so far */
} disp_pcache_t;

disp_pcache_t *disp_pcache_new(void);
void disp_pcache_free(disp_pcache_t *c);
/* Stores (replaces) the profile of (spec_hash, p->host); evicts the least
 * recently used entry when full. */
void disp_pcache_put(disp_pcache_t *c, uint64_t spec_hash, const disp_hprof_t *p,
                     int64_t now_ms);
/* Up to max fresh profiles of spec_hash; returns how many. */
size_t disp_pcache_list(disp_pcache_t *c, uint64_t spec_hash, int64_t now_ms,
                        const disp_hprof_t **ret, size_t max);

/* One worker speed class as the client described it. */
typedef struct disp_pclass_s {
    char key[DISP_PJ_KEY_MAX];
    uint32_t threads;
    double cpu_budget;
    double bandwidth;
    int profiled;
    disp_hprof_t prof;
    uint64_t ids[DISP_PJ_MAX_IDS];
    uint32_t nids;
} disp_pclass_t;

typedef struct disp_pjob_s {
    sl_offload_e policy; /* SL_OFFLOAD_AUTO or FASTFLOW; a fixed one: diagnosis only */
    uint64_t spec_hash;
    uint32_t nunits;
    char unit_names[DISP_PL_MAX_UNITS][DISP_NAME_MAX];

    /* What the client sent (measurements may refine the costs later). */
    disp_hprof_t client;
    double client_budget;
    double recv_sec_per_byte;
    double consumer_target; /* asked for (--consumer-rate); 0 = none */
    double client_bandwidth;
    int links_cached; /* the links came from the dispatcher's link cache (not journaled) */
    /* Where client_budget came from (PlannerInputs.client_cpu_budget_source:
     * "cgroup", "affinity", "unknown"; "" = an older client), the latest
     * measured budget of a client that could not read one (the profile
     * pass's, then ReportRates'; 0 = none), whether the plans use it (then
     * ReportRates.cpu_budget no longer sets client_budget) and when it last
     * re-planned a job. */
    char budget_source[16];
    double budget_measured;
    int budget_from_measured;
    int64_t budget_replan_ms;
    /* The client's machine (PlannerInputs; planner_machines.h): "" and
     * client_has_cpus 0 = not sent (an older client). */
    char client_machine[SL_MACHINE_ID_MAX];
    sl_cpuset_t client_cpus;
    int client_has_cpus;
    disp_pclass_t classes[DISP_PL_MAX_CLASSES];
    uint32_t nclasses;
    /* The wire codec per boundary (PlannerInputs.codec_*); all 0 when the
     * client sent none or a wrong number: never compressed. */
    double codec_ratio[DISP_PL_MAX_UNITS + 1];
    double codec_compress[DISP_PL_MAX_UNITS + 1];
    double codec_decompress[DISP_PL_MAX_UNITS + 1];
    /* How the runtime cuts an epoch, so F is planned in whole splits:
     * nsplits (0 = unknown, or more than DISP_PL_MAX_STEPS: F continuous)
     * and each split's positions. Set by planner_svc.c from the config
     * before the job exists, then from the job's live epoch. */
    uint32_t nsplits;
    uint64_t split_len[DISP_PL_MAX_STEPS];
    /* Multi-rank jobs: this job's ranks on the client's node (itself
     * included) and its world size; 0 or 1 = alone (planner.h
     * disp_planner_rank_share). Kept current by disp_planner_tick. */
    uint32_t node_ranks;
    uint32_t world;

    /* The last planning and what it was computed from. */
    disp_pl_input_t input;
    disp_pl_result_t result;
    disp_ff_result_t ff;
    /* The what-if per class of input (planner.h disp_planner_whatif), made
     * with each plan: the rate with more or fewer workers of the class and
     * how many the job wants (disp_pjob_class_key names the class). */
    disp_wi_curve_t whatif[DISP_PL_MAX_CLASSES];
    uint32_t nwhatif;
    uint64_t worker_sig; /* live worker set at the last plan */
    uint32_t nlive;
    int64_t planned_ms;
    uint32_t replans;
    char last_reason[96];

    /* What the client measures (ReportRates). */
    int have_rates;
    int64_t rates_ms;
    double measured_rate;
    double measured_consumer;
    double measured_cpu_fraction;
    double measured_wait_fraction;
    /* Client CPU per delivered sample outside the units (ReportRates);
     * 0 = unknown. Minus what the model already counts for the plan in
     * effect (plan_split, plan_share: realized sample share), it is the
     * per-sample overhead the next plan adds (planner.h sample_sec). */
    double measured_overhead;
    double measured_sample_sec; /* its fixed part; valid when have_sample_sec */
    int have_sample_sec;
    int overhead_refused; /* the cache refused one (logged once per job) */
    /* client.overhead_sec is another spec's on this host (disp_pcache_host_prior) */
    int overhead_prior;
    /* Where client.overhead_sec came from (first_plan.h disp_ovh_src_e), the
     * host prior found (0: none) and the client's profiled figure (0: none). */
    int overhead_src;
    double overhead_prior_sec;
    double overhead_profiled_sec;
    /* The client's per-second cost: the host's figure found at submission
     * (disp_pcache_host_persec; 0: none), what the first plan charges of it
     * (disp_first_persec; until the job's own overhead replaces both), and
     * the job's own figure (ReportRates.persec_cpu; 0: none yet). */
    double persec_host;
    double persec_charged;
    double measured_persec;
    int persec_refused; /* the cache refused one (logged once per job) */
    /* recv_sec_per_byte was fitted to the measured overhead, which was
     * below what the model charged (the probe's figure too high); the
     * client's repeated probe figure no longer replaces it. */
    int recv_fitted;
    double rate_avg; /* delivered samples/s, windows averaged (DISP_PJ_RATE_AVG_WEIGHT) */
    int steady;      /* the last window against rate_avg (disp_pjob_steady) */
    uint32_t plan_split;
    double plan_share;
    int plan_compress;
    uint32_t measured_nunits;
    disp_stage_stat_t measured_units[DISP_PL_MAX_UNITS];
    int64_t drift_since_ms; /* 0: not drifting */
    int64_t drift_window_ms; /* how long drift must last; DISP_REPLAN_DRIFT_MS, doubling */

    /* The prefix cache: the decision and the hit rate that prices it
     * (planner_cache.h). samples is the caller's (planner_svc.c). */
    disp_pc_job_t cache;
    /* A mixed job's per-source costs and the weights in force
     * (planner_mix.h); NULL: unmixed, or the client sent none. */
    struct disp_pmix_s *mix;
} disp_pjob_t;

/* From the client's inputs and the compiled spec. policy is the spec's
 * offload (auto or fastflow). Returns 0, -EINVAL (err says why), -ENOMEM. */
int disp_pjob_new(const Sluice__PlannerInputs *in, const sl_spec_t *spec, sl_offload_e policy,
                  disp_pjob_t **ret, char *err, size_t errlen);
void disp_pjob_free(disp_pjob_t *pj); /* NULL ok */

/* The client's own prefix cache counters for the job so far
 * (GetAssignmentRequest.cache): its hit rate and read-back cost windows
 * (planner_cache.h), priced by the next plan. */
void disp_pjob_note_client_cache(disp_pjob_t *pj, const Sluice__CacheStats *m);

/* Sets the epoch geometry (pj->nsplits, split_len) from split lengths;
 * more than DISP_PL_MAX_STEPS splits (or none) means continuous F.
 * Returns 1 when it changed. */
int disp_pjob_set_splits(disp_pjob_t *pj, const uint64_t *len, uint32_t n);

/* The per-sample overhead measured for (spec hash, client host): stored
 * with the client's cached profile so the next job of the spec on that host
 * starts from it. It is Sluice's own CPU per received or read sample beyond
 * the modelled costs, so it is bounded by what the cached idle-core profile
 * says a whole local sample costs: a value above DISP_PCACHE_OVERHEAD_MAX_X
 * times the profile's read + units per sample (or DISP_PCACHE_OVERHEAD_FLOOR_SEC,
 * whichever is more) measured something else -- a training loop's CPU, a
 * stalled host -- and would make every later job of the spec decide from
 * it for an hour. Returns 0 (stored), -ENOENT (no entry: nothing happens)
 * or -ERANGE (not stored; *ret_bound the bound, for the log). */
#define DISP_PCACHE_OVERHEAD_MAX_X 4.0
#define DISP_PCACHE_OVERHEAD_FLOOR_SEC 0.002
int disp_pcache_note_overhead(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                              double overhead_sec, double *ret_bound);
/* The prior for a spec's first plan on a host (issue 39 part 4): the
 * per-sample overhead a running job of another spec measured there, the
 * most recently stored of the fresh entries (disp_pcache_note_overhead
 * bounded it). A cold profile is taken on an idle core and carries no
 * overhead; the client's real cost per sample shows only once it runs, and
 * it is mostly the host's and the library's, not the spec's (the per-byte
 * part is the link cache's). Returns 1 with *ret set, or 0: none. */
int disp_pcache_host_prior(const disp_pcache_t *c, const char *host, uint64_t except_spec,
                           int64_t now_ms, double *ret);
/* The client's per-second cost (client/lib/persec.h) a running job of
 * spec_hash measured on host, kept with that entry: a figure of the host
 * and the library, not the spec, so any spec's first plan there may take
 * it (disp_pcache_host_persec). Bounded like the charge (first_plan.h):
 * above DISP_PERSEC_MAX_SHARE x the job's budget or DISP_PERSEC_MAX_CPU it
 * measured something else (a stalled host, a broken client) and is not
 * stored. Returns 0, -ENOENT (no entry) or -ERANGE (*ret_bound the bound). */
int disp_pcache_note_persec(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                            double persec_cpu, double budget, double *ret_bound);
/* The per-second cost most recently stored for host by a job of any spec,
 * fresh. Returns 1 with *ret set, or 0: none. */
int disp_pcache_host_persec(const disp_pcache_t *c, const char *host, int64_t now_ms, double *ret);
/* The spec's stored overhead on host stays its own but is no prior for
 * other specs (first_plan.h DISP_PRIOR_MIN_RUN_MS: measured by a job too
 * young); until the next disp_pcache_note_overhead. No entry: nothing. */
void disp_pcache_not_prior(disp_pcache_t *c, uint64_t spec_hash, const char *host);
/* The per-unit CPU a job of the spec measured on that host while running
 * (units by name, each with at least DISP_PCACHE_MIN_UNIT_SAMPLES): it
 * replaces the cached profile's, so the next job plans with the costs the
 * units had under a running job's load rather than on an idle host. No
 * entry, or units that do not match by name: nothing happens. */
#define DISP_PCACHE_MIN_UNIT_SAMPLES 100
void disp_pcache_note_units(disp_pcache_t *c, uint64_t spec_hash, const char *host,
                            const disp_stage_stat_t *units, uint32_t n);

/* Plans against the live workers of reg: fills plan (split, share, mode,
 * predicted, binding; the caller owns version) and remembers the inputs,
 * the result and the worker set. why is recorded ("submit", "workers
 * changed", "drift"). */
void disp_pjob_plan(disp_pjob_t *pj, const disp_registry_t *reg, disp_plan_t *plan,
                    int64_t now_ms, const char *why);

/* The key of class c of pj->input: the client's profiled class key, or,
 * for workers that joined after profiling, "unprofiled". */
const char *disp_pjob_class_key(const disp_pjob_t *pj, uint32_t c);

/* The job's plan is fixed (offload off, all or K:F): disp_pjob_plan keeps
 * it and fills only its diagnosis (disp_planner_evaluate). */
int disp_pjob_fixed(const disp_pjob_t *pj);
/* "auto", "fastflow" or "fixed" (what /status and --explain call the policy). */
const char *disp_pjob_policy_name(const disp_pjob_t *pj);

/* The client's report. Values that are not finite count as 0. */
void disp_pjob_rates(disp_pjob_t *pj, const Sluice__ReportRatesRequest *req, int64_t now_ms);

/* The last report window delivered at least DISP_PCACHE_STEADY of the
 * job's recent rate. */
int disp_pjob_steady(const disp_pjob_t *pj);
/* Whether a re-plan is due now: 1 = the worker set changed, 3 = the
 * measured CPU budget of a client that could not read one differs from the
 * plan's by more than DISP_REPLAN_BUDGET_DIFF, 4 = the prefix cache's
 * measured hit rate moved (planner_cache.h), 2 = the drift persisted,
 * 0 = not due; why gets the reason. Pure over pj, reg and now. */
int disp_pjob_replan_due(disp_pjob_t *pj, const disp_registry_t *reg, int64_t now_ms,
                         char *why, size_t whylen);
/* After a re-plan of that kind: a drift re-plan that changed neither the
 * split nor the share (by 0.02) doubles the drift window; anything else
 * resets it. A budget re-plan (3) starts DISP_REPLAN_BUDGET_MIN_MS. */
void disp_pjob_replanned(disp_pjob_t *pj, int kind, const disp_plan_t *before,
                         const disp_plan_t *after);

/* Copies of profiles between the wire and the cache. */
void disp_hprof_from_pb(const Sluice__HostProfile *m, disp_hprof_t *ret);

/* The planner's inputs and outputs as JSON (for /status and `sluice plan
 * --json`): {"policy", "reason", "inputs": {...}, "candidates": [...],
 * "chosen", "workers_needed", "fastflow": {...}, "replans", ...}.
 * NULL pj gives NULL. The caller owns the reference. */
json_t *disp_pjob_json(const disp_pjob_t *pj, const disp_plan_t *plan);

#endif
