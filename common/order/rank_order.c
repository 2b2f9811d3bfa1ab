/* rank_order: this rank's order of one epoch, whole, balanced or resumed
 * (ranks.h). The top of the order module: it composes the epoch order and
 * the rank shares (ranks.c) with a resumed epoch's layout (resume_order.c),
 * which itself builds on ranks.c, so neither of those needs the other
 * back. */
#include <errno.h>
#include <stdlib.h>

#include "common/order/blend.h"
#include "common/order/pack.h"
#include "common/order/ranks.h"
#include "common/spec/resume.h"

int sl_pack_epoch(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                  const uint32_t *tokens, const uint32_t *tiles, uint64_t *out,
                  sl_pack_stats_t *stats)
{
    if (cost == NULL || tokens == NULL) {
        return -EINVAL;
    }
    uint64_t e = sl_spec_epoch_len(spec, n); /* positions: a mix's differ from n */
    uint64_t *base = malloc((e > 0 ? e : 1) * sizeof(*base));
    if (base == NULL) {
        return -ENOMEM;
    }
    int rc = sl_spec_epoch_order(spec, epoch, n, NULL, NULL, base);
    sl_pack_params_t p = sl_pack_params_of(spec, spec->world_size);
    if (rc == 0) {
        rc = sl_pack_layout(&p, e, base, cost, tokens, tiles, spec->rank, out, stats);
    }
    free(base);
    return rc;
}

int sl_pack_rank_order(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                       const uint32_t *tokens, const uint32_t *tiles, uint64_t *out,
                       uint64_t *step_tokens)
{
    if (sl_resume_find(spec->resume, epoch) != NULL) {
        return sl_pack_resume_order(spec, epoch, n, cost, tokens, tiles, out, step_tokens);
    }
    uint64_t per_rank = sl_spec_positions(spec, n),
             w = sl_pack_params_of(spec, spec->world_size).world;
    uint64_t per_step = (uint64_t)spec->batching.microbatches * spec->batch_size;
    uint64_t *global = malloc((per_rank * w > 0 ? per_rank * w : 1) * sizeof(*global));
    if (global == NULL) {
        return -ENOMEM;
    }
    int rc = sl_pack_epoch(spec, epoch, n, cost, tokens, tiles, global, NULL);
    for (uint64_t q = 0; rc == 0 && q < per_rank; q++) {
        out[q] = global[q * w + spec->rank];
    }
    if (rc == 0 && step_tokens != NULL) {
        sl_pack_step_tokens(global, per_rank * w, (uint32_t)w, per_step, tokens, step_tokens);
    }
    free(global);
    return rc;
}

int sl_rank_order_balanced(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                           const uint32_t *tokens, const uint32_t *tiles, uint64_t *scratch,
                           uint64_t *out)
{
    if (sl_resume_find(spec->resume, epoch) != NULL) {
        return sl_resume_order(spec, epoch, n, cost, tokens, tiles, out);
    }
    if (spec->batching.mode == SL_BATCHING_PACKED) {
        /* Without the predictions there is no schedule: refused, not guessed. */
        return sl_pack_rank_order(spec, epoch, n, cost, tokens, tiles, out, NULL);
    }
    int rc = sl_spec_epoch_order(spec, epoch, n, cost, tokens, scratch);
    if (rc < 0) {
        return rc;
    }
    uint64_t e = sl_spec_epoch_len(spec, n); /* the order's length */
    uint64_t m = sl_rank_count(e, spec->world_size, spec->rank_padding);
    if (spec->world_size <= 1) {
        if (out != scratch) {
            for (uint64_t i = 0; i < e; i++) {
                out[i] = scratch[i];
            }
        }
    } else {
        /* Padding wraps to the head of scratch: out must not alias it. */
        for (uint64_t q = 0; q < m; q++) {
            out[q] = scratch[sl_rank_global(e, spec->world_size, spec->rank, q)];
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
    return sl_rank_order_balanced(spec, epoch, n, NULL, NULL, NULL, scratch, out);
}
