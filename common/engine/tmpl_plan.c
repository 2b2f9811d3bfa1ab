#include "common/engine/tmpl_plan.h"

#include "common/sample/record.h"

uint64_t sl_tmpl_text_ids(const sl_stage_spec_t *st, const uint32_t *roles, size_t stride,
                          uint32_t nturns, uint64_t ntokens)
{
    uint64_t n = ntokens;
    if (!st->chat) {
        return n;
    }
    for (uint32_t i = 0; i < nturns; i++) {
        uint32_t role = roles[i * stride];
        n += (role < SL_ROLE__COUNT ? st->tmpl_nmarker[role] : 0) + st->tmpl_nmarker[SL_TMPL_END];
    }
    return n;
}

void sl_tmpl_plan(const sl_stage_spec_t *st, const uint32_t *tiles, uint32_t nimages,
                  uint64_t text_ids, sl_tmpl_plan_t *ret)
{
    uint64_t image_ids = 0;
    for (uint32_t i = 0; i < nimages; i++) {
        image_ids += (uint64_t)tiles[i] * st->tokens_per_tile;
    }
    uint64_t fixed = (uint64_t)(st->bos >= 0) + (st->eos >= 0);
    sl_tmpl_plan_t p = {.nimages = nimages,
                        .image_ids = image_ids,
                        .full = fixed + image_ids + text_ids};
    p.len = p.full;
    uint64_t max = st->max_seq_len;
    if (max > 0 && p.len > max) {
        p.skip = st->skip_long;
        while (!p.skip && p.nimages > 0 && p.len > max) {
            p.nimages--;
            uint64_t drop = (uint64_t)tiles[p.nimages] * st->tokens_per_tile;
            p.image_ids -= drop;
            p.len -= drop;
        }
        if (!p.skip && p.len > max) {
            p.len = max;
            p.truncated = true;
        }
    }
    *ret = p;
}
