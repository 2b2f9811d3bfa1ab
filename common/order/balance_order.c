/* balance_order: the balanced epoch order (common/order/balance.h). Pure:
 * the per-sample predictions it is made from are read from the data by
 * common/engine/balance_costs.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/order/balance.h"
#include "common/spec/spec.h"

/* Buffers of one window, allocated once per order. */
typedef struct {
    uint64_t *win, *step_items, *ri;
    double *wc, *c, *rc, *load;
    uint32_t *deal, *t, *rt, *rank, *mb;
} bal_bufs_t;

static void bufs_free(bal_bufs_t *b)
{
    free(b->win);
    free(b->step_items);
    free(b->ri);
    free(b->wc);
    free(b->c);
    free(b->rc);
    free(b->load);
    free(b->deal);
    free(b->t);
    free(b->rt);
    free(b->rank);
    free(b->mb);
}

static int bufs_new(bal_bufs_t *b, uint64_t g, uint64_t L)
{
    *b = (bal_bufs_t){
        .win = malloc(g * L * sizeof(uint64_t)), .step_items = malloc(g * sizeof(uint64_t)),
        .ri = malloc(g * sizeof(uint64_t)),      .wc = malloc(g * L * sizeof(double)),
        .c = malloc(g * sizeof(double)),         .rc = malloc(g * sizeof(double)),
        .load = malloc(4096 * sizeof(double)),   .deal = malloc(g * L * sizeof(uint32_t)),
        .t = malloc(g * sizeof(uint32_t)),       .rt = malloc(g * sizeof(uint32_t)),
        .rank = malloc(g * sizeof(uint32_t)),    .mb = malloc(g * sizeof(uint32_t))};
    if (!b->win || !b->step_items || !b->ri || !b->wc || !b->c || !b->rc || !b->load ||
        !b->deal || !b->t || !b->rt || !b->rank || !b->mb) {
        bufs_free(b);
        return -ENOMEM;
    }
    return 0;
}

/* One step (its g items in b->step_items) into ranks and microbatches,
 * written at the step's global positions. */
static int place_step(const sl_spec_t *spec, uint64_t step, const float *cost,
                      const uint32_t *tokens, uint64_t *order, bal_bufs_t *b)
{
    uint32_t world = spec->world_size > 0 ? spec->world_size : 1;
    uint32_t micro = spec->batching.microbatches, bs = spec->batch_size;
    uint32_t per_rank = micro * bs, g = world * per_rank;
    for (uint32_t k = 0; k < g; k++) {
        b->c[k] = cost[b->step_items[k]];
        b->t[k] = tokens[b->step_items[k]];
    }
    int rc = sl_balance_pack_cap(b->c, b->t, g, world, per_rank, 0, b->rank, b->load);
    for (uint32_t r = 0; rc == 0 && r < world; r++) {
        uint32_t m = 0;
        for (uint32_t k = 0; k < g; k++) {
            if (b->rank[k] == r) {
                b->rc[m] = b->c[k];
                b->rt[m] = b->t[k];
                b->ri[m++] = b->step_items[k];
            }
        }
        rc = sl_balance_pack_cap(b->rc, b->rt, m, micro, bs, spec->batching.token_budget, b->mb,
                                 b->load);
        uint32_t fill[4096] = {0};
        for (uint32_t k = 0; rc == 0 && k < m; k++) {
            uint64_t q = step * per_rank + (uint64_t)b->mb[k] * bs + fill[b->mb[k]]++;
            order[q * world + r] = b->ri[k];
        }
    }
    return rc;
}

int sl_balance_order(const sl_spec_t *spec, uint64_t n, const float *cost,
                     const uint32_t *tokens, uint64_t *order)
{
    uint32_t world = spec->world_size > 0 ? spec->world_size : 1;
    uint64_t g = (uint64_t)world * spec->batching.microbatches * spec->batch_size;
    if (spec->batching.microbatches > 4096 || g == 0 || g > UINT32_MAX / 8) {
        return -EINVAL;
    }
    uint64_t steps = n / g, L = spec->batching.lookahead;
    bal_bufs_t b;
    int rc = bufs_new(&b, g, L);
    if (rc < 0) {
        return rc;
    }
    for (uint64_t s0 = 0; rc == 0 && s0 < steps; s0 += L) {
        uint64_t ns = steps - s0 < L ? steps - s0 : L;
        memcpy(b.win, order + s0 * g, ns * g * sizeof(*b.win));
        for (uint64_t k = 0; k < ns * g; k++) {
            b.wc[k] = cost[b.win[k]];
        }
        rc = sl_balance_deal(b.wc, (uint32_t)ns, (uint32_t)g, b.deal);
        for (uint64_t s = 0; rc == 0 && s < ns; s++) {
            for (uint64_t k = 0; k < g; k++) {
                b.step_items[k] = b.win[b.deal[s * g + k]];
            }
            rc = place_step(spec, s0 + s, cost, tokens, order, &b);
        }
    }
    bufs_free(&b);
    return rc;
}

void sl_balance_stats(const sl_spec_t *spec, uint64_t n, const float *cost, const uint64_t *order,
                      sl_balance_stats_t *ret)
{
    uint32_t world = spec->world_size > 0 ? spec->world_size : 1;
    uint64_t g = (uint64_t)world * spec->batching.microbatches * spec->batch_size;
    memset(ret, 0, sizeof(*ret));
    double *load = calloc(world, sizeof(*load));
    if (load == NULL || g == 0) {
        free(load);
        return;
    }
    for (uint64_t s0 = 0; s0 + g <= n; s0 += g) {
        memset(load, 0, world * sizeof(*load));
        double sum = 0, max = 0;
        for (uint64_t p = s0; p < s0 + g; p++) {
            load[p % world] += cost[order[p]];
            sum += cost[order[p]];
        }
        for (uint32_t r = 0; r < world; r++) {
            max = load[r] > max ? load[r] : max;
        }
        double imb = sum > 0 ? max / (sum / world) : 1.0;
        ret->imbalance += imb;
        ret->imbalance_max = imb > ret->imbalance_max ? imb : ret->imbalance_max;
        ret->step_load += load[spec->rank < world ? spec->rank : 0];
        ret->steps++;
    }
    if (ret->steps > 0) {
        ret->imbalance /= (double)ret->steps;
        ret->step_load /= (double)ret->steps;
    }
    free(load);
}
