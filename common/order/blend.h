/* blend: the epoch order of a mixed spec (common/spec/mix.h,
 * docs/mixing.md), a pure function of (seed, epoch, weights, schedule,
 * source sizes), so every host computes the same.
 *
 * Position p of the epoch takes the source "furthest below its share"
 * (Megatron's blended-dataset index): the j with the largest
 * w_j * (i + 1) - c_j, where i counts the positions since the weights last
 * changed and c_j the ones j got since then (ties: the lowest j). So every
 * prefix holds each source's share to within one sample. Each source is
 * read in its own shuffle (its own seed stream): draw d of source j is
 * perm_j,pass[d mod size_j] with pass = d / size_j, so a source repeats a
 * sample only after all of its samples were used in that epoch, and a new
 * pass is a new permutation. Sample indices are global: the source's offset
 * (the sizes of the sources before it) plus its own index. */
#ifndef SL_BLEND_H
#define SL_BLEND_H

#include <stdbool.h>
#include <stdint.h>

#include "common/spec/mix.h"
#include "common/spec/resume.h"

/* The global step of epoch position p: steps are step_len positions (a
 * global batch: batch_size x world_size) and every epoch starts a new one. */
uint64_t sl_blend_step(const sl_mix_t *mix, uint64_t step_len, uint64_t epoch, uint64_t p);

/* Fills out[0 .. mix->samples_per_epoch) for epoch; shuffle false reads
 * each source in index order. The mix must be resolved (sl_mix_resolved).
 * counts (may be NULL) gets the positions each source got. Returns 0,
 * -EINVAL (unresolved), -ENOMEM. */
int sl_blend_epoch(const sl_mix_t *mix, uint64_t seed, bool shuffle, uint64_t step_len,
                   uint64_t epoch, uint64_t *out, uint64_t *counts);

/* The same for an epoch resumed with other weights (resume.h "carry"; NULL:
 * as sl_blend_epoch): positions 0 .. consumed - 1 are the carried draws'
 * samples, then the greedy starts afresh (as at a schedule change) and each
 * source draws on past the draws carried. -EINVAL for a carry naming a
 * source the mix has not. */
int sl_blend_epoch_carry(const sl_mix_t *mix, const sl_resume_carry_t *carry, uint64_t seed,
                         bool shuffle, uint64_t step_len, uint64_t epoch, uint64_t *out,
                         uint64_t *counts);

/* Source j's pass of epoch as its own indices (perm: its count entries):
 * draw d of j in epoch is sample offset_j + perm_{d / count}[d % count].
 * 0 or -EINVAL. */
int sl_blend_pass(const sl_mix_t *mix, uint64_t seed, bool shuffle, uint64_t epoch, uint32_t j,
                  uint64_t pass, uint64_t *perm);

/* The positions each source gets in epoch (counts: nsources entries),
 * without the order: O(samples_per_epoch x nsources) time, no memory.
 * Returns 0 or -EINVAL (unresolved). */
int sl_blend_counts(const sl_mix_t *mix, uint64_t step_len, uint64_t epoch, uint64_t *counts);

/* The same for an epoch resumed with other weights (carry: resume.h, NULL:
 * as sl_blend_counts): the carried draws' sources, then the new weights'
 * greedy from there, as sl_blend_epoch_carry lays it out. -EINVAL for an
 * unresolved mix or a carry naming a source the mix has not. */
int sl_blend_counts_carry(const sl_mix_t *mix, const sl_resume_carry_t *carry, uint64_t step_len,
                          uint64_t epoch, uint64_t *counts);

/* The source of global sample index g (mix->nsources when past the end). */
uint32_t sl_blend_source_of(const sl_mix_t *mix, uint64_t g);

/* Positions of a mixed spec's epoch (samples_per_epoch), else n. */
uint64_t sl_spec_epoch_len(const sl_spec_t *spec, uint64_t n);

#endif
