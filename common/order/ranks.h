/* ranks: how one epoch is shared by the world_size consumers of a multi-rank
 * job (docs/protocol.md "Multi-rank jobs"), DistributedSampler-style.
 *
 * The epoch order (sl_epoch_order) has n positions. Rank r of W owns the
 * global positions r, r + W, r + 2W, ...: its *rank position* q is global
 * position q * W + r.
 *  - SL_RANK_DROP (drop_last): every rank gets floor(n / W) positions; the
 *    last n mod W positions of the order go to nobody this epoch (the
 *    shuffle moves them every epoch).
 *  - SL_RANK_PAD: every rank gets ceil(n / W); global positions >= n wrap to
 *    p mod n (PyTorch's padding by repeating the first samples).
 * So every rank has the same count, and the ranks' union is every sample
 * once (drop: minus n mod W of them) or the padded multiset.
 * Pure arithmetic: client, worker and dispatcher use the same functions. */
#ifndef SL_RANKS_H
#define SL_RANKS_H

#include <stdint.h>

#include "common/spec/spec.h"

/* In an order: a position without a sample. A resumed job (common/spec/
 * resume.h) has the same positions every epoch, its largest share; an
 * epoch with a smaller one has holes at its end, which producers skip as
 * SL_SKIP_RESUMED. */
#define SL_POS_HOLE UINT64_MAX

/* Positions per epoch of each rank (0 when drop and n < world). world 0 is
 * taken as 1. */
uint64_t sl_rank_count(uint64_t n, uint32_t world, sl_rank_padding_e pad);
/* The global position of rank position q (q < sl_rank_count). */
uint64_t sl_rank_global(uint64_t n, uint32_t world, uint32_t rank, uint64_t q);
/* The spec's positions per epoch over a source of n samples (a resumed
 * job's: the largest of its epochs'). */
uint64_t sl_spec_positions(const sl_spec_t *spec, uint64_t n);
/* Positions of epoch that hold a sample (the rest are holes). */
uint64_t sl_spec_live_positions(const sl_spec_t *spec, uint64_t n, uint64_t epoch);
/* The same for rank of world under spec's padding and resume history (a
 * saved state's rank, whatever this job's world size). */
uint64_t sl_resume_live_positions(const sl_spec_t *spec, uint64_t n, uint64_t epoch,
                                  uint32_t world, uint32_t rank);
/* Entries an order buffer needs: max(n, sl_spec_positions), at least 1. */
uint64_t sl_spec_order_len(const sl_spec_t *spec, uint64_t n);
/* Checks a resumed spec against a source of n samples: every run of its
 * history within its generation's shares. 0 or -EINVAL (err says which). */
int sl_resume_check(const sl_spec_t *spec, uint64_t n, char *err, size_t errlen);
/* The rank's order of a resumed epoch (one spec->resume holds) into out
 * (sl_spec_positions entries, holes at the end). 0, -EINVAL, -ENOMEM. */
int sl_resume_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                    const uint32_t *tokens, const uint32_t *tiles, uint64_t *out);
/* The same for a packed spec, with every global step's tokens over all
 * ranks into step_tokens (may be NULL). */
int sl_pack_resume_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                         const uint32_t *tokens, const uint32_t *tiles, uint64_t *out,
                         uint64_t *step_tokens);
/* The rank's epoch order: out[q] = sample index at rank position q (or
 * SL_POS_HOLE), for q < sl_spec_positions(spec, n). scratch holds n
 * entries; out sl_spec_order_len; they may be one only when world_size is 1.
 * Returns 0, or -ENOMEM / -EINVAL for a resumed epoch. */
int sl_rank_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, uint64_t *scratch,
                   uint64_t *out);
/* The same for a spec with "batching": "balanced": the global order is
 * first rearranged by sl_balance_order from every sample's predicted cost
 * and tokens (sl_balance_sample_costs; NULL: the count-based order). Every
 * host that computes it from the same data gets the same order. Returns 0 or
 * -ENOMEM. */
/* The global order of an epoch (before ranks take their positions): the
 * spec's shuffle, then balanced batching's rearrangement when cost is not
 * NULL. Returns 0 or -ENOMEM. */
int sl_spec_epoch_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                        const uint32_t *tokens, uint64_t *out);
int sl_rank_order_balanced(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                           const uint32_t *tokens, const uint32_t *tiles, uint64_t *scratch,
                           uint64_t *out);
/* A packed spec's global layout of one epoch (common/order/pack.h):
 * sl_spec_positions(spec, n) * world entries into out, holes where no
 * sample is; stats (may be NULL) for spec's rank. Returns 0, -ENOMEM,
 * -EINVAL. */
struct sl_pack_stats_s;
/* Rank's share of a packed epoch into out (sl_spec_positions entries), and
 * (step_tokens not NULL) every global step's tokens over all ranks
 * (sl_spec_positions / (microbatches x batch_size) entries). 0, -ENOMEM,
 * -EINVAL. */
int sl_pack_rank_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                       const uint32_t *tokens, const uint32_t *tiles, uint64_t *out,
                       uint64_t *step_tokens);
int sl_pack_epoch(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                  const uint32_t *tokens, const uint32_t *tiles, uint64_t *out,
                  struct sl_pack_stats_s *stats);

#endif
