#include "client/lib/pack_tokens.h"

#include <errno.h>
#include <stdlib.h>

#include "common/order/ranks.h"

void cl_pack_tokens_free(cl_pack_tokens_t *pt)
{
    free(pt->global);
    free(pt->rank);
    *pt = (cl_pack_tokens_t){0};
}

int cl_pack_tokens_load(cl_pack_tokens_t *pt, const sl_spec_t *spec, uint64_t epoch, uint64_t n,
                        const float *cost, const uint32_t *tokens, const uint32_t *tiles)
{
    if (pt->valid && pt->epoch == epoch) {
        return 0;
    }
    uint64_t w = spec->world_size > 0 ? spec->world_size : 1;
    uint64_t per_rank = sl_spec_positions(spec, n);
    uint64_t per_step = (uint64_t)spec->batching.microbatches * spec->batch_size;
    if (per_step == 0 || tokens == NULL) {
        return -EINVAL;
    }
    cl_pack_tokens_free(pt);
    uint64_t nsteps = per_rank / per_step;
    uint64_t *layout = malloc((per_rank * w > 0 ? per_rank * w : 1) * sizeof(*layout));
    pt->global = calloc(nsteps > 0 ? nsteps : 1, sizeof(*pt->global));
    pt->rank = calloc(nsteps > 0 ? nsteps : 1, sizeof(*pt->rank));
    int rc = layout && pt->global && pt->rank ? 0 : -ENOMEM;
    if (rc == 0) {
        rc = sl_pack_epoch(spec, epoch, n, cost, tokens, tiles, layout, NULL);
    }
    for (uint64_t p = 0; rc == 0 && p < per_rank * w; p++) {
        if (layout[p] == SL_POS_HOLE) {
            continue;
        }
        uint64_t step = (p / w) / per_step;
        pt->global[step] += tokens[layout[p]];
        pt->rank[step] += p % w == spec->rank ? tokens[layout[p]] : 0;
    }
    free(layout);
    if (rc < 0) {
        cl_pack_tokens_free(pt);
        return rc;
    }
    pt->epoch = epoch;
    pt->nsteps = nsteps;
    pt->valid = 1;
    return 0;
}
