/* pack_tokens: the loss-normalisation counts of packed batches -- per
 * global step of an epoch, every rank's tokens and the whole step's, from
 * the schedule (common/order/pack.h), so a rank can divide its loss by the
 * global count without an all-reduce. The counts are the predicted
 * sequence lengths the schedule was made from (common/engine/
 * balance_costs.h). Training-loop thread only. */
#ifndef CL_PACK_TOKENS_H
#define CL_PACK_TOKENS_H

#include <stdint.h>

#include "common/spec/spec.h"

typedef struct cl_pack_tokens_s {
    uint64_t epoch;
    int valid;
    uint64_t nsteps;
    uint64_t *global; /* nsteps: every rank's tokens */
    uint64_t *rank;   /* nsteps: this rank's */
} cl_pack_tokens_t;

/* The counts of epoch, computed once per epoch (the last one is kept).
 * Returns 0, -ENOMEM, -EINVAL. */
int cl_pack_tokens_load(cl_pack_tokens_t *pt, const sl_spec_t *spec, uint64_t epoch, uint64_t n,
                        const float *cost, const uint32_t *tokens, const uint32_t *tiles);
void cl_pack_tokens_free(cl_pack_tokens_t *pt);

#endif
