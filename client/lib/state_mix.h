/* state_mix: a mixed job's state across a weight change (docs/mixing.md
 * "Resume"). A state of a mixed job also records the blend's weights, its
 * schedule and its epoch length, and a second spec hash without them; a job
 * whose spec differs from the saving one only there resumes each source
 * where it was (common/order/resume_mix.h) instead of being refused. */
#ifndef CL_STATE_MIX_H
#define CL_STATE_MIX_H

#include <jansson.h>
#include <stdint.h>

#include "common/spec/resume.h"
#include "common/spec/spec.h"

struct sluice_job;

/* The blend's weights, schedule and epoch length of mix as the state's
 * "mix" value; NULL on ENOMEM. */
json_t *cl_state_mix_json(const sl_spec_t *spec);

/* Sets spec's mix weights, schedule and epoch length to a state's "mix"
 * value (cl_state_mix_json) of a mix with as many sources. 0 or -EINVAL. */
int cl_state_mix_set(sl_spec_t *spec, const json_t *v);

/* A copy of spec's identity without what a weight change may change (the
 * weights, the schedule, samples_per_epoch); 0 or -ENOMEM. */
int cl_state_mix_neutral(sl_spec_t *spec);

/* Turns r, the merged history of a job of spec saved (the old weights),
 * into the history of job (the new weights): each epoch becomes a carry of
 * what each source consumed and a generation removing it. 0, -EINVAL,
 * -E2BIG, -ENOMEM. */
int cl_state_mix_carry(const struct sluice_job *job, const sl_spec_t *saved, sl_resume_t *r);

#endif
