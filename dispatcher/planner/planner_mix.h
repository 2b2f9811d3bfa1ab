/* planner_mix: a mixed job's costs for the planner (docs/mixing.md "Costs
 * per source", docs/planner.md "Mixed jobs").
 *
 * The client profiles the blend (its costs are the mix's average at the
 * weights the profiled positions had) and each source on its own
 * (PlannerInputs.mix_sources). The job's per-unit CPU, its bytes at every
 * boundary and its read cost are then the sources' weighted by the
 * weights in force at the job's step: at submission, and again whenever a
 * schedule entry changes them (disp_pjob_mix_due, from the dispatcher's
 * tick with the step the job's acknowledged positions reached). A
 * worker class's profile (taken on the blend, whose samples came from the
 * sources in the shares MixSourceCost.profiled_share says) is scaled unit
 * by unit by the sources' own ratio: the unit's weighted cost under the
 * weights in force over its weighted cost under the profiled shares. Both
 * come from the same per-source measurement, so its noise cancels: at the
 * profiled mix a worker keeps its own numbers. After a change,
 * the costs measured while the job ran (the client's reports, the
 * workers' heartbeats: cumulative over the old mix) no longer replace the
 * weighted ones.
 *
 * Under the dispatcher mutex, like the rest of planner_job. */
#ifndef DISP_PLANNER_MIX_H
#define DISP_PLANNER_MIX_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spec/mix.h"
#include "dispatcher/planner/planner_job.h"

struct disp_job_s;

typedef struct disp_pmix_s {
    uint32_t nsources, nunits;
    char names[SL_MIX_MAX_SOURCES][SL_MIX_NAME_MAX];
    double unit_sec[SL_MIX_MAX_SOURCES][DISP_PL_MAX_UNITS];
    double bytes[SL_MIX_MAX_SOURCES][DISP_PL_MAX_UNITS + 1]; /* boundary 0..nunits */
    double read_sec[SL_MIX_MAX_SOURCES];
    uint64_t samples[SL_MIX_MAX_SOURCES];
    sl_mix_t *mix;     /* the spec's (weights, schedule), owned */
    uint64_t step_len; /* a global step's positions: batch_size x world_size */
    /* What the client and each class profiled on the blend, kept so any
     * weights can be applied afresh, and the sources' shares of the
     * samples they profiled (normalized; the weights of step 0 when the
     * client sent none). */
    double blend_unit[DISP_PL_MAX_UNITS];
    double blend_read;
    double profiled[SL_MIX_MAX_SOURCES];
    double class_unit[DISP_PL_MAX_CLASSES][DISP_PL_MAX_UNITS];
    double class_read[DISP_PL_MAX_CLASSES];
    /* In force: the normalized weights and the step they were taken at. */
    double weights[SL_MIX_MAX_SOURCES];
    uint64_t step;
    uint32_t changes; /* weight changes since submission */
    int cached;       /* the costs came from the dispatcher's cache (mix_cost_cache.h) */
} disp_pmix_t;

/* Takes in's per-source costs for pj (made by disp_pjob_new from in and
 * spec) and applies the weights of step 0. An unmixed spec, or a client
 * that sent none: pj->mix stays NULL, 0. Per-source costs that do not fit
 * the mix (another count of sources, other names or order, another count
 * of units or boundaries): -EINVAL, err names the field. -ENOMEM. */
int disp_pjob_mix_new(disp_pjob_t *pj, const Sluice__PlannerInputs *in, const sl_spec_t *spec,
                      char *err, size_t errlen);
void disp_pjob_mix_free(disp_pmix_t *m); /* NULL ok */

/* The job's costs (pj->client's units, bytes and read cost, each profiled
 * class's units and read cost) as the sources' under the weights in force
 * at step. Nothing for an unmixed job. */
void disp_pjob_mix_apply(disp_pjob_t *pj, uint64_t step);

/* The weights in force at step differ from those applied: applies them,
 * says which in why ("mix weights at step S: a 0.70 b 0.30 -> ...") and
 * returns 1 (a re-plan is due). Else 0. */
int disp_pjob_mix_due(disp_pjob_t *pj, uint64_t step, char *why, size_t whylen);

/* The costs measured while the job ran belong to another mix than the one
 * in force (the weights changed since submission): they must not replace
 * the weighted ones. 0 for an unmixed job. */
int disp_pjob_mix_stale(const disp_pjob_t *pj);

/* The global step a job's acknowledged positions reached (its oldest live
 * epoch; a resumed epoch's carried positions counted; steps of the
 * resuming world). 0 for an unmixed job. */
uint64_t disp_job_mix_step(const struct disp_job_s *job);

/* {"step", "weights_changes", "measured_costs_used", "costs_cached", "sources": [{"name",
 * "weight_share", "profiled_share", "samples", "cpu_ms_per_sample", "unit_ms", "read_ms",
 * "bytes_per_sample"}], "unit_ms", "profiled_unit_ms"}, or NULL (unmixed,
 * or ENOMEM). The caller owns the reference. */
json_t *disp_pjob_mix_json(const disp_pjob_t *pj);

#endif
