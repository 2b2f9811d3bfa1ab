/* planner_job_impl: what the pieces of a job's planner state (planner_job.h)
 * share and nobody else sees.
 *
 *   profile_cache.c        HostProfiles kept by (spec hash, host)
 *   planner_job_inputs.c   a job's PlannerInputs taken in: profiles, classes,
 *                          codec numbers (disp_pjob_new)
 *   planner_job_live.c     the live workers of the moment and the planner's
 *                          input built against them
 *   planner_job.c          planning, the client's rates, when to re-plan
 *   planner_job_json.c     the planner's state as JSON (/status, `sluice plan`)
 *   planner_job_cache.c    the prefix cache decision and its pricing
 *   planner_mix.c          a mixed job's per-source costs under the weights
 *                          in force (planner_mix.h)
 *
 * Same rules as planner_job.h: everything runs under the dispatcher mutex. */
#ifndef DISP_PLANNER_JOB_IMPL_H
#define DISP_PLANNER_JOB_IMPL_H

#include <math.h>
#include <stdint.h>

#include "dispatcher/planner/planner_job.h"

/* Measured per-unit costs replace profiled ones only past this many samples. */
#define DISP_PJ_MIN_MEASURED 20
/* A client claiming more overhead per sample than this is not believed
 * (it could only starve its own job; the bound keeps the arithmetic sane). */
#define DISP_PJ_MAX_OVERHEAD_SEC 1.0
#define DISP_PJ_MAX_UNIT_SEC 60.0 /* a measured unit cost above this is nonsense */

/* A peer-supplied number cleaned: finite and > 0, else 0. */
static inline double disp_pj_fin(double v) { return isfinite(v) && v > 0.0 ? v : 0.0; }

/* ------------------------------------------------------------ planner_job_live.c */

/* An order-independent signature of the live (usable) workers and their count. */
void disp_pjob_live_set(const disp_registry_t *reg, uint64_t *ret_sig, uint32_t *ret_n);
/* The planner's input for pj against the live workers of reg at now_ms. */
void disp_pjob_build_input(const disp_pjob_t *pj, const disp_registry_t *reg, int64_t now_ms,
                           disp_pl_input_t *in);

/* ------------------------------------------------------------ planner_job_cache.c */

/* The job's prefix cache decision (made once, from pj->input before any
 * pricing, and the live workers' budgets in reg; a plan that already
 * carries one -- a restored job's -- keeps it) into plan, and pj->input
 * priced at the measured hit rate (planner_cache.h). */
void disp_pjob_cache(disp_pjob_t *pj, const disp_registry_t *reg, disp_plan_t *plan);
/* {"decision": "on"/"off", "reason", "prefix_units", "compute_ms_per_sample",
 * "read_ms_per_sample", "stored_bytes_per_sample", "total_bytes",
 * "budget_bytes", "fit", "epochs", "seen_before", "lookups", "hit_rate",
 * "priced_hit_rate"}; NULL on ENOMEM. */
json_t *disp_pjob_cache_json(const disp_pjob_t *pj);

/* ------------------------------------------------------------ planner_job.c */

/* The chosen plan's predicted rate (samples/s). */
double disp_pjob_predicted(const disp_pjob_t *pj);

#endif
