/* resume_mix: a mixed job resumed with other weights (docs/mixing.md
 * "Resume"). The positions a state records belong to the blend of the
 * weights it was saved under; with other weights the positions mean other
 * samples, so the resuming client turns each partly consumed epoch into
 * what each source had consumed of it (common/spec/resume.h "carry"), and
 * the new weights blend the rest of every source's draws. */
#ifndef SL_RESUME_MIX_H
#define SL_RESUME_MIX_H

#include <stdint.h>

#include "common/spec/resume.h"
#include "common/spec/spec.h"

/* The draws each source of old (a mixed spec with its resume history:
 * every generation, the saving one included) consumed of epoch, as a carry
 * for a job of world new_world. A sample consumed c times is its first c
 * draws in the source's sequence (passes in order), so each source goes on
 * where it was: no sample of a pass repeated or left out. cost, tokens and
 * tiles: the per-sample predictions balanced and packed batching need (NULL
 * for count batching). Returns 0, -EINVAL (no history for epoch, or a
 * history that does not add up), -E2BIG (more than SL_RESUME_MAX_RUNS
 * runs), -ENOMEM. */
int sl_resume_mix_carry(const sl_spec_t *old, uint64_t epoch, uint64_t n, const float *cost,
                        const uint32_t *tokens, const uint32_t *tiles, uint32_t new_world,
                        sl_resume_carry_t **ret);

#endif
