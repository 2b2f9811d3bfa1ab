/* balance: data-aware microbatches (DFLOP, SIGMOD 2026). In data-parallel
 * training every step waits for its slowest rank, and with multimodal
 * samples a rank's step cost is the sum of its samples' costs, which differ
 * by an order of magnitude; equal counts per rank leave most GPUs idle.
 *
 * A sample's trainer cost is predicted from its shape before it is decoded:
 *     cost = a * tokens + b * tokens^2 + c * tiles + d
 * (tokens: its sequence length on the GPU; tiles: its image tiles). A step's
 * samples are packed into W ranks, then each rank's into M microbatches, by
 * greedy longest-processing-time first: samples by cost, largest first, each
 * to the least-loaded bin (where its tokens fit the token budget). LPT rather
 * than Karmarkar-Karp: it is within 4/3 of the optimum for any number of
 * bins, takes a token budget as a simple filter, and is O(n log n + n W);
 * KK's differencing is better for 2 bins but has no natural capacity limit.
 * A bounded look-ahead of L steps first deals the window's samples to its
 * steps largest first in snake order, so no step holds more huge samples
 * than it has ranks while every step keeps its sample count.
 *
 * Pure and deterministic (ties broken by position): a function of the
 * samples' order and predicted costs only, so every host computes the same
 * schedule. Any thread. */
#ifndef SL_BALANCE_H
#define SL_BALANCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_trainer_model_s {
    double a, b, c, d; /* per token, per token squared, per tile, per sample */
} sl_trainer_model_t;

double sl_trainer_cost(const sl_trainer_model_t *m, double tokens, double tiles);

/* Packs items [0, n) into nbins (> 0) bins: ret_bin[i] is item i's bin.
 * Bins whose tokens would exceed token_budget (0: no budget) are passed
 * over; an item no bin has room for goes to the least-loaded bin anyway (a
 * sample cannot be split). ret_load (nbins entries) gets each bin's cost.
 * Returns 0 or -ENOMEM. */
int sl_balance_pack(const double *cost, const uint32_t *tokens, uint32_t n, uint32_t nbins,
                    uint64_t token_budget, uint32_t *ret_bin, double *ret_load);
/* The same with at most cap items per bin (0: no cap); n <= nbins * cap. */
int sl_balance_pack_cap(const double *cost, const uint32_t *tokens, uint32_t n, uint32_t nbins,
                        uint32_t cap, uint64_t token_budget, uint32_t *ret_bin,
                        double *ret_load);

/* The look-ahead: reorders items [0, nsteps * per_step) (their costs in
 * cost) so that each step of per_step consecutive items gets a fair share
 * of the large ones: ret_order[k] is the item at new position k. Returns 0
 * or -ENOMEM. */
int sl_balance_deal(const double *cost, uint32_t nsteps, uint32_t per_step, uint32_t *ret_order);

/* The balanced epoch order: base (the spec's shuffled order, n entries) is
 * rearranged in place, window by window (lookahead steps of world x
 * microbatches x batch_size positions), so that global position q * world +
 * r -- rank r's q-th sample (common/order/ranks.h) -- holds what its bins
 * got: each rank the same count per step, at equal predicted cost, split
 * into microbatches of batch_size. A last partial step keeps the base
 * order. Returns 0, -ENOMEM. */
struct sl_spec_s;
int sl_balance_order(const struct sl_spec_s *spec, uint64_t n, const float *cost,
                     const uint32_t *tokens, uint64_t *order);

/* What a balanced order predicts, over its full steps: rank's mean load
 * per step, and the imbalance per step (max / mean over ranks), mean and
 * max. order is the global order (sl_balance_order's). */
typedef struct sl_balance_stats_s {
    double step_load, imbalance, imbalance_max;
    uint64_t steps;
} sl_balance_stats_t;
void sl_balance_stats(const struct sl_spec_s *spec, uint64_t n, const float *cost,
                      const uint64_t *order, sl_balance_stats_t *ret);

#endif
