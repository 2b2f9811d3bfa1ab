/* pack_layout: a packed epoch, step by step, laid out in positions
 * (common/order/pack.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/order/pack.h"
#include "common/order/ranks.h"
#include "common/spec/spec.h"

sl_pack_params_t sl_pack_params_of(const sl_spec_t *spec, uint32_t world)
{
    return (sl_pack_params_t){.world = world > 0 ? world : 1,
                              .micro = spec->batching.microbatches,
                              .cap = spec->batch_size,
                              .token_budget = spec->batching.token_budget,
                              .tile_budget = spec->batching.tile_budget,
                              .lookahead = spec->batching.lookahead};
}

uint64_t sl_pack_positions(uint64_t n, uint32_t world, uint32_t micro, uint32_t cap)
{
    uint64_t w = world > 0 ? world : 1, m = micro > 0 ? micro : 1;
    uint64_t steps = (n + w * m - 1) / (w * m);
    return steps * m * cap;
}

/* The pool: samples waiting for a step, in epoch-order position. */
typedef struct {
    uint64_t *idx;
    sl_pack_item_t *items;
    uint32_t *at;
    double *load;
    uint32_t *fill; /* samples so far per pack of the step */
    uint32_t n;
    uint64_t tokens; /* capped at the budget per sample: one huge sample
                      * must not stand for a step's worth */
} pool_t;

static void pool_free(pool_t *pl)
{
    free(pl->idx);
    free(pl->items);
    free(pl->at);
    free(pl->load);
    free(pl->fill);
}

static uint64_t capped(const sl_pack_params_t *p, uint32_t tokens)
{
    return tokens < p->token_budget ? tokens : p->token_budget;
}

/* Adds base's next samples until the pool holds lookahead steps' worth. */
static void refill(const sl_pack_params_t *p, pool_t *pl, const uint64_t *base, uint64_t n,
                   uint64_t *next, const float *cost, const uint32_t *tokens, const uint32_t *tiles)
{
    uint64_t want = (uint64_t)p->lookahead * p->world * p->micro * p->token_budget;
    while (*next < n && pl->tokens < want) {
        uint64_t s = base[(*next)++];
        pl->idx[pl->n] = s;
        pl->items[pl->n] = (sl_pack_item_t){.cost = cost[s],
                                            .tokens = tokens[s],
                                            .tiles = tiles != NULL ? tiles[s] : 0,
                                            .age = 0};
        pl->tokens += capped(p, tokens[s]);
        pl->n++;
    }
}

/* A step's numbers; only full steps (every pack used, not the epoch's
 * last) enter the means: the last step may be short. */
static void account(const sl_pack_params_t *p, const pool_t *pl, uint32_t rank, bool last,
                    sl_pack_stats_t *st)
{
    uint32_t npacks = p->world * p->micro;
    double sum = 0, max = 0, fill = 0;
    for (uint32_t r = 0; r < p->world; r++) {
        sum += pl->load[r];
        max = pl->load[r] > max ? pl->load[r] : max;
    }
    uint64_t *ptok = calloc(npacks, sizeof(*ptok));
    for (uint32_t i = 0; i < pl->n; i++) {
        if (pl->at[i] == SL_PACK_NONE) {
            continue;
        }
        st->global_tokens += pl->items[i].tokens;
        st->oversize += pl->items[i].tokens > p->token_budget ||
                        (p->tile_budget > 0 && pl->items[i].tiles > p->tile_budget);
        st->carried += pl->items[i].age > 0;
        if (ptok != NULL) {
            ptok[pl->at[i]] += pl->items[i].tokens;
        }
    }
    bool full = !last && ptok != NULL;
    for (uint32_t b = 0; ptok != NULL && b < npacks; b++) {
        double f = (double)ptok[b] / (double)p->token_budget;
        fill += f < 1 ? f : 1;
        full = full && ptok[b] > 0;
    }
    free(ptok);
    st->steps++;
    st->step_load += pl->load[rank < p->world ? rank : 0];
    if (!full) {
        return;
    }
    st->full_steps++;
    double imb = sum > 0 ? max / (sum / p->world) : 1.0;
    st->imbalance += imb;
    st->imbalance_max = imb > st->imbalance_max ? imb : st->imbalance_max;
    st->fill += fill / npacks;
}

/* Writes the step's placements into out and drops them from the pool; the
 * rest wait a step longer. */
static void emit(const sl_pack_params_t *p, pool_t *pl, uint64_t step, uint64_t *out)
{
    uint32_t npacks = p->world * p->micro, k = 0;
    for (uint32_t b = 0; b < npacks; b++) {
        pl->fill[b] = 0;
    }
    for (uint32_t i = 0; i < pl->n; i++) {
        uint32_t b = pl->at[i];
        if (b == SL_PACK_NONE) {
            pl->idx[k] = pl->idx[i];
            pl->items[k] = pl->items[i];
            pl->items[k].age++;
            k++;
            continue;
        }
        uint32_t r = b / p->micro, m = b % p->micro;
        uint64_t q = (step * p->micro + m) * p->cap + pl->fill[b]++;
        out[q * p->world + r] = pl->idx[i];
        pl->tokens -= capped(p, pl->items[i].tokens);
    }
    pl->n = k;
}

void sl_pack_step_tokens(const uint64_t *layout, uint64_t len, uint32_t world, uint64_t per_step,
                         const uint32_t *tokens, uint64_t *step_tokens)
{
    uint64_t w = world > 0 ? world : 1, span = per_step * w;
    for (uint64_t s = 0; span > 0 && s < len / span; s++) {
        step_tokens[s] = 0;
        for (uint64_t p = s * span; p < (s + 1) * span; p++) {
            step_tokens[s] += layout[p] != SL_POS_HOLE ? tokens[layout[p]] : 0;
        }
    }
}

int sl_pack_layout(const sl_pack_params_t *p, uint64_t n, const uint64_t *base, const float *cost,
                   const uint32_t *tokens, const uint32_t *tiles, uint32_t rank, uint64_t *out,
                   sl_pack_stats_t *stats)
{
    if (p->world == 0 || p->micro == 0 || p->cap == 0 || p->token_budget == 0 ||
        p->lookahead == 0 || n > INT32_MAX) {
        return -EINVAL;
    }
    uint64_t per_rank = sl_pack_positions(n, p->world, p->micro, p->cap);
    uint64_t max_steps = per_rank / ((uint64_t)p->micro * p->cap);
    for (uint64_t q = 0; q < per_rank * p->world; q++) {
        out[q] = SL_POS_HOLE;
    }
    size_t cap = n > 0 ? n : 1;
    pool_t pl = {.idx = malloc(cap * sizeof(*pl.idx)),
                 .items = malloc(cap * sizeof(*pl.items)),
                 .at = malloc(cap * sizeof(*pl.at)),
                 .load = malloc(p->world * sizeof(*pl.load)),
                 .fill = malloc((size_t)p->world * p->micro * sizeof(*pl.fill))};
    sl_pack_stats_t st = {0};
    int rc = pl.idx && pl.items && pl.at && pl.load && pl.fill ? 0 : -ENOMEM;
    uint64_t next = 0;
    for (uint64_t step = 0; rc == 0; step++) {
        refill(p, &pl, base, n, &next, cost, tokens, tiles);
        if (pl.n == 0) {
            break;
        }
        if (step >= max_steps) {
            rc = -EOVERFLOW; /* cannot happen: every step fills every pack */
            break;
        }
        rc = sl_pack_step(p, pl.items, pl.n, pl.at, pl.load);
        if (rc >= 0) {
            account(p, &pl, rank, next == n && (uint32_t)rc == pl.n, &st);
            emit(p, &pl, step, out);
            rc = 0;
        }
    }
    if (st.full_steps > 0) {
        st.imbalance /= (double)st.full_steps;
        st.fill /= (double)st.full_steps;
    }
    if (st.steps > 0) {
        st.step_load /= (double)st.steps;
    }
    if (stats != NULL) {
        *stats = st;
    }
    pool_free(&pl);
    return rc;
}
