/* rank_order: this rank's order of one epoch, whole, balanced or resumed
 * (ranks.h). The top of the order module: it composes the epoch order and
 * the rank shares (ranks.c) with a resumed epoch's layout (resume_order.c),
 * which itself builds on ranks.c, so neither of those needs the other
 * back. */
#include "common/order/ranks.h"
#include "common/spec/resume.h"

int sl_rank_order_balanced(const sl_spec_t *spec, uint64_t epoch, uint64_t n, const float *cost,
                           const uint32_t *tokens, uint64_t *scratch, uint64_t *out)
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
