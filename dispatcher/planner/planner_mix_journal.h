/* planner_mix_journal: a mixed job's planner state in and out of the
 * journal (JournalPlanner: inputs.mix_sources, mix_step, mix_changes), so
 * a restarted dispatcher plans the job with the same weights in force and
 * the same per-source costs (docs/mixing.md "Costs per source").
 *
 * The planner holds the client's and the classes' profiles re-weighted
 * for the weights in force; the journal takes them as profiled on the
 * blend, since restoring applies the weights again (applying them to
 * already-weighted numbers would scale the classes twice). */
#ifndef DISP_PLANNER_MIX_JOURNAL_H
#define DISP_PLANNER_MIX_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec/mix.h"
#include "dispatcher/planner/planner_job.h"
#include "proto/sluice.pb-c.h"

/* Storage for the per-source messages; they point into the planner's
 * state, which must outlive the put. */
typedef struct disp_pmix_pb_s {
    Sluice__MixSourceCost c[SL_MIX_MAX_SOURCES];
    Sluice__MixSourceCost *pc[SL_MIX_MAX_SOURCES];
} disp_pmix_pb_t;

/* For pj's journal record: in->mix_sources from b, *client and
 * classes[0..nclasses) the profiles as profiled on the blend (copies of
 * pj's with the base unit and read costs), *step and *changes. Returns 1;
 * 0 (nothing written) for a job without per-source costs. */
int disp_pjob_mix_to_journal(const disp_pjob_t *pj, disp_pmix_pb_t *b, Sluice__PlannerInputs *in,
                             disp_hprof_t *client, disp_hprof_t *classes, uint64_t *step,
                             uint32_t *changes);

/* After disp_pjob_new on the journaled inputs: the weights of the
 * journaled step in force again and the change count back. Nothing for a
 * job without per-source costs. */
void disp_pjob_mix_from_journal(disp_pjob_t *pj, uint64_t step, uint32_t changes);

#endif
