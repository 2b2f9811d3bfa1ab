/* profile_mix_inputs: a mixed job's per-source costs for the planner
 * (PlannerInputs.mix_sources, docs/mixing.md "Costs per source"). The
 * client's profile samples the blend, so its costs are the mix's average
 * at the first weights; these are each source's own, so the dispatcher can
 * form the job's costs under whatever weights are in force (a schedule's
 * later entries, a resume with other weights). Private to client/lib. */
#ifndef SL_CLIENT_PROFILE_MIX_INPUTS_H
#define SL_CLIENT_PROFILE_MIX_INPUTS_H

#include <stddef.h>

#include "client/lib/profile.h"

/* Profiles each source of a's mixed spec on up to `samples` samples in all
 * within max_ms and points p->in.mix_sources at the result (owned by p).
 * idx[0 .. nblend) are the samples the blend's profile ran (their sources'
 * shares are sent as profiled_share).
 * An unmixed spec: nothing. A failure is not the job's: no per-source
 * costs are sent (the dispatcher then plans with the blend's profile) and
 * err says why. Returns 0, or the profiler's negative code. */
int cl_planner_mix_costs(cl_planner_t *p, const cl_plan_args_t *a, size_t samples, int max_ms,
                         const uint64_t *idx, size_t nblend, char *err, size_t errlen);

/* The per-source costs the dispatcher cached for this spec and host
 * (PlanContextResponse.cached_mix_sources, dispatcher/planner/
 * mix_cost_cache.h) taken instead of profiling: copied into p, pointed at
 * by p->in.mix_sources, PlannerInputs.mix_sources_cached set. Returns 1;
 * 0 when there are none or they do not fit a's mix and pipeline (other
 * count, names or order of sources, other unit count): profile them. */
int cl_planner_mix_cached(cl_planner_t *p, const cl_plan_args_t *a,
                          const Sluice__PlanContextResponse *ctx);

#endif
