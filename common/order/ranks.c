#include "common/order/ranks.h"

#include "common/base/rng.h"
#include "common/order/balance.h"
#include "common/order/blend.h"
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
    if (spec->mix != NULL) { /* the blend (blend.h): mix positions, not n */
        /* An epoch resumed with other weights counts its steps in the world
         * of the job that resumed it (resume.h "carry"). */
        const sl_resume_epoch_t *re = sl_resume_find(spec->resume, epoch);
        const sl_resume_carry_t *carry = re != NULL ? re->carry : NULL;
        uint32_t world = carry != NULL ? carry->world : spec->world_size;
        uint64_t step_len = (uint64_t)spec->batch_size * (world ? world : 1);
        int rc = sl_blend_epoch_carry(spec->mix, carry, spec->seed, spec->shuffle, step_len, epoch,
                                      out, NULL);
        if (carry != NULL) {
            return rc; /* its carried head is removed before balancing (resume_order.c) */
        }
        n = sl_spec_epoch_len(spec, n);
        if (rc < 0) {
            return rc;
        }
    } else if (spec->shuffle && spec->shuffle_block > 1) {
        sl_epoch_order_blocks(spec->seed, epoch, n, spec->shuffle_block, out);
    } else {
        sl_epoch_order(spec->seed, epoch, spec->shuffle, n, out);
    }
    if (spec->batching.mode == SL_BATCHING_BALANCED && cost != NULL) {
        return sl_balance_order(spec, n, cost, tokens, out);
    }
    return 0;
}
