#include "common/order/ranks.h"

#include "common/base/rng.h"
#include "common/order/balance.h"
#include "common/spec/resume.h"

uint64_t sl_rank_count(uint64_t n, uint32_t world, sl_rank_padding_e pad)
{
    if (world <= 1) {
        return n;
    }
    if (pad == SL_RANK_PAD && n > 0) {
        return n / world + (n % world != 0);
    }
    return n / world;
}

uint64_t sl_rank_global(uint64_t n, uint32_t world, uint32_t rank, uint64_t q)
{
    if (world <= 1 || n == 0) {
        return q;
    }
    /* Only padding reaches p >= n; it wraps like PyTorch's repeated head. */
    return (q * world + rank) % n;
}

int sl_spec_epoch_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                        const uint32_t *tokens, uint64_t *out)
{
    if (spec->shuffle && spec->shuffle_block > 1) {
        sl_epoch_order_blocks(spec->seed, epoch, n, spec->shuffle_block, out);
    } else {
        sl_epoch_order(spec->seed, epoch, spec->shuffle, n, out);
    }
    if (spec->batching.mode == SL_BATCHING_BALANCED && cost != NULL) {
        return sl_balance_order(spec, n, cost, tokens, out);
    }
    return 0;
}

int sl_rank_order_balanced(const sl_spec_t *spec, uint64_t epoch, uint64_t n,
                           const float *cost, const uint32_t *tokens, uint64_t *scratch,
                           uint64_t *out)
{
    if (sl_resume_find(spec->resume, epoch) != NULL) {
        return sl_resume_order(spec, epoch, n, cost, tokens, out);
    }
    int rc = sl_spec_epoch_order(spec, epoch, n, cost, tokens, scratch);
    if (rc < 0) {
        return rc;
    }
    uint64_t m = sl_rank_count(n, spec->world_size, spec->rank_padding);
    if (spec->world_size <= 1) {
        if (out != scratch) {
            for (uint64_t i = 0; i < n; i++) {
                out[i] = scratch[i];
            }
        }
    } else {
        /* Padding wraps to the head of scratch: out must not alias it. */
        for (uint64_t q = 0; q < m; q++) {
            out[q] = scratch[sl_rank_global(n, spec->world_size, spec->rank, q)];
        }
    }
    for (uint64_t q = m, total = sl_spec_positions(spec, n); q < total; q++) {
        out[q] = SL_POS_HOLE; /* a resumed job's epoch shorter than its longest */
    }
    return 0;
}

int sl_rank_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, uint64_t *scratch,
                  uint64_t *out)
{
    return sl_rank_order_balanced(spec, epoch, n, NULL, NULL, scratch, out);
}
