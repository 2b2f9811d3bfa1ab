/* rng: counter-based randomness, so any host produces the same bytes for the
 * same sample (docs/design.md invariant 2). Nothing here carries state between
 * samples: a stream is derived from (seed, epoch, index, stream id) alone.
 * Philox-style mixing is overkill here; SplitMix64 finalisers over a keyed
 * counter pass BigCrush and are a few cycles each. */
#ifndef SL_RNG_H
#define SL_RNG_H

#include <stdint.h>

typedef struct sl_rng_s {
    uint64_t key;
    uint64_t ctr;
} sl_rng_t;

/* A stream for one (seed, epoch, index, stream) tuple. Stages use their stage
 * position as the stream id, so where a stage runs never changes its draws. */
void sl_rng_init(sl_rng_t *r, uint64_t seed, uint64_t epoch, uint64_t index, uint64_t stream);
uint64_t sl_rng_u64(sl_rng_t *r);
/* Uniform double in [0, 1). */
double sl_rng_uniform(sl_rng_t *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t sl_rng_below(sl_rng_t *r, uint64_t n);
/* Standard normal (Box-Muller over two uniforms; the second value is
 * dropped, so the stream stays a pure function of its counter). */
double sl_rng_normal(sl_rng_t *r);
/* Gamma(shape a, scale 1), a > 0: Marsaglia-Tsang (2000), with the
 * a < 1 boost Gamma(a) = Gamma(a + 1) * U^(1/a). */
double sl_rng_gamma(sl_rng_t *r, double a);
/* Beta(a, b), a, b > 0: X / (X + Y) of two Gamma draws (X first). */
double sl_rng_beta(sl_rng_t *r, double a, double b);

/* Fisher-Yates permutation of 0..n-1 for an epoch: order[i] is the sample
 * index at position i. Without shuffle the identity. */
void sl_epoch_order(uint64_t seed, uint64_t epoch, int shuffle, uint64_t n, uint64_t *order);

/* Block shuffle: the n indices cut into blocks of `block` consecutive ones,
 * the blocks permuted, then the samples shuffled within each window of
 * SL_SHUFFLE_WINDOW_BLOCKS consecutive blocks of that sequence. Any
 * contiguous range of the order touches about as many runs of consecutive
 * indices as it spans windows times the window's blocks, so reads stay
 * sequential within a run. block < 2 is sl_epoch_order with shuffle. */
#define SL_SHUFFLE_WINDOW_BLOCKS 8u
void sl_epoch_order_blocks(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t block,
                           uint64_t *order);

#endif
