/* pack: packed global batches ("batching": {"mode": "packed"}). Every rank
 * gets exactly M packs per global step; a pack is whole samples whose
 * sequence lengths sum to at most the token budget T (and tiles to at most
 * the tile budget K, samples to at most the cap C), so sample counts per
 * rank and per pack vary. A rank's cost in a step is the sum of its
 * sequences' trainer costs (attention is per sequence under varlen
 * kernels, not per pack); the schedule minimises the largest rank's.
 *
 * The heuristic, per step, over a pool of candidates (the samples carried
 * from earlier steps plus the epoch order's next ones, up to `lookahead`
 * steps' worth of tokens):
 *   1. samples carried for `lookahead` steps or more are placed first, then
 *      the rest; each group largest cost first (LPT), each sample into the
 *      pack where it fits whose rank has the least load (ties: the pack
 *      with the fewest tokens, so a rank's M packs fill evenly);
 *   2. a pack still empty takes the cheapest unplaced sample (so every step
 *      but the last uses all W x M packs: an epoch has at most
 *      ceil(n / (W M)) steps);
 *   3. local search: while moving one sample from the most to the least
 *      loaded rank, or swapping a pair between them, lowers the largest
 *      load and fits the budgets, do it;
 *   4. each rank's packs are ordered by cost, largest first, so microbatch
 *      m is alike across ranks (pipeline parallelism waits per microbatch).
 * What does not fit is carried to the next step. LPT into the least-loaded
 * bin is within 4/3 of the optimum without budgets; tests/unit/test_pack.c
 * measures it with the budgets against an exact search on small steps.
 *
 * A sample longer than T (or with more tiles than K) is never truncated
 * here: it gets a pack of its own, counted as oversize.
 *
 * Pure and deterministic (ties by pool position, which is epoch-order
 * position): every host computes the same schedule from the same order and
 * predictions. Any thread. */
#ifndef SL_PACK_H
#define SL_PACK_H

#include <stddef.h>
#include <stdint.h>

#define SL_PACK_NONE UINT32_MAX /* a pool sample this step does not take */

typedef struct sl_pack_params_s {
    uint32_t world, micro; /* ranks; packs per rank and step */
    uint32_t cap;          /* samples per pack (the spec's batch_size) */
    uint64_t token_budget; /* per pack, > 0 */
    uint64_t tile_budget;  /* per pack, 0: none */
    uint32_t lookahead;    /* steps' worth of tokens in the pool; >= 1 */
} sl_pack_params_t;

/* One pool sample: its predicted cost, sequence length and tiles, and how
 * many steps it has waited. */
typedef struct sl_pack_item_s {
    double cost;
    uint32_t tokens, tiles;
    uint32_t age;
} sl_pack_item_t;

/* One step: assigns items [0, n) to the world x micro packs. ret_pack[i]
 * is pack rank * micro + m, or SL_PACK_NONE (carried). ret_load (world
 * entries) gets each rank's cost. Returns the number placed (> 0 when
 * n > 0), -EINVAL (bad params), -ENOMEM. */
int sl_pack_step(const sl_pack_params_t *p, const sl_pack_item_t *items, uint32_t n,
                 uint32_t *ret_pack, double *ret_load);

/* A packed spec's parameters for world ranks (0 taken as 1). */
struct sl_spec_s;
sl_pack_params_t sl_pack_params_of(const struct sl_spec_s *spec, uint32_t world);

/* Positions each rank has per epoch in a packed layout of n samples: one
 * slot per (step, microbatch, sample of a pack), for the most steps an
 * epoch can take. */
uint64_t sl_pack_positions(uint64_t n, uint32_t world, uint32_t micro, uint32_t cap);

/* What a packed epoch predicts. */
typedef struct sl_pack_stats_s {
    uint64_t steps;      /* steps holding samples */
    uint64_t full_steps; /* of them: every pack used and not the last */
    double imbalance;    /* mean over full steps of max / mean rank cost */
    double imbalance_max;
    double fill;            /* mean over full steps' packs of tokens / budget */
    double step_load;       /* mean cost of rank `rank` per step */
    uint64_t oversize;      /* samples longer than the budgets */
    uint64_t carried;       /* placements that waited at least one step */
    uint64_t global_tokens; /* tokens of the whole epoch (every rank) */
} sl_pack_stats_t;

/* The packed layout of one epoch: base (n sample indices in epoch order)
 * is scheduled step by step; sample j of microbatch m of rank r in step s
 * goes to global position ((s * micro + m) * cap + j) * world + r of out
 * (sl_pack_positions(n, ...) * world entries), every other position is
 * SL_POS_HOLE. cost/tokens/tiles are per sample index (tiles may be NULL).
 * stats (may be NULL) is filled for rank. Returns 0, -EINVAL, -ENOMEM. */
int sl_pack_layout(const sl_pack_params_t *p, uint64_t n, const uint64_t *base, const float *cost,
                   const uint32_t *tokens, const uint32_t *tiles, uint32_t rank, uint64_t *out,
                   sl_pack_stats_t *stats);

/* Every global step's tokens over all ranks, from a global layout (len
 * entries, world ranks, per_step slots per rank and step) into
 * step_tokens (len / world / per_step entries). */
void sl_pack_step_tokens(const uint64_t *layout, uint64_t len, uint32_t world, uint64_t per_step,
                         const uint32_t *tokens, uint64_t *step_tokens);

#endif
